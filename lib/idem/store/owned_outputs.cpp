#include "idem/store/owned_outputs.hpp"

#include "idem/crypto/crypto.hpp"
#include "idem/store/store.hpp"

#include "idem/util/crash_point.hpp"
#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace idem::store {

std::string checkpoint_name(std::string_view command, std::string_view scope,
                            const std::string& output_path) {
    std::error_code ignored;
    auto absolute = std::filesystem::absolute(output_path, ignored).lexically_normal().string();
    return fmt::format("{} {} {}", command, scope, absolute);
}

std::optional<std::uint64_t> input_identity(const std::vector<std::string>& paths) {
    if (paths.empty()) return std::nullopt;
    std::string described;
    for (const auto& path : paths) {
        struct stat status {};
        if (path == "-" || ::stat(path.c_str(), &status) != 0 || !S_ISREG(status.st_mode))
            return std::nullopt;
        std::error_code ignored;
        fmt::format_to(std::back_inserter(described), "{}\n{}\n{}.{}\n",
                       std::filesystem::absolute(path, ignored).lexically_normal().string(),
                       status.st_size, status.st_mtim.tv_sec, status.st_mtim.tv_nsec);
    }
    auto digest = crypto::hash(crypto::HashAlgorithm::sha256, described);
    std::uint64_t identity = 0;
    std::memcpy(&identity, digest.view().data(), sizeof identity);
    return identity >> 1;
}

Resumption find_resumption(CheckpointStore& store, std::string_view command, std::string_view scope,
                           const std::string& output_path, std::optional<std::uint64_t> input,
                           io::Diagnostics& diagnostics) {
    Resumption found{checkpoint_name(command, scope, output_path), std::nullopt};
    found.checkpoint = store.load_checkpoint(found.checkpoint_name);
    if (!found.checkpoint) return found;
    if (found.checkpoint->finished_input) {
        if (found.checkpoint->finished_input != input) {
            found.checkpoint.reset(); // a new run: its outputs start anew
            return found;
        }
        diagnostics.warning({output_path, 0, 0, 0},
                            fmt::format("a run over this same input already finished ({} "
                                        "records): its outputs stand, nothing is done again",
                                        found.checkpoint->records_done));
        return found;
    }
    diagnostics.warning({output_path, 0, 0, 0},
                        fmt::format("resuming a run that stopped after {} records: the "
                                    "outputs are cut back to what it had committed",
                                    found.checkpoint->records_done));
    return found;
}

void save_finished(CheckpointStore& store, const std::string& checkpoint_name, Checkpoint done,
                   std::optional<std::uint64_t> input) {
    if (!input) {
        store.clear_checkpoint(checkpoint_name);
        return;
    }
    done.finished_input = input;
    store.save_checkpoint(checkpoint_name, done);
}

namespace {

// A file idem owns, in its role: created anew, or cut back to what the
// checkpoint committed.
std::unique_ptr<io::Sink> open_owned(const std::string& path,
                                     const std::optional<Checkpoint>& checkpoint,
                                     const std::string& role) {
    if (!checkpoint) return io::Sink::create_file(path);
    auto committed = checkpoint->file_bytes.find(role);
    return io::Sink::resume_file(path,
                                 committed == checkpoint->file_bytes.end() ? 0 : committed->second);
}

} // namespace

RunCounts only_named(const RunCounts& counts, std::initializer_list<std::string_view> names) {
    RunCounts named;
    for (const auto& [name, count] : counts)
        if (std::find(names.begin(), names.end(), name) != names.end())
            named.emplace_back(name, count);
    return named;
}

