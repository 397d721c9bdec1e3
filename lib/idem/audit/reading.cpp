// What an audit worker reads from one line (detail/reading.hpp).

#include "idem/audit/detail/reading.hpp"

#include "idem/crypto/crypto.hpp"
#include "idem/record/event_time.hpp"
#include "idem/util/encoding.hpp"
#include "idem/util/text.hpp"

#include <charconv>
#include <fmt/format.h>
#include <xxhash.h>

namespace idem::audit::detail {

Reading::Span within_text_bound(std::string& texts, Reading::Span span) {
    if (span.size <= k_max_kept_text_bytes) return span;
    auto text = std::string_view(texts).substr(span.at, span.size);
    // SHA-256, not a fast hash: two keys an attacker made to collide would
    // merge two groups of the report.
    auto digest = hex_encode(crypto::hash(crypto::HashAlgorithm::sha256, text).view());
    auto cut = utf8_cut(text, k_kept_text_prefix_bytes); // never inside a UTF-8 sequence
    auto marker = fmt::format("\u2026 [cut: {} bytes, sha256 {}]", span.size, digest);
    texts.resize(span.at + cut);
    texts.append(marker);
    return {span.at, static_cast<std::uint32_t>(cut + marker.size())};
}

namespace {

// The encoded values at `paths`, appended to `texts`; empty when one is missing.
Reading::Span encode(record::RecordParser& parser, const std::vector<record::FieldPath>& paths,
                     std::string& texts) {
    auto at = texts.size();
    for (std::size_t i = 0; i < paths.size(); ++i) {
        auto value = parser.find(paths[i]);
        if (!value) {
            texts.resize(at);
            return {};
        }
        if (i > 0) texts += ' ';
        record::append_encoded_value(texts, *value);
    }
    return within_text_bound(
        texts, {static_cast<std::uint32_t>(at), static_cast<std::uint32_t>(texts.size() - at)});
}

// What "the same payload" compares: a 64-bit hash of the canonical record
// minus key, time, source and --ignore (no canonical text is written), or
// of the --payload values' encoding. Payloads are only ever compared
// within one run, so the hash need not be dedup's stable fingerprint.
std::uint64_t payload_hash(WorkerState& state) {
    auto& parser = state.parser;
    if (state.payload.key_paths.empty())
        return parser.event_hash(state.payload_ignored).value_or(0);
    state.encoded.clear();
    for (const auto& path : state.payload.key_paths) {
        auto value = parser.find(path);
        if (!value) return 0;
        state.encoded += ' ';
        record::append_encoded_value(state.encoded, *value);
    }
    return XXH3_64bits(state.encoded.data(), state.encoded.size());
}

// A status as a log or a capture writes it: 503, "503", or "timeout".
std::uint16_t status_of(const record::FieldValue& value) {
    if (value.type != record::FieldValue::Type::number &&
        value.type != record::FieldValue::Type::string)
        return 0;
    if (iequals(value.text, "timeout") || iequals(value.text, "dropped")) return k_no_answer;
    unsigned number = 0;
    auto [end, error] =
        std::from_chars(value.text.data(), value.text.data() + value.text.size(), number);
    if (error != std::errc() || end != value.text.data() + value.text.size() || number < 100 ||
        number > 599)
        return 0;
    return static_cast<std::uint16_t>(number);
}

std::uint16_t answered_status(record::RecordParser& parser, const AuditRunOptions& options) {
    if (options.status_field) {
        auto value = parser.find(*options.status_field);
        return value ? status_of(*value) : 0;
    }
    if (parser.shape() != record::RecordShape::envelope || !parser.has_annotations()) return 0;
    static const auto k_dropped = record::FieldPath::parse("_idem.listen.dropped");
    static const auto k_status = record::FieldPath::parse("_idem.listen.status");
    if (auto dropped = parser.find(k_dropped); dropped && dropped->text == "true")
        return k_no_answer;
    auto status = parser.find(k_status);
    return status ? status_of(*status) : 0;
}

// An attempt counter as a log writes it: 2 or "2"; 0 when it is not one.
std::uint8_t counter_of(const record::FieldValue& value) {
    if (value.type != record::FieldValue::Type::number &&
        value.type != record::FieldValue::Type::string)
        return 0;
    unsigned number = 0;
    auto [end, error] =
        std::from_chars(value.text.data(), value.text.data() + value.text.size(), number);
    if (error != std::errc() || end != value.text.data() + value.text.size()) return 0;
    return static_cast<std::uint8_t>(std::min(number, 255u));
}

// How a copy was delivered (explain.hpp DeliveryTrace): the provider and
// its retry counter from a capture's headers (or --provider), the endpoint
// it was sent to (host and path), the subscription a provider names in a
// header (or --route-field), and each retry layer's counter.
// `parts` appended to `texts`, one after another: their span.
Reading::Span append_span(std::string& texts, std::initializer_list<std::string_view> parts) {
    auto at = texts.size();
    for (auto part : parts)
        texts.append(part);
    return within_text_bound(
        texts, {static_cast<std::uint32_t>(at), static_cast<std::uint32_t>(texts.size() - at)});
}

void read_trace(record::RecordParser& parser, Reading& reading, std::string& texts,
                const record::IgnoredPaths& nothing_ignored, const AuditRunOptions& options) {
    reading.provider = options.provider;
    if (parser.shape() == record::RecordShape::envelope) {
        const auto& envelope = parser.envelope();
        auto header = [&](std::string_view name) { return envelope.header(name); };
        std::uint8_t attempt = 0;
        auto detected = provider_of_headers(header, attempt);
        if (reading.provider == Provider::unknown) reading.provider = detected;
        if (detected == reading.provider) reading.provider_attempt = attempt;
        auto host = header("X-Forwarded-Host");
        if (!host) host = header("Host");
        auto path = envelope.path.substr(0, envelope.path.find('?'));
        if (host || !path.empty())
            reading.endpoint = append_span(texts, {host.value_or(std::string_view()), path});
        // The signing: what tells a fresh attempt from a copy sent again.
        auto signing = signing_headers(header, reading.provider);
        if (signing.signature) {
            auto& copy = reading.signed_copy;
            copy.signature = XXH3_64bits(signing.signature->data(), signing.signature->size()) | 1;
            if (signing.signed_at) copy.signed_at = signed_seconds(*signing.signed_at);
            copy.body = XXH3_64bits(envelope.body.data(), envelope.body.size());
            copy.canonical = parser.event_hash(nothing_ignored).value_or(0);
        }
        // Headers that name the subscription, with few values each (never a
        // per-delivery id: those are as many as the events).
        for (std::string_view name : {"X-GitHub-Hook-ID", "X-Shopify-API-Version"})
            if (auto value = header(name); value && !value->empty()) {
                reading.subscription = append_span(texts, {name, " ", *value});
                break;
            }
    }
    if (options.route_field)
        if (auto value = parser.find(*options.route_field); value && !value->text.empty()) {
            reading.subscription =
                append_span(texts, {options.route_field->text(), " ", value->text});
            reading.route_found = true;
        }
    for (std::size_t layer = 0; layer < options.attempt_fields.size() && layer < k_max_layers;
         ++layer)
        if (auto value = parser.find(options.attempt_fields[layer]))
            reading.layers[layer] = counter_of(*value);
}

} // namespace

void read_line(const io::BlockLine& line, Reading& reading, std::string& texts, WorkerState& state,
               const AuditRunOptions& options) {
    auto& parser = state.parser;
    if (auto failure = parser.parse(line.bytes)) {
        reading.parsed = false;
        reading.column = failure->column;
        reading.message = std::move(failure->message);
        return;
    }
    reading.key = encode(parser, options.key_fields, texts);
    for (std::size_t k = 0; k < options.what_if_key_fields.size() && k < k_max_what_if_keys; ++k)
        reading.what_if_keys[k] = encode(parser, options.what_if_key_fields[k], texts);
    reading.fingerprint = encode(parser, options.fingerprint_fields, texts);
    if (options.source_field) {
        if (auto value = parser.find(*options.source_field)) {
            reading.source = append_span(texts, {value->text});
        }
    }
    // A record without one is counted by the --time-field check
    // (check_paths), not rejected: it still belongs to its group.
    auto time = record::event_time(parser, options.time_field ? &*options.time_field : nullptr);
    reading.time = time.time;
    if (options.input.window.active()) {
        if (!time.time) {
            reading.parsed = false;
            reading.message = time.failed() ? record::describe_failure(time, *options.time_field)
                                            : std::string(record::k_untimed_in_window);
            return;
        }
        if (!options.input.window.contains(*time.time)) {
            reading.outside_range = true;
            return;
        }
    }
    reading.payload = payload_hash(state);
    reading.status = answered_status(parser, options);
    read_trace(parser, reading, texts, state.nothing_ignored, options);
}

void read_block(const run::InputBlock& block, WorkerState& state, const AuditRunOptions& options,
                BlockReadings& result) {
    io::LineCursor cursor(block.block.lines());
    while (auto line = cursor.next()) {
        auto& reading = result.outcomes.emplace_back();
        reading.line = *line;
        if (line->bytes.size() > options.input.max_record_bytes) {
            reading.parsed = false;
            continue;
        }
        read_line(*line, reading, result.texts, state, options);
    }
    result.lines = cursor.lines_seen();
}

} // namespace idem::audit::detail
