// Fuzz target: an untrusted input file through the whole input layer, as
// every command reads one: format detection (NDJSON, a JSON array or page,
// HAR, CSV), each decompressor (gzip, zstd, xz, bzip2, told by the first
// bytes), blocks of lines, oversized records, and the record parser on
// every record that comes out. A crash, a leak or an allocation past the
// run's -rss_limit_mb / -malloc_limit_mb is a finding; InputError is the
// expected answer to most inputs.

#include "idem/io/block_reader.hpp"
#include "idem/record/parser.hpp"
#include "idem/run/input.hpp"
#include "idem/util/errors.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <sys/mman.h>
#include <unistd.h>

namespace {

// What an oversized record's bytes would be streamed to: counted only.
class CountingOversize final : public idem::io::OversizeHandler {
public:
    void begin(std::string_view) override {}
    void chunk(std::string_view bytes) override { m_bytes += bytes.size(); }
    void end() override {}

private:
    std::uint64_t m_bytes = 0;
};

// The input as a file the input layer opens by name, as it opens any.
int input_file() {
    static int fd = ::memfd_create("fuzz-input", MFD_CLOEXEC);
    return fd;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    int fd = input_file();
    if (fd < 0 || ::ftruncate(fd, 0) != 0) return 0;
    if (::pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) return 0;
    idem::run::InputOptions options;
    options.paths = {"/proc/self/fd/" + std::to_string(fd)};
    options.max_record_bytes = 64 * 1024;
    CountingOversize oversize;
    static idem::record::RecordParser parser;
    try {
        idem::run::InputStream input(options, &oversize);
        while (auto record = input.next()) {
            if (record->oversized_bytes > 0 || record->bytes.empty()) continue;
            (void)parser.parse(record->bytes);
        }
    } catch (const idem::InputError&) {
        // A clear error (a damaged stream, a document that is no array of
        // records, nesting too deep) is the expected outcome for most inputs.
    }
    return 0;
}
