#pragma once
// What a delivery did, read where the handler keeps it (docs/probe.md,
// "Side effects"): a query on the handler's own SQLite database, read-only;
// a GET answering a JSON count; or a command printing one. Each is the
// user's configuration; a delivery's data only ever fills a bound
// parameter, a percent-encoded URL slot or an environment variable.

#include "idem/util/time.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace idem::probe {

class EffectObserver {
public:
    virtual ~EffectObserver() = default;
    // The reading for the delivery keyed `key` whose event id is `id`: a
    // count, or (out-of-order) whatever value the query answers, as text.
    // Throws StoreError (exit 4) when it cannot be read.
    virtual std::string read(std::string_view key, std::string_view id) = 0;
    // "sqlite", "url" or "cmd", for the report.
    [[nodiscard]] virtual std::string_view kind() const = 0;

    // read() as a count: a non-negative integer, or a StoreError saying
    // what came instead.
    std::int64_t count(std::string_view key, std::string_view id);
};

// --effects-sqlite DB --effects-query SQL: one read-only statement with
// :key and/or :id; its first column of its first row (no row: 0). Throws
// UsageError when the query is not one statement that only reads.
[[nodiscard]] std::unique_ptr<EffectObserver> sqlite_observer(const std::string& path,
                                                              const std::string& query);
// --effects-url URL: {key} and {id} replaced by the percent-encoded
// values; the answer a JSON number or {"count": N}. Redirects are not
// followed; the body is read to 64 KiB. Throws UsageError for a URL that
// is not http(s).
[[nodiscard]] std::unique_ptr<EffectObserver> url_observer(const std::string& url_template,
                                                           Duration timeout);
// --effects-cmd CMD: run by /bin/sh with IDEM_KEY and IDEM_ID set, its
// standard output (64 KiB at most) a count; killed after `timeout`.
[[nodiscard]] std::unique_ptr<EffectObserver> command_observer(const std::string& command,
                                                               Duration timeout);

} // namespace idem::probe
