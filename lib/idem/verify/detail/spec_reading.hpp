#pragma once
// Internal to provider_spec.cpp: what reading a provider file's fields
// shares, and the reading of its message template (provider_message_spec.cpp).

#include "idem/verify/config.hpp"

#include <string>
#include <string_view>
#include <yaml-cpp/yaml.h>

namespace idem::verify::detail {

// "a.b.c": member names, none empty, no braces.
[[nodiscard]] bool is_dotted_path(std::string_view path);
// Letters, digits, '-' and '_'.
[[nodiscard]] bool is_header_name(std::string_view name);
// Lowercase letters, digits and '_' (a --param NAME).
[[nodiscard]] bool is_param_name(std::string_view name);
// The header name `node` holds; refused where it is otherwise.
[[nodiscard]] std::string header_name(const std::string& file, const YAML::Node& node,
                                      std::string_view key);

// `message`: the template, its placeholders checked and the values they
// need ({json:...}, {param:...}, {header:...}, {query:...}) noted on `spec`.
void read_message(const std::string& file, const YAML::Node& node, ProviderSpec& spec);

} // namespace idem::verify::detail
