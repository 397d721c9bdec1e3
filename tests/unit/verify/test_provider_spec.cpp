// Provider files (provider_spec.hpp): what a spec may say, and how the
// verifier reads a delivery with it. The shipped specs are checked against
// their providers' SDK vectors end to end in tests/e2e/test_providers.py.

#include "idem/util/errors.hpp"
#include "idem/verify/provider_spec.hpp"
#include "idem/verify/verifier.hpp"

#include <doctest/doctest.h>

using namespace idem;
using namespace idem::verify;

namespace {

record::Envelope delivery(std::vector<record::Header> headers, std::string_view body) {
    record::Envelope envelope;
    envelope.method = "POST";
    envelope.path = "/hooks";
    envelope.headers = std::move(headers);
    envelope.body = body;
    return envelope;
}

VerifyConfig with(std::vector<ProviderSpec> specs, std::string secret) {
    VerifyConfig config;
    config.providers = std::move(specs);
    config.secrets.push_back({"#1", std::move(secret)});
    return config;
}

} // namespace

TEST_CASE("a spec reads the header items, the template and the timestamp unit") {
    auto specs = parse_provider_specs(R"(
name: acme
signature_header: X-Acme-Signature
separator: ","
signature_key: v1
timestamp_key: t
timestamp_unit: ms
message: "{timestamp}.{method}.{body}"
id_header: X-Acme-Id
detect: [X-Acme-Signature, X-Acme-Id]
)",
                                      "acme.yaml");
    REQUIRE(specs.size() == 1);
    const auto& spec = specs.front();
    CHECK(spec.separator == ',');
    CHECK(spec.timestamp_unit == ProviderSpec::TimestampUnit::milliseconds);
    CHECK(spec.detect.size() == 2);
    // The MAC computed independently: Python's
    // hmac.new(b"k", b"1700000000000.POST.{}", sha256).hexdigest(); the first
    // v1 item is a stale one, as during a rotation.
    auto envelope = delivery(
        {{"X-Acme-Signature", "t=1700000000000,v1=00,v1="
                              "83d5c432343f33c1ba379734499e04098699cc2b64ed5b33d62f10b1262e0336"},
         {"X-Acme-Id", "evt_1"}},
        "{}");
    auto config = with(specs, "k");
    config.scheme = Scheme::auto_detect;
    Verifier verifier(config);
    // The timestamp is in milliseconds: 1700000000000 ms is this second.
    auto verdict = verifier.verify(envelope, Timestamp(std::chrono::seconds(1700000001)));
    CHECK(verdict.valid);
    CHECK(verdict.provider == "acme");
    CHECK(verdict_scheme_name(verdict) == "acme");
    CHECK(verdict.nonce == "evt_1");
    // Another method is another message.
    envelope.method = "PUT";
    CHECK_FALSE(verifier.verify(envelope, Timestamp(std::chrono::seconds(1700000001))).valid);
}

TEST_CASE("auto prefers the spec that needs the most headers") {
    auto specs = parse_provider_specs(R"(
- {name: plain, signature_header: X-Signature}
- {name: topical, signature_header: X-Signature, detect: [X-Signature, X-Topic]}
)",
                                      "two.yaml");
    auto bare = delivery({{"X-Signature", "00"}}, "{}");
    auto topical = delivery({{"X-Signature", "00"}, {"X-Topic", "t"}}, "{}");
    REQUIRE(detect_provider(specs, bare));
    CHECK(detect_provider(specs, bare)->name == "plain");
    CHECK(detect_provider(specs, topical)->name == "topical");
    CHECK(detect_provider(specs, delivery({}, "{}")) == nullptr);
}

TEST_CASE("a malformed spec is refused with its place") {
    CHECK_THROWS_WITH_AS(
        parse_provider_specs("name: a\nsignature_header: X-A\nprefx: x\n", "a.yaml"),
        doctest::Contains("a.yaml:3:1: unknown field 'prefx'"), UsageError);
    CHECK_THROWS_WITH_AS(
        parse_provider_specs("name: a\nsignature_header: X-A\nmessage: '{id}'\n", "a.yaml"),
        doctest::Contains("give id_header"), UsageError);
    CHECK_THROWS_WITH_AS(
        parse_provider_specs("name: a\nsignature_header: X-A\nsignature_key: v1\n", "a.yaml"),
        doctest::Contains("need a separator"), UsageError);
    CHECK_THROWS_WITH_AS(parse_provider_specs("name: A B\nsignature_header: X-A\n", "a.yaml"),
                         doctest::Contains("use lowercase letters"), UsageError);
}
