#include "http_flags.hpp"

#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"

#include <fmt/format.h>

namespace idem::cli {

double parse_share(std::string_view flag, std::string_view text) {
    auto trimmed = trim(text);
    bool percent = !trimmed.empty() && trimmed.back() == '%';
    if (percent) trimmed.remove_suffix(1);
    double value = -1;
    try {
        std::size_t used = 0;
        value = std::stod(std::string(trimmed), &used);
        if (used != trimmed.size()) value = -1;
    } catch (const std::exception&) {
    }
    if (percent) value /= 100;
    if (value < 0)
        throw UsageError(
            fmt::format("{}: expected a share such as 10% or 0.1, got {}", flag, quote(text)));
    return value;
}

double parse_probability(std::string_view flag, std::string_view text) {
    auto value = parse_share(flag, text);
    if (value > 1)
        throw UsageError(
            fmt::format("{}: {} is not between 0 and 1 (0% and 100%)", flag, quote(text)));
    return value;
}

net::Timeouts parse_timeouts(std::string_view flag, std::string_view text) {
    net::Timeouts timeouts;
    for (auto part : split(text, ',')) {
        auto equals = part.find('=');
        auto name = trim(part.substr(0, equals));
        if (equals == std::string_view::npos || (name != "connect" && name != "total"))
            throw UsageError(
                fmt::format("{}: expected connect=DUR,total=DUR, got {}", flag, quote(text)));
        auto value = parse_duration(part.substr(equals + 1));
        (name == "connect" ? timeouts.connect : timeouts.total) = value;
    }
    return timeouts;
}

} // namespace idem::cli
