#pragma once
// Compressed outputs, told by the file's name: `.gz` is written as gzip,
// `.zst` as zstd (Debian's zlib and libzstd), at each tool's default level.
// Every chunk a sink flushes is one whole gzip member or zstd frame, so a
// file cut back to any flush (a resumed run's committed size, docs/
// architecture.md "The crash guarantee") is a complete stream that readers
// of concatenated members and frames (gzip -d, zstd -d, idem) read whole.

#include <memory>
#include <string>
#include <string_view>

namespace idem::io {

class Compressor {
public:
    virtual ~Compressor() = default;
    // `bytes` as one complete member (gzip) or frame (zstd), replacing
    // `out`. Throws FileSystemError naming `name` when the library fails.
    virtual void compress(std::string_view bytes, std::string& out) = 0;
};

// The compressor a file named `path` is written through, or null for a
// name that asks for none.
[[nodiscard]] std::unique_ptr<Compressor> compressor_for(std::string_view path);

} // namespace idem::io
