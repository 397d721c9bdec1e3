// Target URLs and hop-by-hop headers. Only libcurl's URL API (curl_url)
// parses and builds URLs here.

#include "idem/net/target.hpp"

#include "idem/net/detail/curl_url.hpp"

#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"

#include <algorithm>
#include <curl/curl.h>
#include <fmt/format.h>
#include <memory>

namespace idem::net {

namespace {

using detail::new_url;
using detail::UrlHandle;

// One part of a parsed URL, or "" when it has none.
std::string url_part(CURLU* url, CURLUPart part) {
    return detail::url_part_of(url, part).value_or("");
}

// The authority as typed: between "://" and the first '/', '?' or '#'.
std::string_view typed_authority(std::string_view url) {
    auto rest = url.substr(url.find("://") + 3);
    return rest.substr(0, rest.find_first_of("/?#"));
}

} // namespace

Target parse_target(std::string_view url, std::string_view flag) {
    auto scheme_end = url.find("://");
    auto scheme =
        scheme_end == std::string_view::npos ? std::string_view() : url.substr(0, scheme_end);
    if (scheme != "http" && scheme != "https")
        throw UsageError(
            fmt::format("{}: expected an http:// or https:// URL, got {}", flag, quote(url)));
    auto authority = typed_authority(url);
    if (authority.empty() || authority.front() == ':' || authority.front() == '@')
        throw UsageError(fmt::format("{}: {} names no host", flag, quote(url)));
    if (authority.find('@') != std::string_view::npos)
        throw UsageError(fmt::format("{}: {} holds user information ('@'): pass credentials in a "
                                     "header, not in the URL",
                                     flag, quote(url)));
    // A ':' after the host (outside an IPv6 literal's brackets) must be followed by a port.
    auto host_end = authority.front() == '[' ? authority.find(']') : 0;
    auto colon = authority.find(':', host_end == std::string_view::npos ? 0 : host_end);
    if (colon != std::string_view::npos) {
        auto port_text = authority.substr(colon + 1);
        int port = 0;
        bool digits = !port_text.empty() && port_text.size() <= 5 &&
                      std::all_of(port_text.begin(), port_text.end(),
                                  [](char c) { return c >= '0' && c <= '9'; });
        if (digits) port = std::stoi(std::string(port_text));
        if (!digits || port < 1 || port > 65535)
            throw UsageError(fmt::format("{}: {} has port {}: expected a number from 1 to 65535",
                                         flag, quote(url), quote(port_text)));
    }

    auto parsed = new_url();
    std::string text(url);
    if (auto rc = detail::libcurl().url_set(parsed.get(), CURLUPART_URL, text.c_str(), 0);
        rc != CURLUE_OK)
        throw UsageError(fmt::format("{}: {} is not a URL: {}", flag, quote(url),
                                     detail::libcurl().url_strerror(rc)));
    Target target;
    target.scheme = url_part(parsed.get(), CURLUPART_SCHEME);
    target.host = url_part(parsed.get(), CURLUPART_HOST);
    target.port = url_part(parsed.get(), CURLUPART_PORT);
    if (target.host.empty())
        throw UsageError(fmt::format("{}: {} names no host", flag, quote(url)));
    target.origin = target.scheme + "://" + target.host;
    if (!target.port.empty()) target.origin += ":" + target.port;
    if (!url_part(parsed.get(), CURLUPART_FRAGMENT).empty())
        throw UsageError(
            fmt::format("{}: {} has a fragment ('#'), which is never sent", flag, quote(url)));
    target.path = url_part(parsed.get(), CURLUPART_PATH);
    if (target.path == "/") target.path.clear();
    auto query = url_part(parsed.get(), CURLUPART_QUERY);
    if (!query.empty()) target.query = "?" + query;
    return target;
}

std::optional<std::string> captured_path_problem(std::string_view captured) {
    if (captured.empty()) return std::nullopt;
    if (captured.front() != '/')
        return fmt::format("request path {} does not start with '/': it could name another host",
                           quote(captured, 80));
    if (std::any_of(captured.begin(), captured.end(), [](char c) {
            auto byte = static_cast<unsigned char>(c);
            return byte <= 32 || byte == 127;
        }))
        return fmt::format("request path {} holds spaces or control bytes", quote(captured, 80));
    if (captured.find('\\') != std::string_view::npos)
        return fmt::format("request path {} holds a backslash", quote(captured, 80));
    if (captured.find('#') != std::string_view::npos)
        return fmt::format("request path {} holds a '#'", quote(captured, 80));
    return std::nullopt;
}

std::string url_for(const Target& target, std::string_view captured) {
    if (auto problem = captured_path_problem(captured)) throw UsageError(*problem);
    auto query_start = captured.find('?');
    auto captured_path = captured.substr(0, query_start);
    auto captured_query = query_start == std::string_view::npos ? std::string_view()
                                                                : captured.substr(query_start + 1);
    std::string path = !target.path.empty()    ? target.path
                       : captured_path.empty() ? std::string("/")
                                               : std::string(captured_path);
    std::string query =
        !target.query.empty() ? target.query.substr(1) : std::string(captured_query);

    auto url = new_url();
    auto set = [&](CURLUPart part, const std::string& value) {
        if (auto rc = detail::libcurl().url_set(url.get(), part,
                                                value.empty() ? nullptr : value.c_str(), 0);
            rc != CURLUE_OK)
            throw UsageError(fmt::format("cannot build a URL from {}: {}", quote(captured, 80),
                                         detail::libcurl().url_strerror(rc)));
    };
    set(CURLUPART_URL, target.origin + "/");
    set(CURLUPART_PATH, path);
    set(CURLUPART_QUERY, query);
    auto built = url_part(url.get(), CURLUPART_URL);

    // Parse what was built, as libcurl will when it sends it: the origin must
    // be the configured one. A difference is a bug, never a request to send.
    auto check = new_url();
    if (detail::libcurl().url_set(check.get(), CURLUPART_URL, built.c_str(), 0) != CURLUE_OK ||
        url_part(check.get(), CURLUPART_SCHEME) != target.scheme ||
        url_part(check.get(), CURLUPART_HOST) != target.host ||
        url_part(check.get(), CURLUPART_PORT) != target.port ||
        !url_part(check.get(), CURLUPART_USER).empty())
        throw UsageError(fmt::format("request path {} would leave {}: refused", quote(captured, 80),
                                     target.origin));
    return built;
}

bool is_hop_by_hop(std::string_view name) {
    static constexpr std::string_view k_names[] = {"Connection",
                                                   "Keep-Alive",
                                                   "Proxy-Connection",
                                                   "Proxy-Authenticate",
                                                   "Proxy-Authorization",
                                                   "TE",
                                                   "Trailer",
                                                   "Transfer-Encoding",
                                                   "Upgrade",
                                                   "Host",
                                                   "Content-Length",
                                                   "Expect"};
    return std::any_of(std::begin(k_names), std::end(k_names),
                       [&](std::string_view hop) { return iequals(hop, name); });
}

} // namespace idem::net
