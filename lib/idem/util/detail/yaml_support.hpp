#pragma once
// Reading YAML (and JSON, which is YAML) configuration files: merge's rules
// and states' machines. The one place yaml-cpp is used; every error names
// the file, line and column (UsageError, exit 2).

#include "idem/util/errors.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <yaml-cpp/yaml.h>

namespace idem::detail {

// A configuration file is small: past this it is refused, never read whole
// (a --rules /dev/zero must not exhaust memory).
inline constexpr std::uint64_t k_max_config_file_bytes = 4ULL << 20;

// The whole file, or UsageError: "cannot read <what> file 'PATH'", "... is
// a directory", "... is larger than 4 MiB".
[[nodiscard]] std::string read_config_file(const std::string& path, std::string_view what);

// The document in `text`; `name` stands for the file in messages. A key
// given twice in one mapping is refused at its second place, as an unknown
// key is: which of the two would win differs between readers; a key that
// is not a plain value (null, a list, a map) is refused at its place.
[[nodiscard]] YAML::Node load_yaml(std::string_view text, const std::string& name);

// "FILE:LINE:COL: message" (or "FILE: message" for a node with no place).
[[noreturn]] void fail_at(const std::string& file, const YAML::Node& node,
                          const std::string& message);

// A yaml-cpp exception (a conversion a parser asked of a node of another
// kind) as the UsageError any other mistake in the file is: at its place.
[[nodiscard]] UsageError yaml_error(const std::string& file, const YAML::Exception& error);

// Runs `interpret` over a loaded document: no yaml-cpp exception leaves it
// (it would reach the user as an internal error), each becomes yaml_error.
template <typename Interpret>
auto interpret_yaml(const std::string& file, Interpret&& interpret) -> decltype(interpret()) {
    try {
        return interpret();
    } catch (const YAML::Exception& error) {
        throw yaml_error(file, error);
    }
}

// A single, non-empty value, or fail_at naming `key`.
[[nodiscard]] std::string scalar(const std::string& file, const YAML::Node& node,
                                 std::string_view key);

} // namespace idem::detail
