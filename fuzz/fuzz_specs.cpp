// Fuzz target: the specs users and their teams write, read as untrusted
// text: a provider file (YAML or JSON), a state machine, merge rules, and
// the one-line forms of aggregates and conditions. The first byte picks
// which; a UsageError naming what is wrong is the expected outcome.

#include "idem/merge/rules.hpp"
#include "idem/states/machine.hpp"
#include "idem/util/errors.hpp"
#include "idem/verify/provider_spec.hpp"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
    try {
        switch (data[0] % 5) {
        case 0:
            (void)idem::verify::parse_provider_specs(text, "fuzz.yaml");
            break;
        case 1:
            (void)idem::states::parse_machine_text(text, "fuzz-machine.yaml");
            break;
        case 2:
            (void)idem::merge::parse_rules_text(text, "fuzz-rules.yaml");
            break;
        case 3:
            (void)idem::merge::parse_aggregates(text);
            break;
        default:
            (void)idem::merge::parse_condition(text);
            break;
        }
    } catch (const idem::Error&) {
    }
    return 0;
}
