#include "idem/record/field_path.hpp"

#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"

#include <fmt/format.h>

namespace idem::record {

FieldPath FieldPath::parse(std::string_view text) {
    FieldPath path;
    path.m_text = std::string(text);
    if (text.empty()) throw UsageError("empty field path: expected something like data.object.id");
    if (text.front() == '/') {
        for (auto raw : split(text.substr(1), '/')) {
            std::string segment;
            for (std::size_t i = 0; i < raw.size(); ++i) {
                if (raw[i] != '~') {
                    segment += raw[i];
                    continue;
                }
                if (i + 1 < raw.size() && (raw[i + 1] == '0' || raw[i + 1] == '1')) {
                    segment += raw[i + 1] == '0' ? '~' : '/';
                    ++i;
                } else {
                    throw UsageError(fmt::format(
                        "invalid JSON Pointer {}: '~' must be followed by 0 or 1", quote(text)));
                }
            }
            path.m_segments.push_back(std::move(segment));
        }
        return path;
    }
    for (auto segment : split(text, '.')) {
        if (segment.empty())
            throw UsageError(fmt::format("invalid field path {}: empty segment (use a JSON Pointer "
                                         "such as /a.b for keys that contain dots)",
                                         quote(text)));
        path.m_segments.emplace_back(segment);
    }
    // A header name may itself contain dots: keep everything after "headers."
    // together.
    if (path.m_segments.size() > 2 && path.m_segments.front() == "headers") {
        path.m_segments = {"headers", std::string(text.substr(8))};
    }
    return path;
}

std::vector<FieldPath> FieldPath::parse_list(std::string_view text) {
    std::vector<FieldPath> paths;
    for (auto piece : split(text, ','))
        paths.push_back(parse(trim(piece)));
    return paths;
}

FieldPath FieldPath::of_segments(const std::vector<std::string>& segments) {
    std::string pointer;
    for (const auto& segment : segments) {
        pointer += '/';
        for (char c : segment) {
            if (c == '~')
                pointer += "~0";
            else if (c == '/')
                pointer += "~1";
            else
                pointer += c;
        }
    }
    return parse(pointer);
}

} // namespace idem::record
