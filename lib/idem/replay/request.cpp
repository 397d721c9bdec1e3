// Requests and idempotency keys for replay.

#include "idem/replay/request.hpp"

#include "idem/crypto/crypto.hpp"
#include "idem/record/key.hpp"
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

net::OutgoingRequest build_request(const record::RecordParser& parser, std::string_view line,
                                   const net::Target& target, std::string_view key_header,
                                   std::string_view key) {
    net::OutgoingRequest request;
    if (parser.shape() == record::RecordShape::envelope) {
        const auto& envelope = parser.envelope();
        request.method = envelope.method.empty() ? "POST" : std::string(envelope.method);
        request.url = net::url_for(target, envelope.path);
        // Headers the captured Connection header names are hop-by-hop too.
        std::vector<std::string_view> named_by_connection;
        if (auto connection = envelope.header("Connection"))
            for (auto name : split(*connection, ','))
                named_by_connection.push_back(trim(name));
        for (const auto& header : envelope.headers) {
            if (net::is_hop_by_hop(header.name) || iequals(header.name, key_header)) continue;
            if (std::any_of(named_by_connection.begin(), named_by_connection.end(),
                            [&](std::string_view named) { return iequals(named, header.name); }))
                continue;
            request.headers.emplace_back(header.name, header.value);
        }
        request.body = envelope.body;
    } else {
        request.url = net::url_for(target, "");
        request.headers.emplace_back("Content-Type", "application/json");
        request.body = record::event_text(line);
    }
    if (!key_header.empty()) request.headers.emplace_back(key_header, key);
    return request;
}

struct KeyMaker::Impl {
    std::size_t path_count = 0;
    std::vector<record::FieldPath> paths;
    record::Fingerprinter fingerprinter;
    explicit Impl(std::vector<record::FieldPath> key_paths)
        : path_count(key_paths.size()), paths(key_paths),
          fingerprinter(record::KeySpec{std::move(key_paths), {}}) {}
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
