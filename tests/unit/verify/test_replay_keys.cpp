// What --nonce keys a valid delivery on: the content its signature covers,
// never the text of the signature (docs/verify.md, "Replays"). The
// signatures here were computed with Python's hmac module from the
// algorithms in the providers' documentation.

#include "idem/record/joined_headers.hpp"
#include "idem/verify/verifier.hpp"
#include "support/deliveries.hpp"
#include "support/instants.hpp"

#include <doctest/doctest.h>

using namespace idem;
using namespace idem::verify;
using record::Envelope;
using record::Header;

namespace {

// Timestamps are not what these tests judge.
VerifyConfig replay_config(Scheme scheme, std::vector<std::string> secrets) {
    auto config = test::config_for(scheme, std::move(secrets));
    config.timestamp_check = TimestampCheck::ignore;
    return config;
}

// HMAC-SHA256("whsec_unit", "1700000000.{"id":"evt_1"}"), and the SHA-256
// of that signed content.
constexpr std::string_view k_stripe_v1 =
    "e32d0b0792e3e11e6c07c688e34efe8eefe86705d67b0c1efa2d12cec3ad17e0";
constexpr std::string_view k_stripe_content =
    "sha256:84ec3e96affce72cf265ab7a61281bea0d32a4ed87659cd4028bac4489209531";
constexpr std::string_view k_stripe_body = R"({"id":"evt_1"})";

std::string upper(std::string_view text) {
    std::string out(text);
    for (auto& c : out)
        c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return out;
}

} // namespace

TEST_CASE("a Stripe signature spelled another way keys the same nonce") {
    auto config = replay_config(Scheme::stripe, {"whsec_unit"});
    Verifier verifier(config);
    std::string plain = "t=1700000000,v1=" + std::string(k_stripe_v1);
    std::string shouted = "t=1700000000,v1=" + upper(k_stripe_v1);
    std::string bogus_first = "t=1700000000,v1=00,v1=" + std::string(k_stripe_v1);
    std::string other_first =
        "t=1700000000,v1=" + std::string(64, 'a') + ",v1=" + std::string(k_stripe_v1);
    for (const auto& header : {plain, shouted, bogus_first, other_first}) {
        CAPTURE(header);
        auto verdict =
            verifier.verify(test::delivery({{"Stripe-Signature", header}}, k_stripe_body), {});
        CHECK(verdict.valid);
        CHECK(verdict.nonce == k_stripe_content);
    }
    // The text an earlier release keyed on is still told, for stores it wrote.
    auto verdict =
        verifier.verify(test::delivery({{"Stripe-Signature", plain}}, k_stripe_body), {});
    CHECK(verdict.message_id == k_stripe_v1);
}

TEST_CASE("another secret matching the same content keys the same nonce") {
    // A rotation: the provider signs with both secrets; a replay carrying
    // only the second one's signature is the same signed content.
    auto config = replay_config(Scheme::stripe, {"whsec_other", "whsec_unit"});
    Verifier verifier(config);
    auto verdict = verifier.verify(
        test::delivery({{"Stripe-Signature", "t=1700000000,v1=" + std::string(k_stripe_v1)}},
                       k_stripe_body),
        {});
    CHECK(verdict.valid);
    CHECK(verdict.key_label == "#2");
    CHECK(verdict.nonce == k_stripe_content);
}

TEST_CASE("a GitHub delivery keys its body, not the delivery id a replay may change") {
    // docs.github.com, "Validating webhook deliveries": "Hello, World!".
    auto config = replay_config(Scheme::github, {"It's a Secret to Everybody"});
    Verifier verifier(config);
    std::string signature =
        "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
    auto first = verifier.verify(
        test::delivery({{"X-Hub-Signature-256", signature}, {"X-GitHub-Delivery", "d-1"}},
                       "Hello, World!"),
        {});
    auto again = verifier.verify(
        test::delivery({{"X-Hub-Signature-256", "sha256=" + upper(signature.substr(7))},
                        {"X-GitHub-Delivery", "d-2"}},
                       "Hello, World!"),
        {});
    CHECK(first.valid);
    CHECK(again.valid);
    CHECK(first.nonce == again.nonce);
    CHECK(first.nonce == "sha256:dffd6021bb2bd5b0af676290809ec3a53191dd81c7f70a4b28688a362182986f");
    CHECK(first.message_id == "d-1");
}

TEST_CASE("a provider's retry signs new content and keys a new nonce") {
    // Standard Webhooks: the same message id at another timestamp is the
    // provider's own retry, not a replay of the first attempt.
    auto config = replay_config(Scheme::standard, {"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"});
    Verifier verifier(config);
    // The specification's reference vector (standard-webhooks, spec and
    // libraries' tests): msg_p5jXN8AQM9LWM0D4loKWxJek at 1614265330.
    auto first = verifier.verify(
        test::delivery({{"webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek"},
                        {"webhook-timestamp", "1614265330"},
                        {"webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="}},
                       R"({"test": 2432232314})"),
        {});
    CHECK(first.valid);
    CHECK(first.message_id == "msg_p5jXN8AQM9LWM0D4loKWxJek");
    CHECK(first.nonce.starts_with("sha256:"));
    CHECK(first.nonce != first.message_id);
}

TEST_CASE("repeated header lines are one comma-joined field") {
    record::JoinedHeaders joined;
    auto single = test::delivery({{"A", "1"}, {"B", "2"}}, "");
    CHECK(&joined.join(single) == &single);
    auto repeated = test::delivery({{"X-Sig", "v1=a"}, {"Other", "o"}, {"x-sig", "v1=b"}}, "");
    const auto& read = joined.join(repeated);
    REQUIRE(read.headers.size() == 2);
    CHECK(read.header("X-Sig") == "v1=a, v1=b");
    CHECK(read.header("Other") == "o");
}
