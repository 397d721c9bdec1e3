// Provider files (provider_spec.hpp): what a spec may say, and how the
// verifier reads a delivery with it. The shipped specs are checked against
// their providers' SDK vectors end to end in tests/e2e/test_providers.py.

#include "idem/util/errors.hpp"
#include "idem/verify/detail/schemes.hpp"
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
    CHECK(verdict.message_id == "evt_1");
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
    REQUIRE(detect_provider(specs, bare).spec);
    CHECK(detect_provider(specs, bare).spec->name == "plain");
    CHECK(detect_provider(specs, topical).spec->name == "topical");
    CHECK(detect_provider(specs, delivery({}, "{}")).spec == nullptr);
    CHECK(detect_provider(specs, delivery({}, "{}")).candidates.empty());
}

TEST_CASE("a detection value ending in '*' is a prefix; specs that tie are all candidates") {
    auto specs = parse_provider_specs(R"(
- {name: agent, signature_header: X-Hub-Signature, detect: [X-Hub-Signature, "User-Agent: parrot-client*"]}
- {name: keyed, signature_header: X-Hub-Signature, detect: [X-Hub-Signature, X-Event-Key]}
)",
                                      "hub.yaml");
    auto parrot =
        delivery({{"X-Hub-Signature", "sha1=00"}, {"User-Agent", "Parrot-Client/1.0"}}, "{}");
    REQUIRE(detect_provider(specs, parrot).spec);
    CHECK(detect_provider(specs, parrot).spec->name == "agent");
    // The value must start with the text, not merely contain it.
    auto other =
        delivery({{"X-Hub-Signature", "sha1=00"}, {"User-Agent", "my-parrot-client"}}, "{}");
    CHECK(detect_provider(specs, other).spec == nullptr);
    // Both claim it with two headers each: neither is picked, both are named.
    auto both = delivery({{"X-Hub-Signature", "sha1=00"},
                          {"User-Agent", "parrot-client/1.0"},
                          {"X-Event-Key", "repo:push"}},
                         "{}");
    auto found = detect_provider(specs, both);
    CHECK(found.spec == nullptr);
    REQUIRE(found.candidates.size() == 2);
    CHECK(found.candidates[0]->name == "agent");
    CHECK(found.candidates[1]->name == "keyed");
    auto config = with(specs, "k");
    config.scheme = Scheme::auto_detect;
    auto verdict = Verifier(config).verify(both, Timestamp(std::chrono::seconds(1700000000)));
    CHECK_FALSE(verdict.valid);
    CHECK(verdict.reason ==
          "the headers fit agent, keyed alike: cannot tell the provider (pass --scheme)");
}

TEST_CASE("a malformed spec is refused with its place") {
    // (the spec, what the refusal must say)
    const std::pair<const char*, const char*> cases[] = {
        {"name: a\nsignature_header: X-A\nprefx: x\n", "a.yaml:3:1: unknown field 'prefx'"},
        {"name: a\nsignature_header: X-A\nmessage: '{id}'\n", "give id_header"},
        {"name: a\nsignature_header: X-A\nsignature_key: v1\n", "need a separator"},
        {"name: A B\nsignature_header: X-A\n", "use lowercase letters"},
        {"name: a\nsignature_header: X-A\nseparator: ' '\nsignature_key: v1\nkey_separator: ' '\n",
         "a.yaml:5:16: key_separator"},
        {"name: a\nsignature_header: X-A\nkey_separator: ','\n", "need a separator"},
        {"name: a\nsignature_header: X-A\nsecret: utf16\n", "a.yaml:3:9: secret 'utf16'"},
        {"name: a\nsignature_header: X-A\nconstruction: digest\nsecret: hex\n",
         "go with construction: hmac"},
        {"name: a\nsignature_header: X-A\nconstruction: token\nmessage: '{body}'\n",
         "a.yaml:4:10: message: construction: token signs nothing"},
        {"name: a\nsignature_header: X-A\nconstruction: token\nencoding: hex\n",
         "a token is written as is, or in base64"},
        {"name: a\nsignature_header: X-A\nmessage: '{body}{secret}'\n",
         "unknown placeholder at '{secret}'"},
        {"name: a\nsignature_header: X-A\nconstruction: digest\nmessage: '{secret}{body}'\n",
         "({secret} only last, with construction: digest)"},
        {"name: a\nsignature_header: X-A\nalgorithm: [sha1, sha1]\n",
         "a.yaml:3:19: algorithm: each at most once"},
        {"name: a\nsignature_header: X-A\npositional: true\n", "positional need a separator"},
        {"name: a\nsignature_header: X-A\nsignature_path: s.sig\n",
         "a.yaml:3:17: give signature_header or signature_path, not both"},
        {"name: a\nsignature_path: s..sig\n", "signature_path 's..sig': dotted member names"},
        {"name: a\nsignature_header: X-A\nmessage: '{json:}{body}'\n",
         "a.yaml:3:10: message: {json:PATH} takes a dotted member path"},
        {"name: a\n", "needs a signature_header (or a signature_path)"},
        {"name: a\nsignature_header: X-A\nmessage: '{param:Webhook}{body}'\n",
         "a.yaml:3:10: message: {param:NAME} takes a NAME of lowercase letters"},
        {"name: a\nsignature_header: X-A\nmessage: '{body}{param:webhook_id'\n",
         "a.yaml:3:10: message: {param:NAME} takes a NAME"},
        {"name: a\nsignature_header: X-A\nconstruction: jwt\njwt_algorithm: HS256\n",
         "construction: jwt needs jwt_body_hash"},
        {"name: a\nsignature_header: X-A\njwt_body_hash: sha256\n", "go with construction: jwt"},
        {"name: a\nsignature_header: X-A\nconstruction: jwt\njwt_algorithm: none\n"
         "jwt_body_hash: h\n",
         "a.yaml:4:16: jwt_algorithm 'none': use HS256"},
        {"name: a\nsignature_header: X-A\nseparator: ','\npositional: true\nsignature_key: v1\n",
         "a.yaml:5:16: signature_key: positional items have no keys"},
        {"name: a\nsignature_header: X-A\ntimestamp_header: X-T\ntimestamp_unit: rfc2822\n",
         "use s, ms, rfc3339 or http-date"},
        {"name: a\nsignature_header: X-A\nencoding: base32\n", "use hex, base64 or base64url"},
    };
    for (const auto& [text, expected] : cases) {
        CAPTURE(text);
        CHECK_THROWS_WITH_AS(parse_provider_specs(text, "a.yaml"), doctest::Contains(expected),
                             UsageError);
    }
}

