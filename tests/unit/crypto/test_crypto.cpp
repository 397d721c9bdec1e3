#include "idem/crypto/crypto.hpp"
#include "idem/util/encoding.hpp"

#include <doctest/doctest.h>

using namespace idem;
using namespace idem::crypto;

TEST_CASE("HMAC-SHA256 and SHA-512 reproduce RFC 4231 test case 2") {
    HmacKey sha256(HashAlgorithm::sha256, "Jefe");
    CHECK(hex_encode(sha256.mac({"what do ya want ", "for nothing?"}).view()) ==
          "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    HmacKey sha512(HashAlgorithm::sha512, "Jefe");
    CHECK(hex_encode(sha512.mac({"what do ya want for nothing?"}).view()) ==
          "164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea2505549758bf75c05a994a6d034f65"
          "f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737");
}

TEST_CASE("a prepared HMAC key gives the same MAC on every reuse") {
    HmacKey key(HashAlgorithm::sha1, "key");
    auto first = hex_encode(key.mac({"The quick brown fox jumps over the lazy dog"}).view());
    CHECK(first == "de7c9b85b8b78aa6bc8a7a36f70a90701c9db4d9"); // Wikipedia's HMAC_SHA1 example
    CHECK(hex_encode(key.mac({"The quick brown fox ", "jumps over the lazy dog"}).view()) == first);
}

TEST_CASE("ed25519 reproduces RFC 8032 section 7.1 TEST 2") {
    auto seed = *hex_decode("4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb");
    auto key = Ed25519PrivateKey::from_seed(seed);
    REQUIRE(key);
    CHECK(hex_encode(key->public_key_raw()) ==
          "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c");
    auto signature = key->sign("\x72");
    CHECK(hex_encode(signature) ==
          "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613"
          "d0f11d8c387b2eaeb4302aeeb00d291612bb0c00");
    auto public_key = Ed25519PublicKey::from_raw(key->public_key_raw());
    REQUIRE(public_key);
    CHECK(public_key->verify("\x72", signature));
    CHECK_FALSE(public_key->verify("\x73", signature));
    CHECK_FALSE(public_key->verify("\x72", signature.substr(1)));
}

TEST_CASE("constant_time_equal compares contents and lengths") {
    CHECK(constant_time_equal("abc", "abc"));
    CHECK_FALSE(constant_time_equal("abc", "abd"));
    CHECK_FALSE(constant_time_equal("abc", "ab"));
}

TEST_CASE("HMAC with a key longer than the block hashes the key first (RFC 4231 test case 6)") {
    HmacKey key(HashAlgorithm::sha256, std::string(131, '\xaa'));
    CHECK(hex_encode(key.mac({"Test Using Larger Than Block-Size Key - Hash Key First"}).view()) ==
          "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
    HmacKey empty(HashAlgorithm::sha256, "");
    CHECK(hex_encode(empty.mac({""}).view()) ==
          "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad");
}

TEST_CASE("ECDSA P-256 verifies SendGrid's event webhook vector and nothing else") {
    // sendgrid/sendgrid-nodejs packages/eventwebhook/src/eventwebhook.spec.js:
    // PUBLIC_KEY, SIGNATURE, TIMESTAMP and PAYLOAD (with its trailing \r\n).
    auto der = base64_decode("MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE83T4O/n84iotIvIW4mdBgQ/"
                             "7dAfSmpqIM8kF9mN1flpVKS3GRqe62gw+2fNNRaINXvVpiglSI8eNEc6wEA3F+g==");
    REQUIRE(der);
    auto key = EcdsaP256PublicKey::from_der(*der);
    REQUIRE(key);
    auto signature = base64_decode("MEUCIGHQVtGj+Y3LkG9fLcxf3qfI10QysgDWmMOVmxG0u6ZUAiEAyBiXDWzM+"
                                   "uOe5W0JuG+luQAbPIqHh89M15TluLtEZtM=");
    REQUIRE(signature);
    const std::string payload =
        R"([{"email":"hello@world.com","event":"dropped","reason":"Bounced Address",)"
        R"("sg_event_id":"ZHJvcC0xMDk5NDkxOS1MUnpYbF9OSFN0T0doUTRrb2ZTbV9BLTA",)"
        R"("sg_message_id":"LRzXl_NHStOGhQ4kofSm_A.filterdrecv-p3mdw1-756b745b58-kmzbl-18-5F5FC76C-9.0",)"
        R"("smtp-id":"<LRzXl_NHStOGhQ4kofSm_A@ismtpd0039p1iad1.sendgrid.net>","timestamp":1600112492}])"
        "\r\n";
    CHECK(key->verify("1600112502" + payload, *signature));
    // Its 'should reject for bad payload' and 'bad timestamp'.
    CHECK_FALSE(key->verify("1600112502payload", *signature));
    CHECK_FALSE(key->verify("timestamp" + payload, *signature));
    // Its 'should reject for invalid key': another P-256 key.
    auto other = base64_decode("MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEqTxd43gyp8IOEto2LdIfjRQrIbsd4SX"
                               "ZkLW6jDutdhXSJCWHw8REntlo7aNDthvj+y7GjUuFDb/R1NGe1OPzpA==");
    REQUIRE(other);
    CHECK_FALSE(EcdsaP256PublicKey::from_der(*other)->verify("1600112502" + payload, *signature));
    // Not a key: garbage, a truncated key, an ed25519 key's raw bytes.
    CHECK_FALSE(EcdsaP256PublicKey::from_der("not a key"));
    CHECK_FALSE(EcdsaP256PublicKey::from_der(der->substr(0, 60)));
    CHECK_FALSE(EcdsaP256PublicKey::from_der(std::string(32, '\x01')));
    CHECK_FALSE(key->verify("1600112502" + payload, "garbage"));
}
