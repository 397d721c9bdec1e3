// HMAC uses OpenSSL's low-level SHA functions, deprecated in OpenSSL 3 but
// still built with the same SHA-NI block code: the inner and outer states are
// hashed once per key and copied per message, which costs no allocation. The
// EVP_MAC path re-creates its digest context per message (measured about 25%
// slower per 1 KB message here; see docs/verify.md, "Performance").
#define OPENSSL_SUPPRESS_DEPRECATED

#include "idem/crypto/crypto.hpp"

#include "idem/util/encoding.hpp"
#include "idem/util/errors.hpp"

#include <cassert>
#include <fmt/format.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <openssl/x509.h>
#include <sodium.h>
#include <variant>

#include <cstring>

namespace idem::crypto {

std::string_view hash_name(HashAlgorithm algorithm) {
    switch (algorithm) {
    case HashAlgorithm::sha1:
        return "SHA1";
    case HashAlgorithm::sha256:
        return "SHA256";
    case HashAlgorithm::sha512:
        return "SHA512";
    }
    return "SHA256";
}

std::size_t digest_size(HashAlgorithm algorithm) {
    switch (algorithm) {
    case HashAlgorithm::sha1:
        return 20;
    case HashAlgorithm::sha256:
        return 32;
    case HashAlgorithm::sha512:
        return 64;
    }
    return 32;
}

namespace {

template <typename Context, int (*Init)(Context*), int (*Update)(Context*, const void*, size_t),
          int (*Final)(unsigned char*, Context*), std::size_t BlockBytes, std::size_t DigestBytes>
struct Sha {
    using context_type = Context;
    static constexpr std::size_t block_bytes = BlockBytes;
    static constexpr std::size_t digest_bytes = DigestBytes;
    static void init(Context* c) { Init(c); }
    static void update(Context* c, const void* data, std::size_t size) { Update(c, data, size); }
    static void final(unsigned char* out, Context* c) { Final(out, c); }
};

using Sha1 = Sha<SHA_CTX, SHA1_Init, SHA1_Update, SHA1_Final, 64, 20>;
using Sha256 = Sha<SHA256_CTX, SHA256_Init, SHA256_Update, SHA256_Final, 64, 32>;
using Sha512 = Sha<SHA512_CTX, SHA512_Init, SHA512_Update, SHA512_Final, 128, 64>;

// RFC 2104 with the padded key's inner and outer blocks hashed in advance.
template <typename H> struct HmacStates {
    typename H::context_type inner;
    typename H::context_type outer;

    explicit HmacStates(std::string_view key) {
        std::array<unsigned char, H::block_bytes> block{};
        if (key.size() > H::block_bytes) {
            typename H::context_type shortening;
            H::init(&shortening);
            H::update(&shortening, key.data(), key.size());
            H::final(block.data(), &shortening);
        } else {
            std::memcpy(block.data(), key.data(), key.size());
        }
        std::array<unsigned char, H::block_bytes> pad{};
        for (std::size_t i = 0; i < pad.size(); ++i)
            pad[i] = block[i] ^ 0x36;
        H::init(&inner);
        H::update(&inner, pad.data(), pad.size());
        for (std::size_t i = 0; i < pad.size(); ++i)
            pad[i] = block[i] ^ 0x5c;
        H::init(&outer);
        H::update(&outer, pad.data(), pad.size());
        OPENSSL_cleanse(block.data(), block.size());
        OPENSSL_cleanse(pad.data(), pad.size());
    }
    ~HmacStates() { OPENSSL_cleanse(this, sizeof *this); }

    void mac(std::initializer_list<std::string_view> parts, Digest& digest) const {
        auto context = inner;
        for (auto part : parts)
            H::update(&context, part.data(), part.size());
        unsigned char inner_digest[H::digest_bytes];
        H::final(inner_digest, &context);
        context = outer;
        H::update(&context, inner_digest, sizeof inner_digest);
        H::final(digest.bytes.data(), &context);
        digest.size = H::digest_bytes;
        OPENSSL_cleanse(&context, sizeof context);
    }
};

} // namespace

struct HmacKey::Impl {
    std::variant<HmacStates<Sha1>, HmacStates<Sha256>, HmacStates<Sha512>> states;
    static Impl make(HashAlgorithm algorithm, std::string_view key) {
        switch (algorithm) {
        case HashAlgorithm::sha1:
            return Impl{HmacStates<Sha1>(key)};
        case HashAlgorithm::sha512:
            return Impl{HmacStates<Sha512>(key)};
        case HashAlgorithm::sha256:
            break;
        }
        return Impl{HmacStates<Sha256>(key)};
    }
};

HmacKey::HmacKey(HashAlgorithm algorithm, std::string_view key)
    : m_impl(std::make_unique<Impl>(Impl::make(algorithm, key))), m_algorithm(algorithm) {}

HmacKey::~HmacKey() = default;
HmacKey::HmacKey(HmacKey&&) noexcept = default;
HmacKey& HmacKey::operator=(HmacKey&&) noexcept = default;

Digest HmacKey::mac(std::initializer_list<std::string_view> parts) const {
    Digest digest;
    std::visit([&](const auto& states) { states.mac(parts, digest); }, m_impl->states);
    return digest;
}

namespace {
template <typename H> void hash_into(std::string_view message, Digest& digest) {
    typename H::context_type context;
    H::init(&context);
    H::update(&context, message.data(), message.size());
    H::final(digest.bytes.data(), &context);
    digest.size = H::digest_bytes;
}
} // namespace

void cleanse(std::string& bytes) {
    // The whole buffer, not only size(): a string's short buffer keeps the
    // bytes a move or a shorter assignment left behind.
    OPENSSL_cleanse(bytes.data(), bytes.capacity());
    bytes.clear();
}

std::string csp_hash(std::string_view script) {
    return "sha256-" + base64_encode(hash(HashAlgorithm::sha256, script).view());
}

Digest hash(HashAlgorithm algorithm, std::string_view message) {
    // The context functions, not EVP_Digest or SHA256(): in OpenSSL 3 those
    // look the algorithm up, under a lock, on every call, and this runs once
    // per record.
    Digest digest;
    switch (algorithm) {
    case HashAlgorithm::sha1:
        hash_into<Sha1>(message, digest);
        break;
    case HashAlgorithm::sha256:
        hash_into<Sha256>(message, digest);
        break;
    case HashAlgorithm::sha512:
        hash_into<Sha512>(message, digest);
        break;
    }
    return digest;
}

struct Sha256Stream::Impl {
    SHA256_CTX context;
};

Sha256Stream::Sha256Stream() : m_impl(std::make_unique<Impl>()) {
    SHA256_Init(&m_impl->context);
}
Sha256Stream::~Sha256Stream() = default;

void Sha256Stream::update(std::string_view bytes) {
    SHA256_Update(&m_impl->context, bytes.data(), bytes.size());
}

Digest Sha256Stream::finish() {
    Digest digest;
    SHA256_Final(digest.bytes.data(), &m_impl->context);
    digest.size = SHA256_DIGEST_LENGTH;
    return digest;
}

bool constant_time_equal(std::string_view a, std::string_view b) {
    return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

namespace {
// A public key and the digest context its checks reuse: what ed25519,
// P-256 and RSA keys all hold. Not thread-safe: one per thread.
struct VerifyingKey {
    EVP_PKEY* key = nullptr;
    EVP_MD_CTX* context = nullptr;
    VerifyingKey() = default;
    VerifyingKey(const VerifyingKey&) = delete;
    VerifyingKey& operator=(const VerifyingKey&) = delete;
    ~VerifyingKey() {
        EVP_MD_CTX_free(context);
        EVP_PKEY_free(key);
    }

    // Takes `parsed` (nullptr: none); false when it or the context is missing.
    bool hold(EVP_PKEY* parsed) {
        key = parsed;
        context = EVP_MD_CTX_new();
        return key && context;
    }
    // `digest` nullptr for ed25519, which hashes the message itself.
    [[nodiscard]] bool verify(const EVP_MD* digest, std::string_view message,
                              std::string_view signature) const {
        EVP_MD_CTX_reset(context);
        if (EVP_DigestVerifyInit(context, nullptr, digest, nullptr, key) != 1) return false;
        return EVP_DigestVerify(context, reinterpret_cast<const unsigned char*>(signature.data()),
                                signature.size(),
                                reinterpret_cast<const unsigned char*>(message.data()),
                                message.size()) == 1;
    }
};

// The key a whole DER SubjectPublicKeyInfo of at most `longest` bytes spells
// when it is of `base_id` (EVP_PKEY_EC, EVP_PKEY_RSA); nullptr otherwise.
EVP_PKEY* subject_public_key(std::string_view der, std::size_t longest, int base_id) {
    if (der.empty() || der.size() > longest) return nullptr;
    const auto* cursor = reinterpret_cast<const unsigned char*>(der.data());
    EVP_PKEY* key = d2i_PUBKEY(nullptr, &cursor, static_cast<long>(der.size()));
    if (key && cursor == reinterpret_cast<const unsigned char*>(der.data()) + der.size() &&
        EVP_PKEY_get_base_id(key) == base_id)
        return key;
    EVP_PKEY_free(key);
    return nullptr;
}
} // namespace

namespace {
// OpenSSL verifies against any 32 bytes that decode to a point: the
// identity (01 00..00) lets the signature R = identity, S = 0 pass for
// every message, and other small-order points pass forged signatures too.
// A provider's key is always a canonical point of the prime-order
// subgroup; libsodium checks exactly that (crypto_core_ed25519_is_valid_point:
// canonical, on the curve, in the main subgroup, not of small order).
bool is_prime_order_point(std::string_view raw) {
    static const bool ready = sodium_init() >= 0;
    return ready && raw.size() == crypto_core_ed25519_BYTES &&
           crypto_core_ed25519_is_valid_point(reinterpret_cast<const unsigned char*>(raw.data())) ==
               1;
}

// OpenSSL's full check of a public key (EVP_PKEY_public_check): for EC, a
// point on the curve, not at infinity, of the group's order; for RSA, an
// odd modulus and exponent.
bool passes_public_check(EVP_PKEY* key) {
    EVP_PKEY_CTX* context = EVP_PKEY_CTX_new_from_pkey(nullptr, key, nullptr);
    bool passed = context && EVP_PKEY_public_check(context) == 1;
    EVP_PKEY_CTX_free(context);
    return passed;
}

// An RSA exponent of 1 makes the "signature" the padded digest itself.
std::optional<std::uint64_t> rsa_exponent(EVP_PKEY* key) {
    BIGNUM* exponent = nullptr;
    if (EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_RSA_E, &exponent) != 1) return std::nullopt;
    std::optional<std::uint64_t> value;
    if (BN_num_bits(exponent) <= 64) value = BN_get_word(exponent);
    BN_free(exponent);
    return value.value_or(UINT64_MAX);
}
} // namespace

std::optional<std::string> public_key_weakness(std::string_view der_or_raw) {
    if (der_or_raw.size() == k_ed25519_key_bytes) {
        if (is_prime_order_point(der_or_raw)) return std::nullopt;
        return "an ed25519 point of small order, outside the prime-order subgroup or not in "
               "canonical form: forged signatures would verify";
    }
    for (int kind : {EVP_PKEY_EC, EVP_PKEY_RSA}) {
        VerifyingKey key;
        if (!key.hold(subject_public_key(der_or_raw, 2048, kind))) continue;
        if (kind == EVP_PKEY_EC) {
            if (!passes_public_check(key.key)) return "an EC point off its curve or at infinity";
            return std::nullopt;
        }
        auto exponent = rsa_exponent(key.key);
        if (!exponent || *exponent < 3) return "an RSA public exponent below 3";
        if (EVP_PKEY_get_bits(key.key) < 2048)
            return fmt::format("an RSA modulus of {} bits (2048 at least)",
                               EVP_PKEY_get_bits(key.key));
        if (!passes_public_check(key.key)) return "an RSA key that fails OpenSSL's check";
        return std::nullopt;
    }
    return std::nullopt; // no key at all: the caller's own message says what it expects
}

struct Ed25519PublicKey::Impl : VerifyingKey {};

Ed25519PublicKey::Ed25519PublicKey() : m_impl(std::make_unique<Impl>()) {}
Ed25519PublicKey::~Ed25519PublicKey() = default;
Ed25519PublicKey::Ed25519PublicKey(Ed25519PublicKey&&) noexcept = default;
Ed25519PublicKey& Ed25519PublicKey::operator=(Ed25519PublicKey&&) noexcept = default;

std::optional<Ed25519PublicKey> Ed25519PublicKey::from_raw(std::string_view raw) {
    if (raw.size() != k_ed25519_key_bytes || public_key_weakness(raw)) return std::nullopt;
    Ed25519PublicKey key;
    if (!key.m_impl->hold(EVP_PKEY_new_raw_public_key(
            EVP_PKEY_ED25519, nullptr, reinterpret_cast<const unsigned char*>(raw.data()),
            raw.size())))
        return std::nullopt;
    return key;
}

bool Ed25519PublicKey::verify(std::string_view message, std::string_view signature) const {
    if (signature.size() != k_ed25519_signature_bytes) return false;
    return m_impl->verify(nullptr, message, signature);
}

struct EcdsaP256PublicKey::Impl : VerifyingKey {};

EcdsaP256PublicKey::EcdsaP256PublicKey() : m_impl(std::make_unique<Impl>()) {}
EcdsaP256PublicKey::~EcdsaP256PublicKey() = default;
EcdsaP256PublicKey::EcdsaP256PublicKey(EcdsaP256PublicKey&&) noexcept = default;
EcdsaP256PublicKey& EcdsaP256PublicKey::operator=(EcdsaP256PublicKey&&) noexcept = default;

std::optional<EcdsaP256PublicKey> EcdsaP256PublicKey::from_der(std::string_view der) {
    // A SubjectPublicKeyInfo of P-256 is 91 bytes; far larger is no such key.
    EcdsaP256PublicKey key;
    if (!key.m_impl->hold(subject_public_key(der, 512, EVP_PKEY_EC))) return std::nullopt;
    char curve[64] = {};
    std::size_t length = 0;
    if (EVP_PKEY_get_utf8_string_param(key.m_impl->key, OSSL_PKEY_PARAM_GROUP_NAME, curve,
                                       sizeof(curve), &length) != 1 ||
        std::string_view(curve, length) != "prime256v1" || !passes_public_check(key.m_impl->key))
        return std::nullopt;
    return key;
}

bool EcdsaP256PublicKey::verify(std::string_view message, std::string_view der_signature) const {
    return m_impl->verify(EVP_sha256(), message, der_signature);
}

bool EcdsaP256PublicKey::verify_raw(std::string_view message, std::string_view r_and_s) const {
    if (r_and_s.size() != 64) return false;
    const auto* bytes = reinterpret_cast<const unsigned char*>(r_and_s.data());
    ECDSA_SIG* signature = ECDSA_SIG_new();
    BIGNUM* r = BN_bin2bn(bytes, 32, nullptr);
    BIGNUM* s = BN_bin2bn(bytes + 32, 32, nullptr);
    if (!signature || !r || !s || ECDSA_SIG_set0(signature, r, s) != 1) {
        BN_free(r);
        BN_free(s);
        ECDSA_SIG_free(signature);
        return false;
    }
    unsigned char* der = nullptr;
    int length = i2d_ECDSA_SIG(signature, &der); // r and s belong to the signature now
    ECDSA_SIG_free(signature);
    if (length <= 0) return false;
    bool valid = verify(message, std::string_view(reinterpret_cast<const char*>(der),
                                                  static_cast<std::size_t>(length)));
    OPENSSL_free(der);
    return valid;
}

struct RsaPublicKey::Impl : VerifyingKey {};

RsaPublicKey::RsaPublicKey() : m_impl(std::make_unique<Impl>()) {}
RsaPublicKey::~RsaPublicKey() = default;
RsaPublicKey::RsaPublicKey(RsaPublicKey&&) noexcept = default;
RsaPublicKey& RsaPublicKey::operator=(RsaPublicKey&&) noexcept = default;

std::optional<RsaPublicKey> RsaPublicKey::from_der(std::string_view der) {
    // 8192 bits make a SubjectPublicKeyInfo of about 1 KB.
    RsaPublicKey key;
    if (!key.m_impl->hold(subject_public_key(der, 2048, EVP_PKEY_RSA)) || public_key_weakness(der))
        return std::nullopt;
    return key;
}

bool RsaPublicKey::verify(HashAlgorithm algorithm, std::string_view message,
                          std::string_view signature) const {
    const EVP_MD* digest = algorithm == HashAlgorithm::sha1     ? EVP_sha1()
                           : algorithm == HashAlgorithm::sha512 ? EVP_sha512()
                                                                : EVP_sha256();
    return m_impl->verify(digest, message, signature);
}

std::optional<std::string> certificate_public_key(std::string_view der) {
    if (der.empty() || der.size() > 64 * 1024) return std::nullopt;
    const auto* cursor = reinterpret_cast<const unsigned char*>(der.data());
    X509* certificate = d2i_X509(nullptr, &cursor, static_cast<long>(der.size()));
    if (!certificate) return std::nullopt;
    std::optional<std::string> spki;
    if (cursor == reinterpret_cast<const unsigned char*>(der.data()) + der.size()) {
        unsigned char* out = nullptr;
        int length = i2d_PUBKEY(X509_get0_pubkey(certificate), &out);
        if (length > 0)
            spki.emplace(reinterpret_cast<const char*>(out), static_cast<std::size_t>(length));
        OPENSSL_free(out);
    }
    X509_free(certificate);
    return spki;
}

struct Ed25519PrivateKey::Impl {
    EVP_PKEY* key = nullptr;
    ~Impl() { EVP_PKEY_free(key); }
};

Ed25519PrivateKey::Ed25519PrivateKey() : m_impl(std::make_unique<Impl>()) {}
Ed25519PrivateKey::~Ed25519PrivateKey() = default;
Ed25519PrivateKey::Ed25519PrivateKey(Ed25519PrivateKey&&) noexcept = default;
Ed25519PrivateKey& Ed25519PrivateKey::operator=(Ed25519PrivateKey&&) noexcept = default;

std::optional<Ed25519PrivateKey> Ed25519PrivateKey::from_seed(std::string_view seed) {
    if (seed.size() != k_ed25519_key_bytes) return std::nullopt;
    Ed25519PrivateKey key;
    key.m_impl->key = EVP_PKEY_new_raw_private_key(
        EVP_PKEY_ED25519, nullptr, reinterpret_cast<const unsigned char*>(seed.data()),
        seed.size());
    if (!key.m_impl->key) return std::nullopt;
    return key;
}

std::string Ed25519PrivateKey::sign(std::string_view message) const {
    std::string signature(k_ed25519_signature_bytes, '\0');
    std::size_t length = signature.size();
    EVP_MD_CTX* context = EVP_MD_CTX_new();
    bool ok =
        context && EVP_DigestSignInit(context, nullptr, nullptr, nullptr, m_impl->key) == 1 &&
        EVP_DigestSign(context, reinterpret_cast<unsigned char*>(signature.data()), &length,
                       reinterpret_cast<const unsigned char*>(message.data()), message.size()) == 1;
    EVP_MD_CTX_free(context);
    if (!ok) throw StoreError("OpenSSL could not make an ed25519 signature");
    return signature;
}

std::string Ed25519PrivateKey::public_key_raw() const {
    std::string raw(k_ed25519_key_bytes, '\0');
    std::size_t length = raw.size();
    EVP_PKEY_get_raw_public_key(m_impl->key, reinterpret_cast<unsigned char*>(raw.data()), &length);
    return raw;
}

void random_bytes(unsigned char* out, std::size_t size) {
    if (size > 0 && RAND_bytes(out, static_cast<int>(size)) != 1)
        throw FileSystemError("the system's random source (OpenSSL RAND_bytes) failed");
}

} // namespace idem::crypto
