#pragma once
// Internal to the SQLite store: the fingerprint slots saved whole, in a
// file beside the store (`<store>-index-<token>`, 16 hex digits), named by
// the store's fingerprint_index row. A process maps the file read-only
// instead of copying 8 bytes a slot into memory: at 50M fingerprints that
// copy, and the kernel zeroing the memory it went to, was most of opening
// the store (docs/dedup.md, "The SQLite store's memory").
//
// The file is written whole under a temporary name, synced, and renamed
// into place, inside the store's write transaction; a file never changes
// once named, so a process that mapped it reads the same slots whichever
// process saves next. The row and the file's header name the same token
// and counts: any difference, and the slots are not used (the log is read
// instead).

#include "idem/store/sqlite/fingerprint_slots.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace idem::store::detail {

// What a saved table is: the row names it, the file's header repeats it.
struct SavedSlotsIdentity {
    std::uint64_t token = 0; // random, never 0; names the file
    std::int64_t covers_seq = 0;
    std::int64_t gc_generation = 0;
    std::uint64_t capacity = 0;
    std::uint64_t entries = 0;
    std::int64_t base = 0;
};

// `<store path>-index-<token as 16 hex digits>`.
std::string saved_slots_path(const std::string& store_path, std::uint64_t token);

// Writes `slots` (identity.capacity words) as the file for `identity`:
// through a temporary beside it, synced, renamed. False, with nothing left
// behind, when it cannot (the caller saves nothing whole).
bool write_saved_slots(const std::string& store_path, const SavedSlotsIdentity& identity,
                       const std::uint64_t* slots);

// The same, the slots given in pieces: `fill` hands each to the put it is
// passed (FingerprintSlots::write_merged), in any order, every slot once.
// False, with nothing left behind, when fill or a write fails.
bool write_saved_slots(const std::string& store_path, const SavedSlotsIdentity& identity,
                       const std::function<bool(const FingerprintSlots::PutSlots&)>& fill);

// The file for `identity`, mapped read-only, when its header and size are
// what `identity` says (the rows it covers may be fewer: the row's mark
// moves on when only repeats came since); nullopt otherwise (missing, cut
// short, another table's).
std::optional<SavedSlots> map_saved_slots(const std::string& store_path,
                                          const SavedSlotsIdentity& identity);

// Removes the store's slot files (and temporaries left by a process that
// died writing one) whose token is not in `keep`.
void remove_saved_slots_except(const std::string& store_path,
                               const std::vector<std::uint64_t>& keep);

// A fresh token: random, never 0.
std::uint64_t new_saved_slots_token();

} // namespace idem::store::detail
