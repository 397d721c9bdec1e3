#pragma once
// A hash map from strings, looked up by string_view without building a
// string. Shared by every table keyed by a record's text (sequencer
// partitions, states' entities, merge's windows, audit's ids).

#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace idem {

// Deliberately not noexcept: libstdc++ stores each node's hash code only
// when the hasher may throw or is marked slow. Without the stored code,
// every collision step in a lookup re-hashes the node's whole key, which
// costs a third of `idem states`' time at 100k entities (measured with perf).
struct TransparentStringHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view text) const { // NOLINT(performance-noexcept-*)
        return std::hash<std::string_view>{}(text);
    }
};

template <typename Value>
using StringMap = std::unordered_map<std::string, Value, TransparentStringHash, std::equal_to<>>;

} // namespace idem
