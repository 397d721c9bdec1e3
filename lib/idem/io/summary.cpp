#include "idem/io/summary.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace idem::io {

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::uint64_t Summary::count(const std::string& name) const {
    for (const auto& [key, value] : counts)
        if (key == name) return value;
    return 0;
}

namespace {
std::string format_rate(double per_second) {
    if (per_second >= 1e6) return fmt::format("{:.2f}M", per_second / 1e6);
    if (per_second >= 1e3) return fmt::format("{:.1f}k", per_second / 1e3);
    return fmt::format("{:.0f}", per_second);
}
} // namespace

std::string render_summary_text(const Summary& summary) {
    std::string line = fmt::format("idem {}:", summary.command);
    bool first = true;
    for (const auto& [name, value] : summary.counts) {
        line += fmt::format("{} {} {}", first ? "" : ",", value, name);
        first = false;
    }
    for (const auto& [name, value] : summary.facts)
        line += fmt::format("; {} {}", name, value);
    auto records = summary.count("in");
    if (summary.seconds > 0 && records > 0)
        line += fmt::format(" ({:.2f} s, {} records/s)", summary.seconds,
                            format_rate(static_cast<double>(records) / summary.seconds));
    return line;
}

std::string render_summary_json(const Summary& summary) {
    nlohmann::ordered_json json;
    json["command"] = summary.command;
    for (const auto& [name, value] : summary.counts)
        json[name] = value;
    for (const auto& [name, value] : summary.facts)
        json[name] = value;
    json["seconds"] = std::round(summary.seconds * 1000.0) / 1000.0;
    return json.dump();
}

} // namespace idem::io
