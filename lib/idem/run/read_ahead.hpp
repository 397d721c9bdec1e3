#pragma once
// Reads an input's blocks on a thread of their own, a few ahead of the
// calling thread. In a block pipeline the calling thread emits in input
// order and is the critical path; read(2)'s copy out of the page cache was
// a fifth of its time. Only for inputs that are regular files: a file never
// goes quiet, so nothing needs to wait on the wall clock for it.

#include "idem/run/input.hpp"

#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace idem::run {

class ReadAhead {
public:
    // Starts reading `input` at once; at most `depth` blocks wait unread.
    // `input` is the reader thread's until this is destroyed.
    ReadAhead(InputStream& input, std::size_t target_bytes, std::size_t depth);
    ~ReadAhead();
    ReadAhead(const ReadAhead&) = delete;
    ReadAhead& operator=(const ReadAhead&) = delete;

    // The next block, in input order; false after the last. The InputError
    // reading met is rethrown here, once every block read before it was
    // taken, as InputStream::next_block would have thrown it.
    bool next(InputBlock& block);
    // A block whose buffers the reader may fill again.
    void recycle(InputBlock&& block);

private:
    void read_all(const std::stop_token& stop);

    InputStream& m_input;
    std::size_t m_target_bytes;
    std::size_t m_depth;
    std::mutex m_mutex;
    std::condition_variable_any m_changed;
    std::deque<InputBlock> m_ready;
    std::vector<InputBlock> m_spare;
    bool m_done = false;
    std::exception_ptr m_error;
    std::jthread m_reader; // last: it starts once the rest exists
};

} // namespace idem::run
