#pragma once
// Internal to net: one owner for libcurl's parsed URLs (CURLU), and the one
// way its parts are read, for target.cpp and url.cpp.

#include "idem/net/detail/libcurl.hpp"

#include <curl/curl.h>
#include <memory>
#include <new>
#include <optional>
#include <string>

namespace idem::net::detail {

struct UrlDeleter {
    void operator()(CURLU* url) const { libcurl().url_cleanup(url); }
};
using UrlHandle = std::unique_ptr<CURLU, UrlDeleter>;

inline UrlHandle new_url() {
    UrlHandle url(libcurl().url());
    if (!url) throw std::bad_alloc();
    return url;
}

// One part of a parsed URL, or nullopt when it has none.
inline std::optional<std::string> url_part_of(CURLU* url, CURLUPart part, unsigned int flags = 0) {
    char* text = nullptr;
    if (libcurl().url_get(url, part, &text, flags) != CURLUE_OK || !text) return std::nullopt;
    std::string value(text);
    libcurl().free(text);
    return value;
}

} // namespace idem::net::detail
