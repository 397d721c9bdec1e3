// /metrics for idem listen (detail/counters.hpp).

#include "idem/listen/detail/counters.hpp"

#include "idem/io/metrics.hpp"
#include "idem/util/text.hpp"

#include <string>
#include <vector>

namespace idem::listen::detail {

net::Response metrics_response(const Counters& c, const net::IncomingRequest& request) {
    net::Response response;
    if (request.head.target != "/metrics") {
        response.status = 404;
        response.body = "the metrics are at /metrics\n";
        return response;
    }
    if (request.head.method != "GET" && request.head.method != "HEAD") {
        response.status = 405;
        response.headers.emplace_back("Allow", "GET, HEAD");
        return response;
    }
    std::string accept;
    for (const auto& [name, value] : request.head.headers)
        if (iequals(name, "accept")) accept += value;
    auto format = io::metrics_format_for(accept);
    std::vector<io::MetricFamily> families;
    auto counter = [&](std::string name, std::string help,
                       std::vector<std::pair<io::MetricLabels, std::uint64_t>> samples) {
        auto& family = families.emplace_back();
        family.name = std::move(name);
        family.help = std::move(help);
        family.type = io::MetricFamily::Type::counter;
        for (auto& [labels, value] : samples)
            family.samples.push_back({std::move(labels), static_cast<double>(value)});
    };
    counter("idem_listen_requests",
            "requests received (every one is captured or counted as "
            "capture_failed)",
            {{{}, c.requests}});
    counter("idem_listen_captured", "requests written to the capture", {{{}, c.captured}});
    counter("idem_listen_captured_bytes", "bytes written to the capture", {{{}, c.captured_bytes}});
    counter("idem_listen_capture_failed",
            "requests answered 503 because the capture could not "
            "be written",
            {{{}, c.failed_writes}});
    counter("idem_listen_answered", "answers by class",
            {{{{"class", "2xx"}}, c.answered_2xx}, {{{"class", "other"}}, c.answered_other}});
    counter("idem_listen_invalid_signatures", "deliveries whose signature failed (answered 401)",
            {{{}, c.invalid}});
    counter("idem_listen_duplicates", "deliveries --dedup found already seen",
            {{{}, c.duplicates}});
    counter("idem_listen_dropped", "connections dropped on purpose (--drop-connection-rate)",
            {{{}, c.dropped}});
    counter("idem_listen_refused",
            "requests the server refused before the handler (over a "
            "limit, a timeout)",
            {{{}, c.refused}});
    counter("idem_listen_store_errors", "deliveries the dedup store could not judge, by outcome",
            {{{{"outcome", "unavailable"}}, c.store_unavailable},
             {{{"outcome", "degraded"}}, c.degraded}});
    counter("idem_listen_forwarded", "deliveries the --forward-to upstream answered",
            {{{}, c.forwarded}});
    counter("idem_listen_upstream_answers", "the upstream's final answers by class",
            {{{{"class", "2xx"}}, c.upstream_2xx},
             {{{"class", "3xx"}}, c.upstream_3xx},
             {{{"class", "4xx"}}, c.upstream_4xx},
             {{{"class", "5xx"}}, c.upstream_5xx}});
    counter("idem_listen_upstream_failures", "deliveries not forwarded, by failure (answered 502)",
            {{{{"failure", "not_final_status"}}, c.upstream_not_final},
             {{{"failure", "not_sent"}}, c.upstream_not_sent},
             {{{"failure", "no_answer"}}, c.upstream_lost}});
    counter("idem_listen_traced",
            "deliveries with a W3C trace, and those whose trace listen "
            "started",
            {{{{"origin", "sender"}}, c.traced - c.traces_started},
             {{{"origin", "listen"}}, c.traces_started}});
    auto& latency = families.emplace_back();
    latency.name = "idem_listen_request_duration_seconds";
    latency.help = "from a request's first byte to its answer";
    latency.type = io::MetricFamily::Type::histogram;
    latency.bounds.assign(std::begin(Counters::k_latency_bounds),
                          std::end(Counters::k_latency_bounds));
    io::MetricFamily::Histogram histogram;
    std::uint64_t cumulative = 0;
    for (const auto& bucket : c.latency) {
        cumulative += bucket.load();
        histogram.cumulative.push_back(cumulative);
    }
    histogram.sum = static_cast<double>(c.latency_sum_us.load()) / 1e6;
    latency.histograms.push_back(std::move(histogram));
    response.headers.emplace_back("Content-Type", std::string(io::metrics_content_type(format)));
    response.body = io::render_metrics(families, format);
    if (request.head.method == "HEAD") response.body.clear();
    return response;
}

} // namespace idem::listen::detail
