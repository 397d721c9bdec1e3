#pragma once
// Internal to audit: the words its reports share (table, Markdown, HTML).

#include "idem/audit/report.hpp"

#include <optional>
#include <string>
#include <vector>

namespace idem::audit::detail {

[[nodiscard]] double seconds(Duration duration);
// "6m04s", "1.5s", "24h": short, for tables and sentences.
[[nodiscard]] std::string short_duration(Duration duration);
// Each position as positions_text() names it.
[[nodiscard]] std::vector<std::string> position_names(const Findings& findings,
                                                      const std::vector<std::string>& positions);
// "line 3, line 9" when the run read one input; "day/a.ndjson:3,
// day/b.ndjson:9" (each as the run named its file) when it read several,
// so a record is never named without its file.
[[nodiscard]] std::string positions_text(const Findings& findings,
                                         const std::vector<std::string>& positions);
[[nodiscard]] std::string gap_list(const std::vector<Duration>& gaps, std::size_t limit = 8);
// A key or fingerprint for a person: a lone string without its quotes.
[[nodiscard]] std::string plain(const std::string& json);
// "key evt_1Q77", "intent [\"u_1042\",\"login_timeout\"]".
[[nodiscard]] std::string group_label(const Findings& findings, const Explanation& group);
// One sentence for a cause, from its evidence.
[[nodiscard]] std::string describe(const Findings& findings, const Explanation& group,
                                   const Evidence& evidence);
[[nodiscard]] std::string cause_list(const Explanation& group);
// "completed after 3 attempts (last status 201, 12 ms)".
[[nodiscard]] std::string describe_replay(const store::ReplayEntry& entry);
// "2 valid, 1 invalid (line 9: replayed: ...)"; nullopt when verify kept no
// verdict for any of the group's records.
// "line 5 against line 1: request.id: "req_0a" -> "req_0b"": one line per
// later payload of a group that mixes them, when its records were read again.
[[nodiscard]] std::vector<std::string> describe_differences(const Findings& findings,
                                                            const Explanation& group);
[[nodiscard]] std::optional<std::string> describe_verdicts(const Findings& findings,
                                                           const Explanation& group);
[[nodiscard]] std::string span_of(const Explanation& group);
// "treated as per-delivery: attempt_id, worker (...)": the fields learned
// from the log (per_delivery.hpp); nullopt when none was.
[[nodiscard]] std::optional<std::string> describe_per_delivery(const FindingsSummary& summary);
// "intents: one fingerprint within 24h of its first record (--window)";
// nullopt without --fingerprint.
[[nodiscard]] std::optional<std::string> describe_intent_window(const FindingsSummary& summary);

} // namespace idem::audit::detail
