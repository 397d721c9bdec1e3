#pragma once
// The shape every per-record subcommand shares: blocks of whole lines are
// read (on a read-ahead thread for files, on the calling thread for pipes),
// judged on worker threads (one state object per worker: parsers and
// prepared keys are not shared), and handed back to the calling thread in
// input order, where everything with side effects (rejects, the store,
// output) happens; only a line too long to hold is streamed to the reject
// file as it is read. Memory is bounded by the blocks in flight, whatever
// the input's length.

#include "idem/run/input.hpp"
#include "idem/run/read_ahead.hpp"
#include "idem/util/errors.hpp"
#include "idem/util/ordered_workers.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace idem::run {

// A block is about this many bytes of whole lines. Each costs a handoff
// between threads, and each holds one result per record while in flight.
inline constexpr std::size_t k_block_bytes = 1 << 20;
inline constexpr std::chrono::milliseconds k_idle_interval{200};
// The ordered stage reports progress (io::Diagnostics) every this many records.
inline constexpr std::uint64_t k_progress_every = 1 << 16;

// 0 means one worker per core, at most 8; with `busy_ordered_stage`, one
// fewer (at least one), for a run whose calling thread is a core's work of
// its own (a sequencer, a state machine's judging). On 2 cores, a third
// busy thread only takes turns with the other two: `states` with two
// workers took 1.2-1.3x as long as with one (docs/states.md, "Measured").
[[nodiscard]] inline std::size_t worker_count(std::size_t requested,
                                              bool busy_ordered_stage = false) {
    if (requested > 0) return requested;
    auto cores = static_cast<std::size_t>(std::thread::hardware_concurrency());
    if (busy_ordered_stage && cores > 1) --cores;
    return std::clamp<std::size_t>(cores, 1, 8);
}

// Runs judge(block, state, result) on the workers and emit(block, result) on
// the calling thread, in input order. Results are recycled: `result` is one
// emitted before, emptied by its clear(), which keeps its capacity. (Freed on
// the emitting thread, they made glibc trim the workers' arenas, and the next
// blocks faulted the pages back in: half of a dedup run's page faults.)
//
// When the input fails (unreadable, or a HAR file that is not one), what was
// read before is still judged and emitted, then the InputError propagates;
// should emit() throw for an earlier record meanwhile (--strict), that error,
// first in input order, is the one raised.
//
// `idle`, when given, runs on the calling thread whenever live input has gone
// quiet and everything read so far is emitted, then every `idle_interval`
// until more arrives: the time to flush output and act on the wall clock.
// `block_bytes` is what each block is filled to.
//
// With `caller_helps`, the last state is the calling thread's: waiting for
// the oldest block, it judges one not yet started instead (OrderedWorkers'
// caller_index), and the others run on workers. For a run whose ordered
// stage is a core's work but idles while its one worker parses.
template <typename State, typename Result>
void run_block_pipeline(InputStream& input, std::vector<std::unique_ptr<State>>& states,
                        const std::function<void(const InputBlock&, State&, Result&)>& judge,
                        const std::function<void(const InputBlock&, Result&)>& emit,
                        const std::function<void()>& idle = {},
                        std::chrono::milliseconds idle_interval = k_idle_interval,
                        std::size_t block_bytes = k_block_bytes, bool caller_helps = false) {
    std::mutex spare_results_mutex;
    std::vector<Result> spare_results;
    auto spare_result = [&] {
        Result result;
        std::lock_guard lock(spare_results_mutex);
        if (!spare_results.empty()) {
            result = std::move(spare_results.back());
            spare_results.pop_back();
        }
        return result;
    };
    auto judge_on_worker = [&](InputBlock& block, std::size_t worker) {
        auto result = spare_result();
        result.clear();
        judge(block, *states[worker], result);
        return result;
    };
    caller_helps = caller_helps && states.size() > 1;
    auto workers = caller_helps ? states.size() - 1 : states.size();
    OrderedWorkers<InputBlock, Result> pool(
        workers, 2 * states.size() + 1, judge_on_worker,
        caller_helps ? std::optional<std::size_t>(states.size() - 1) : std::nullopt);
    // Files are read ahead on a thread of their own (read_ahead.hpp); live
    // input is read here, where going quiet can be noticed.
    std::optional<ReadAhead> ahead;
    // Eight blocks more than the workers take: a decompressing reader, on a
    // core it shares with them, runs ahead while it has one (a .zst run
    // 1.62x the plain file's wall time became 1.43x; sixteen held the
    // plain file's blocks past the cache and slowed it by a quarter).
    constexpr std::size_t k_blocks_ahead = 8;
    if (input.total_bytes()) ahead.emplace(input, block_bytes, states.size() + k_blocks_ahead);
    // Blocks are recycled so their buffers are allocated once.
    std::vector<InputBlock> spare;
    auto next_block = [&](InputBlock& block) {
        if (ahead) return ahead->next(block);
        if (!spare.empty()) {
            block = std::move(spare.back());
            spare.pop_back();
        }
        return input.next_block(block, block_bytes);
    };
    auto finish = [&](bool wait) {
        auto finished = pool.next(wait);
        if (!finished) return false;
        emit(finished->job, finished->output);
        {
            std::lock_guard lock(spare_results_mutex);
            spare_results.push_back(std::move(finished->output));
        }
        if (ahead)
            ahead->recycle(std::move(finished->job));
        else
            spare.push_back(std::move(finished->job));
        return true;
    };
    try {
        while (true) {
            while (pool.full())
                finish(true);
            InputBlock block;
            if (!next_block(block)) break;
            pool.submit(std::move(block));
            while (finish(false)) {
            }
            // Live input gone quiet: finish what was read before waiting, so
            // records do not sit behind a read that may block for hours.
            if (!ahead && !input.ready()) {
                while (finish(true)) {
                }
                if (idle) {
                    idle();
                    while (!input.ready(idle_interval))
                        idle();
                }
            }
        }
    } catch (const InputError&) {
        while (finish(true)) {
        }
        throw;
    }
    while (finish(true)) {
    }
}

} // namespace idem::run
