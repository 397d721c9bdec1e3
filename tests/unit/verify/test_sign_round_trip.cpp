// Every scheme round-trips: what Signer produces, Verifier accepts; and each
// failure has its own readable reason.

#include "idem/util/errors.hpp"
#include "idem/verify/signer.hpp"
#include "idem/verify/verifier.hpp"
#include "support/instants.hpp"

#include <doctest/doctest.h>
#include <new>

using namespace idem;
using namespace idem::verify;

namespace {

struct OwnedEnvelope {
    std::vector<std::pair<std::string, std::string>> headers;
    std::string body;
    std::string path = "/hooks/x?a=1";
    record::Envelope view() const {
        record::Envelope e;
        e.method = "POST";
        e.path = path;
        e.body = body;
        for (const auto& [n, v] : headers)
            e.headers.push_back({n, v});
        return e;
    }
};

struct SchemeCase {
    Scheme scheme;
    std::string signing_secret;
    std::string verify_secret; // empty: use public_key
    std::string public_key;
};

} // namespace

TEST_CASE("every scheme: sign then verify round-trips, and a changed body fails") {
    const std::string seed_hex = "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb";
    const std::string public_hex =
        "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c";
    std::vector<SchemeCase> cases = {
        {Scheme::github, "s3cret", "s3cret", ""},
        {Scheme::stripe, "whsec_abc", "whsec_abc", ""},
        {Scheme::slack, "slack-secret", "slack-secret", ""},
        {Scheme::standard, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
         "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", ""},
        {Scheme::svix, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
         "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", ""},
        {Scheme::standard, "whsk_TM0Imyj/ltqdtsNG7BFOD1uKMZ81q6Yk2oz27U+4pvs=", "",
         "whpk_PUAXw+hDiVqStwqnTRt+vJyYLM8uxJaMwM1V8Sr0Zgw="},
        {Scheme::shopify, "shpss", "shpss", ""},
        {Scheme::discord, seed_hex, "", public_hex},
        {Scheme::twilio, "token", "token", ""},
        {Scheme::square, "sq-key", "sq-key", ""},
        {Scheme::pagerduty, "pd", "pd", ""},
        {Scheme::hmac, "generic", "generic", ""},
    };
    for (const auto& c : cases) {
        CAPTURE(scheme_name(c.scheme));
        VerifyConfig sign_config;
        sign_config.scheme = c.scheme;
        sign_config.secrets = {{"#1", c.signing_secret}};
        sign_config.url_base = "https://example.com";
        sign_config.hmac.message_template = "{timestamp}:{body}";
        sign_config.hmac.timestamp_header = "X-Timestamp";
        Signer signer(sign_config);
        OwnedEnvelope e;
        e.body = R"({"id":"evt_1","amount":100})";
        for (auto& [name, value] :
             signer.signature_headers(e.view(), test::unix_seconds(1700000000)))
            e.headers.emplace_back(name, value);

        VerifyConfig verify_config = sign_config;
        verify_config.scheme = Scheme::auto_detect;
        if (c.scheme == Scheme::hmac) verify_config.scheme = Scheme::hmac;
        verify_config.secrets.clear();
        if (!c.verify_secret.empty()) verify_config.secrets = {{"#1", c.verify_secret}};
        if (!c.public_key.empty()) verify_config.public_keys = {parse_public_key(c.public_key, 1)};
        Verifier verifier(verify_config);
        auto verdict = verifier.verify(e.view(), test::unix_seconds(1700000060));
        CHECK(verdict.valid);
        if (c.scheme == Scheme::twilio) {
            // Twilio covers a JSON body only through bodySHA256 in the URL.
            CHECK(verdict.reason ==
                  "signature matches (the body is not signed: no bodySHA256 and not a form)");
            continue;
        }
        CHECK(verdict.reason == "signature matches");
        if (c.scheme != Scheme::svix) CHECK(verdict.scheme == c.scheme);

        e.body = R"({"id":"evt_1","amount":101})";
        CHECK_FALSE(verifier.verify(e.view(), test::unix_seconds(1700000060)).valid);
    }
}

