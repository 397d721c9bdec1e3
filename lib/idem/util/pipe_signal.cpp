#include "idem/util/pipe_signal.hpp"

#include <ctime>
#include <pthread.h>

namespace idem {

PipeSignalHeld::PipeSignalHeld() {
    sigemptyset(&m_pipe);
    sigaddset(&m_pipe, SIGPIPE);
    m_held = pthread_sigmask(SIG_BLOCK, &m_pipe, &m_previous) == 0;
    if (!m_held) return;
    sigset_t pending;
    sigpending(&pending);
    m_was_pending = sigismember(&pending, SIGPIPE) == 1;
}

PipeSignalHeld::~PipeSignalHeld() {
    if (!m_held) return;
    if (!m_was_pending) {
        timespec no_wait{0, 0};
        while (sigtimedwait(&m_pipe, nullptr, &no_wait) == SIGPIPE) {
        }
    }
    pthread_sigmask(SIG_SETMASK, &m_previous, nullptr);
}

} // namespace idem
