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
    // RFC 8032 section 7.1, TEST 1: a point of the prime-order subgroup
    // (32 bytes of 0x01 is none, and a Verifier refuses it).
    config.public_keys = {{"#1", std::string("\xd7\x5a\x98\x01\x82\xb1\x0a\xb7\xd5\x4b\xfe"
                                             "\xd3\xc9\x64\x07\x3a\x0e\xe1\x72\xf3\xda\xa6"
                                             "\x23\x25\xaf\x02\x1a\x68\xf7\x07\x51\x1a",
                                             32)}};
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
