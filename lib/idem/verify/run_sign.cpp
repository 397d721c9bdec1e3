// idem sign over a stream of records (docs/sign.md).

#include "idem/verify/run.hpp"

#include "idem/record/parser.hpp"
#include "idem/util/text.hpp"
#include "idem/verify/signer.hpp"

#include <chrono>
#include <nlohmann/json.hpp>

namespace idem::verify {

namespace {

// A plain event becomes an envelope whose body is the event's exact bytes.
nlohmann::ordered_json as_envelope(std::string_view line, const record::RecordParser& parser) {
    if (parser.shape() == record::RecordShape::envelope) return nlohmann::ordered_json::parse(line);
    nlohmann::ordered_json envelope;
    envelope["idem"] = 1;
    envelope["method"] = "POST";
    envelope["path"] = "/";
    envelope["headers"] = nlohmann::ordered_json::array({{"Content-Type", "application/json"}});
    envelope["body"] = std::string(record::event_text(line));
    return envelope;
}

} // namespace

RunResult run_sign(const SignRunOptions& options, io::Sink& output, io::Diagnostics& diagnostics) {
    auto start = std::chrono::steady_clock::now();
    std::unique_ptr<io::Sink> reject_sink;
    if (!options.reject_path.empty()) reject_sink = io::Sink::create_file(options.reject_path);
    run::RejectRouter rejects(reject_sink.get(), options.strictness, diagnostics,
                              options.input.max_record_bytes);
    run::InputStream input(options.input, &rejects);
    record::RecordParser parser;
    record::RecordParser envelope_parser;
    Signer signer(options.config);
    std::uint64_t records = 0;
    while (auto raw = input.next()) {
        ++records;
        if (raw->oversized_bytes) {
            rejects.reject_oversized(*raw);
            continue;
        }
        if (auto failure = parser.parse(raw->bytes)) {
            rejects.reject(*raw, failure->column, failure->message);
            continue;
        }
        nlohmann::ordered_json envelope_json;
        try {
            envelope_json = as_envelope(raw->bytes, parser);
        } catch (const nlohmann::json::exception&) {
            rejects.reject(*raw, 0,
                           "a number is too large: idem reads 64-bit integers and doubles");
            continue;
        }
        // Re-read the envelope so that body_b64 and plain events look alike.
        std::string text = envelope_json.dump();
        text.reserve(text.size() + io::k_padding_bytes);
        envelope_parser.parse(text);
        auto at = options.timestamp.value_or(now_utc());
        auto added = signer.signature_headers(envelope_parser.envelope(), at);
        auto headers = nlohmann::ordered_json::array();
        for (const auto& pair : envelope_json.value("headers", nlohmann::ordered_json::array())) {
            bool replaced = false;
            for (const auto& [name, value] : added)
                if (iequals(pair[0].get<std::string>(), name)) replaced = true;
            if (!replaced) headers.push_back(pair);
        }
        for (const auto& [name, value] : added)
            headers.push_back({name, value});
        envelope_json["headers"] = headers;
        // The signed envelope is a delivery yet to be made: its old capture
        // time would make `verify` judge the fresh timestamp as of then.
        envelope_json.erase("received_at");
        output.write_record(envelope_json.dump());
    }
    output.flush();
    if (reject_sink) reject_sink->flush();
    RunResult result;
    result.summary.command = "sign";
    result.summary.counts = {{"in", records},
                             {"signed", output.records_written()},
                             {"rejected", rejects.count()},
                             {"out", output.records_written()}};
    result.summary.facts.emplace_back("scheme", std::string(scheme_name(options.config.scheme)));
    if (!signer.signature_kind().empty())
        result.summary.facts.emplace_back("signature", std::string(signer.signature_kind()));
    result.summary.seconds = io::seconds_since(start);
    return result;
}

} // namespace idem::verify
