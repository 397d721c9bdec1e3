// What other commands kept that audit reads beside the records: replay's
// ledger, verify's verdicts, dedup's evidence (detail/kept_stores.hpp).

#include "idem/audit/detail/kept_stores.hpp"

#include "idem/record/annotate.hpp"
#include "idem/store/fingerprints.hpp"
#include "idem/store/replay_ledger.hpp"
#include "idem/store/store.hpp"
#include "idem/store/verdicts.hpp"
#include "idem/util/encoding.hpp"
#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"

#include <fmt/format.h>

namespace idem::audit::detail {

namespace {

// A store another command wrote to: never :memory:, which keeps nothing.
std::unique_ptr<store::Store> open_kept_store(const std::string& uri, std::string_view flag,
                                              std::string_view writer) {
    auto location = store::parse_store_uri(uri);
    if (location.kind == store::StoreKind::memory)
        throw UsageError(fmt::format("{} :memory: keeps nothing between runs: give the SQLite "
                                     "file or redis:// URI that {} used",
                                     flag, writer));
    return store::open_store(location);
}

} // namespace

// What replay kept per key, by the key as reports show it: a one-field
// key's JSON string (a key group of several fields is never replay's).
ReplayLedger read_replay_ledger(const AuditRunOptions& options, io::Diagnostics& diagnostics) {
    ReplayLedger replayed;
    if (options.replay_ledger_uri.empty()) return replayed;
    auto store = open_kept_store(options.replay_ledger_uri, "--replay-ledger", "replay");
    store->replay_ledger().for_each_replay_entry(
        options.replay_scope, [&](const store::ReplayEntry& entry) {
            std::string label;
            record::append_json_string(label, entry.key);
            replayed.insert_or_assign(std::move(label), entry);
        });
    if (replayed.empty())
        diagnostics.warning({options.replay_ledger_uri, 0, 0, 0},
                            fmt::format("the replay ledger has no key under scope {}: "
                                        "replay's scope is 'replay:' and its --to URL",
                                        quote(options.replay_scope)));
    return replayed;
}

// What verify kept, by "file:line" as the report names records.
KeptVerdicts read_verdicts(const AuditRunOptions& options, io::Diagnostics& diagnostics) {
    KeptVerdicts verdicts;
    if (options.verdicts_uri.empty()) return verdicts;
    auto store = open_kept_store(options.verdicts_uri, "--verdicts", "verify --keep-verdicts");
    store->verdicts().for_each_verdict(
        store::k_verdict_scope, [&](const store::VerdictRecord& kept) {
            verdicts.insert_or_assign(fmt::format("{}:{}", kept.source, kept.line),
                                      KeptVerdict{kept.valid, kept.reason});
        });
    if (verdicts.empty())
        diagnostics.warning({options.verdicts_uri, 0, 0, 0},
                            "the store holds no verdict: run idem verify with "
                            "--keep-verdicts and this --store");
    return verdicts;
}

// Every copy dedup recorded, first copies and repeats, as records.
void read_dedup_evidence(const AuditRunOptions& options, io::Diagnostics& diagnostics,
                         const run::RowHandler& take_row) {
    auto store = open_kept_store(options.store_uri, "--store", "dedup");
    std::string json;
    std::uint64_t not_kept = 0, events_not_kept = 0;
    store->evidence().for_each_fingerprint_record(
        options.store_scope, [&](const store::FingerprintRecord& record) {
            if (record.copies_not_kept) {
                not_kept += record.copies_not_kept;
                ++events_not_kept;
            }
            json.assign(R"({"fingerprint":")");
            json += hex_encode(
                std::string_view(reinterpret_cast<const char*>(record.fingerprint.data()),
                                 record.fingerprint.size()));
            json += R"(","time":")";
            json += format_rfc3339(record.event_time);
            json += R"(","source":)";
            record::append_json_string(json, record.source);
            json += '}';
            take_row(json, {record.source, false, record.line});
        });
    if (not_kept)
        diagnostics.warning(
            {options.store_uri, 0, 0, 0},
            fmt::format("{} more copies of {} events were counted by dedup but not kept as "
                        "evidence (the store keeps the first repeats of an event and its "
                        "latest copy): those groups are larger than shown",
                        not_kept, events_not_kept));
}

} // namespace idem::audit::detail
