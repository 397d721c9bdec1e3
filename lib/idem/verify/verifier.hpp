#pragma once
// Checks one delivery's signature against its scheme. Pure: no I/O, no
// clock; the caller passes the moment to judge timestamps against.

#include "idem/record/parser.hpp"
#include "idem/verify/config.hpp"

#include <memory>
#include <optional>
#include <string>

namespace idem::verify {

// Why `scheme` cannot be checked with the keys in `config`, or nullopt. A
// log that mixes providers may hold one whose key was not passed: that
// record is invalid ("no public key configured for discord") and the run
// goes on; with an explicit --scheme the CLI refuses it up front.
[[nodiscard]] std::optional<std::string> missing_key(Scheme scheme, const VerifyConfig& config);

class Verifier {
public:
    // Keeps a reference to `config`, which must outlive the verifier.
    explicit Verifier(const VerifyConfig& config);
    ~Verifier();
    Verifier(const Verifier&) = delete;
    Verifier& operator=(const Verifier&) = delete;

    // Never throws for a bad delivery (that is an invalid verdict); throws
    // UsageError when the configuration lacks what the scheme needs.
    [[nodiscard]] Verdict verify(const record::Envelope& envelope, Timestamp now);

private:
    struct Impl;
    std::unique_ptr<Impl> m_impl;
};

// Appends `"verify":{"valid":…,"scheme":…,"key":…,"reason":…}`, the member
// verify and listen add under a record's "_idem".
void append_verdict(std::string& out, const Verdict& verdict);

} // namespace idem::verify
