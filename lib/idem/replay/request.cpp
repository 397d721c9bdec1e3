// Requests and idempotency keys for replay.

#include "idem/replay/request.hpp"

#include "idem/crypto/crypto.hpp"
#include "idem/dedup/fingerprint.hpp"
#include "idem/util/encoding.hpp"
#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"

#include <algorithm>
#include <fmt/format.h>

namespace idem::replay {

namespace {

constexpr std::size_t k_max_readable_key_chars = 200;

bool header_safe(std::string_view text) {
    return !text.empty() && text.size() <= k_max_readable_key_chars &&
           std::all_of(text.begin(), text.end(), [](char c) {
               auto u = static_cast<unsigned char>(c);
               return u > 32 && u < 127;
           });
}

} // namespace

Target parse_target(std::string_view url) {
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
        throw UsageError(fmt::format("--to: {} names no host", quote(url)));
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

net::OutgoingRequest build_request(const record::RecordParser& parser, std::string_view line,
                                   const Target& target, std::string_view key_header,
                                   std::string_view key) {
    net::OutgoingRequest request;
    if (parser.shape() == record::RecordShape::envelope) {
        const auto& envelope = parser.envelope();
        request.method = envelope.method.empty() ? "POST" : std::string(envelope.method);
        request.url = url_for(target, envelope.path);
        // Headers the captured Connection header names are hop-by-hop too.
        std::vector<std::string_view> named_by_connection;
        if (auto connection = envelope.header("Connection"))
            for (auto name : split(*connection, ','))
                named_by_connection.push_back(trim(name));
        for (const auto& header : envelope.headers) {
            if (is_hop_by_hop(header.name) || iequals(header.name, key_header)) continue;
            if (std::any_of(named_by_connection.begin(), named_by_connection.end(),
                            [&](std::string_view named) { return iequals(named, header.name); }))
                continue;
            request.headers.emplace_back(header.name, header.value);
        }
        request.body = envelope.body;
    } else {
        request.url = url_for(target, "");
        request.headers.emplace_back("Content-Type", "application/json");
        request.body = line;
    }
    if (!key_header.empty()) request.headers.emplace_back(key_header, key);
    return request;
}

struct KeyMaker::Impl {
    std::size_t path_count = 0;
    std::vector<record::FieldPath> paths;
    dedup::Fingerprinter fingerprinter;
    explicit Impl(std::vector<record::FieldPath> key_paths)
        : path_count(key_paths.size()), paths(key_paths),
          fingerprinter(dedup::KeySpec{std::move(key_paths), {}}) {}
};

KeyMaker::KeyMaker(std::vector<record::FieldPath> key_paths)
    : m_impl(std::make_unique<Impl>(std::move(key_paths))) {}
KeyMaker::~KeyMaker() = default;

KeyResult KeyMaker::key_for(record::RecordParser& parser, std::string_view line) {
    KeyResult result;
    if (m_impl->path_count == 1) {
        auto value = parser.find(m_impl->paths.front());
        if (!value) {
            result.missing_path = m_impl->paths.front().text();
            return result;
        }
        if ((value->type == record::FieldValue::Type::string ||
             value->type == record::FieldValue::Type::number) &&
            header_safe(value->text)) {
            result.key = std::string(value->text);
            return result;
        }
    }
    auto outcome = m_impl->fingerprinter.fingerprint(parser);
    if (outcome.fingerprint) {
        result.key = "idem-" + outcome.fingerprint->hex();
        return result;
    }
    if (m_impl->path_count > 0) {
        result.missing_path = outcome.missing_path;
        return result;
    }
    // A body that is not JSON has no canonical form: its bytes are the event.
    std::string_view bytes =
        parser.shape() == record::RecordShape::envelope ? parser.envelope().body : line;
    auto digest = crypto::hash(crypto::HashAlgorithm::sha256, bytes);
    result.key = "idem-" + hex_encode(digest.view().substr(0, 16));
    return result;
}

} // namespace idem::replay
