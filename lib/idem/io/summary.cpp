#include "idem/io/summary.hpp"

#include "idem/util/render.hpp"
#include "idem/util/text.hpp"

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

// "1 deliveries" and "1 records" read wrong: a count of one names one.
// (JSON keeps the names as they are: scripts read them.)
std::string counted(const std::string& name, std::uint64_t value) {
    if (value != 1 || name.size() < 3) return name;
    if (name.ends_with("ies")) return name.substr(0, name.size() - 3) + "y";
    if (name.ends_with("s") && !name.ends_with("ss")) return name.substr(0, name.size() - 1);
    return name;
}
} // namespace

std::string render_summary_text(const Summary& summary) {
    std::string line = fmt::format("idem {}:", summary.command);
    auto add_counts = [&](const auto& counts, const auto& ratios) {
        bool first = true;
        for (const auto& [name, value] : counts) {
            line += fmt::format("{} {} {}", first ? "" : ",", value, counted(name, value));
            first = false;
        }
        for (const auto& [name, value] : ratios)
            line += fmt::format(", {:.1f}% {}", value * 100.0, name);
    };
    add_counts(summary.counts, summary.ratios);
    // Facts and part names hold values (a store's path, a target's URL, a
    // stage's name): one line whatever they hold.
    for (const auto& part : summary.parts) {
        line += fmt::format("; {} {}:", summary.parts_name, terminal_text(part.name));
        add_counts(part.counts, part.ratios);
    }
    for (const auto& [name, value] : summary.facts)
        line += fmt::format("; {} {}", name, terminal_text(value));
    auto records = summary.count("in");
    if (summary.seconds > 0 && records > 0)
        line += fmt::format(" ({:.2f} s, {} records/s)", summary.seconds,
                            format_rate(static_cast<double>(records) / summary.seconds));
    return line;
}

std::string render_summary_json(const Summary& summary) {
    nlohmann::ordered_json json;
    if (!summary.version.empty()) json["version"] = summary.version;
    json["command"] = summary.command;
    auto ratio = [](double value) { return std::round(value * 1e6) / 1e6; };
    for (const auto& [name, value] : summary.counts)
        json[name] = value;
    for (const auto& [name, value] : summary.ratios)
        json[name] = ratio(value);
    if (!summary.parts_name.empty()) {
        auto& parts = json[summary.parts_name + "s"] = nlohmann::ordered_json::array();
        for (const auto& part : summary.parts) {
            nlohmann::ordered_json entry;
            entry[summary.parts_name] = part.name;
            for (const auto& [name, value] : part.counts)
                entry[name] = value;
            for (const auto& [name, value] : part.ratios)
                entry[name] = ratio(value);
            parts.push_back(std::move(entry));
        }
    }
    for (const auto& [name, value] : summary.facts)
        json[name] = value;
    json["seconds"] = std::round(summary.seconds * 1000.0) / 1000.0;
    return json_report_text(json.dump()); // it goes to stderr: a terminal, often
}

} // namespace idem::io
