#pragma once
// Who holds a lease: replay's keys, dedup's claims on Redis.

#include <string>

namespace idem {

// "host:pid:start" with the start in microseconds: unique to this process
// on this machine, and readable in a store when someone asks who holds what.
[[nodiscard]] std::string new_owner_id();

} // namespace idem
