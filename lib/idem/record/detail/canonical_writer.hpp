#pragma once
// Internal: writes a simdjson DOM element as canonical JSON.

#include "idem/record/detail/ignored_names.hpp"
#include "idem/record/field_path.hpp"

#include <simdjson.h>
#include <string>
#include <vector>

namespace idem::record::detail {

// `names`: what IgnoredNames(ignored, depth) would be, made ready by the caller.
void write_canonical(simdjson::dom::element element, const std::vector<const FieldPath*>& ignored,
                     std::size_t depth, std::string& out, const IgnoredNames* names = nullptr);

void write_canonical_number(simdjson::dom::element element, std::string& out);

void write_canonical_string(std::string_view text, std::string& out);

// A 64-bit hash of the canonical form's structure, computed from the DOM
// without writing it out: equal canonical forms hash equal. Object members
// are combined in any order (a sum), so no sort is needed; the one
// difference from comparing canonical text is that an object repeating a
// key in two orders hashes as one.
[[nodiscard]] std::uint64_t hash_canonical(simdjson::dom::element element,
                                           const std::vector<const FieldPath*>& ignored,
                                           std::size_t depth, const IgnoredNames* names = nullptr);

} // namespace idem::record::detail
