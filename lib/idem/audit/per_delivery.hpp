#pragma once
// Fields that belong to a delivery, not to the intent it carries, learned
// from the log itself (docs/audit.md, "Per-delivery fields"): an attempt
// id, a worker's or a host's name, the id of what the delivery created.
// Each differs between the copies of a retried group without the intent
// changing; compared as payload, every retry would read as key-reuse.
//
// A field is per-delivery when it differs between the copies of more than
// half of the retried groups, and of at least k_fewest_groups of them:
// a business field that differs under one key (an amount) does so in the
// groups of the incident, not in nearly every retry. A log of fewer
// retried groups cannot tell so by counting: there a field is learned
// when, besides, each of its values is a generated identifier seen once
// (a UUID per delivery), which no business field under a reused key is
// (an order's id "ord_2", an amount). The report names what was learned,
// so a reader sees a business field there and gives --no-learn-volatile.

#include "idem/audit/report.hpp"
#include "idem/audit/run.hpp"
#include "idem/io/diagnostics.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace idem::audit {

// What the groups say of their payloads before any group is explained: the
// groups fields are learned from (key groups when --key is given, else
// intent groups) by their first record's place in the input, and every
// group whose copies carry more than one payload, with the first record of
// each payload.
struct PayloadSurvey {
    std::vector<std::uint64_t> retried; // first records of the groups learned from
    struct Mixed {
        std::uint64_t first = 0;   // the group's first record, in input order
        bool learned_from = false; // of the kind fields are learned from
        // The first record of each payload, the group's first one first.
        std::vector<std::pair<std::uint64_t, Findings::Position>> payloads;
    };
    std::vector<Mixed> mixed;
};

// What one record tells survey_groups().
struct SurveyedRecord {
    std::uint64_t seq = 0; // its place in the input
    std::uint64_t payload = 0;
    Findings::Position position;
};

// Adds `groups` (each the indexes of its records, two or more) to
// `survey`; record_of(i) tells of record i. `learned_from`: they are of the
// kind fields are learned from.
template <typename RecordOf>
void survey_groups(const std::vector<std::vector<std::size_t>>& groups, bool learned_from,
                   RecordOf&& record_of, PayloadSurvey& survey) {
    std::vector<SurveyedRecord> ordered;
    for (const auto& records : groups) {
        // Input order: the first record of each payload is its earliest.
        ordered.clear();
        for (auto i : records)
            ordered.push_back(record_of(i));
        std::sort(ordered.begin(), ordered.end(),
                  [](const auto& a, const auto& b) { return a.seq < b.seq; });
        if (learned_from) survey.retried.push_back(ordered.front().seq);
        PayloadSurvey::Mixed mixed{ordered.front().seq, learned_from, {}};
        for (const auto& one : ordered)
            if (std::none_of(mixed.payloads.begin(), mixed.payloads.end(),
                             [&](const auto& seen) { return seen.first == one.payload; }))
                mixed.payloads.emplace_back(one.payload, one.position);
        if (mixed.payloads.size() > 1) survey.mixed.push_back(std::move(mixed));
    }
}

struct PerDelivery {
    // The fields learned, as paths ("attempt_id", "meta.worker"), and the
    // retried groups they were learned from.
    std::vector<std::string> fields;
    std::uint64_t groups_judged = 0;
    // A payload (as read) to the payload without those fields: only the
    // payloads of groups that mix them are here, the rest stay as read.
    std::unordered_map<std::uint64_t, std::uint64_t> classes;
    // The payloads read to learn from, by position, as read, when no field
    // was learned (the groups that mix payloads are then those read):
    // "What differs" reads only the others again.
    std::map<std::string, nlohmann::json> payloads_read;

    [[nodiscard]] std::uint64_t class_of(std::uint64_t payload) const {
        auto found = classes.find(payload);
        return found == classes.end() ? payload : found->second;
    }
    // Whether `path` (as differences() writes it) is or lies under a
    // learned field.
    [[nodiscard]] bool covers(std::string_view path) const;
};

inline constexpr std::uint64_t k_fewest_groups = 3;
// The groups that mix payloads whose payloads are read to learn from, the
// earliest first (their JSON is held while learning): the rest are only
// given their payloads without the fields learned.
inline constexpr std::size_t k_groups_learned_from = 5'000;

// Learns from the payloads of `survey`'s groups, read again from the
// inputs (`inputs` names them by Findings::Position::input). Nothing is
// learned with --payload (it names what counts) or --no-learn-volatile.
[[nodiscard]] PerDelivery learn_per_delivery(const AuditRunOptions& options,
                                             const PayloadSurvey& survey,
                                             const std::vector<std::string>& inputs,
                                             io::Diagnostics& diagnostics);

} // namespace idem::audit
