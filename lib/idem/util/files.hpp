#pragma once
// Reading a small file a user names (a rules file, a machine, a provider
// spec, a secret file) whole, within a bound.

#include <cstdint>
#include <string>
#include <string_view>

namespace idem {

// The whole of `path`, or UsageError naming `what` ("rules file",
// "--secret-file") and the path: unreadable, a directory, or larger than
// `max_bytes` (the file is never read past it, so /dev/zero is refused too).
[[nodiscard]] std::string read_bounded_file(const std::string& path, std::string_view what,
                                            std::uint64_t max_bytes);

} // namespace idem
