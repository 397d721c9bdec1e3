#pragma once
// Internal to listen: what the handlers count, and /metrics (--metrics-listen)
// rendered from it for Prometheus or OpenMetrics.

#include "idem/net/http_server.hpp"
#include "idem/util/time.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <iterator>

namespace idem::listen::detail {

struct Counters {
    std::atomic<std::uint64_t> requests{0};
    std::atomic<std::uint64_t> captured{0};
    std::atomic<std::uint64_t> captured_bytes{0};
    std::atomic<std::uint64_t> failed_writes{0};
    std::atomic<std::uint64_t> answered_2xx{0};
    std::atomic<std::uint64_t> answered_other{0};
    std::atomic<std::uint64_t> invalid{0};
    std::atomic<std::uint64_t> duplicates{0};
    std::atomic<std::uint64_t> dropped{0};
    std::atomic<std::uint64_t> refused{0};
    std::atomic<std::uint64_t> store_unavailable{0}; // answered 503: the dedup store failed
    std::atomic<std::uint64_t> degraded{0};          // judged in this process (local)
    // --forward-to: what the upstream did, by class.
    std::atomic<std::uint64_t> forwarded{0}; // the upstream answered (any final status)
    std::atomic<std::uint64_t> upstream_2xx{0}, upstream_3xx{0}, upstream_4xx{0}, upstream_5xx{0};
    std::atomic<std::uint64_t> upstream_not_final{0}; // a 1xx or out-of-range status: 502
    std::atomic<std::uint64_t> upstream_not_sent{0};  // no connection, or refused: 502
    std::atomic<std::uint64_t> upstream_lost{0};      // sent, no answer (a timeout): 502
    std::atomic<std::uint64_t> traced{0};             // deliveries with a trace in _idem.trace
    std::atomic<std::uint64_t> traces_started{0};     // ... of which listen started (--trace-ids)
    // How long each request took to answer, from its first byte, in
    // cumulative buckets (k_latency_bounds), and their sum in microseconds.
    static constexpr double k_latency_bounds[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                  0.25,  0.5,    1,     2.5,  5,     10};
    static constexpr std::size_t k_buckets = std::size(k_latency_bounds) + 1;
    std::atomic<std::uint64_t> latency[k_buckets]{};
    std::atomic<std::uint64_t> latency_sum_us{0};

    void observe_latency(Duration took) {
        auto seconds = std::chrono::duration<double>(took).count();
        std::size_t bucket = 0;
        while (bucket + 1 < k_buckets && seconds > k_latency_bounds[bucket])
            ++bucket;
        ++latency[bucket];
        latency_sum_us += static_cast<std::uint64_t>(std::max<std::int64_t>(took.count(), 0));
    }
};

// The answer to a scrape of /metrics (404 for another path, 405 for a
// method other than GET and HEAD), in the format its Accept asks for.
[[nodiscard]] net::Response metrics_response(const Counters& counters,
                                             const net::IncomingRequest& request);

} // namespace idem::listen::detail
