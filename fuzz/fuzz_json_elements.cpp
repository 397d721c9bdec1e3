// Fuzz target: an untrusted JSON array or page split into its elements
// (run/json_elements.hpp), fed in chunks of a size the first byte picks, so
// every state boundary is crossed mid-token.

#include "idem/io/block_reader.hpp"
#include "idem/run/json_elements.hpp"
#include "idem/util/errors.hpp"

#include <cstddef>
#include <cstdint>
#include <string>

namespace {
class DroppedOversize final : public idem::io::OversizeHandler {
public:
    void begin(std::string_view) override {}
    void chunk(std::string_view) override {}
    void end() override {}
};
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    std::size_t step = 1 + data[0] % 64;
    std::string_view document(reinterpret_cast<const char*>(data) + 1, size - 1);
    DroppedOversize oversize;
    idem::run::JsonElements elements("fuzz.json", 256, &oversize);
    std::string lines;
    try {
        for (std::size_t at = 0; at < document.size();) {
            auto fed = elements.feed(document.substr(at, step), lines);
            at += fed.consumed;
            // Every line is one element: no raw line break but inside a string.
            lines.clear();
        }
        elements.finish();
    } catch (const idem::InputError&) {
    }
    return 0;
}
