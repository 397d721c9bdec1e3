#pragma once
// `verify --explain` (docs/verify.md, "Why a genuine delivery fails"): for
// an invalid verdict, the known ways a genuine delivery gets broken on its
// way to the verifier are tried one by one, each a verification of a
// changed copy (one HMAC or so), and the first that makes the signature
// match is the diagnosis. Pure but for the verifier's crypto: no I/O, no
// clock. Secrets are named by their labels only.

#include "idem/record/parser.hpp"
#include "idem/verify/config.hpp"
#include "idem/verify/verifier.hpp"

#include <deque>
#include <memory>
#include <string>
#include <vector>

namespace idem::verify {

struct Diagnosis {
    // "body-reserialized", "trailing-newline", "line-endings",
    // "form-reencoded", "secret-prefix", "secret-encoding",
    // "secret-whitespace", "secret-as-text", "timestamp-milliseconds",
    // "other-secret", "scheme", "algorithm",
    // "encoding", "clock-skew", "stale", "url-scheme", "url-port",
    // "url-trailing-slash", "url-query-order", "url-host", "truncated",
    // "decompressed", or "unexplained".
    std::string kind;
    std::string detail;    // in words, for the reader of a postmortem
    std::string key_label; // the secret that matched (its label), if one did
    // True when a changed copy verified: the signature is genuine. False for
    // what is read off the delivery alone (truncated, decompressed) and for
    // "unexplained".
    bool proven = false;
    std::size_t tried = 0; // verifications spent
};

class Explainer {
public:
    // `budget`: verifications at most per delivery. Keeps a reference to
    // `config`, which must outlive the explainer.
    explicit Explainer(const VerifyConfig& config, std::size_t budget = 64);
    ~Explainer();
    Explainer(const Explainer&) = delete;
    Explainer& operator=(const Explainer&) = delete;

    // Why `envelope` did not verify at `now` (its verdict: `failed`).
    [[nodiscard]] Diagnosis explain(const record::Envelope& envelope, Timestamp now,
                                    const Verdict& failed);

private:
    struct Impl;
    std::unique_ptr<Impl> m_impl;
};

// `,"diagnosis":{"kind":…,"proven":…,"detail":…,"key":…}` for a verdict.
void append_diagnosis(std::string& out, const Diagnosis& diagnosis);

} // namespace idem::verify
