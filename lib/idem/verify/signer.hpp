#pragma once
// The inverse of Verifier: the signature headers a scheme's provider would
// have sent for an envelope, so `idem sign | idem verify` round-trips.

#include "idem/record/parser.hpp"
#include "idem/verify/config.hpp"

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace idem::verify {

using HeaderList = std::vector<std::pair<std::string, std::string>>;

class Signer {
public:
    // Signs with the secrets of `config` (for discord and Standard Webhooks
    // v1a: an ed25519 private key, as whsk_<base64> or a 32-byte hex or
    // base64 seed): stripe, standard and svix with each (their headers
    // carry several signatures during a rotation), the others with their
    // one. Throws UsageError when the scheme cannot be signed with what was
    // given, or several secrets are given for a scheme that carries one.
    explicit Signer(const VerifyConfig& config);
    ~Signer();
    Signer(const Signer&) = delete;
    Signer& operator=(const Signer&) = delete;

    // Which signature a scheme with several kinds gets ("v1 (HMAC-SHA256)",
    // "v1a (ed25519)"), for the summary; "" for a scheme with one.
    [[nodiscard]] std::string_view signature_kind() const;

    // The headers to add (replacing any of the same name) to `envelope`.
    [[nodiscard]] HeaderList signature_headers(const record::Envelope& envelope,
                                               Timestamp at) const;

private:
    struct Impl;
    std::unique_ptr<Impl> m_impl;
};

} // namespace idem::verify
