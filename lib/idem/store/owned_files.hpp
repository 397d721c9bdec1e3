#pragma once
// Output files a run owns (-o FILE and its side outputs), resumed exactly
// after a crash: their committed sizes live in a store::Checkpoint, saved in
// the same transaction as the run's state (docs/architecture.md, "The crash guarantee").

#include "idem/io/diagnostics.hpp"
#include "idem/io/sink.hpp"
#include "idem/store/store.hpp"

#include <memory>
#include <optional>
#include <string>

namespace idem::store {

// Where a run of `command` that owns `output_path` keeps its checkpoint.
[[nodiscard]] std::string checkpoint_name(std::string_view command, std::string_view scope,
                                          const std::string& output_path);

// What a run reads, as far as the files can tell: each path with its size
// and modification time, hashed (below 2^63, so every store keeps it as an
// integer). Nullopt when an input is stdin or not a regular file.
[[nodiscard]] std::optional<std::uint64_t> input_identity(const std::vector<std::string>& paths);

// The checkpoint a killed run of `command` left for `output_path`, if any,
// announced in a warning; and the name it is kept under. A finished run's
// checkpoint counts only for the same input (`input`, input_identity): the
// run it finished is being run again, and everything in it is done.
struct Resumption {
    std::string checkpoint_name;
    std::optional<Checkpoint> checkpoint;
};
[[nodiscard]] Resumption find_resumption(Store& store, std::string_view command,
                                         std::string_view scope, const std::string& output_path,
                                         std::optional<std::uint64_t> input,
                                         io::Diagnostics& diagnostics);

// What a run that owns its outputs leaves at its last commit: a checkpoint
// marked finished for an input it can recognize again, none otherwise.
void save_finished(Store& store, const std::string& checkpoint_name, Checkpoint done,
                   std::optional<std::uint64_t> input);

// A file idem owns, in the role `role` ("output", "dups", "gaps"...): created
// anew, or cut back to what the checkpoint committed. Null for no path.
[[nodiscard]] std::unique_ptr<io::Sink> open_owned(const std::string& path,
                                                   const std::optional<Checkpoint>& checkpoint,
                                                   const std::string& role);

} // namespace idem::store
