#pragma once
// Records copied out of the input into one buffer, so that a batch can be
// handed to another thread while the reader goes on. Each record keeps its
// position, and is followed by io::k_padding_bytes for SIMD parsers.

#include "idem/record/input.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace idem::record {

struct BatchRecord {
    std::size_t offset = 0; // into RecordBatch::bytes
    std::size_t size = 0;
    const std::string* source = nullptr;
    std::uint64_t line = 0;
    std::uint64_t byte_offset = 0;
    std::uint64_t oversized_bytes = 0;
};

class RecordBatch {
public:
    void clear();
    void add(const InputRecord& record);
    [[nodiscard]] std::size_t size() const { return m_records.size(); }
    [[nodiscard]] std::size_t byte_size() const { return m_bytes.size(); }
    [[nodiscard]] const std::vector<BatchRecord>& records() const { return m_records; }
    [[nodiscard]] std::string_view bytes_of(const BatchRecord& record) const {
        return {m_bytes.data() + record.offset, record.size};
    }
    // The record as the input gave it, for rejects and messages.
    [[nodiscard]] InputRecord input_record(const BatchRecord& record) const;

private:
    std::string m_bytes;
    std::vector<BatchRecord> m_records;
};

// Fills batches of about `target_bytes` (or `max_records`) from the input.
// Returns false at the end of the input, with whatever was read in `batch`.
bool fill_batch(InputStream& input, RecordBatch& batch, std::size_t target_bytes, std::size_t max_records);

} // namespace idem::record
