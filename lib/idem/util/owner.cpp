#include "idem/util/owner.hpp"

#include <chrono>
#include <fmt/format.h>
#include <unistd.h>

namespace idem {

std::string new_owner_id() {
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    auto start = std::chrono::duration_cast<std::chrono::microseconds>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count();
    return fmt::format("{}:{}:{:x}", host, ::getpid(), start);
}

} // namespace idem
