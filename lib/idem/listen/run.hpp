#pragma once
// `idem listen`: an HTTP receiver that captures every request as a delivery
// envelope, optionally verifying signatures, dropping duplicates, forwarding
// to an upstream, or playing a flaky downstream (docs/listen.md). Called by
// the CLI with everything already decided.

#include "idem/io/diagnostics.hpp"
#include "idem/io/summary.hpp"
#include "idem/listen/flaky.hpp"
#include "idem/net/http_client.hpp"
#include "idem/net/http_server.hpp"
#include "idem/record/key.hpp"
#include "idem/verify/config.hpp"

#include <atomic>
#include <functional>
#include <optional>
#include <string>

namespace idem::listen {

// --dedup: duplicates are answered 2xx and not passed on; the store and
// fingerprints are the ones `idem dedup` uses.
struct LiveDedup {
    record::KeySpec key;
    std::string store_uri;
    std::string scope = "default";
    Duration ttl = std::chrono::hours(24);
    // When the store fails: answer 503 until it is back (the default), or
    // judge in this process, mark the delivery degraded, and write what was
    // claimed back to the store once it answers again.
    enum class OnStoreError { unavailable, local };
    OnStoreError on_store_error = OnStoreError::unavailable;
};

struct ListenOptions {
    std::string bind_address = "127.0.0.1";
    int port = 8080;
    std::string out_path = "-";
    net::ServerLimits limits;
    std::optional<verify::VerifyConfig> verify; // set: 401 for invalid signatures
    FlakyPlan flaky;
    std::optional<LiveDedup> dedup;
    // Send the reason a signature failed in the 401 body (else only "invalid
    // signature"; the reason is always in the capture and on stderr).
    bool tell_sender_why = false;
    std::string forward_to; // "" : answer here
    net::Timeouts forward_timeouts;
    // A Prometheus endpoint on its own socket (never the capture's):
    // GET /metrics. Port -1: none; 0: any free port.
    std::string metrics_address = "127.0.0.1";
    int metrics_port = -1;
    // W3C trace context: a delivery without a valid traceparent gets a new
    // trace (else it has none in _idem.trace and none is sent on).
    bool trace_ids = false;
};

struct ListenResult {
    io::Summary summary;
    std::uint64_t failed_writes = 0; // requests answered 503 because the capture failed
};

// Serves until `stop` becomes true (the CLI sets it on SIGINT/SIGTERM),
// then finishes requests in flight and syncs the capture. `on_listening`
// gets the bound port once requests are accepted. Throws NetworkError
// (cannot bind), FileSystemError (cannot open or sync the capture).
// `on_metrics` gets the metrics endpoint's port once it serves.
ListenResult run_listen(const ListenOptions& options, const std::atomic<bool>& stop,
                        io::Diagnostics& diagnostics,
                        const std::function<void(int port)>& on_listening,
                        const std::function<void(int port)>& on_metrics = {});

} // namespace idem::listen
