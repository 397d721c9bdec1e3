// Fuzz target: one untrusted NDJSON line through everything the per-record
// path does with it: parse, envelope fields, field paths, canonical JSON,
// annotation splicing, and verification under every scheme.

#include "idem/io/block_reader.hpp"
#include "idem/record/annotate.hpp"
#include "idem/record/canonical.hpp"
#include "idem/record/parser.hpp"
#include "idem/verify/verifier.hpp"

#include <cstddef>
#include <cstdint>
#include <string>

namespace {

idem::verify::VerifyConfig config_for(idem::verify::Scheme scheme) {
    idem::verify::VerifyConfig config;
    config.scheme = scheme;
    config.secrets = {{"#1", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}};
    config.public_keys = {{"#1", std::string(32, '\x01')}};
    config.url_base = "https://example.com";
    config.hmac.timestamp_header = "X-Timestamp";
    config.hmac.id_header = "X-Id";
    config.hmac.message_template = "{id}.{timestamp}.{body}";
    return config;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string line(reinterpret_cast<const char*>(data), size);
    line.reserve(size + idem::io::k_padding_bytes);
    static idem::record::RecordParser parser;
    if (parser.parse(line)) return 0;
    for (const char* path :
         {"data.object.id", "/a/0", "headers.Stripe-Signature", "body.id", "items.0"})
        (void)parser.find(idem::record::FieldPath::parse(path));
    (void)parser.canonical_event({idem::record::FieldPath::parse("request.id")});
    (void)idem::record::annotate(line, parser.has_annotations(), "\"x\":1");
    (void)idem::record::canonical_json(line);
    if (parser.shape() != idem::record::RecordShape::envelope) return 0;
    for (auto scheme :
         {idem::verify::Scheme::auto_detect, idem::verify::Scheme::github,
          idem::verify::Scheme::stripe, idem::verify::Scheme::slack, idem::verify::Scheme::standard,
          idem::verify::Scheme::shopify, idem::verify::Scheme::discord,
          idem::verify::Scheme::twilio, idem::verify::Scheme::square,
          idem::verify::Scheme::pagerduty, idem::verify::Scheme::hmac}) {
        auto config = config_for(scheme);
        idem::verify::Verifier verifier(config);
        (void)verifier.verify(parser.envelope(), idem::Timestamp(std::chrono::seconds(1700000000)));
    }
    return 0;
}
