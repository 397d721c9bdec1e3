#include "idem/net/url.hpp"

#include "idem/net/detail/curl_url.hpp"

#include <curl/curl.h>
#include <memory>

namespace idem::net {

namespace {

// Read as typed: no scheme guessed, no path normalised, nothing encoded.
constexpr unsigned int k_as_typed = CURLU_NON_SUPPORT_SCHEME | CURLU_PATH_AS_IS;

} // namespace

std::optional<PortSpellings> port_spellings(const std::string& url) {
    auto parsed = detail::new_url();
    if (detail::libcurl().url_set(parsed.get(), CURLUPART_URL, url.c_str(), k_as_typed) !=
        CURLUE_OK)
        return std::nullopt;
    if (detail::url_part_of(parsed.get(), CURLUPART_URL) != url) return std::nullopt;
    PortSpellings spellings;
    if (detail::url_part_of(parsed.get(), CURLUPART_PORT)) {
        if (detail::libcurl().url_set(parsed.get(), CURLUPART_PORT, nullptr, 0) == CURLUE_OK)
            spellings.without_port = detail::url_part_of(parsed.get(), CURLUPART_URL);
        return spellings;
    }
    auto default_port = detail::url_part_of(parsed.get(), CURLUPART_PORT, CURLU_DEFAULT_PORT);
    if (default_port && detail::libcurl().url_set(parsed.get(), CURLUPART_PORT,
                                                  default_port->c_str(), 0) == CURLUE_OK)
        spellings.with_default_port = detail::url_part_of(parsed.get(), CURLUPART_URL);
    return spellings;
}

} // namespace idem::net
