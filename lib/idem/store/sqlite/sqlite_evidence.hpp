#pragma once
// Internal to the SQLite store: reading dedup's fingerprint log back as
// evidence, for `audit --store`.

#include "idem/store/fingerprints.hpp"

#include <functional>
#include <sqlite3.h>
#include <string>

namespace idem::store::detail {

void read_fingerprint_records(sqlite3* db, const std::string& store_name, std::string_view scope,
                              const std::function<void(const FingerprintRecord&)>& visit);

} // namespace idem::store::detail
