#pragma once
// Internal to net: libcurl, loaded the first time a command needs it.
// Linked at start-up, it and the 27 libraries it brings took ~8 ms of
// every run (`idem --version`: 20 ms against 12), though most commands
// never speak HTTP nor parse a URL.

#include <curl/curl.h>

namespace idem::net::detail {

// libcurl's functions that idem calls, by their names without `curl_`.
// Variadic setopt and getinfo lose the compile-time type checks curl.h's
// macros add: their arguments are the types the options document (long,
// curl_off_t, pointers), as written at each call.
struct LibCurl {
    decltype(&::curl_global_init) global_init;
    decltype(&::curl_free) free;
    decltype(&::curl_easy_init) easy_init;
    decltype(&::curl_easy_setopt) easy_setopt;
    decltype(&::curl_easy_getinfo) easy_getinfo;
    decltype(&::curl_easy_reset) easy_reset;
    decltype(&::curl_easy_cleanup) easy_cleanup;
    decltype(&::curl_easy_strerror) easy_strerror;
    decltype(&::curl_slist_append) slist_append;
    decltype(&::curl_slist_free_all) slist_free_all;
    decltype(&::curl_multi_init) multi_init;
    decltype(&::curl_multi_setopt) multi_setopt;
    decltype(&::curl_multi_add_handle) multi_add_handle;
    decltype(&::curl_multi_remove_handle) multi_remove_handle;
    decltype(&::curl_multi_perform) multi_perform;
    decltype(&::curl_multi_poll) multi_poll;
    decltype(&::curl_multi_info_read) multi_info_read;
    decltype(&::curl_multi_cleanup) multi_cleanup;
    decltype(&::curl_url) url;
    decltype(&::curl_url_set) url_set;
    decltype(&::curl_url_get) url_get;
    decltype(&::curl_url_cleanup) url_cleanup;
    decltype(&::curl_url_strerror) url_strerror;
};

// libcurl (libcurl.so.4), loaded once, on first use, from any thread; it
// stays loaded for the process. Throws NetworkError when it cannot be
// loaded or lacks a function.
const LibCurl& libcurl();

} // namespace idem::net::detail
