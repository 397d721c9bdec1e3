#include "idem/util/interrupt.hpp"

#include <csignal>

namespace idem {

namespace {

std::atomic<int> g_request{0}; // a signal handler can reach nothing else
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void note_interrupt(int signal) {
    g_request.store(signal, std::memory_order_relaxed);
}

} // namespace

const std::atomic<int>& interrupt_request() {
    return g_request;
}

void stop_on_interrupt() {
    struct sigaction action {};
    action.sa_handler = note_interrupt;
    sigemptyset(&action.sa_mask);
    action.sa_flags = static_cast<int>(static_cast<unsigned>(SA_RESETHAND) | SA_RESTART);
    sigaction(SIGINT, &action, nullptr);
    sigaction(SIGTERM, &action, nullptr);
}

} // namespace idem
