#pragma once
// HAR 1.2 (browser and proxy exports) to delivery envelopes: one envelope
// line per entry's request, with its method, path and query, headers in
// order, body (postData.text; body_b64 when the text is base64-encoded) and
// startedDateTime as received_at.

#include <string>
#include <string_view>
#include <vector>

namespace idem::record {

// Throws InputError (with line and column) when `document` is not a HAR log.
[[nodiscard]] std::vector<std::string> har_to_envelopes(std::string_view document,
                                                        const std::string& source);

} // namespace idem::record
