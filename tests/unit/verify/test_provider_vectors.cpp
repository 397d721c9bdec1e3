// Each scheme checked against the values its provider publishes. Where a
// provider publishes no complete example, the expected signature was
// computed independently (Python's hmac / cryptography modules) from the
// algorithm in the provider's documentation, and the test says so.

#include "idem/verify/verifier.hpp"
#include "support/deliveries.hpp"
#include "support/instants.hpp"

#include <doctest/doctest.h>

using namespace idem;
using namespace idem::verify;
using record::Envelope;
using record::Header;

using test::config_for;

TEST_CASE("github: the example in GitHub's 'Validating webhook deliveries' docs verifies") {
    // docs.github.com, "Validating webhook deliveries", "Testing the webhook payload validation".
    auto config = config_for(Scheme::github, {"It's a Secret to Everybody"});
    Verifier verifier(config);
    auto e =
        test::delivery({{"X-Hub-Signature-256",
                         "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"},
                        {"X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958"}},
                       "Hello, World!");
    auto verdict = verifier.verify(e, test::unix_seconds(0));
    CHECK(verdict.valid);
    CHECK(verdict.key_label == "#1");
    CHECK(verdict.message_id == "72d3162e-cc78-11e3-81ab-4c9367dc0958");

    auto tampered = test::delivery(e.headers, "Hello, World?");
    CHECK_FALSE(verifier.verify(tampered, test::unix_seconds(0)).valid);
}

TEST_CASE("github: the legacy sha1 header needs --allow-sha1") {
    auto config = config_for(Scheme::github, {"It's a Secret to Everybody"});
    Verifier verifier(config);
    auto e = test::delivery({{"X-Hub-Signature", "sha1=01dc10d0c83e72ed246219cdd91669667fe2ca59"}},
                            "Hello, World!");
    auto verdict = verifier.verify(e, test::unix_seconds(0));
    CHECK_FALSE(verdict.valid);
    CHECK(verdict.reason ==
          "only the legacy SHA-1 'X-Hub-Signature' is present; pass --allow-sha1 to accept it");
}

TEST_CASE("slack: the example in Slack's 'Verifying requests from Slack' docs verifies") {
    // api.slack.com/authentication/verifying-requests-from-slack, the worked example.
    auto config = config_for(Scheme::slack, {"8f742231b10e8888abcd99yyyzzz85a5"});
    Verifier verifier(config);
    std::string body = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&"
                       "channel_id=G8PSS9T3V&"
                       "channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%"
                       "2Fwebhook-collect&text=&"
                       "response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%"
                       "2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&"
                       "trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
    auto e =
        test::delivery({{"X-Slack-Request-Timestamp", "1531420618"},
                        {"X-Slack-Signature",
                         "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"}},
                       body);
    CHECK(verifier.verify(e, test::unix_seconds(1531420618 + 60)).valid);

    SUBCASE("a timestamp older than the tolerance is rejected") {
        auto verdict = verifier.verify(e, test::unix_seconds(1531420618 + 301));
        CHECK_FALSE(verdict.valid);
        CHECK(verdict.reason ==
              "timestamp 2018-07-12T18:36:58.000Z is 5m1s old, beyond the 5m tolerance");
    }
    SUBCASE("Slack checks both sides of the clock") {
        auto verdict = verifier.verify(e, test::unix_seconds(1531420618 - 600));
        CHECK_FALSE(verdict.valid);
        CHECK(verdict.reason ==
              "timestamp 2018-07-12T18:36:58.000Z is 10m in the future, beyond the 5m tolerance");
    }
}

