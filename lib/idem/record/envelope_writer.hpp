#pragma once
// Writes delivery envelopes (docs/records.md), the records `idem listen`
// captures and `idem replay` reads back: the raw body byte for byte, the
// headers in arrival order.

#include "idem/util/time.hpp"

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace idem::record {

struct CapturedRequest {
    std::string_view id;
    Timestamp received_at;
    std::string_view method;
    std::string_view path; // the request target: path and query
    const std::vector<std::pair<std::string, std::string>>* headers = nullptr;
    std::string_view body;
    std::string_view remote; // "address:port" of the sender; empty: not written
};

// Appends one envelope as a JSON object (no newline). A body that is not
// UTF-8 is written as body_b64. Header values that are not UTF-8 (HTTP's
// obs-text) are read as ISO-8859-1, the charset HTTP/1.1 historically
// gave them, so every byte survives as one character.
void append_envelope(std::string& out, const CapturedRequest& request);

[[nodiscard]] bool is_valid_utf8(std::string_view bytes);

} // namespace idem::record
