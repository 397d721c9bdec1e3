#pragma once
// Holds SIGPIPE back on this thread for a scope: a write to a pipe or socket
// whose reader went away then fails with EPIPE instead of killing the
// process, and a SIGPIPE the scope raised is taken off the queue before the
// thread's mask is restored. Used around stderr writes and hiredis calls
// (which write with write(2)).

#include <csignal>

namespace idem {

class PipeSignalHeld {
public:
    PipeSignalHeld();
    ~PipeSignalHeld();
    PipeSignalHeld(const PipeSignalHeld&) = delete;
    PipeSignalHeld& operator=(const PipeSignalHeld&) = delete;

private:
    sigset_t m_pipe{};
    sigset_t m_previous{};
    bool m_held = false;
    bool m_was_pending = false; // raised before the scope: left for its owner
};

} // namespace idem
