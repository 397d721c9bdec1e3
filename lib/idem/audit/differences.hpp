#pragma once
// What differs between two payloads of one group, path by path: the
// evidence that tells a retry (only volatile fields differ, and those are
// not compared) from a key reused for another intent. Pure: the payloads
// come in as the canonical JSON audit compared (what payload_hash hashed).

#include <nlohmann/json.hpp>

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace idem::audit {

// One field that differs: its dotted path ("request.id", "items[2].qty"),
// and its value in each payload as JSON (nullopt: absent there).
struct FieldDifference {
    std::string path;
    std::optional<std::string> before, after;
};

// A later payload compared with the group's first: where each was, and
// the fields that differ (at most k_differences_shown, and how many more).
struct PayloadComparison {
    std::string first_at, later_at; // "events.ndjson:1"
    std::vector<FieldDifference> fields;
    std::size_t more = 0;
};

inline constexpr std::size_t k_differences_shown = 8;

// The fields that differ between `before` and `after`, in path order:
// objects member by member, arrays element by element when their lengths
// agree (else as one value), everything else by value.
[[nodiscard]] std::vector<FieldDifference> differences(const nlohmann::json& before,
                                                       const nlohmann::json& after);

// What the report shows of a group's payloads, by the group: its kind (a
// fingerprint group or not) and its first record's position
// ("events.ndjson:1"), since a key group and a fingerprint group may start
// on one record and each compares only its own records. One comparison per
// later payload shown; none for a group whose records could not be read
// again (a file gone since, or past the first 10,000 such groups).
struct PayloadDifferences {
    std::map<std::pair<bool, std::string>, std::vector<PayloadComparison>> by_group;
    [[nodiscard]] const std::vector<PayloadComparison>* of(bool fingerprint_group,
                                                           const std::string& first_at) const {
        auto found = by_group.find({fingerprint_group, first_at});
        return found == by_group.end() ? nullptr : &found->second;
    }
};

// "request.id: "req_1" -> "req_2"", values cut to a few dozen characters.
[[nodiscard]] std::string describe_difference(const FieldDifference& difference);

} // namespace idem::audit
