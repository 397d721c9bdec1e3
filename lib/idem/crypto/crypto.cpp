#include "idem/crypto/crypto.hpp"

#include "idem/util/errors.hpp"

#include <cassert>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>

namespace idem::crypto {

std::string_view hash_name(HashAlgorithm algorithm) {
    switch (algorithm) {
    case HashAlgorithm::sha1: return "SHA1";
    case HashAlgorithm::sha256: return "SHA256";
    case HashAlgorithm::sha512: return "SHA512";
    }
    return "SHA256";
}

std::size_t digest_size(HashAlgorithm algorithm) {
    switch (algorithm) {
    case HashAlgorithm::sha1: return 20;
    case HashAlgorithm::sha256: return 32;
    case HashAlgorithm::sha512: return 64;
    }
    return 32;
}

namespace {
const EVP_MD* evp_md(HashAlgorithm algorithm) {
    switch (algorithm) {
    case HashAlgorithm::sha1: return EVP_sha1();
    case HashAlgorithm::sha256: return EVP_sha256();
    case HashAlgorithm::sha512: return EVP_sha512();
    }
    return EVP_sha256();
}
} // namespace

struct HmacKey::Impl {
    EVP_MAC* mac = nullptr;
    EVP_MAC_CTX* context = nullptr;
    ~Impl() {
        EVP_MAC_CTX_free(context);
        EVP_MAC_free(mac);
    }
};

HmacKey::HmacKey(HashAlgorithm algorithm, std::string_view key)
    : m_impl(std::make_unique<Impl>()), m_algorithm(algorithm) {
    m_impl->mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
    if (!m_impl->mac) throw StoreError("OpenSSL has no HMAC implementation");
    m_impl->context = EVP_MAC_CTX_new(m_impl->mac);
    std::string digest(hash_name(algorithm));
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest.data(), 0),
        OSSL_PARAM_construct_end(),
    };
    // An empty key is legal HMAC; OpenSSL wants a non-null pointer for it.
    static const unsigned char k_empty = 0;
    const auto* key_bytes = key.empty() ? &k_empty : reinterpret_cast<const unsigned char*>(key.data());
    if (!m_impl->context || EVP_MAC_init(m_impl->context, key_bytes, key.size(), params) != 1)
        throw StoreError("OpenSSL could not prepare an HMAC key");
}

HmacKey::~HmacKey() = default;
HmacKey::HmacKey(HmacKey&&) noexcept = default;
HmacKey& HmacKey::operator=(HmacKey&&) noexcept = default;

Digest HmacKey::mac(std::initializer_list<std::string_view> parts) const {
    Digest digest;
    // Re-initialising without a key reuses the prepared inner and outer
    // states: no key schedule and no allocation per message.
    [[maybe_unused]] int ok = EVP_MAC_init(m_impl->context, nullptr, 0, nullptr);
    assert(ok == 1);
    for (auto part : parts)
        EVP_MAC_update(m_impl->context, reinterpret_cast<const unsigned char*>(part.data()), part.size());
    std::size_t length = 0;
    EVP_MAC_final(m_impl->context, digest.bytes.data(), &length, digest.bytes.size());
    digest.size = length;
    return digest;
}

Digest hash(HashAlgorithm algorithm, std::string_view message) {
    Digest digest;
    unsigned int length = 0;
    EVP_Digest(message.data(), message.size(), digest.bytes.data(), &length, evp_md(algorithm), nullptr);
    digest.size = length;
    return digest;
}

bool constant_time_equal(std::string_view a, std::string_view b) {
    return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

struct Ed25519PublicKey::Impl {
    EVP_PKEY* key = nullptr;
    EVP_MD_CTX* context = nullptr;
    ~Impl() {
        EVP_MD_CTX_free(context);
        EVP_PKEY_free(key);
    }
};

Ed25519PublicKey::Ed25519PublicKey() : m_impl(std::make_unique<Impl>()) {}
Ed25519PublicKey::~Ed25519PublicKey() = default;
Ed25519PublicKey::Ed25519PublicKey(Ed25519PublicKey&&) noexcept = default;
Ed25519PublicKey& Ed25519PublicKey::operator=(Ed25519PublicKey&&) noexcept = default;

std::optional<Ed25519PublicKey> Ed25519PublicKey::from_raw(std::string_view raw) {
    if (raw.size() != k_ed25519_key_bytes) return std::nullopt;
    Ed25519PublicKey key;
    key.m_impl->key = EVP_PKEY_new_raw_public_key(
        EVP_PKEY_ED25519, nullptr, reinterpret_cast<const unsigned char*>(raw.data()), raw.size());
    key.m_impl->context = EVP_MD_CTX_new();
    if (!key.m_impl->key || !key.m_impl->context) return std::nullopt;
    return key;
}

bool Ed25519PublicKey::verify(std::string_view message, std::string_view signature) const {
    if (signature.size() != k_ed25519_signature_bytes) return false;
    EVP_MD_CTX_reset(m_impl->context);
    if (EVP_DigestVerifyInit(m_impl->context, nullptr, nullptr, nullptr, m_impl->key) != 1) return false;
    return EVP_DigestVerify(m_impl->context, reinterpret_cast<const unsigned char*>(signature.data()),
                            signature.size(), reinterpret_cast<const unsigned char*>(message.data()),
                            message.size()) == 1;
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
        EVP_PKEY_ED25519, nullptr, reinterpret_cast<const unsigned char*>(seed.data()), seed.size());
    if (!key.m_impl->key) return std::nullopt;
    return key;
}

std::string Ed25519PrivateKey::sign(std::string_view message) const {
    std::string signature(k_ed25519_signature_bytes, '\0');
    std::size_t length = signature.size();
    EVP_MD_CTX* context = EVP_MD_CTX_new();
    bool ok = context && EVP_DigestSignInit(context, nullptr, nullptr, nullptr, m_impl->key) == 1 &&
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

} // namespace idem::crypto
