#pragma once
// Output files a run owns (-o FILE and its side outputs), resumed exactly
// after a crash: their committed sizes live in a store::Checkpoint, saved in
// the same transaction as the run's state (DESIGN.md, "Nothing is lost").

#include "idem/io/sink.hpp"
#include "idem/store/store.hpp"

#include <memory>
#include <optional>
#include <string>

namespace idem::store {

// Where a run of `command` that owns `output_path` keeps its checkpoint.
[[nodiscard]] std::string checkpoint_name(std::string_view command, std::string_view scope,
                                          const std::string& output_path);

// A file idem owns, in the role `role` ("output", "dups", "gaps"...): created
// anew, or cut back to what the checkpoint committed. Null for no path.
[[nodiscard]] std::unique_ptr<io::Sink> open_owned(const std::string& path,
                                                   const std::optional<Checkpoint>& checkpoint,
                                                   const std::string& role);

} // namespace idem::store
