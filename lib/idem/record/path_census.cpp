#include "idem/record/path_census.hpp"

#include "idem/record/parser.hpp"
#include "idem/util/text.hpp"

#include <algorithm>
#include <fmt/format.h>

namespace idem::record {

namespace {
// "Did you mean" looks at the paths of the first records only: enough to
// find what a typo meant, and bounded on a wide log.
constexpr std::uint64_t k_records_sampled = 64;
constexpr std::size_t k_paths_per_record = 512;
constexpr std::size_t k_paths_kept = 4096;
// Values remembered per value no record held yet, for the message.
constexpr std::size_t k_values_kept = 32;
constexpr std::size_t k_value_bytes_kept = 200;
} // namespace

PathCensus::PathCensus(std::vector<FieldPath> allowed_absent)
    : m_allowed_absent(std::move(allowed_absent)) {}

PathCensus::Expectation* PathCensus::find(const FieldPath& path,
                                          const std::optional<std::string>& value) {
    for (auto& expectation : m_expectations)
        if (expectation.path.text() == path.text() && expectation.value == value)
            return &expectation;
    return nullptr;
}

PathCensus::Expectation& PathCensus::add(std::string flag, const FieldPath& path, Scope scope) {
    auto& expectation = m_expectations.emplace_back();
    expectation.flag = std::move(flag);
    expectation.path = path;
    if (scope == Scope::event && path.segments().front() != "body")
        expectation.in_body = FieldPath::parse("body." + path.text());
    ++m_pending;
    return expectation;
}

void PathCensus::expect_path(std::string flag, const FieldPath& path, Scope scope) {
    if (find(path, std::nullopt)) return;
    add(std::move(flag), path, scope);
}

void PathCensus::expect_value(std::string flag, const FieldPath& path, std::string value,
                              Scope scope) {
    if (find(path, value)) return;
    add(std::move(flag), path, scope).value = std::move(value);
}

void PathCensus::observe(RecordParser& parser) {
    // Once every path and value has been seen nothing is left to judge, and
    // nothing is written: no shared counter moves on the per-record path
    // (records are counted only while something is unseen, and only then
    // does a message need the count).
    if (m_pending.load(std::memory_order_relaxed) == 0) return;
    m_records.fetch_add(1, std::memory_order_relaxed);
    {
        std::lock_guard lock(m_mutex);
        if (m_records_sampled < k_records_sampled && m_paths_seen.size() < k_paths_kept) {
            ++m_records_sampled;
            std::vector<std::string> paths;
            parser.field_paths(paths, k_paths_per_record);
            for (auto& path : paths)
                if (m_paths_seen.size() < k_paths_kept) m_paths_seen.insert(std::move(path));
        }
    }
    for (auto& expectation : m_expectations) {
        bool settled = expectation.value ? expectation.value_seen.load(std::memory_order_relaxed)
                                         : expectation.path_seen.load(std::memory_order_relaxed);
        if (settled) continue;
        auto found = parser.find(expectation.path);
        if (!found && expectation.in_body) found = parser.find(*expectation.in_body);
        if (!found) continue;
        bool first_sight = !expectation.path_seen.exchange(true);
        if (!expectation.value) {
            if (first_sight) --m_pending;
            continue;
        }
        if (found->text == *expectation.value) {
            if (!expectation.value_seen.exchange(true)) --m_pending;
            continue;
        }
        std::lock_guard lock(m_mutex);
        auto& values = expectation.values;
        if (values.size() < k_values_kept &&
            std::find(values.begin(), values.end(), found->text) == values.end())
            values.emplace_back(found->text.substr(0, k_value_bytes_kept));
    }
}

bool PathCensus::held(const FieldPath& path) const {
    return std::any_of(m_expectations.begin(), m_expectations.end(), [&](const Expectation& e) {
        return e.path.text() == path.text() && e.path_seen.load();
    });
}

std::string PathCensus::closest_to(std::string_view path) const {
    std::lock_guard lock(m_mutex);
    return closest_name(path, std::vector<std::string>(m_paths_seen.begin(), m_paths_seen.end()));
}

PathCensus::Verdict PathCensus::verdict() const {
    std::lock_guard lock(m_mutex);
    Verdict verdict;
    verdict.records = m_records.load();
    if (verdict.records == 0) return verdict;
    std::vector<std::string> known(m_paths_seen.begin(), m_paths_seen.end());
    for (const auto& expectation : m_expectations) {
        Miss miss{expectation.flag, expectation.path.text(), std::nullopt, {}, {}};
        if (!expectation.path_seen.load()) {
            bool allowed = std::any_of(
                m_allowed_absent.begin(), m_allowed_absent.end(),
                [&](const FieldPath& path) { return path.text() == expectation.path.text(); });
            if (allowed) continue;
            miss.closest = closest_name(expectation.path.text(), known);
            if (expectation.value) miss.value = expectation.value;
            verdict.absent.push_back(std::move(miss));
        } else if (expectation.value && !expectation.value_seen.load()) {
            miss.value = expectation.value;
            miss.seen = expectation.values;
            miss.closest = closest_name(*expectation.value, expectation.values);
            verdict.unmatched.push_back(std::move(miss));
        }
    }
    return verdict;
}

void PathCensus::report(io::Diagnostics& diagnostics, io::Summary& summary) const {
    if (m_expectations.empty()) return;
    auto verdict = this->verdict();
    if (verdict.records == 0) return;
    auto records = fmt::format("{} record{}", verdict.records, verdict.records == 1 ? "" : "s");
    for (const auto& miss : verdict.absent) {
        auto hint = miss.closest.empty() ? std::string()
                                         : fmt::format("; did you mean {}?", quote(miss.closest));
        diagnostics.warning({}, fmt::format("{}: {} is in none of {}{} (--allow-absent {} if it "
                                            "may be)",
                                            miss.flag, quote(miss.path), records, hint, miss.path));
    }
    for (const auto& miss : verdict.unmatched) {
        std::string seen;
        for (std::size_t i = 0; i < miss.seen.size() && i < 5; ++i)
            seen += (i ? ", " : "") + quote(miss.seen[i], 40);
        if (miss.seen.size() > 5) seen += ", ...";
        auto hint = miss.closest.empty() ? std::string()
                                         : fmt::format("; did you mean {}?", quote(miss.closest));
        diagnostics.warning({}, fmt::format("{}: none of {} has {}={} ({} holds {}){}", miss.flag,
                                            records, miss.path, quote(*miss.value), miss.path, seen,
                                            hint));
    }
    // absent_paths only when there are some (the run exits 3 then);
    // unmatched_values whenever a value was expected, for scripts.
    if (!verdict.absent.empty()) summary.counts.emplace_back("absent_paths", verdict.absent.size());
    bool values_expected = std::any_of(m_expectations.begin(), m_expectations.end(),
                                       [](const Expectation& e) { return e.value.has_value(); });
    if (values_expected) summary.counts.emplace_back("unmatched_values", verdict.unmatched.size());
}

} // namespace idem::record
