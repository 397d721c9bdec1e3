// Fuzz target: key and secret material as users give it (--public-key,
// --secret-file, provider files' `secret:` forms), read as untrusted text.
// A UsageError that never echoes the key is the expected outcome.

#include "idem/util/errors.hpp"
#include "idem/verify/config.hpp"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string_view text(reinterpret_cast<const char*>(data), size);
    try {
        (void)idem::verify::parse_public_key(text, 1);
    } catch (const idem::Error&) {
    }
    for (std::string_view prefix : {"", "whpk_", "whsk_"})
        (void)idem::verify::decode_key_text(text, prefix);
    idem::verify::Secret secret;
    secret.label = "fuzz";
    secret.value = std::string(text);
    for (auto decode : {&idem::verify::standard_webhooks_key, &idem::verify::base64_key,
                        &idem::verify::hex_key}) {
        try {
            (void)decode(secret);
        } catch (const idem::Error&) {
        }
    }
    try {
        (void)idem::verify::parse_secret_lines(text, "fuzz");
    } catch (const idem::Error&) {
    }
    return 0;
}