TEST_CASE("standard webhooks: the reference vector of the specification verifies") {
    // standard-webhooks specification test vector (also svix-webhooks go/webhook_test.go).
    auto config = config_for(Scheme::standard, {"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"});
    Verifier verifier(config);
    auto e =
        test::delivery({{"webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek"},
                        {"webhook-timestamp", "1614265330"},
                        {"webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="}},
                       "{\"test\": 2432232314}");
    auto verdict = verifier.verify(e, test::unix_seconds(1614265330));
    CHECK(verdict.valid);
    CHECK(verdict.message_id == "msg_p5jXN8AQM9LWM0D4loKWxJek");

    SUBCASE("one of several space-separated signatures is enough") {
        auto several = test::delivery(
            {e.headers[0],
             e.headers[1],
             {"webhook-signature", "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= "
                                   "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="}},
            e.body);
        CHECK(verifier.verify(several, test::unix_seconds(1614265330)).valid);
    }
    SUBCASE("the svix- headers carry the same scheme") {
        auto svix_config = config_for(Scheme::svix, {"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"});
        Verifier svix(svix_config);
        auto s =
            test::delivery({{"svix-id", "msg_p5jXN8AQM9LWM0D4loKWxJek"},
                            {"svix-timestamp", "1614265330"},
                            {"svix-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="}},
                           e.body);
        CHECK(svix.verify(s, test::unix_seconds(1614265330)).valid);
    }
    SUBCASE("a future timestamp beyond the tolerance is rejected") {
        CHECK_FALSE(verifier.verify(e, test::unix_seconds(1614265330 - 301)).valid);
    }
}

TEST_CASE("standard webhooks v1a: an ed25519 signature verifies with the whpk_ public key") {
    // Key pair of RFC 8032 section 7.1 TEST 2; the signature over
    // "msg_1.1700000000.{\"a\":1}" computed with Python's cryptography module.
    VerifyConfig config;
    config.scheme = Scheme::standard;
    config.public_keys.push_back(
        parse_public_key("whpk_PUAXw+hDiVqStwqnTRt+vJyYLM8uxJaMwM1V8Sr0Zgw=", 1));
    Verifier verifier(config);
    auto e =
        test::delivery({{"webhook-id", "msg_1"},
                        {"webhook-timestamp", "1700000000"},
                        {"webhook-signature", "v1a,vviQXkRN/b1H6tEsfiHZSmWG0SplaRdhL8oqbkKC7O1/"
                                              "IvGDgYhp1SHS38uH5bRaAeXTJAXxCeoFvCrWrcrXCw=="}},
                       "{\"a\":1}");
    CHECK(verifier.verify(e, test::unix_seconds(1700000000)).valid);
    auto tampered = test::delivery(e.headers, "{\"a\":2}");
    CHECK_FALSE(verifier.verify(tampered, test::unix_seconds(1700000000)).valid);
}

TEST_CASE("stripe: t= and v1= over '{t}.{body}', several v1 entries, v0 ignored") {
    // Payload and secret from stripe-python's tests/test_webhook.py; the v1
    // value computed with Python's hmac from Stripe's documented scheme.
    auto config = config_for(Scheme::stripe, {"whsec_test_secret"});
    Verifier verifier(config);
    std::string body = "{\n  \"id\": \"evt_test_webhook\",\n  \"object\": \"event\"\n}";
    auto e = test::delivery(
        {{"Stripe-Signature",
          "t=1700000000,v0=6ffbb59b2300aae63f272406069a9788598b792a944a07aba816edb039989a39,"
          "v1=0000000000000000000000000000000000000000000000000000000000000000,"
          "v1=4f1cd7feda9826e746b7d482c4badebb657398df1099e1046364f6196a230150"}},
        body);
    CHECK(verifier.verify(e, test::unix_seconds(1700000000 + 299)).valid);
    SUBCASE("Stripe rejects only old timestamps, not future ones") {
        CHECK(verifier.verify(e, test::unix_seconds(1700000000 - 3600)).valid);
        auto old = verifier.verify(e, test::unix_seconds(1700000000 + 301));
        CHECK_FALSE(old.valid);
        CHECK(old.reason.find("old, beyond the 5m tolerance") != std::string::npos);
    }
    SUBCASE("reformatting the JSON body breaks the signature: it is over bytes") {
        auto compact =
            test::delivery(e.headers, "{\"id\":\"evt_test_webhook\",\"object\":\"event\"}");
        CHECK_FALSE(verifier.verify(compact, test::unix_seconds(1700000000)).valid);
        auto escaped = test::delivery(
            e.headers, "{\n  \"id\": \"evt_test_webhook\",\n  \"object\": \"\\u0065vent\"\n}");
        CHECK_FALSE(verifier.verify(escaped, test::unix_seconds(1700000000)).valid);
    }
    SUBCASE("a header without t= is malformed") {
        auto no_t = test::delivery({{"Stripe-Signature", "v1=4f1c"}}, body);
        CHECK(verifier.verify(no_t, test::unix_seconds(0)).reason ==
              "malformed header 'Stripe-Signature': no t= timestamp");
    }
    SUBCASE("a header with only v0 has no v1 signature") {
        auto only_v0 = test::delivery({{"Stripe-Signature", "t=1700000000,v0=abcd"}}, body);
        CHECK(verifier.verify(only_v0, test::unix_seconds(0)).reason ==
              "no v1 signature in header 'Stripe-Signature'");
    }
}

