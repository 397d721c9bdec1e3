#pragma once
// Ctrl-C (SIGINT) or SIGTERM asking a long run to stop where it can say
// what it did: the run frame stops after the block it is routing, the
// command commits what it routed and says how to resume (docs/dedup.md,
// "Interrupted"). Only a command that looks at the request installs the
// handlers; a second signal ends the process as the default action does.

#include <atomic>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace idem {

// The signal that asked to stop (0: none). Written by the handler only.
[[nodiscard]] const std::atomic<int>& interrupt_request();

// Installs the handlers for SIGINT and SIGTERM, each for one signal: the
// next one of either is the default action again.
void stop_on_interrupt();

// Thrown by the run frame at the block boundary after a stop was asked;
// a command that catches it commits and says what it committed (`what`).
class Interrupted : public std::runtime_error {
public:
    Interrupted(int signal, const std::string& what) : std::runtime_error(what), m_signal(signal) {}
    [[nodiscard]] int signal() const { return m_signal; }

private:
    int m_signal;
};

} // namespace idem
