// A provider file's message template: which placeholders it may hold and
// what each needs (provider_spec.hpp, docs/verify.md "Provider files").

#include "idem/util/detail/yaml_support.hpp"
#include "idem/util/text.hpp"
#include "idem/verify/detail/schemes.hpp"
#include "idem/verify/detail/spec_reading.hpp"

#include <algorithm>
#include <fmt/format.h>

namespace idem::verify::detail {

using idem::detail::fail_at;
using idem::detail::scalar;

bool is_dotted_path(std::string_view path) {
    if (path.empty()) return false;
    return std::all_of(path.begin(), path.end(), [](char c) { return c != '}' && c != '{'; }) &&
           !path.starts_with('.') && !path.ends_with('.') &&
           path.find("..") == std::string_view::npos;
}

bool is_header_name(std::string_view name) {
    return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '-' || c == '_';
    });
}

bool is_param_name(std::string_view name) {
    return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
    });
}

std::string header_name(const std::string& file, const YAML::Node& node, std::string_view key) {
    auto name = scalar(file, node, key);
    if (!is_header_name(name))
        fail_at(file, node, fmt::format("{}: {} is not a header name", key, quote(name)));
    return name;
}

namespace {

// The message template's placeholders.
constexpr std::string_view k_placeholders[] = {
    "{body}",  "{timestamp}",           "{id}",          "{method}",      "{path}", "{url}",
    "{crc32}", "{php_serialized_form}", "{form_sorted}", "{plivo_v3_url}"};

// Placeholders naming a part of the request: "{PREFIX NAME}".
constexpr std::pair<std::string_view, ProviderSpec::RequestPart::From> k_request_parts[] = {
    {"{header:", ProviderSpec::RequestPart::From::header},
    {"{query:", ProviderSpec::RequestPart::From::query},
    {"{query_lowercase:", ProviderSpec::RequestPart::From::query_lowercase}};

// "{json:a.b}": a member of the JSON body, by its dotted path.
constexpr std::string_view k_json_placeholder = "{json:";

// What each "{PREFIX...}" placeholder of `text` holds, each once, in the
// order they come; an unclosed one holds nothing (its caller refuses it).
std::vector<std::string_view> placeholder_arguments(std::string_view text,
                                                    std::string_view prefix) {
    std::vector<std::string_view> found;
    for (auto open = text.find(prefix); open != std::string_view::npos;
         open = text.find(prefix, open + 1)) {
        auto close = text.find('}', open);
        auto argument = close == std::string_view::npos
                            ? std::string_view()
                            : text.substr(open + prefix.size(), close - open - prefix.size());
        if (std::find(found.begin(), found.end(), argument) == found.end())
            found.push_back(argument);
    }
    return found;
}

// The message's {json:PATH} placeholders, each once.
std::vector<ProviderSpec::JsonPlaceholder>
json_placeholders(const std::string& file, const YAML::Node& node, const std::string& text) {
    std::vector<ProviderSpec::JsonPlaceholder> found;
    for (auto path : placeholder_arguments(text, k_json_placeholder)) {
        if (!is_dotted_path(path))
            fail_at(file, node,
                    fmt::format("message: {{json:PATH}} takes a dotted member path "
                                "({{json:signature.token}})"));
        found.push_back({fmt::format("{{json:{}}}", path), std::string(path), dotted_path(path)});
    }
    return found;
}

void check_template(const std::string& file, const YAML::Node& node, const std::string& text) {
    for (auto open = text.find('{'); open != std::string::npos; open = text.find('{', open + 1)) {
        auto rest = std::string_view(text).substr(open);
        if (rest.starts_with(k_json_placeholder)) continue; // json_placeholders checks it
        if (rest.starts_with("{param:")) continue;          // message_params checks it
        if (std::any_of(std::begin(k_request_parts), std::end(k_request_parts),
                        [&](const auto& part) { return rest.starts_with(part.first); }))
            continue; // request_parts checks it
        bool known = std::any_of(std::begin(k_placeholders), std::end(k_placeholders),
                                 [&](std::string_view name) { return rest.starts_with(name); });
        if (!known)
            fail_at(file, node,
                    fmt::format("message: unknown placeholder at {}: use {{body}}, "
                                "{{timestamp}}, {{id}}, {{method}}, {{path}}, {{url}}, {{crc32}}, "
                                "{{form_sorted}}, {{plivo_v3_url}}, {{json:PATH}}, {{param:NAME}}, "
                                "{{header:NAME}}, {{query:NAME}} or {{query_lowercase:NAME}} "
                                "({{secret}} only last, with construction: digest)",
                                quote(rest.substr(0, rest.find('}') + 1))));
    }
}

} // namespace

void read_message(const std::string& file, const YAML::Node& node, ProviderSpec& spec) {
    if (!node["message"]) return;
    spec.message = scalar(file, node["message"], "message");
    constexpr std::string_view secret = "{secret}";
    if (spec.message.ends_with(secret) && spec.construction == ProviderSpec::Construction::digest) {
        spec.message.resize(spec.message.size() - secret.size());
        spec.secret_last = true;
    }
    check_template(file, node["message"], spec.message);
    spec.json_placeholders = json_placeholders(file, node["message"], spec.message);
    for (auto name : placeholder_arguments(spec.message, "{param:")) {
        if (!is_param_name(name))
            fail_at(file, node["message"],
                    "message: {param:NAME} takes a NAME of lowercase letters, digits and '_'");
        spec.message_params.emplace_back(name);
    }
    for (const auto& [prefix, from] : k_request_parts)
        for (auto name : placeholder_arguments(spec.message, prefix)) {
            bool header = from == ProviderSpec::RequestPart::From::header;
            if (header ? !is_header_name(name)
                       : name.empty() || name.find_first_of("{}&=#") != std::string_view::npos)
                fail_at(file, node["message"],
                        fmt::format("message: {}NAME}} takes {}", prefix,
                                    header ? "a header's name" : "a query parameter's name"));
            spec.request_parts.push_back(
                {from, std::string(name), fmt::format("{}{}}}", prefix, name)});
        }
}

} // namespace idem::verify::detail
