#pragma once
// The only door to OpenSSL: keyed MACs prepared once and reused per message,
// SHA digests, ed25519, and constant-time comparison. Key material never
// leaves these objects except as MAC outputs.

#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace idem::crypto {

enum class HashAlgorithm { sha1, sha256, sha512 };

[[nodiscard]] std::string_view hash_name(HashAlgorithm algorithm);
[[nodiscard]] std::size_t digest_size(HashAlgorithm algorithm);

// A MAC or digest output (at most SHA-512's 64 bytes).
struct Digest {
    std::array<unsigned char, 64> bytes{};
    std::size_t size = 0;
    [[nodiscard]] std::string_view view() const {
        return {reinterpret_cast<const char*>(bytes.data()), size};
    }
};

// An HMAC key prepared once; each mac() costs one message's hashing, with no
// allocation. Not thread-safe: one per thread.
class HmacKey {
public:
    HmacKey(HashAlgorithm algorithm, std::string_view key);
    ~HmacKey();
    HmacKey(HmacKey&&) noexcept;
    HmacKey& operator=(HmacKey&&) noexcept;

    // HMAC over the concatenation of `parts`.
    [[nodiscard]] Digest mac(std::initializer_list<std::string_view> parts) const;
    [[nodiscard]] HashAlgorithm algorithm() const { return m_algorithm; }

private:
    struct Impl;
    std::unique_ptr<Impl> m_impl;
    HashAlgorithm m_algorithm;
};

[[nodiscard]] Digest hash(HashAlgorithm algorithm, std::string_view message);

// Overwrites `bytes` (a secret's copy that is done with), its whole buffer,
// in a way the compiler cannot drop, and empties it.
void cleanse(std::string& bytes);

// A Content-Security-Policy source for one inline script:
// "sha256-<base64 of SHA-256 of its text>".
[[nodiscard]] std::string csp_hash(std::string_view script);

// SHA-256 over bytes that arrive in pieces (a response body, say).
class Sha256Stream {
public:
    Sha256Stream();
    ~Sha256Stream();
    Sha256Stream(const Sha256Stream&) = delete;
    Sha256Stream& operator=(const Sha256Stream&) = delete;
    void update(std::string_view bytes);
    // The digest of everything so far; the stream is spent afterwards.
    [[nodiscard]] Digest finish();

private:
    struct Impl;
    std::unique_ptr<Impl> m_impl;
};

// Compares in time that depends only on the lengths, which are public.
[[nodiscard]] bool constant_time_equal(std::string_view a, std::string_view b);

inline constexpr std::size_t k_ed25519_key_bytes = 32;
inline constexpr std::size_t k_ed25519_signature_bytes = 64;

class Ed25519PublicKey {
public:
    // nullopt unless `raw` is 32 bytes of a point in the prime-order
    // subgroup (public_key_weakness).
    static std::optional<Ed25519PublicKey> from_raw(std::string_view raw);
    ~Ed25519PublicKey();
    Ed25519PublicKey(Ed25519PublicKey&&) noexcept;
    Ed25519PublicKey& operator=(Ed25519PublicKey&&) noexcept;

    [[nodiscard]] bool verify(std::string_view message, std::string_view signature) const;

private:
    Ed25519PublicKey();
    struct Impl;
    std::unique_ptr<Impl> m_impl;
};

// An ECDSA public key on P-256 (SendGrid's event webhook), from its DER
// SubjectPublicKeyInfo; signatures are DER over SHA-256 of the message.
class EcdsaP256PublicKey {
public:
    // nullopt unless `der` is a whole P-256 SubjectPublicKeyInfo whose point
    // passes OpenSSL's full check.
    static std::optional<EcdsaP256PublicKey> from_der(std::string_view der);
    ~EcdsaP256PublicKey();
    EcdsaP256PublicKey(EcdsaP256PublicKey&&) noexcept;
    EcdsaP256PublicKey& operator=(EcdsaP256PublicKey&&) noexcept;

    [[nodiscard]] bool verify(std::string_view message, std::string_view der_signature) const;
    // A signature written as r and s, 32 bytes each (JWS's ES256).
    [[nodiscard]] bool verify_raw(std::string_view message, std::string_view r_and_s) const;

private:
    EcdsaP256PublicKey();
    struct Impl;
    std::unique_ptr<Impl> m_impl;
};

// An RSA public key (PayPal's, from its certificate), from its DER
// SubjectPublicKeyInfo; PKCS #1 v1.5 signatures over SHA-1 or SHA-256.
class RsaPublicKey {
public:
    // nullopt unless `der` is a whole RSA SubjectPublicKeyInfo of at least
    // 2048 bits with a public exponent of 3 or more.
    static std::optional<RsaPublicKey> from_der(std::string_view der);
    ~RsaPublicKey();
    RsaPublicKey(RsaPublicKey&&) noexcept;
    RsaPublicKey& operator=(RsaPublicKey&&) noexcept;

    [[nodiscard]] bool verify(HashAlgorithm algorithm, std::string_view message,
                              std::string_view signature) const;

private:
    RsaPublicKey();
    struct Impl;
    std::unique_ptr<Impl> m_impl;
};

// Why a public key must not be trusted to check signatures, or nullopt:
// 32 raw bytes are an ed25519 point (refused when of small order, outside
// the prime-order subgroup or non-canonical); a DER SubjectPublicKeyInfo an
// EC key (refused off its curve or at infinity) or an RSA key (refused
// with an exponent below 3 or a modulus below 2048 bits). Bytes that are
// no key at all are nullopt too: the parsers say what they expected.
[[nodiscard]] std::optional<std::string> public_key_weakness(std::string_view der_or_raw);

// The DER SubjectPublicKeyInfo of the key an X.509 certificate (DER)
// holds; nullopt when `der` is not one certificate.
[[nodiscard]] std::optional<std::string> certificate_public_key(std::string_view der);

class Ed25519PrivateKey {
public:
    // From the 32-byte seed (RFC 8032 "secret key"); nullopt for other sizes.
    static std::optional<Ed25519PrivateKey> from_seed(std::string_view seed);
    ~Ed25519PrivateKey();
    Ed25519PrivateKey(Ed25519PrivateKey&&) noexcept;
    Ed25519PrivateKey& operator=(Ed25519PrivateKey&&) noexcept;

    [[nodiscard]] std::string sign(std::string_view message) const;
    [[nodiscard]] std::string public_key_raw() const;

private:
    Ed25519PrivateKey();
    struct Impl;
    std::unique_ptr<Impl> m_impl;
};

// `size` bytes from the system's CSPRNG (OpenSSL's RAND_bytes). Throws
// FileSystemError when the random source fails.
void random_bytes(unsigned char* out, std::size_t size);

} // namespace idem::crypto