TEST_CASE("rotation: the verdict names the secret that matched") {
    auto config = config_for(Scheme::stripe, {});
    config.secrets = {{"old", "whsec_old"}, {"new", "whsec_test_secret"}};
    Verifier verifier(config);
    auto e = test::delivery(
        {{"Stripe-Signature",
          "t=1700000000,v1=4f1cd7feda9826e746b7d482c4badebb657398df1099e1046364f6196a230150"}},
        "{\n  \"id\": \"evt_test_webhook\",\n  \"object\": \"event\"\n}");
    auto verdict = verifier.verify(e, test::unix_seconds(1700000000));
    CHECK(verdict.valid);
    CHECK(verdict.key_label == "new");
}

TEST_CASE("shopify: base64 HMAC-SHA256 of the body") {
    // Computed with Python's hmac from shopify.dev "Verify a webhook" (HMAC-SHA256, base64).
    auto config = config_for(Scheme::shopify, {"hush"});
    Verifier verifier(config);
    auto e =
        test::delivery({{"X-Shopify-Hmac-Sha256", "qBvrsZF7RfB1iS6BX6IHqJTp5L911P7intnPeTPsH0I="},
                        {"X-Shopify-Webhook-Id", "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043"}},
                       "{\"id\":820982911946154508}");
    CHECK(verifier.verify(e, test::unix_seconds(0)).valid);
    auto wrong = config_for(Scheme::shopify, {"other"});
    Verifier wrong_verifier(wrong);
    CHECK(wrong_verifier.verify(e, test::unix_seconds(0)).reason ==
          "signature does not match: 1 signature checked against 1 key");
}

TEST_CASE("shopify: the headers without X- are read, by the scheme and by auto") {
    // Shopify's newer deliveries name their headers without "X-"
    // (shopify-hmac-sha256, shopify-webhook-id); the signature is the same
    // base64 HMAC-SHA256 of the body as above.
    auto e =
        test::delivery({{"shopify-hmac-sha256", "qBvrsZF7RfB1iS6BX6IHqJTp5L911P7intnPeTPsH0I="},
                        {"shopify-webhook-id", "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043"}},
                       "{\"id\":820982911946154508}");
    for (auto scheme : {Scheme::shopify, Scheme::auto_detect}) {
        auto config = config_for(scheme, {"hush"});
        Verifier verifier(config);
        auto verdict = verifier.verify(e, test::unix_seconds(0));
        CHECK(verdict.valid);
        CHECK(verdict.scheme == Scheme::shopify);
    }
    auto config = config_for(Scheme::shopify, {"hush"});
    Verifier verifier(config);
    CHECK_FALSE(
        verifier.verify(test::delivery(e.headers, "{\"id\":1}"), test::unix_seconds(0)).valid);
}