TEST_CASE("missing and malformed headers each get their own reason") {
    VerifyConfig config;
    config.secrets = {{"#1", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}};
    auto reason = [&](Scheme scheme, std::vector<std::pair<std::string, std::string>> headers) {
        config.scheme = scheme;
        config.url = "https://example.com/x";
        Verifier verifier(config);
        OwnedEnvelope e;
        e.body = "{}";
        e.headers = std::move(headers);
        return verifier.verify(e.view(), test::unix_seconds(1700000000)).reason;
    };
    CHECK(reason(Scheme::github, {}) == "missing header 'X-Hub-Signature-256'");
    CHECK(reason(Scheme::github, {{"X-Hub-Signature-256", "md5=00"}}) ==
          "malformed header 'X-Hub-Signature-256': expected 'sha256=' followed by hex");
    CHECK(reason(Scheme::github, {{"X-Hub-Signature-256", "sha256=zz"}}) ==
          "the signature is not hex");
    CHECK(reason(Scheme::stripe, {}) == "missing header 'Stripe-Signature'");
    CHECK(reason(Scheme::stripe, {{"Stripe-Signature", "t=soon,v1=00"}}) ==
          "malformed header 'Stripe-Signature': t='soon' is not a Unix timestamp");
    CHECK(reason(Scheme::stripe, {{"Stripe-Signature", "t=1700000000,v1=abc"}}) ==
          "the v1 signature has the wrong length: expected 64 hex digits, got 3");
    CHECK(reason(Scheme::slack, {{"X-Slack-Signature", "v0=00"}}) ==
          "missing header 'X-Slack-Request-Timestamp'");
    CHECK(reason(Scheme::slack,
                 {{"X-Slack-Signature", "v1=00"}, {"X-Slack-Request-Timestamp", "1700000000"}}) ==
          "malformed header 'X-Slack-Signature': expected 'v0=' followed by hex");
    CHECK(reason(Scheme::standard, {{"webhook-signature", "v1,AAAA"}}) ==
          "missing header 'webhook-id'");
    CHECK(reason(Scheme::standard, {{"webhook-signature", "v2,AAAA"},
                                    {"webhook-id", "m"},
                                    {"webhook-timestamp", "1700000000"}}) ==
          "no v1 or v1a signature in header 'webhook-signature'");
    CHECK(reason(Scheme::standard, {{"webhook-signature", "v1,AAAA"},
                                    {"webhook-id", "m"},
                                    {"webhook-timestamp", "1700000000"}}) ==
          "the v1 signature has the wrong length: expected 32 bytes, got 3");
    CHECK(reason(Scheme::shopify, {{"X-Shopify-Hmac-Sha256", "!!"}}) ==
          "the signature is not base64");
    CHECK(reason(Scheme::pagerduty, {{"X-PagerDuty-Signature", "v0=00"}}) ==
          "no v1= signature in header 'X-PagerDuty-Signature'");
    CHECK(reason(Scheme::twilio, {}) == "missing header 'X-Twilio-Signature'");
    config.url.clear();
    config.scheme = Scheme::square;
    Verifier no_url(config);
    OwnedEnvelope e;
    e.headers = {{"X-Square-HmacSha256-Signature", "AAAA"}};
    CHECK(no_url.verify(e.view(), test::unix_seconds(0)).reason ==
          "square signs the notification URL: pass --url or --url-base");
}

