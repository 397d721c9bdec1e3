#pragma once
// Internal to states: what a worker thread reads from each record of a block
// (worker.cpp), and how an event waits in the sequencer and an entity's
// state is kept in the store (packed.cpp). The run (run.cpp) orders and
// judges what these read.

#include "idem/io/block_reader.hpp"
#include "idem/record/parser.hpp"
#include "idem/run/input.hpp"
#include "idem/states/checker.hpp"
#include "idem/states/run.hpp"
#include "idem/store/sequencer_state.hpp"
#include "idem/util/huge_pages.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace idem::states::detail {

struct Outcome {
    enum class Kind : std::uint8_t { too_long, failed_to_parse, bad_field, outside_range, event };
    io::BlockLine line;
    Kind kind = Kind::event;
    bool has_annotations = false;
    std::uint32_t entity_at = 0, entity_size = 0, state_at = 0, state_size = 0, operation_at = 0,
                  operation_size = 0; // in BlockResult::texts
    std::optional<std::int64_t> version;
    std::uint64_t entity_hash = 0; // KeyIndex::hash_of(entity), computed by the worker
    std::uint32_t state_id = 0;    // Checker::declared_state(state), likewise
    order::OrderKey key;           // time and hlc ordering
    std::optional<Timestamp> time;
    std::uint64_t column = 0;
    std::string message;
};

struct BlockResult {
    HugeVector<Outcome> outcomes; // a few MiB per block: huge_pages.hpp
    std::uint64_t lines = 0;
    std::string texts;

    void clear() {
        outcomes.clear();
        lines = 0;
        texts.clear();
    }
};

struct WorkerState {
    record::RecordParser parser;
};

// On a worker thread: `checker` is only asked what never changes.
void judge_block(const run::InputBlock& block, WorkerState& state, const StatesRunOptions& options,
                 const Checker& checker, BlockResult& result);

// --- what waits in the sequencer ------------------------------------------
//
// An event waiting for its predecessors travels as its record prefixed by
// what was read from it, so nothing is parsed twice:
// u32 sizes and texts (entity, state, operation, position), u8 versioned,
// i64 version, i64 time, u64 entity hash, then the record.

inline void put_text(std::string& out, std::string_view text) {
    auto size = static_cast<std::uint32_t>(text.size());
    out.append(reinterpret_cast<const char*>(&size), sizeof size);
    out.append(text);
}

template <typename Number> inline void put_number(std::string& out, Number number) {
    out.append(reinterpret_cast<const char*>(&number), sizeof number);
}

struct Packed {
    Event event;
    std::string_view record;
};

// A packed event read back; nullopt for bytes that are not one.
[[nodiscard]] std::optional<Packed> unpack(std::string_view in);

// An entity's state in the store: CBOR of [state, operation, version|null,
// last_at, events, findings].
[[nodiscard]] std::string encode_state(const EntityState& state);
[[nodiscard]] std::optional<EntityState> decode_state(std::string_view bytes);

} // namespace idem::states::detail