TEST_CASE("items split by ',' within, keys from base64 or hex, HTTP dates") {
    // Finch's form: "v1,<base64>" items, space-separated; the key is the
    // bytes the base64 secret spells. MACs computed independently with
    // Python's hmac: key bytes 00 01 02 03 (AAECAw== / 00010203), message
    // "evt_1.Mon, 02 Jan 2006 22:04:05 GMT.{}".
    auto specs = parse_provider_specs(R"(
- name: spaced
  signature_header: X-Sig
  separator: " "
  key_separator: ","
  signature_key: v1
  secret: base64
  encoding: base64url
  message: "{id}.{timestamp}.{body}"
  timestamp_header: X-Date
  timestamp_unit: http-date
  id_header: X-Id
- name: hexkey
  signature_header: X-Hex-Sig
  secret: hex
  message: "{id}.{timestamp}.{body}"
  timestamp_header: X-Date
  timestamp_unit: http-date
  id_header: X-Id
)",
                                      "two.yaml");
    REQUIRE(specs.size() == 2);
    CHECK(specs[0].key_separator == ',');
    CHECK(specs[0].secret_form == ProviderSpec::SecretForm::base64);
    CHECK(specs[1].secret_form == ProviderSpec::SecretForm::hex);
    auto at = Timestamp(std::chrono::seconds(1136239445)); // 2006-01-02T22:04:05Z
    std::vector<record::Header> common = {{"X-Date", "Mon, 02 Jan 2006 22:04:05 GMT"},
                                          {"X-Id", "evt_1"}};
    auto spaced = common;
    spaced.push_back(
        {"X-Sig", "v2,ignored v1,AAAA v1,CBms3zZjGt2CjeO8q-mGTjDuZC-SpmlJjS3x36kAYhc"});
    auto config = with(specs, "AAECAw==");
    config.scheme = Scheme::provider;
    config.provider = 0;
    Verifier by_base64(config);
    CHECK(by_base64.verify(delivery(spaced, "{}"), at).valid);
    // The same secret taken as its characters is another key.
    config.providers[0].secret_form = ProviderSpec::SecretForm::raw;
    CHECK_FALSE(Verifier(config).verify(delivery(spaced, "{}"), at).valid);
    // Five minutes and one second later: stale (the date is what is checked).
    CHECK_FALSE(by_base64.verify(delivery(spaced, "{}"), at + std::chrono::seconds(301)).valid);

    auto hexed = common;
    hexed.push_back(
        {"X-Hex-Sig", "0819acdf36631add828de3bcabe9864e30ee642f92a669498d2df1dfa9006217"});
    auto hex_config = with(specs, "00010203");
    hex_config.scheme = Scheme::provider;
    hex_config.provider = 1;
    CHECK(Verifier(hex_config).verify(delivery(hexed, "{}"), at).valid);
    // A secret that is not hex is refused as a usage error, naming it, not a verdict.
    auto not_hex = with(specs, "zz");
    not_hex.scheme = Scheme::provider;
    not_hex.provider = 1;
    CHECK_THROWS_WITH_AS((void)Verifier(not_hex).verify(delivery(hexed, "{}"), at),
                         doctest::Contains("secret #1 is not hex"), UsageError);
}

