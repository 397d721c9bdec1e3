#include "idem/record/batch.hpp"

#include "idem/io/line_reader.hpp"

namespace idem::record {

void RecordBatch::clear() {
    m_bytes.clear();
    m_records.clear();
}

void RecordBatch::add(const InputRecord& record) {
    BatchRecord entry;
    entry.offset = m_bytes.size();
    entry.size = record.bytes.size();
    entry.source = record.source;
    entry.line = record.line;
    entry.byte_offset = record.byte_offset;
    entry.oversized_bytes = record.oversized_bytes;
    m_bytes.append(record.bytes);
    // Padding after each record; its contents do not matter.
    m_bytes.append(io::k_padding_bytes, ' ');
    m_records.push_back(entry);
}

InputRecord RecordBatch::input_record(const BatchRecord& record) const {
    InputRecord input;
    input.bytes = bytes_of(record);
    input.source = record.source;
    input.line = record.line;
    input.byte_offset = record.byte_offset;
    input.oversized_bytes = record.oversized_bytes;
    return input;
}

bool fill_batch(InputStream& input, RecordBatch& batch, std::size_t target_bytes, std::size_t max_records) {
    batch.clear();
    while (batch.byte_size() < target_bytes && batch.size() < max_records) {
        auto record = input.next();
        if (!record) return false;
        batch.add(*record);
    }
    return true;
}

} // namespace idem::record
