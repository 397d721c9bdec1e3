#pragma once
// The signature schemes idem knows (docs/verify.md), by name, and how `auto`
// recognises them from the headers present.

#include "idem/record/parser.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace idem::verify {

enum class Scheme {
    github,
    stripe,
    slack,
    standard,
    svix,
    shopify,
    discord,
    twilio,
    square,
    pagerduty,
    braintree,
    hmac,
    provider, // a --provider-file spec
    auto_detect,
};

[[nodiscard]] std::string_view scheme_name(Scheme scheme);
// Throws UsageError with a "did you mean" hint for an unknown name.
[[nodiscard]] Scheme parse_scheme(std::string_view name);
[[nodiscard]] std::vector<std::string> scheme_names();

// The scheme whose signature header the envelope carries; nullopt when none.
// The built-in scheme a delivery's headers name. `signature_alone`: the
// answer rests on a generic signature header without the header that
// scheme always sends beside it (Standard Webhooks' webhook-signature
// without webhook-id), so a provider file may claim the delivery.
struct DetectedScheme {
    Scheme scheme;
    bool signature_alone = false;
};
[[nodiscard]] std::optional<DetectedScheme> detect_scheme(const record::Envelope& envelope);

// True for schemes whose signatures are ed25519 (verified with public keys).
[[nodiscard]] bool uses_public_keys(Scheme scheme);
// True for schemes that sign the public URL the provider called.
[[nodiscard]] bool signs_url(Scheme scheme);

} // namespace idem::verify
