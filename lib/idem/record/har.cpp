#include "idem/record/har.hpp"

#include "idem/record/detail/json_errors.hpp"

#include "idem/util/errors.hpp"
#include "idem/util/time.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace idem::record {

namespace {

using nlohmann::json;

SourcePosition position_of_byte(const std::string& source, std::string_view document,
                                std::size_t byte) {
    SourcePosition position{source, 1, 1, 0};
    for (std::size_t i = 0; i + 1 < byte && i < document.size(); ++i) {
        if (document[i] == '\n') {
            ++position.line;
            position.column = 1;
            position.byte_offset = i + 1;
        } else {
            ++position.column;
        }
    }
    return position;
}

// "https://host:8443/a/b?x=1" -> "/a/b?x=1"
std::string request_target(const std::string& url) {
    auto scheme_end = url.find("://");
    if (scheme_end == std::string::npos) return url.empty() ? "/" : url;
    auto path_start = url.find('/', scheme_end + 3);
    if (path_start == std::string::npos) {
        auto query = url.find('?', scheme_end + 3);
        return query == std::string::npos ? "/" : "/" + url.substr(query);
    }
    auto fragment = url.find('#', path_start);
    return url.substr(path_start,
                      fragment == std::string::npos ? std::string::npos : fragment - path_start);
}

std::string entry_to_envelope(const json& entry, std::size_t index, const std::string& source) {
    SourcePosition where{source, index + 1, 0, 0};
    if (!entry.is_object() || !entry.contains("request") || !entry["request"].is_object())
        throw InputError(where, fmt::format("HAR entry {} has no request object", index + 1));
    const json& request = entry["request"];
    nlohmann::ordered_json envelope;
    envelope["idem"] = 1;
    envelope["id"] = fmt::format("har-{}", index + 1);
    if (entry.contains("startedDateTime") && entry["startedDateTime"].is_string()) {
        auto started = parse_timestamp(entry["startedDateTime"].get<std::string>());
        envelope["received_at"] =
            started ? format_rfc3339(*started) : entry["startedDateTime"].get<std::string>();
    }
    envelope["method"] = request.value("method", "GET");
    envelope["path"] = request_target(request.value("url", "/"));
    auto headers = nlohmann::ordered_json::array();
    if (request.contains("headers") && request["headers"].is_array()) {
        for (const auto& header : request["headers"]) {
            if (!header.is_object() || !header.contains("name") || !header.contains("value"))
                continue;
            auto name = header["name"].get<std::string>();
            if (!name.empty() && name.front() == ':') continue; // HTTP/2 pseudo-headers
            headers.push_back({name, header["value"].get<std::string>()});
        }
    }
    envelope["headers"] = headers;
    if (request.contains("postData") && request["postData"].is_object()) {
        const json& post = request["postData"];
        auto text = post.value("text", "");
        if (post.value("encoding", "") == "base64")
            envelope["body_b64"] = text;
        else
            envelope["body"] = text;
    } else {
        envelope["body"] = "";
    }
    return envelope.dump(-1, ' ', false, json::error_handler_t::strict);
}

} // namespace

std::vector<std::string> har_to_envelopes(std::string_view document, const std::string& source) {
    json har;
    try {
        har = json::parse(document.begin(), document.end());
    } catch (const json::parse_error& error) {
        throw InputError(position_of_byte(source, document, error.byte),
                         "not a HAR file: " + detail::without_json_prefix(error.what()));
    } catch (const json::exception&) {
        // nlohmann reports a number it cannot hold as out_of_range, without a position.
        throw InputError({source, 0, 0, 0}, "not a HAR file: a number is too large to read");
    }
    if (!har.is_object() || !har.contains("log") || !har["log"].is_object() ||
        !har["log"].contains("entries") || !har["log"]["entries"].is_array())
        throw InputError({source, 0, 0, 0},
                         "not a HAR file: expected {\"log\":{\"entries\":[...]}}");
    std::vector<std::string> envelopes;
    const auto& entries = har["log"]["entries"];
    envelopes.reserve(entries.size());
    for (std::size_t i = 0; i < entries.size(); ++i) {
        try {
            envelopes.push_back(entry_to_envelope(entries[i], i, source));
        } catch (const json::exception& error) {
            throw InputError({source, i + 1, 0, 0},
                             fmt::format("HAR entry {} is malformed: {}", i + 1, error.what()));
        }
    }
    return envelopes;
}

} // namespace idem::record
