#pragma once
// Where a re-sent or forwarded request goes: a target URL (--to,
// --forward-to) joined with the captured request's path, and the headers
// that must not travel from one connection to the next.
//
// A captured path is untrusted: it came from whoever sent the request to
// `listen`. A URL built here always keeps the scheme, host and port the user
// configured, whatever the path holds (`@evil/x`, `.evil/x`, `//evil`): the
// path is set as a path through libcurl's URL API, never concatenated onto
// the origin, and the result is parsed again to prove the host did not move.

#include <optional>
#include <string>
#include <string_view>

namespace idem::net {

// A target URL (--to, --forward-to), split so an envelope's path can be appended.
struct Target {
    std::string scheme; // "http" or "https"
    std::string host;   // as libcurl normalises it ("[::1]" for IPv6)
    std::string port;   // "" when the URL names none
    std::string origin; // scheme://host[:port]
    std::string path;   // "" when the target names no path: the envelope's is used
    std::string query;  // with its '?', or ""
};

// Throws UsageError (naming `flag`) for anything but an http:// or https://
// URL with a host and, when a ':' follows the host, a port in 1..65535.
[[nodiscard]] Target parse_target(std::string_view url, std::string_view flag = "--to");

// Why a captured request target cannot be appended to a configured origin,
// or nullopt when it can: it must be empty (a plain event) or start with '/',
// and hold no '\' or '#' (which some URL parsers read as a host or fragment).
[[nodiscard]] std::optional<std::string> captured_path_problem(std::string_view captured);

// The URL for a record whose captured request target is `captured` ("" for
// a plain event): the target's path when it has one (with the captured query when
// the target has none), else the captured path and query. Throws UsageError
// when `captured` has a problem (check captured_path_problem first to
// reject the record instead); the result's scheme, host and port are the
// target's, always.
[[nodiscard]] std::string url_for(const Target& target, std::string_view captured);

// Connection-level headers that describe one hop, not the request
// (RFC 9110 section 7.6.1), plus Host and Content-Length, which the new
// connection sets itself.
[[nodiscard]] bool is_hop_by_hop(std::string_view name);

} // namespace idem::net