TEST_CASE("a generic signature header alone yields to a provider file that claims it") {
    auto specs =
        parse_provider_specs("name: gocardless\nsignature_header: Webhook-Signature\n", "g.yaml");
    auto config = with(specs, "k");
    config.scheme = Scheme::auto_detect;
    Verifier verifier(config);
    auto now = Timestamp(std::chrono::seconds(1700000000));
    auto alone = verifier.verify(delivery({{"Webhook-Signature", "00"}}, "{}"), now);
    CHECK(alone.provider == "gocardless");
    // With webhook-id beside it, it is Standard Webhooks, as without the file.
    auto standard = verifier.verify(
        delivery({{"webhook-signature", "v1,AA=="}, {"webhook-id", "msg_1"}}, "{}"), now);
    CHECK(standard.scheme == Scheme::standard);
    CHECK(standard.provider.empty());
}

TEST_CASE("GitHub's signature headers without X-GitHub-Event are left to a file that claims them") {
    auto specs = parse_provider_specs(
        "{name: hubbed, signature_header: X-Hub-Signature-256, prefix: 'sha256='}", "hub.yaml");
    auto config = with(specs, "It's a Secret to Everybody");
    config.scheme = Scheme::auto_detect;
    Verifier verifier(config);
    // GitHub's documented example: "Hello, World!" under that secret.
    const std::string signature =
        "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
    auto at = Timestamp(std::chrono::seconds(1700000000));
    auto meta_like = delivery({{"X-Hub-Signature-256", signature}}, "Hello, World!");
    CHECK(verifier.verify(meta_like, at).provider == "hubbed");
    auto github =
        delivery({{"X-Hub-Signature-256", signature}, {"X-GitHub-Event", "push"}}, "Hello, World!");
    auto verdict = verifier.verify(github, at);
    CHECK(verdict.valid);
    CHECK(verdict.provider.empty());
    CHECK(verdict_scheme_name(verdict) == "github");
}

TEST_CASE("a digest may put the secret last and take either of two algorithms by the signature's "
          "length") {
    // cloudinary/cloudinary_npm test/utils/utils_spec.js: SHA-256 of body, timestamp, api_secret.
    auto specs = parse_provider_specs(R"(
name: cld
signature_header: X-Cld-Signature
construction: digest
algorithm: [sha1, sha256]
message: "{body}{timestamp}{secret}"
timestamp_header: X-Cld-Timestamp
future_refused: false
)",
                                      "cld.yaml");
    REQUIRE(specs.size() == 1);
    CHECK(specs[0].secret_last);
    CHECK(specs[0].message == "{body}{timestamp}");
    auto config = with(specs, "hardcoded");
    config.scheme = Scheme::provider;
    config.provider = 0;
    Verifier verifier(config);
    const std::string body =
        R"({"public_id":"b8sjhoslj8cq8ovoa0ma","version":"1555337587","width":1000,"height":800})";
    auto now = Timestamp(std::chrono::seconds(1700000000));
    auto sha256 = delivery(
        {{"X-Cld-Signature", "6c5a29fd8815772fbac2f10ae741e093d0859313947ef8fadeb29126ded6649c"},
         {"X-Cld-Timestamp", "7952342400000"}},
        body);
    CHECK(verifier.verify(sha256, now).valid);
    // The same under SHA-1 (40 hex digits), signed at 1555337600 with another secret.
    config.secrets.front().value = "cloudinary-api-secret";
    Verifier sha1_verifier(config);
    auto sha1 = delivery({{"X-Cld-Signature", "ca80eecc2dd3becb3e61afffe9c6e9c224ebf4ca"},
                          {"X-Cld-Timestamp", "1555337600"}},
                         body);
    CHECK(sha1_verifier.verify(sha1, Timestamp(std::chrono::seconds(1555337601))).valid);
    // The secret first is another message.
    auto first = parse_provider_specs("{name: first, signature_header: X-Cld-Signature, "
                                      "construction: digest, algorithm: sha1, "
                                      "message: '{body}{timestamp}', "
                                      "timestamp_header: X-Cld-Timestamp}",
                                      "first.yaml");
    auto secret_first = with(first, "cloudinary-api-secret");
    secret_first.scheme = Scheme::provider;
    CHECK_FALSE(
        Verifier(secret_first).verify(sha1, Timestamp(std::chrono::seconds(1555337601))).valid);
}

TEST_CASE("a form is PHP-serialized as Paddle Classic signs it: sorted, the last of a name, byte "
          "lengths") {
    CHECK(idem::verify::detail::php_serialized_form("b=2&a=%C3%A9&a=1&p_signature=x%2B",
                                                    "p_signature") ==
          R"(a:2:{s:1:"a";s:1:"1";s:1:"b";s:1:"2";})");
    CHECK(idem::verify::detail::php_serialized_form("name=%C3%A9+t", "p_signature") ==
          "a:1:{s:4:\"name\";s:4:\"\xC3\xA9 t\";}");
    CHECK(idem::verify::detail::php_serialized_form("", "p_signature") == "a:0:{}");
}

TEST_CASE("a provider file whose key is a list or a map is an error at its place") {
    CHECK_THROWS_WITH_AS(
        (void)idem::verify::parse_provider_specs("name: acme\n? [header]\n: X-Sig\n", "acme.yaml"),
        doctest::Contains("acme.yaml:2:"), idem::UsageError);
}
