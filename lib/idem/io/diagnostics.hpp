#pragma once
// Where the library reports what is not a result: warnings about input it
// set aside, and progress on long runs. The CLI decides how (and whether) a
// person sees them; the library never prints.

#include "idem/util/errors.hpp"

#include <cstdint>
#include <string_view>

namespace idem::io {

class Diagnostics {
public:
    virtual ~Diagnostics() = default;
    virtual void warning(const SourcePosition& where, std::string_view message) = 0;
    // Called every few thousand records with running totals.
    virtual void progress(std::uint64_t records, std::uint64_t bytes) {
        (void)records;
        (void)bytes;
    }
};

// Discards everything; for tests and library callers that do not care.
class SilentDiagnostics final : public Diagnostics {
public:
    void warning(const SourcePosition&, std::string_view) override {}
};

} // namespace idem::io
