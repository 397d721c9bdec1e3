#pragma once
// Output files a run owns (-o FILE and its side outputs), resumed exactly
// after a crash: their committed sizes live in a store::Checkpoint, saved in
// the same transaction as the run's state (docs/architecture.md, "The crash
// guarantee"). OwnedOutputs is that protocol, once, for every subcommand
// that writes -o FILE: find the checkpoint a killed run left, open or cut
// back each file, and at each commit sync them and save how far they go.

#include "idem/io/diagnostics.hpp"
#include "idem/io/sink.hpp"
#include "idem/store/checkpoints.hpp"
#include "idem/util/time.hpp"
#include "idem/util/unique_fd.hpp"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace idem::store {

class Store;

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
[[nodiscard]] Resumption find_resumption(CheckpointStore& store, std::string_view command,
                                         std::string_view scope, const std::string& output_path,
                                         std::optional<std::uint64_t> input,
                                         io::Diagnostics& diagnostics);

// What a run that owns its outputs leaves at its last commit: a checkpoint
// marked finished for an input it can recognize again, none otherwise.
void save_finished(CheckpointStore& store, const std::string& checkpoint_name, Checkpoint done,
                   std::optional<std::uint64_t> input);

// A summary's counts, by name.
using RunCounts = std::vector<std::pair<std::string, std::uint64_t>>;

// Of `counts`, the ones named in `names`: what adds up over a run's
// records (findings, rejects, records written), not what describes its
// end (entities, peaks) or the input as a whole ("in").
[[nodiscard]] RunCounts only_named(const RunCounts& counts,
                                   std::initializer_list<std::string_view> names);

// A run's outputs: standard output, or -o FILE with its side outputs owned
// and resumed. Without -o, side outputs are plain files made anew and
// nothing is checkpointed.
//
// Every side output (the reject file too) follows the main output's
// protocol, so a killed-and-resumed run and a rerun of a finished one leave
// every file as one clean run does. One run at a time owns -o FILE: a
// second waits for the first (a lock on the file, up to `lock_timeout`),
// then finds its checkpoint.
class OwnedOutputs {
public:
    struct Owner {
        std::string_view command;               // "dedup", "reorder"
        std::string_view scope;                 // the run's --scope
        const std::vector<std::string>& inputs; // what it reads (input_identity)
        Duration lock_timeout = std::chrono::seconds(60);
        // A command that calls interrupted() when a signal stops it: a run
        // of it to standard output looks for what an interrupted one noted.
        bool notes_interruptions = false;
        // --resume-to-stdout: a run to standard output over an input an
        // interrupted run left unfinished (interrupted()) goes on after
        // what that run committed; without it such a run is refused.
        bool resume_to_stdout = false;
    };
    // Waits for -o FILE to be free, finds the checkpoint a killed run left
    // in `store` and opens -o FILE, created anew or cut back to it. Throws
    // FileSystemError when another run keeps the file past lock_timeout.
    OwnedOutputs(CheckpointStore& store, const Owner& owner, const std::string& output_path,
                 io::Sink& standard_output, io::Diagnostics& diagnostics);
    OwnedOutputs(const OwnedOutputs&) = delete;
    OwnedOutputs& operator=(const OwnedOutputs&) = delete;

    // A side output in `role` ("dups", "gaps", "late"...), null for no path.
    [[nodiscard]] io::Sink* add(const std::string& role, const std::string& path);

