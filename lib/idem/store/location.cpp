#include "idem/store/location.hpp"

#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"

#include <algorithm>
#include <charconv>
#include <fmt/format.h>
#include <iterator>

namespace idem::store {

std::string StoreLocation::describe() const {
    switch (kind) {
    case StoreKind::sqlite:
        return fmt::format("sqlite:{}", path);
    case StoreKind::memory:
        return ":memory:";
    case StoreKind::redis:
        if (seeds.size() > 1) {
            std::string all;
            for (const auto& [seed_host, seed_port] : seeds)
                all += fmt::format("{}{}:{}", all.empty() ? "" : ",", seed_host, seed_port);
            return fmt::format("redis://{}/{}", all, database);
        }
        return fmt::format("redis://{}:{}/{}", host, port, database);
    }
    return "?";
}

std::string redact_store_uri(std::string_view uri) {
    std::string out(uri);
    auto scheme = out.find("://");
    if (scheme != std::string::npos) {
        auto start = scheme + 3;
        auto end = out.find_first_of("/?#", start);
        if (end == std::string::npos) end = out.size();
        auto at = out.rfind('@', end - 1);
        if (at != std::string::npos && at >= start) {
            auto colon = out.find(':', start);
            auto user_end = colon != std::string::npos && colon < at ? colon : start;
            auto user = out.substr(start, user_end - start);
            out.replace(start, at - start, user.empty() ? "***" : user + ":***");
        }
    }
    auto query = out.find('?');
    if (query == std::string::npos) return out;
    constexpr std::string_view k_secret_names[] = {"password", "pass",  "pwd",
                                                   "secret",   "token", "auth"};
    std::string redacted = out.substr(0, query + 1);
    std::string_view rest = std::string_view(out).substr(query + 1);
    bool first = true;
    for (auto parameter : split(rest, '&')) {
        if (!first) redacted += '&';
        first = false;
        auto equals = parameter.find('=');
        auto name = to_lower(parameter.substr(0, equals));
        bool secret = std::find(std::begin(k_secret_names), std::end(k_secret_names), name) !=
                      std::end(k_secret_names);
        if (secret && equals != std::string_view::npos) {
            redacted += parameter.substr(0, equals + 1);
            redacted += "***";
        } else {
            redacted += parameter;
        }
    }
    return redacted;
}

namespace {
int parse_int(std::string_view text, std::string_view uri, std::string_view what) {
    int value = 0;
    auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc{} || end != text.data() + text.size() || value < 0)
        throw UsageError(fmt::format("invalid {} in store {}", what, quote(redact_store_uri(uri))));
    return value;
}
} // namespace

StoreLocation parse_store_uri(std::string_view uri) {
    StoreLocation location;
    if (uri.empty())
        throw UsageError("empty --store: give a file path, :memory: or redis://host:port");
    // "--store --strict" would otherwise create a file named "--strict".
    if (uri.starts_with('-'))
        throw UsageError(fmt::format("--store {} looks like a flag, not a store: give a file path "
                                     "(./{} if you mean it), :memory: or redis://host:port",
                                     quote(redact_store_uri(uri)), redact_store_uri(uri)));
    if (uri == ":memory:") {
        location.kind = StoreKind::memory;
        return location;
    }
    if (uri.starts_with("redis://")) {
        location.kind = StoreKind::redis;
        auto rest = uri.substr(8);
        auto slash = rest.find('/');
        auto authority = rest.substr(0, slash);
        if (slash != std::string_view::npos && slash + 1 < rest.size())
            location.database = parse_int(rest.substr(slash + 1), uri, "database number");
        // Credentials never travel in a URI (it shows in the process list
        // and in messages): IDEM_REDIS_PASSWORD and IDEM_REDIS_USER.
        if (authority.find('@') != std::string_view::npos)
            throw UsageError("a redis:// URI holds no credentials: set IDEM_REDIS_PASSWORD (and "
                             "IDEM_REDIS_USER for an ACL user) in the environment instead");
        while (!authority.empty()) {
            auto comma = authority.find(',');
            auto seed = authority.substr(0, comma);
            authority =
                comma == std::string_view::npos ? std::string_view() : authority.substr(comma + 1);
            auto colon = seed.rfind(':');
            std::pair<std::string, int> endpoint{std::string(seed.substr(0, colon)), 6379};
            if (colon != std::string_view::npos)
                endpoint.second = parse_int(seed.substr(colon + 1), uri, "port");
            if (endpoint.first.empty())
                throw UsageError(
                    fmt::format("store {} names no host", quote(redact_store_uri(uri))));
            if (endpoint.second < 1 || endpoint.second > 65535)
                throw UsageError(fmt::format("store {}: port {} is not 1 to 65535",
                                             quote(redact_store_uri(uri)), endpoint.second));
            location.seeds.push_back(std::move(endpoint));
        }
        if (location.seeds.empty())
            throw UsageError(fmt::format("store {} names no host", quote(redact_store_uri(uri))));
        location.host = location.seeds.front().first;
        location.port = location.seeds.front().second;
        return location;
    }
    if (uri.starts_with("sqlite:")) uri.remove_prefix(7);
    if (uri.find("://") != std::string_view::npos)
        throw UsageError(fmt::format("unknown store {}: use a file path, sqlite:PATH, :memory: or "
                                     "redis://host:port[/db]",
                                     quote(redact_store_uri(uri))));
    location.path = std::string(uri);
    return location;
}

} // namespace idem::store
