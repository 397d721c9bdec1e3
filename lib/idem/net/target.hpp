#pragma once
// Where a re-sent or forwarded request goes: a target URL (--to,
// --forward-to) joined with the captured request's path, and the headers
// that must not travel from one connection to the next.

#include <string>
#include <string_view>

namespace idem::net {

// A target URL (--to, --forward-to), split so an envelope's path can be appended.
struct Target {
    std::string origin; // scheme://host[:port]
    std::string path;   // "" when the target names no path: the envelope's is used
    std::string query;  // with its '?', or ""
};

// Throws UsageError (naming `flag`) for anything but an http:// or https:// URL.
[[nodiscard]] Target parse_target(std::string_view url, std::string_view flag = "--to");

// The URL for a record whose captured request target is `captured` ("" for
// a plain event): the target's path when it has one (with the captured query when
// the target has none), else the captured path and query.
[[nodiscard]] std::string url_for(const Target& target, std::string_view captured);

// Connection-level headers that describe one hop, not the request
// (RFC 9110 section 7.6.1), plus Host and Content-Length, which the new
// connection sets itself.
[[nodiscard]] bool is_hop_by_hop(std::string_view name);

} // namespace idem::net