    [[nodiscard]] io::Sink& output() { return *m_output; }
    [[nodiscard]] const io::Sink& output() const { return *m_output; }
    // Whether -o FILE was given: the outputs are checkpointed.
    [[nodiscard]] bool owned() const { return m_owned != nullptr; }
    // Records the run this one resumes had done (0 for a fresh run).
    [[nodiscard]] std::uint64_t resume_point() const {
        return m_checkpoint ? m_checkpoint->records_done : 0;
    }
    [[nodiscard]] bool resumed() const { return m_checkpoint.has_value(); }
    // Whether this run repeats one that finished over the same input: its
    // outputs stand whole, and what a run writes at its end is there.
    [[nodiscard]] bool repeats_finished() const {
        return m_checkpoint && m_checkpoint->finished_input.has_value();
    }
    // The checkpoint's name: a key for state kept beside it ("" without -o).
    [[nodiscard]] const std::string& checkpoint_name() const { return m_checkpoint_name; }

    // Every output has what was written to it (a commit does this first).
    void flush();
    // Within the store's transaction, before it commits: syncs the owned
    // files and saves their sizes with `records_done`, so the checkpoint is
    // durable exactly when the state committed with it is; with them what
    // this run counted (`counts`, see only_named) plus what the run it
    // resumes had. Nothing without -o.
    void checkpoint(CheckpointStore& store, std::uint64_t records_done,
                    const RunCounts& counts = {});
    // The last commit's checkpoint, marked finished for this input.
    void finish(CheckpointStore& store, std::uint64_t records_done, const RunCounts& counts = {});

    // One commit of a run, in the order the crash guarantee needs: every
    // output flushed first (a crash after it makes a rerun repeat the
    // batch, never lose it), then, in `store`'s transaction, the run's own
    // state (`save_state`), the checkpoint and the commit. A null `store`:
    // the run's state outlives nothing (no -o, a :memory: store), and the
    // flush is all there is.
    void commit(Store* store, std::uint64_t records_done, const RunCounts& counts,
                const std::function<void()>& save_state);
    // The last commit, as commit(), its checkpoint marked finished.
    void commit_finished(Store* store, std::uint64_t records_done, const RunCounts& counts,
                         const std::function<void()>& save_state);
    // Adds to `counts` what the run this one resumes (or repeats) had
    // counted under the same names: the summary then speaks for the whole
    // input, and so does the exit code taken from it.
    void add_carried(RunCounts& counts) const;

    // A signal stopped the run after its last commit (`records_done`,
    // `counts` as commit() takes them). With -o FILE the checkpoint that
    // commit saved resumes it. To standard output, over regular files and
    // a store that outlives the run, it is noted in `store`: the same run
    // again is refused, or with --resume-to-stdout writes only what this
    // one did not (docs/dedup.md, "Interrupted").
    void interrupted(Store* store, std::uint64_t records_done, const RunCounts& counts);
    // Whether interrupted() noted this run in the store.
    [[nodiscard]] bool noted_interruption() const { return m_noted_interruption; }

private:
    void commit_in_order(Store* store, std::uint64_t records_done, const RunCounts& counts,
                         const std::function<void()>& save_state, bool finished);
    // The checkpoint for `records_done` and `counts`, with what the run
    // this one resumes had counted; synced() adds the files' sizes.
    [[nodiscard]] Checkpoint carried(std::uint64_t records_done, const RunCounts& counts) const;
    [[nodiscard]] Checkpoint synced(std::uint64_t records_done, const RunCounts& counts);

    // Held while the run owns -o FILE (flock on the file itself).
    class OutputLock {
    public:
        OutputLock() = default;
        OutputLock(const std::string& path, Duration timeout);

    private:
        UniqueFd m_fd; // the lock lasts as long as it is open
    };
    OutputLock m_lock;
    std::unique_ptr<io::Sink> m_owned;
    io::Sink* m_output = nullptr;
    std::vector<std::pair<std::string, std::unique_ptr<io::Sink>>> m_sides;
    std::string m_checkpoint_name;
    std::optional<Checkpoint> m_checkpoint;
    std::optional<std::uint64_t> m_input_identity;
    // To standard output: the name an interruption is noted under (""
    // when it cannot be: stdin, a store that ends with the run).
    std::string m_stdout_note;
    bool m_noted_interruption = false;
};

} // namespace idem::store
