#pragma once
// Internal to audit: the grouping both paths share, the one in memory and
// the one over spilled partitions (spill.cpp).

#include "idem/audit/explain.hpp"

#include "idem/util/huge_pages.hpp"
#include "idem/util/string_map.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>
#include <xxhash.h>

namespace idem::audit::detail {

// Ids by distinct text for `count` texts (text_at(i)), 1 and up in order
// of first appearance (0: an empty text, absent), in `ids[i]`; returns how
// many distinct texts there are. Open addressing on the texts' hashes, made
// here into `hashes`: sorting the records by hash, as this did, was a
// tenth of grouping a spilled partition. `hashes` and `firsts` (the table)
// are the caller's, kept for its next call.
template <typename TextAt>
std::uint32_t assign_text_ids(std::size_t count, TextAt&& text_at,
                              HugeVector<std::uint64_t>& hashes, std::vector<std::uint32_t>& ids,
                              std::vector<std::uint32_t>& firsts) {
    hashes.resize(count);
    for (std::size_t i = 0; i < count; ++i) {
        auto text = text_at(i);
        hashes[i] = text.empty() ? 0 : XXH3_64bits(text.data(), text.size());
    }
    ids.assign(count, 0);
    auto capacity = std::bit_ceil(std::max<std::size_t>(16, 2 * count));
    firsts.assign(capacity, 0); // a text's first index + 1
    std::uint32_t id = 0;
    for (std::size_t i = 0; i < count; ++i) {
        auto text = text_at(i);
        if (text.empty()) continue;
        auto hash = hashes[i];
        for (auto slot = hash & (capacity - 1);; slot = (slot + 1) & (capacity - 1)) {
            auto first = firsts[slot];
            if (first == 0) {
                firsts[slot] = static_cast<std::uint32_t>(i + 1);
                ids[i] = ++id;
                break;
            }
            if (hashes[first - 1] == hash && text_at(first - 1) == text) {
                ids[i] = ids[first - 1];
                break;
            }
        }
    }
    return id;
}

// One text per record (empty: absent), back to back: no allocation per
// record, and ids by distinct text only once the input is read (a hash
// map of a million strings costs more than the rest of the run).
class TextColumn {
public:
    void add(std::string_view text) {
        m_at.push_back({m_bytes.size(), static_cast<std::uint32_t>(text.size())});
        m_bytes.append(text);
    }
    // Room for `records` texts of `bytes` in all, before the first add().
    void reserve(std::size_t records, std::size_t bytes) {
        reserve_huge(m_at, records);
        reserve_huge(m_hashes, records);
        m_bytes.reserve(bytes);
        advise_huge_pages(m_bytes.data(), m_bytes.capacity());
    }
    [[nodiscard]] std::string_view text(std::size_t record) const {
        return std::string_view(m_bytes).substr(m_at[record].offset, m_at[record].size);
    }
    // Ids by distinct text, 1 and up in order of first appearance (0:
    // absent), in `ids[record]`; returns how many distinct texts there are.
    std::uint32_t assign_ids(std::vector<std::uint32_t>& ids) {
        return assign_text_ids(
            m_at.size(), [&](std::size_t i) { return text(i); }, m_hashes, ids, m_firsts);
    }

private:
    struct Span {
        std::uint64_t offset;
        std::uint32_t size;
    };
    std::string m_bytes;
    HugeVector<Span> m_at;
    HugeVector<std::uint64_t> m_hashes; // assign_ids' hashes and table
    std::vector<std::uint32_t> m_firsts;
};

// Strings to small ids; id 0 is "" (absent). For sources: there are few.
class Interner {
public:
    Interner() { m_values.emplace_back(); }
    // Small enough to be inlined where it is called, three times a record:
    // most records have no source, endpoint or subscription.
    std::uint32_t intern(std::string_view value) { return value.empty() ? 0 : find_or_add(value); }
    [[nodiscard]] std::vector<std::string>& values() { return m_values; }

private:
    std::uint32_t find_or_add(std::string_view value) {
        if (auto found = m_ids.find(value); found != m_ids.end()) return found->second;
        auto id = static_cast<std::uint32_t>(m_values.size());
        m_ids.emplace(std::string(value), id);
        m_values.emplace_back(value);
        return id;
    }

