#include "idem/store/store.hpp"

#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"

#include <charconv>
#include <fmt/format.h>

namespace idem::store {

std::string StoreLocation::describe() const {
    switch (kind) {
    case StoreKind::sqlite:
        return fmt::format("sqlite:{}", path);
    case StoreKind::memory:
        return ":memory:";
    case StoreKind::redis:
        return fmt::format("redis://{}:{}/{}", host, port, database);
    }
    return "?";
}

namespace {
int parse_int(std::string_view text, std::string_view uri, std::string_view what) {
    int value = 0;
    auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc{} || end != text.data() + text.size() || value < 0)
        throw UsageError(fmt::format("invalid {} in store {}", what, quote(uri)));
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
                                     quote(uri), std::string(uri)));
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
        if (authority.find('@') != std::string_view::npos)
            throw UsageError("redis:// store URIs with credentials are not supported yet");
        auto colon = authority.rfind(':');
        location.host = std::string(authority.substr(0, colon));
        if (colon != std::string_view::npos)
            location.port = parse_int(authority.substr(colon + 1), uri, "port");
        if (location.host.empty())
            throw UsageError(fmt::format("store {} names no host", quote(uri)));
        return location;
    }
    if (uri.starts_with("sqlite:")) uri.remove_prefix(7);
    if (uri.find("://") != std::string_view::npos)
        throw UsageError(fmt::format("unknown store {}: use a file path, sqlite:PATH, :memory: or "
                                     "redis://host:port[/db]",
                                     quote(uri)));
    location.path = std::string(uri);
    return location;
}

} // namespace idem::store
