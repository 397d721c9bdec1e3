#include "idem/reconcile/detail/traces.hpp"

#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"

#include <charconv>
#include <fmt/format.h>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

namespace idem::reconcile::detail {

namespace {

// An OTLP time (fixed64 nanoseconds: a decimal string, or a JSON integer),
// or nullopt for anything else ("12abc", "NaN", past 2^64).
std::optional<std::uint64_t> unix_nanos_of(const nlohmann::json& value) {
    if (value.is_number_unsigned()) return value.get<std::uint64_t>();
    if (!value.is_string()) return std::nullopt;
    const auto& text = value.get_ref<const std::string&>();
    std::uint64_t nanos = 0;
    auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), nanos);
    if (error != std::errc() || end != text.data() + text.size() || text.empty())
        return std::nullopt;
    return nanos;
}

// Why a span of a stage cannot be read, or "".
std::string span_problem(const nlohmann::json& span) {
    if (!span.contains("traceId") || !span["traceId"].is_string() ||
        span["traceId"].get_ref<const std::string&>().empty())
        return "span without a traceId";
    if (span.contains("startTimeUnixNano") && !unix_nanos_of(span["startTimeUnixNano"]))
        return fmt::format("span's startTimeUnixNano {} is not a count of nanoseconds",
                           quote(span["startTimeUnixNano"].dump()));
    return "";
}

// Why an export request's structure cannot be walked, or "": every list
// on the way to a span is a list of objects.
std::string request_problem(const nlohmann::json& request) {
    if (!request.is_object()) return "not an OTLP JSON export request (an object)";
    if (!request.contains("resourceSpans")) return "";
    const auto& resources = request["resourceSpans"];
    if (!resources.is_array()) return "resourceSpans is not a list";
    for (const auto& resource : resources) {
        if (!resource.is_object()) return "an item of resourceSpans is not an object";
        if (!resource.contains("scopeSpans")) continue;
        if (!resource["scopeSpans"].is_array()) return "scopeSpans is not a list";
        for (const auto& scope : resource["scopeSpans"]) {
            if (!scope.is_object()) return "an item of scopeSpans is not an object";
            if (!scope.contains("spans")) continue;
            if (!scope["spans"].is_array()) return "spans is not a list";
            for (const auto& span : scope["spans"])
                if (!span.is_object()) return "a span is not an object";
        }
    }
    return "";
}

std::string service_of(const nlohmann::json& resource) {
    std::string service = "unknown";
    if (!resource.contains("resource") || !resource["resource"].is_object()) return service;
    const auto& attributes = resource["resource"].value("attributes", nlohmann::json::array());
    if (!attributes.is_array()) return service;
    for (const auto& attribute : attributes)
        if (attribute.is_object() && attribute.value("key", "") == "service.name" &&
            attribute.contains("value") && attribute["value"].is_object())
            service = attribute["value"].value("stringValue", service);
    return service;
}

} // namespace

std::vector<std::set<std::string>> read_traces(
    const ReconcileRunOptions& options, run::RejectRouter& rejects,
    const std::function<void(std::size_t stage, std::string_view trace, Timestamp start)>& take) {
    std::vector<std::set<std::string>> services(options.stages.size());
    std::ifstream in(options.traces_path, std::ios::binary);
    if (!in) throw InputError({options.traces_path, 0, 0, 0}, "cannot read the --traces file");
    std::map<std::string_view, std::size_t> stage_of;
    for (std::size_t s = 0; s < options.stages.size(); ++s)
        if (!options.stages[s].span.empty()) stage_of.emplace(options.stages[s].span, s);
    std::string line;
    std::uint64_t line_number = 0;
    std::uint64_t offset = 0;
    while (std::getline(in, line)) {
        ++line_number;
        run::InputRecord record;
        record.source = &options.traces_path;
        record.line = line_number;
        record.byte_offset = offset;
        offset += line.size() + 1;
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        nlohmann::json request;
        try {
            request = nlohmann::json::parse(line);
        } catch (const nlohmann::json::exception& error) {
            throw InputError({options.traces_path, line_number, 0, 0},
                             fmt::format("not an OTLP JSON export request ({})", error.what()));
        }
        if (auto problem = request_problem(request); !problem.empty()) {
            record.bytes = line;
            rejects.reject(record, 0, problem);
            continue;
        }
        if (!request.contains("resourceSpans")) continue;
        for (const auto& resource : request["resourceSpans"]) {
            if (!resource.contains("scopeSpans")) continue;
            auto service = service_of(resource);
            for (const auto& scope : resource["scopeSpans"]) {
                if (!scope.contains("spans")) continue;
                for (const auto& span : scope["spans"]) {
                    auto name = span.value("name", nlohmann::json()).is_string()
                                    ? span["name"].get<std::string>()
                                    : std::string();
                    auto found = stage_of.find(name);
                    if (found == stage_of.end()) continue;
                    if (auto problem = span_problem(span); !problem.empty()) {
                        auto bytes = span.dump();
                        record.bytes = bytes;
                        rejects.reject(record, 0, problem);
                        continue;
                    }
                    services[found->second].insert(service);
                    auto nanos = span.contains("startTimeUnixNano")
                                     ? *unix_nanos_of(span["startTimeUnixNano"])
                                     : 0;
                    take(found->second, span["traceId"].get_ref<const std::string&>(),
                         Timestamp(Duration(static_cast<std::int64_t>(nanos / 1000))));
                }
            }
        }
    }
    return services;
}

} // namespace idem::reconcile::detail
