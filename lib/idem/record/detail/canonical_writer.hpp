#pragma once
// Internal: writes a simdjson DOM element as canonical JSON.

#include "idem/record/field_path.hpp"

#include <simdjson.h>
#include <string>
#include <vector>

namespace idem::record::detail {

void write_canonical(simdjson::dom::element element, const std::vector<const FieldPath*>& ignored,
                     std::size_t depth, std::string& out);

void write_canonical_number(simdjson::dom::element element, std::string& out);

void write_canonical_string(std::string_view text, std::string& out);

} // namespace idem::record::detail