TEST_CASE("a scheme that needs a key says which flag is missing, without echoing secrets") {
    VerifyConfig config;
    config.scheme = Scheme::discord;
    Verifier verifier(config);
    OwnedEnvelope e;
    e.headers = {{"X-Signature-Ed25519", std::string(128, '0')}, {"X-Signature-Timestamp", "1"}};
    // A record of a scheme whose key is missing is invalid, never a run abort.
    auto verdict = verifier.verify(e.view(), test::unix_seconds(0));
    CHECK_FALSE(verdict.valid);
    CHECK(verdict.reason == "no public key configured for discord: pass --public-key");
    config.scheme = Scheme::standard;
    config.secrets = {{"#1", "whsec_not*base64"}};
    Verifier standard(config);
    e.headers = {{"webhook-signature", "v1,AAAA"}, {"webhook-id", "m"}, {"webhook-timestamp", "1"}};
    try {
        (void)standard.verify(e.view(), test::unix_seconds(0));
        FAIL("expected a usage error");
    } catch (const UsageError& error) {
        std::string message = error.what();
        CHECK(message ==
              "secret #1 is not a Standard Webhooks secret: expected whsec_ followed by base64");
        CHECK(message.find("not*base64") == std::string::npos);
    }
}

TEST_CASE("a secret's bytes are never split, trimmed or read as a label") {
    // '=' inside, at the end (base64 padding) and at the start: all of it is the secret.
    for (const char* value : {"GHSECRETMARK_p4ss=w0rdTAIL", "whsec_abc==", "=leading", "a b "})
        CHECK(make_secret(value, "#1").value == value);
    CHECK_THROWS_WITH_AS((void)make_secret("", "#2"), "secret #2 is empty", UsageError);
    auto lines = parse_secret_lines("old=one\r\n\n new=two \n#three\n", "rotation.txt");
    REQUIRE(lines.size() == 3);
    CHECK(lines[0].value == "old=one");
    CHECK(lines[0].label == "rotation.txt:1");
    CHECK(lines[1].value == " new=two ");
    CHECK(lines[1].label == "rotation.txt:3");
    CHECK(lines[2].value == "#three");
    auto single = parse_secret_lines("whsec_x==\n", "stripe");
    REQUIRE(single.size() == 1);
    CHECK(single[0].label == "stripe");
}

TEST_CASE("labels come from the reference, never from the secret") {
    auto labelled = parse_labelled_reference("old=STRIPE_OLD");
    CHECK(labelled.label == "old");
    CHECK(labelled.reference == "STRIPE_OLD");
    auto plain = parse_labelled_reference("STRIPE_SECRET");
    CHECK(plain.label.empty());
    CHECK(plain.reference == "STRIPE_SECRET");
    CHECK(parse_labelled_reference("dir with space=x/y").label.empty());
    CHECK_THROWS_WITH_AS((void)parse_public_key("k=abc", 1),
                         "public key k is neither an ed25519 public key (64 hex digits, 32 bytes "
                         "of base64, or whpk_<base64>) nor an ECDSA P-256 one (its DER "
                         "SubjectPublicKeyInfo in base64, or PEM) nor an RSA one of 2048 bits or "
                         "more (PEM, or an X.509 certificate's PEM)",
                         UsageError);
}