    StringMap<std::uint32_t> m_ids;
    std::vector<std::string> m_values;
};

// The records of each id that has two or more, in input order: record i
// has id_of(i) (0: none).
template <typename IdOf>
std::vector<std::vector<std::size_t>> members_of(std::size_t count, IdOf&& id_of) {
    std::uint32_t most = 0;
    for (std::size_t i = 0; i < count; ++i)
        most = std::max<std::uint32_t>(most, id_of(i));
    std::vector<std::uint32_t> counts(std::size_t{most} + 1, 0);
    for (std::size_t i = 0; i < count; ++i)
        ++counts[id_of(i)];
    std::vector<std::uint32_t> slot(std::size_t{most} + 1, 0);
    std::vector<std::vector<std::size_t>> members;
    for (std::uint32_t id = 1; id <= most; ++id)
        if (counts[id] > 1) {
            slot[id] = static_cast<std::uint32_t>(members.size() + 1);
            members.emplace_back().reserve(counts[id]);
        }
    for (std::size_t i = 0; i < count; ++i)
        if (auto at = slot[id_of(i)]) members[at - 1].push_back(i);
    return members;
}

inline std::vector<std::vector<std::size_t>> members_by(const std::vector<Attempt>& attempts,
                                                        std::uint32_t Attempt::*field) {
    return members_of(attempts.size(), [&](std::size_t i) { return attempts[i].*field; });
}

// One intent is one fingerprint within a window (docs/audit.md, "The
// intent window"): the same user filing the same kind of ticket two days
// apart is two intents. Each id's records in time order, a record `window`
// or more after the first record of its window starts another window,
// given a new id past `distinct`; records without a time stay in the first.
// Returns how many ids there are now. `ids[i]` is record i's (0: none).
template <typename TimeOf>
std::uint32_t split_by_window(std::vector<std::uint32_t>& ids, std::uint32_t distinct,
                              TimeOf&& time_of, Duration window) {
    auto groups = members_of(ids.size(), [&](std::size_t i) { return ids[i]; });
    for (auto& members : groups) {
        std::stable_sort(members.begin(), members.end(), [&](std::size_t a, std::size_t b) {
            std::optional<Timestamp> left = time_of(a), right = time_of(b);
            if (left && right) return *left < *right;
            return !left && right.has_value(); // untimed first: they join the first window
        });
        std::optional<Timestamp> start;
        std::uint32_t id = 0;
        for (auto i : members) {
            std::optional<Timestamp> at = time_of(i);
            if (!at) continue;
            if (!start) {
                start = at;
                id = ids[i];
                continue;
            }
            if (*at - *start >= window) {
                start = at;
                id = ++distinct;
            }
            ids[i] = id;
        }
    }
    return distinct;
}

// How many distinct keys and fingerprints number_texts found.
struct DistinctTexts {
    std::uint32_t keys = 0;
    std::uint32_t fingerprints = 0;
};

// Gives each attempt the ids of its key and fingerprint texts (record i's
// are keys.text(i) and fingerprints.text(i); 0: absent).
inline DistinctTexts number_texts(TextColumn& keys, TextColumn& fingerprints,
                                  std::vector<Attempt>& attempts) {
    std::vector<std::uint32_t> ids;
    DistinctTexts distinct;
    distinct.keys = keys.assign_ids(ids);
    for (std::size_t i = 0; i < attempts.size(); ++i)
        attempts[i].key = ids[i];
    distinct.fingerprints = fingerprints.assign_ids(ids);
    for (std::size_t i = 0; i < attempts.size(); ++i)
        attempts[i].fingerprint = ids[i];
    return distinct;
}

// Explains the groups of `attempts` of one kind, handing each to `found`:
// every key shared by two records or more; every fingerprint shared by
// two or more under more than one key (one key's worth is that key's
// group already), or under any keys when none were given.
template <typename Found>
void explain_groups(GroupKind kind, const std::vector<Attempt>& attempts, bool keys_given,
                    const ExplainOptions& options, Found&& found) {
    auto field = kind == GroupKind::key ? &Attempt::key : &Attempt::fingerprint;
    for (auto& members : members_by(attempts, field)) {
        if (kind == GroupKind::fingerprint && keys_given) {
            auto first_key = attempts[members.front()].key;
            bool several_keys = std::any_of(members.begin(), members.end(), [&](std::size_t i) {
                return attempts[i].key != first_key;
            });
            if (!several_keys) continue;
        }
        found(explain(kind, std::move(members), attempts, options));
    }
}

// What orders a group in the report: how many records, its first record's
// place in the input, and its kind.
struct GroupRank {
    std::uint64_t records;
    std::uint64_t first;
    GroupKind kind;
};

// Worst first: most records, then earliest, then a key group before the
// fingerprint group that starts with the same record. A total order (a
// record is the first of one group of each kind), so the report does not
// depend on the order groups were found in; the in-memory and the spilled
// path both order by it.
inline bool worse_first(const GroupRank& a, const GroupRank& b) {
    if (a.records != b.records) return a.records > b.records;
    if (a.first != b.first) return a.first < b.first;
    return a.kind == GroupKind::key && b.kind == GroupKind::fingerprint;
}

inline void sort_worst_first(std::vector<Explanation>& groups) {
    auto rank = [](const Explanation& group) {
        return GroupRank{group.records.size(), group.records.front(), group.kind};
    };
    std::sort(groups.begin(), groups.end(), [&](const Explanation& a, const Explanation& b) {
        return worse_first(rank(a), rank(b));
    });
}

} // namespace idem::audit::detail
