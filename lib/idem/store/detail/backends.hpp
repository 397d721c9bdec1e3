#pragma once
// The backends open_store() chooses from (open_store.cpp).

#include "idem/store/store.hpp"

#include <memory>

namespace idem::store::detail {

[[nodiscard]] std::unique_ptr<Store> open_sqlite_store(const StoreLocation& location);
[[nodiscard]] std::unique_ptr<Store> open_redis_store(const StoreLocation& location);
[[nodiscard]] std::unique_ptr<Store> open_memory_store();

} // namespace idem::store::detail
