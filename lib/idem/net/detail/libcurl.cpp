// libcurl, loaded on first use (detail/libcurl.hpp).

#include "idem/net/detail/libcurl.hpp"

#include "idem/util/errors.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

namespace idem::net::detail {

namespace {

// The library's SONAME: the ABI this was compiled against.
constexpr const char* k_library = "libcurl.so.4";

std::string load_error() {
    const char* why = ::dlerror();
    return why ? why : "unknown error";
}

LibCurl load() {
    // Never closed: handles and callbacks may live until exit.
    void* library = ::dlopen(k_library, RTLD_NOW | RTLD_LOCAL);
    if (!library)
        throw NetworkError(
            fmt::format("cannot load {} ({}): install libcurl4", k_library, load_error()));
    LibCurl functions{};
    auto bind = [&](auto& function, const char* name) {
        void* symbol = ::dlsym(library, name);
        if (!symbol)
            throw NetworkError(fmt::format("{} has no {} ({}): libcurl 7.80 or later is needed",
                                           k_library, name, load_error()));
        function = reinterpret_cast<std::remove_reference_t<decltype(function)>>(symbol);
    };
    bind(functions.global_init, "curl_global_init");
    bind(functions.free, "curl_free");
    bind(functions.easy_init, "curl_easy_init");
    bind(functions.easy_setopt, "curl_easy_setopt");
    bind(functions.easy_getinfo, "curl_easy_getinfo");
    bind(functions.easy_reset, "curl_easy_reset");
    bind(functions.easy_cleanup, "curl_easy_cleanup");
    bind(functions.easy_strerror, "curl_easy_strerror");
    bind(functions.slist_append, "curl_slist_append");
    bind(functions.slist_free_all, "curl_slist_free_all");
    bind(functions.multi_init, "curl_multi_init");
    bind(functions.multi_setopt, "curl_multi_setopt");
    bind(functions.multi_add_handle, "curl_multi_add_handle");
    bind(functions.multi_remove_handle, "curl_multi_remove_handle");
    bind(functions.multi_perform, "curl_multi_perform");
    bind(functions.multi_poll, "curl_multi_poll");
    bind(functions.multi_info_read, "curl_multi_info_read");
    bind(functions.multi_cleanup, "curl_multi_cleanup");
    bind(functions.url, "curl_url");
    bind(functions.url_set, "curl_url_set");
    bind(functions.url_get, "curl_url_get");
    bind(functions.url_cleanup, "curl_url_cleanup");
    bind(functions.url_strerror, "curl_url_strerror");
    return functions;
}

} // namespace

const LibCurl& libcurl() {
    // A failed load throws out of the initialiser: the next call tries again.
    static const LibCurl k_loaded = load();
    return k_loaded;
}

} // namespace idem::net::detail