TEST_CASE("pagerduty: comma-separated v1= entries") {
    // Computed with Python's hmac from PagerDuty's "Verifying Signatures" (v1=hex HMAC-SHA256).
    auto config = config_for(Scheme::pagerduty, {"pd-secret"});
    Verifier verifier(config);
    auto e =
        test::delivery({{"X-PagerDuty-Signature",
                         "v1=00000000000000000000000000000000000000000000000000000000000000ff,"
                         "v1=5dfbb69d65dea346201b4c2af4f3e6b963a805bcfe94589f41ceb84b27302c76"}},
                       "{\"event\":{\"id\":\"01DEN4HPBQAAAG05V5QQYBRZMF\"}}");
    CHECK(verifier.verify(e, test::unix_seconds(0)).valid);
}

TEST_CASE("discord: ed25519 over timestamp followed by body") {
    // RFC 8032 TEST 2 key pair; signature over "1700000000{\"type\":1}" made with Python's
    // cryptography.
    VerifyConfig config;
    config.scheme = Scheme::discord;
    config.public_keys.push_back(
        parse_public_key("3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", 1));
    Verifier verifier(config);
    auto e = test::delivery(
        {{"X-Signature-Ed25519", "f469ecef789749220e905777fb1f6bc03b827ddd6097c3fc0a7924131c221ab14"
                                 "abed319656685a311beeb741a33ee88a5e14858e3aa0c3d1efc66804188b00e"},
         {"X-Signature-Timestamp", "1700000000"}},
        "{\"type\":1}");
    CHECK(verifier.verify(e, test::unix_seconds(1700000000)).valid);
    auto tampered = test::delivery(e.headers, "{\"type\":2}");
    CHECK_FALSE(verifier.verify(tampered, test::unix_seconds(1700000000)).valid);
}

TEST_CASE("twilio: the form example from Twilio's security docs verifies") {
    // twilio.com/docs/usage/security "Validating Signatures from Twilio" and twilio-node's tests.
    auto config = config_for(Scheme::twilio, {"12345"});
    config.url = "https://mycompany.com/myapp.php?foo=1&bar=2";
    Verifier verifier(config);
    auto e = test::delivery(
        {{"Content-Type", "application/x-www-form-urlencoded"},
         {"X-Twilio-Signature", "0/KCTR6DLpKmkAf8muzZqo1nDgQ="}},
        "To=%2B18005551212&CallSid=CA1234567890ABCDE&Digits=1234&From=%2B12349013030&"
        "Caller=%2B12349013030");
    CHECK(verifier.verify(e, test::unix_seconds(0)).valid);

    SUBCASE("the port rules of Twilio's libraries: the default port may be added or removed") {
        auto with_port = config;
        with_port.url = "https://mycompany.com:443/myapp.php?foo=1&bar=2";
        Verifier v(with_port);
        CHECK(v.verify(e, test::unix_seconds(0)).valid);
    }
    SUBCASE("--url-base gets the envelope's path and query appended") {
        auto base = config;
        base.url.clear();
        base.url_base = "https://mycompany.com";
        Verifier v(base);
        auto routed = test::delivery(e.headers, e.body, "/myapp.php?foo=1&bar=2");
        CHECK(v.verify(routed, test::unix_seconds(0)).valid);
    }
    SUBCASE("a changed parameter fails") {
        auto changed =
            test::delivery(e.headers, "To=%2B18005551212&CallSid=CA1234567890ABCDE&Digits="
                                      "9999&From=%2B12349013030&Caller=%2B12349013030");
        CHECK_FALSE(verifier.verify(changed, test::unix_seconds(0)).valid);
    }
}

