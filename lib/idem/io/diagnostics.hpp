#pragma once
// Where the library reports what is not a result: warnings about input it
// set aside, and progress on long runs. The CLI decides how (and whether) a
// person sees them; the library never prints.

#include "idem/util/errors.hpp"

#include <cstdint>
#include <optional>
#include <string_view>

namespace idem::io {

class Diagnostics {
public:
    virtual ~Diagnostics() = default;
    virtual void warning(const SourcePosition& where, std::string_view message) = 0;
    // Called every few thousand records with running totals; `total_bytes`
    // is the inputs' size when every one is a regular file (a compressed
    // one by its compressed size, as `bytes` counts it).
    virtual void progress(std::uint64_t records, std::uint64_t bytes,
                          std::optional<std::uint64_t> total_bytes) {
        (void)records;
        (void)bytes;
        (void)total_bytes;
    }
};

// Discards everything; for tests and library callers that do not care.
class SilentDiagnostics final : public Diagnostics {
public:
    void warning(const SourcePosition&, std::string_view) override {}
};

} // namespace idem::io
