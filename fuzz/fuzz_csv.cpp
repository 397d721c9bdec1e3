// Fuzz target: an untrusted CSV file read row by row (run/rows.hpp), with a
// delimiter and typed values the first byte picks.

#include "idem/run/rows.hpp"
#include "idem/util/errors.hpp"

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    constexpr char k_delimiters[] = {',', ';', '\t', '|'};
    char delimiter = k_delimiters[data[0] % sizeof k_delimiters];
    auto values = data[0] & 0x80 ? idem::run::CsvValues::typed : idem::run::CsvValues::text;
    std::istringstream in(std::string(reinterpret_cast<const char*>(data) + 1, size - 1));
    try {
        idem::run::CsvRowReader rows(in, "fuzz.csv", delimiter, values, 4096);
        std::string json;
        std::uint64_t line = 0;
        while (rows.next(json, line)) {
        }
    } catch (const idem::InputError&) {
    }
    return 0;
}
