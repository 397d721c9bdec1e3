#pragma once
// Internal: nlohmann/json's error text without its own prefix, so messages
// read "file:line:col: syntax error ..." rather than repeat the position.

#include <string>

namespace idem::record::detail {

// "[json.exception.parse_error.101] parse error at line 1, column 17: X" -> "X";
// any other text is returned as it is.
inline std::string without_json_prefix(std::string message) {
    auto colon = message.find(": ");
    if (message.starts_with("[json.exception.") && colon != std::string::npos)
        return message.substr(colon + 2);
    return message;
}

} // namespace idem::record::detail
