// Fuzz target: an untrusted HAR document to envelopes.

#include "idem/record/har.hpp"
#include "idem/util/errors.hpp"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    try {
        (void)idem::record::har_to_envelopes(
            std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.har");
    } catch (const idem::InputError&) {
        // A clear error is the expected outcome for most inputs.
    }
    return 0;
}