OwnedOutputs::OutputLock::OutputLock(const std::string& path, Duration timeout) {
    // Opened without O_TRUNC: the run holding it may be writing it.
    // Closed (the lock released) when the lock goes, or when this throws.
    m_fd.reset(::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
    if (!m_fd.valid())
        throw FileSystemError(fmt::format("cannot open {}: {}", quote(path), std::strerror(errno)));
    struct stat status {};
    if (::fstat(m_fd.get(), &status) != 0 || !S_ISREG(status.st_mode)) return; // a device, a FIFO
    auto deadline = std::chrono::steady_clock::now() + timeout;
    auto pause = std::chrono::milliseconds(5);
    while (::flock(m_fd.get(), LOCK_EX | LOCK_NB) != 0) {
        if (errno != EWOULDBLOCK && errno != EINTR)
            throw FileSystemError(
                fmt::format("cannot lock {}: {}", quote(path), std::strerror(errno)));
        if (std::chrono::steady_clock::now() >= deadline)
            throw FileSystemError(fmt::format(
                "{} is the output of another idem run, still going after --lock-timeout {}: "
                "wait for it, or give another -o",
                quote(path), format_duration(timeout)));
        std::this_thread::sleep_for(pause);
        pause = std::min(pause * 2, std::chrono::milliseconds(200));
    }
}

OwnedOutputs::OwnedOutputs(CheckpointStore& store, const Owner& owner,
                           const std::string& output_path, io::Sink& standard_output,
                           io::Diagnostics& diagnostics) {
    if (output_path.empty()) {
        m_output = &standard_output;
        // A run to standard output keeps no checkpoint, but one a signal
        // stopped is noted (interrupted()): run again, it would take the
        // records that run committed for duplicates and leave them out.
        // Only a command that notes interruptions looks for one.
        if (!owner.notes_interruptions) return;
        m_input_identity = input_identity(owner.inputs);
        if (!m_input_identity) return;
        m_stdout_note = store::checkpoint_name(owner.command, owner.scope,
                                               fmt::format("<stdout {}>", *m_input_identity));
        std::optional<Checkpoint> noted;
        try {
            noted = store.load_checkpoint(m_stdout_note);
        } catch (const StoreError&) {
            // A store that does not answer yet: the run's own first claim
            // meets it (and --on-store-error decides); no note is known.
        }
        if (!noted) return;
        if (!owner.resume_to_stdout)
            throw UsageError(fmt::format(
                "a run of {} over this same input (scope {}) was interrupted after committing "
                "{} records to the store and writing them to its standard output: run again, "
                "this one would leave them out as duplicates. Give --resume-to-stdout and "
                "append (>>) to that output to go on after them, or --scope NEW (or "
                "--store :memory:) for a run from scratch",
                owner.command, quote(std::string(owner.scope)), noted->records_done));
        diagnostics.warning({}, fmt::format("resuming an interrupted run after its {} records: "
                                            "this run writes only what it did not",
                                            noted->records_done));
        m_checkpoint = std::move(noted);
        return;
    }
    // Before the checkpoint is read: a run still writing this file has not
    // saved its last one yet.
    m_lock = OutputLock(output_path, owner.lock_timeout);
    m_input_identity = input_identity(owner.inputs);
    auto resumption = find_resumption(store, owner.command, owner.scope, output_path,
                                      m_input_identity, diagnostics);
    m_checkpoint_name = std::move(resumption.checkpoint_name);
    m_checkpoint = std::move(resumption.checkpoint);
    m_owned = open_owned(output_path, m_checkpoint, "output");
    m_output = m_owned.get();
}

io::Sink* OwnedOutputs::add(const std::string& role, const std::string& path) {
    if (path.empty()) return nullptr;
    auto sink = owned() ? open_owned(path, m_checkpoint, role) : io::Sink::create_file(path);
    return m_sides.emplace_back(role, std::move(sink)).second.get();
}

void OwnedOutputs::flush() {
    m_output->flush();
    for (auto& [role, sink] : m_sides)
        sink->flush();
}

Checkpoint OwnedOutputs::carried(std::uint64_t records_done, const RunCounts& counts) const {
    Checkpoint done;
    if (m_checkpoint) done.counts = m_checkpoint->counts;
    for (const auto& [name, count] : counts)
        done.counts[name] += count;
    // Never behind the run this one resumes: its records are done.
    done.records_done = std::max(records_done, resume_point());
    return done;
}

Checkpoint OwnedOutputs::synced(std::uint64_t records_done, const RunCounts& counts) {
    auto done = carried(records_done, counts);
    m_output->sync();
    done.file_bytes["output"] = m_output->size();
    for (auto& [role, sink] : m_sides) {
        sink->sync();
        done.file_bytes[role] = sink->size();
    }
    return done;
}

void OwnedOutputs::checkpoint(CheckpointStore& store, std::uint64_t records_done,
                              const RunCounts& counts) {
    if (!owned()) return;
    store.save_checkpoint(m_checkpoint_name, synced(records_done, counts));
}

void OwnedOutputs::finish(CheckpointStore& store, std::uint64_t records_done,
                          const RunCounts& counts) {
    if (!owned()) return;
    save_finished(store, m_checkpoint_name, synced(records_done, counts), m_input_identity);
}

void OwnedOutputs::commit(Store* store, std::uint64_t records_done, const RunCounts& counts,
                          const std::function<void()>& save_state) {
    commit_in_order(store, records_done, counts, save_state, false);
}

void OwnedOutputs::commit_finished(Store* store, std::uint64_t records_done,
                                   const RunCounts& counts,
                                   const std::function<void()>& save_state) {
    commit_in_order(store, records_done, counts, save_state, true);
}

void OwnedOutputs::commit_in_order(Store* store, std::uint64_t records_done,
                                   const RunCounts& counts, const std::function<void()>& save_state,
                                   bool finished) {
    flush();
    if (store == nullptr) return;
    if (save_state) save_state();
    if (finished)
        finish(store->checkpoints(), records_done, counts);
    else
        checkpoint(store->checkpoints(), records_done, counts);
    // The interrupted run this one resumed to standard output is done.
    if (finished && !owned() && m_checkpoint) store->checkpoints().clear_checkpoint(m_stdout_note);
    reach_commit();
    store->commit();
}

void OwnedOutputs::interrupted(Store* store, std::uint64_t records_done, const RunCounts& counts) {
    if (owned() || store == nullptr || m_stdout_note.empty() || records_done == 0) return;
    store->checkpoints().save_checkpoint(m_stdout_note, carried(records_done, counts));
    store->commit();
    m_noted_interruption = true;
}

void OwnedOutputs::add_carried(RunCounts& counts) const {
    if (!m_checkpoint) return;
    for (auto& [name, count] : counts)
        if (auto carried = m_checkpoint->counts.find(name); carried != m_checkpoint->counts.end())
            count += carried->second;
}

} // namespace idem::store
