// Target URLs and hop-by-hop headers.

#include "idem/net/target.hpp"

#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"

#include <algorithm>
#include <fmt/format.h>

namespace idem::net {

Target parse_target(std::string_view url, std::string_view flag) {
    auto scheme_end = url.find("://");
    auto scheme =
        scheme_end == std::string_view::npos ? std::string_view() : url.substr(0, scheme_end);
    if (scheme != "http" && scheme != "https")
        throw UsageError(
            fmt::format("--to: expected an http:// or https:// URL, got {}", quote(url)));
    auto rest = url.substr(scheme_end + 3);
    auto path_start = rest.find_first_of("/?");
    Target target;
    target.origin =
        std::string(url.substr(0, scheme_end + 3)) + std::string(rest.substr(0, path_start));
    if (rest.substr(0, path_start).empty())
        throw UsageError(fmt::format("{}: {} names no host", flag, quote(url)));
    if (path_start == std::string_view::npos) return target;
    auto tail = rest.substr(path_start);
    auto query = tail.find('?');
    target.path = tail.substr(0, query);
    if (target.path == "/") target.path.clear();
    if (query != std::string_view::npos) target.query = tail.substr(query);
    return target;
}

std::string url_for(const Target& target, std::string_view captured) {
    auto query = captured.find('?');
    auto captured_path = captured.substr(0, query);
    auto captured_query =
        query == std::string_view::npos ? std::string_view() : captured.substr(query);
    if (!target.path.empty())
        return target.origin + target.path +
               (target.query.empty() ? std::string(captured_query) : target.query);
    std::string url = target.origin;
    url += captured_path.empty() ? std::string_view("/") : captured_path;
    url += target.query.empty() ? captured_query : std::string_view(target.query);
    return url;
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
