#pragma once
// All of a command's inputs as one stream of records: NDJSON files (or "-"
// for stdin) read line by line, or HAR 1.2 files whose entries become
// delivery envelopes. Every record knows where it came from.

#include "idem/io/line_reader.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace idem::record {

enum class InputFormat { ndjson, har };

[[nodiscard]] InputFormat parse_input_format(std::string_view name);

inline constexpr std::uint64_t k_default_max_record_bytes = 16ULL << 20;
// A HAR file is one JSON document and must be held whole to be parsed.
inline constexpr std::uint64_t k_max_har_file_bytes = 1ULL << 30;

struct InputOptions {
    std::vector<std::string> paths; // "-" is stdin; empty means stdin
    InputFormat format = InputFormat::ndjson;
    std::uint64_t max_record_bytes = k_default_max_record_bytes;
};

struct InputRecord {
    std::string_view bytes; // followed by io::k_padding_bytes readable bytes
    const std::string* source = nullptr;
    std::uint64_t line = 0; // for HAR: the entry number
    std::uint64_t byte_offset = 0;
    std::uint64_t oversized_bytes = 0; // non-zero: streamed to the oversize handler instead
};

class InputStream {
public:
    // Opens every input up front, so a missing file fails before any output.
    // Throws InputError naming the file.
    InputStream(const InputOptions& options, io::OversizeHandler* oversize_handler);
    ~InputStream();
    InputStream(const InputStream&) = delete;
    InputStream& operator=(const InputStream&) = delete;

    // The next record, or nullopt after the last input. Throws InputError
    // when an input cannot be read or a HAR file is not valid.
    std::optional<InputRecord> next();

    [[nodiscard]] std::uint64_t bytes_read() const;

private:
    struct Impl;
    std::unique_ptr<Impl> m_impl;
};

} // namespace idem::record
