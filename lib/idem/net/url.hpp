#pragma once
// A URL's other spellings as far as its port goes, for schemes that sign
// the URL as the sender typed it (Twilio's libraries try it with the
// scheme's default port added, and without the port it names). libcurl's
// URL API parses and rebuilds it; nothing here splits a URL by hand, so
// user information (`https://user:pass@host/`) and IPv6 literals keep
// their own colons.

#include <optional>
#include <string>

namespace idem::net {

struct PortSpellings {
    // With the scheme's default port (443, 80) when the URL names none.
    std::optional<std::string> with_default_port;
    // Without the port the URL names, when it names one.
    std::optional<std::string> without_port;
};

// Nullopt when libcurl does not read `url` as a URL, or would not write it
// back byte for byte (a signature is over the exact text): then only the
// URL as given can be tried.
[[nodiscard]] std::optional<PortSpellings> port_spellings(const std::string& url);

} // namespace idem::net