TEST_CASE("twilio: URLs with user information and ports, as twilio-php's RequestValidatorTest") {
    // twilio-php tests/Twilio/Unit/Security/RequestValidatorTest.php: token
    // 12345, these parameters; each URL with the signature the test expects.
    auto form = "CallSid=CA1234567890ABCDE&Caller=%2B14158675309&Digits=1234&From=%2B14158675309&"
                "To=%2B18005551212";
    struct Vector {
        const char* name;
        const char* url;
        const char* signature;
    };
    for (auto vector : {
             Vector{"testValidate", "https://mycompany.com/myapp.php?foo=1&bar=2",
                    "RSOYDt4T1cUTdK1PDd93/VVr8B8="},
             Vector{"testValidateRemovesPortHttps",
                    "https://mycompany.com:1234/myapp.php?foo=1&bar=2",
                    "RSOYDt4T1cUTdK1PDd93/VVr8B8="},
             Vector{"testValidateRemovesPortHttp",
                    "http://mycompany.com:1234/myapp.php?foo=1&bar=2",
                    "Zmvh+3yNM1Phv2jhDCwEM3q5ebU="},
             Vector{"testValidateAddsPortHttps", "https://mycompany.com/myapp.php?foo=1&bar=2",
                    "kvajT1Ptam85bY51eRf/AJRuM3w="},
             Vector{"testValidateAddsPortHttp", "http://mycompany.com/myapp.php?foo=1&bar=2",
                    "0ZXoZLH/DfblKGATFgpif+LLRf4="},
             Vector{"testBuildUrlCreds", "https://user:pass@mycompany.com/myapp.php?foo=1&bar=2",
                    "CukzLTc1tT5dXEDIHm/tKBanW10="},
             Vector{"testBuildUrlWithUser", "https://user@mycompany.com/myapp.php?foo=1&bar=2",
                    "2YRLlVAflCqxaNicjMpJcSTgzSs="},
             Vector{"testBuildUrlCredsAddsPort",
                    "https://user:pass@mycompany.com/myapp.php?foo=1&bar=2",
                    "ZQFR1PTIZXF2MXB8ZnKCvnnA+rI="},
         }) {
        CAPTURE(vector.name);
        auto config = config_for(Scheme::twilio, {"12345"});
        config.url = vector.url;
        Verifier verifier(config);
        auto e = test::delivery({{"Content-Type", "application/x-www-form-urlencoded"},
                                 {"X-Twilio-Signature", vector.signature}},
                                form);
        CHECK(verifier.verify(e, test::unix_seconds(0)).valid);
    }
    // testFailsWhenIncorrect
    auto config = config_for(Scheme::twilio, {"12345"});
    config.url = "https://user:pass@mycompany.com/myapp.php?foo=1&bar=2";
    Verifier verifier(config);
    auto e = test::delivery(
        {{"Content-Type", "application/x-www-form-urlencoded"}, {"X-Twilio-Signature", "FAIL"}},
        form);
    CHECK_FALSE(verifier.verify(e, test::unix_seconds(0)).valid);
}

TEST_CASE("twilio: a repeated parameter's values are sorted and repeats dropped") {
    // twilio-python's RequestValidator.compute_signature (current releases)
    // signs `for value in sorted(set(values))` per name, and twilio-node
    // does the same: Digits=5678&Digits=1234&Digits=1234 signs
    // "Digits1234Digits5678". The signature below was computed apart from
    // idem, with Python's hmac: base64(HMAC-SHA1("12345", URL +
    // "CallSidCA1234567890ABCDEDigits1234Digits5678")).
    auto config = config_for(Scheme::twilio, {"12345"});
    config.url = "https://mycompany.com/myapp.php?foo=1&bar=2";
    Verifier verifier(config);
    auto e = test::delivery({{"Content-Type", "application/x-www-form-urlencoded"},
                             {"X-Twilio-Signature", "xvxzJ7dFxZg6CzvevjfwbPcNNjM="}},
                            "Digits=5678&CallSid=CA1234567890ABCDE&Digits=1234&Digits=1234");
    CHECK(verifier.verify(e, test::unix_seconds(0)).valid);
}