TEST_CASE(
    "every scheme: a wrong secret fails, and timestamps are judged in the provider's directions") {
    struct TimedCase {
        Scheme scheme;
        std::string secret;
        std::string public_key;    // for ed25519 schemes
        bool checks_future = true; // Stripe's libraries accept future timestamps
        bool has_timestamp = true;
    };
    const std::string seed_hex = "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb";
    std::vector<TimedCase> cases = {
        {Scheme::github, "s3cret", "", false, false},
        {Scheme::stripe, "whsec_abc", "", false, true},
        {Scheme::slack, "slack-secret", "", true, true},
        {Scheme::standard, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "", true, true},
        {Scheme::svix, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "", true, true},
        {Scheme::shopify, "shpss", "", false, false},
        {Scheme::discord, seed_hex,
         "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", true, true},
        {Scheme::twilio, "token", "", false, false},
        {Scheme::square, "sq-key", "", false, false},
        {Scheme::pagerduty, "pd", "", false, false},
        {Scheme::hmac, "generic", "", true, true},
    };
    const long long signed_at = 1700000000;
    for (const auto& c : cases) {
        CAPTURE(scheme_name(c.scheme));
        VerifyConfig config;
        config.scheme = c.scheme;
        config.secrets = {{"#1", c.secret}};
        config.url_base = "https://example.com";
        config.hmac.message_template = "{timestamp}:{body}";
        config.hmac.timestamp_header = "X-Timestamp";
        Signer signer(config);
        OwnedEnvelope e;
        e.headers = {{"Content-Type", "application/x-www-form-urlencoded"}};
        e.body = "a=1&b=2";
        for (auto& [name, value] :
             signer.signature_headers(e.view(), test::unix_seconds(signed_at)))
            e.headers.emplace_back(name, value);

        VerifyConfig wrong = config;
        if (c.public_key.empty()) {
            wrong.secrets = {{"#1", c.scheme == Scheme::standard || c.scheme == Scheme::svix
                                        ? "whsec_c2VjcmV0LW9mLWEtcm90YXRlZC1lbmRwb2ludA=="
                                        : "not-the-secret"}};
        } else {
            wrong.secrets.clear();
            // Another real key (RFC 8032 section 7.1, TEST 1; the seed signs
            // as TEST 2): 64 'a's is no point of the prime-order subgroup,
            // and is refused when loaded.
            wrong.public_keys = {parse_public_key(
                "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", 1)};
        }
        Verifier wrong_verifier(wrong);
        auto forged = wrong_verifier.verify(e.view(), test::unix_seconds(signed_at));
        CHECK_FALSE(forged.valid);
        CHECK(forged.reason.starts_with("signature does not match"));

        VerifyConfig right = config;
        if (!c.public_key.empty()) {
            right.secrets.clear();
            right.public_keys = {parse_public_key(c.public_key, 1)};
        }
        Verifier verifier(right);
        auto old = verifier.verify(e.view(), test::unix_seconds(signed_at + 600));
        auto future = verifier.verify(e.view(), test::unix_seconds(signed_at - 600));
        if (!c.has_timestamp) {
            CHECK(old.valid);
            CHECK(future.valid);
            continue;
        }
        CHECK_FALSE(old.valid);
        CHECK(old.reason ==
              "timestamp 2023-11-14T22:13:20.000Z is 10m old, beyond the 5m tolerance");
        CHECK(future.valid == !c.checks_future);
        if (c.checks_future)
            CHECK(
                future.reason ==
                "timestamp 2023-11-14T22:13:20.000Z is 10m in the future, beyond the 5m tolerance");
    }
}

TEST_CASE("a secret's bytes are wiped when its copy goes") {
    // A short secret lives in the string's own buffer, inside the object:
    // after the destructor, the object's storage holds none of its bytes.
    const std::string marker = "S3CRETMARK";
    alignas(verify::Secret) unsigned char storage[sizeof(verify::Secret)];
    auto* secret = new (storage) verify::Secret{"#1", marker};
    std::string moved = std::move(secret->value); // a move leaves its bytes behind
    secret->value = "short";
    secret->~Secret();
    std::string_view bytes(reinterpret_cast<const char*>(storage), sizeof storage);
    CHECK(bytes.find("S3CRET") == std::string_view::npos);
    CHECK(bytes.find("MARK") == std::string_view::npos); // what "short" did not cover
    CHECK(bytes.find("short") == std::string_view::npos);
    crypto::cleanse(moved);
    CHECK(moved.empty());
}

TEST_CASE("a secret that decodes to no bytes is refused by its label, verifying and signing") {
    for (const char* value : {"whsec_", "====", "whsec_===="})
        for (auto scheme : {Scheme::standard, Scheme::svix}) {
            VerifyConfig config;
            config.scheme = scheme;
            config.secrets.push_back(make_secret(value, "CI_SECRET"));
            CHECK_THROWS_WITH_AS(Verifier{config}, doctest::Contains("secret CI_SECRET decodes"),
                                 UsageError);
            CHECK_THROWS_WITH_AS(Signer{config}, doctest::Contains("secret CI_SECRET decodes"),
                                 UsageError);
        }
    // One byte is a key (a weak one, but the provider's).
    VerifyConfig config;
    config.scheme = Scheme::standard;
    config.secrets.push_back(make_secret("whsec_AA==", "CI_SECRET"));
    CHECK_NOTHROW(Verifier{config});
}
