#pragma once
// The key of a record, a noun every subcommand shares (dedup, audit,
// reorder, replay, listen). What makes two records "the same event" (docs/dedup.md): the values at
// --key paths, or the canonical JSON of the whole event minus --ignore
// paths, encoded unambiguously (idem-key/1: type-tagged, length-prefixed)
// and hashed with SHA-256. The fingerprint is the digest's first 128 bits.

#include "idem/record/field_path.hpp"
#include "idem/record/parser.hpp"

#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace idem::record {

inline constexpr std::string_view k_key_version = "idem-key/1";

// A fingerprint's bytes: 128 bits of a SHA-256 (see docs/dedup.md).
using FingerprintBytes = std::array<std::uint8_t, 16>;

// For hash tables of fingerprints: the bytes are already a cryptographic
// hash, so any eight of them will do.
struct FingerprintBytesHash {
    std::size_t operator()(const FingerprintBytes& bytes) const noexcept {
        std::size_t value = 0;
        std::memcpy(&value, bytes.data(), sizeof value);
        return value;
    }
};

struct Fingerprint {
    FingerprintBytes bytes{};
    [[nodiscard]] std::string hex() const;
    friend bool operator==(const Fingerprint&, const Fingerprint&) = default;
    friend auto operator<=>(const Fingerprint&, const Fingerprint&) = default;
};

struct KeySpec {
    std::vector<record::FieldPath> key_paths; // empty: the whole event
    std::vector<record::FieldPath> ignore_paths;
};

// The fingerprint of a record, or the path that was missing.
struct KeyOutcome {
    std::optional<Fingerprint> fingerprint;
    std::string missing_path; // set when fingerprint is empty
};

class Fingerprinter {
public:
    explicit Fingerprinter(KeySpec spec);

    // Fingerprints the record `parser` holds, within `bucket` (a calendar
    // bucket such as "2026-11-30", folded into the key; empty: none). The
    // encoded key stays in encoded_key() until the next call (--print-key).
    KeyOutcome fingerprint(record::RecordParser& parser, std::string_view bucket = {});
    [[nodiscard]] const std::string& encoded_key() const { return m_encoded; }

private:
    KeySpec m_spec;
    IgnoredPaths m_ignored; // m_spec.ignore_paths, made ready once
    std::string m_encoded;
};

// The encoding of one value: a type tag, the byte length, ':' and the bytes
// (docs/dedup.md). Exposed for tests and for --print-key's readers.
void append_encoded_value(std::string& out, const record::FieldValue& value);

// Values encoded by append_encoded_value (joined by spaces) as JSON: the
// value for one path, an array for several, null for none.
[[nodiscard]] std::string encoded_values_json(std::string_view encoded, std::size_t paths);

} // namespace idem::record