TEST_CASE("twilio: the bodySHA256 variant for JSON bodies") {
    // twilio-node spec/unit/webhooks/webhooks.spec.js: token 12345, this body and URL.
    auto config = config_for(Scheme::twilio, {"12345"});
    config.url = "https://mycompany.com/myapp.php?foo=1&bar=2&bodySHA256="
                 "0a1ff7634d9ab3b95db5c9a2dfe9416e41502b283a80c7cf19632632f96e6620";
    Verifier verifier(config);
    auto e = test::delivery({{"Content-Type", "application/json"},
                             {"X-Twilio-Signature", "a9nBmqA0ju/hNViExpshrM61xv4="}},
                            "{\"property\": \"value\", \"boolean\": true}");
    CHECK(verifier.verify(e, test::unix_seconds(0)).valid);
    auto other_body = test::delivery(e.headers, "{\"property\": \"value\", \"boolean\": false}");
    CHECK(verifier.verify(other_body, test::unix_seconds(0)).reason ==
          "the bodySHA256 in the URL does not match the body");
}

TEST_CASE("square: the vector of Square's SDK tests verifies") {
    // square-nodejs-sdk tests/utilities/webhooksHelper.test.ts.
    auto config = config_for(Scheme::square, {"Ibxx_5AKakO-3qeNVR61Dw"});
    config.url = "https://webhook.site/679a4f3a-dcfa-49ee-bac5-9d0edad886b9";
    Verifier verifier(config);
    auto e = test::delivery(
        {{"x-square-hmacsha256-signature", "GF4YkrJgGBDZ9NIYbNXBnMzqb2HoL4RW/S6vkZ9/2N4="}},
        "{\"merchant_id\":\"MLEFBHHSJGVHD\",\"type\":\"webhooks.test_notification\",\"event_id\":"
        "\"ac3ac95b-f97d-458c-a6e6-18981597e05f\",\"created_at\":\"2022-07-13T20:30:59."
        "037339943Z\","
        "\"data\":{\"type\":\"webhooks\",\"id\":\"bc368e64-01aa-407e-b46e-3231809b1129\"}}");
    CHECK(verifier.verify(e, test::unix_seconds(0)).valid);
    auto moved = config;
    moved.url = "https://webhook.site/elsewhere";
    Verifier v(moved);
    CHECK_FALSE(v.verify(e, test::unix_seconds(0)).valid);
}

TEST_CASE("hmac: a generic scheme described by flags") {
    // HMAC-SHA512, base64, over "{timestamp}.{body}"; expected value from Python's hmac.
    auto config = config_for(Scheme::hmac, {"k"});
    config.hmac.header = "X-Sig";
    config.hmac.prefix = "sha512=";
    config.hmac.algorithm = crypto::HashAlgorithm::sha512;
    config.hmac.encoding = SignatureEncoding::base64;
    config.hmac.message_template = "{timestamp}.{body}";
    config.hmac.timestamp_header = "X-Time";
    Verifier verifier(config);
    auto e =
        test::delivery({{"X-Sig", "sha512=EPJj5Z7aWOEtgYN1gtFeVVbYg1qutLjIaR+mphV5VNmZvLHP6mHFHpy5/"
                                  "jipsmk9t8+3on/F04UwnEUUHu4oVQ=="},
                        {"X-Time", "1700000000"}},
                       "{\"a\":1}");
    CHECK(verifier.verify(e, test::unix_seconds(1700000000)).valid);
    CHECK_FALSE(verifier.verify(e, test::unix_seconds(1700000000 + 3600)).valid);
}

TEST_CASE("auto: the scheme comes from the headers present, and the verdict says which") {
    auto config = config_for(Scheme::auto_detect, {"It's a Secret to Everybody"});
    Verifier verifier(config);
    auto e = test::delivery(
        {{"x-hub-signature-256",
          "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"}},
        "Hello, World!");
    auto verdict = verifier.verify(e, test::unix_seconds(0));
    CHECK(verdict.valid);
    CHECK(verdict.scheme == Scheme::github);
    auto unknown = test::delivery({{"X-Other", "1"}}, "x");
    CHECK(verifier.verify(unknown, test::unix_seconds(0)).reason ==
          "no known signature header: cannot tell the scheme (pass --scheme)");
}
