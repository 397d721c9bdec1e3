#pragma once
// Canonical JSON, version idem-canonical/1 (docs/canonical-json.md): object
// keys sorted by their UTF-8 bytes, no insignificant whitespace, one spelling
// per number and per string, and the ignored paths removed. Two events that
// differ only in key order, whitespace, number spelling or an ignored field
// have the same canonical form.

#include "idem/record/field_path.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace idem::record {

inline constexpr std::string_view k_canonical_version = "idem-canonical/1";

// nullopt when `json` is not one valid JSON value.
[[nodiscard]] std::optional<std::string> canonical_json(std::string_view json,
                                                        const std::vector<FieldPath>& ignored = {});

} // namespace idem::record
