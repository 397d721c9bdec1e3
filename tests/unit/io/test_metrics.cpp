// The Prometheus and OpenMetrics texts, as pure logic. The end-to-end tests
// read them back with python3-prometheus-client's two parsers.

#include "idem/io/metrics.hpp"

#include <doctest/doctest.h>

using namespace idem;
using namespace idem::io;

TEST_CASE("a counter is named by its sample in the classic format, by its family in OpenMetrics") {
    MetricFamily family;
    family.name = "idem_x";
    family.help = "a \"quoted\" help\nwith a line feed and a \\";
    family.type = MetricFamily::Type::counter;
    family.samples.push_back({{{"class", "a\"b\\c\nd"}}, 3});
    auto classic = render_metrics({family}, MetricsFormat::prometheus);
    CHECK(classic == "# HELP idem_x_total a \"quoted\" help\\nwith a line feed and a \\\\\n"
                     "# TYPE idem_x_total counter\n"
                     "idem_x_total{class=\"a\\\"b\\\\c\\nd\"} 3\n");
    auto open = render_metrics({family}, MetricsFormat::openmetrics);
    CHECK(open == "# HELP idem_x a \\\"quoted\\\" help\\nwith a line feed and a \\\\\n"
                  "# TYPE idem_x counter\n"
                  "idem_x_total{class=\"a\\\"b\\\\c\\nd\"} 3\n"
                  "# EOF\n");
}

TEST_CASE("a histogram's buckets are cumulative, with +Inf and the count equal") {
    MetricFamily family;
    family.name = "idem_seconds";
    family.help = "h";
    family.type = MetricFamily::Type::histogram;
    family.bounds = {0.5, 1};
    family.histograms.push_back({{}, {1, 3, 4}, 2.25});
    auto text = render_metrics({family}, MetricsFormat::prometheus);
    CHECK(text == "# HELP idem_seconds h\n# TYPE idem_seconds histogram\n"
                  "idem_seconds_bucket{le=\"0.5\"} 1\nidem_seconds_bucket{le=\"1\"} 3\n"
                  "idem_seconds_bucket{le=\"+Inf\"} 4\nidem_seconds_sum 2.25\n"
                  "idem_seconds_count 4\n");
}

TEST_CASE("a scraper that asks for OpenMetrics gets it; anything else the classic text") {
    CHECK(metrics_format_for("application/openmetrics-text;version=1.0.0,text/plain;q=0.5") ==
          MetricsFormat::openmetrics);
    CHECK(metrics_format_for("text/plain") == MetricsFormat::prometheus);
    CHECK(metrics_format_for("") == MetricsFormat::prometheus);
}

TEST_CASE("a run's summary as gauges: counts, parts, exit code, when") {
    Summary summary;
    summary.command = "reconcile";
    summary.counts = {{"in", 10}, {"lost", 2}};
    summary.parts_name = "hop";
    summary.parts.push_back({"a>b", {{"lost", 2}}, {{"loss_rate", 0.2}}});
    summary.seconds = 0.5;
    auto families = run_metrics(summary, 1, Timestamp(std::chrono::seconds(1'800'000'000)));
    auto text = render_metrics(families, MetricsFormat::openmetrics);
    CHECK(text.find("idem_run_exit_code{command=\"reconcile\"} 1\n") != std::string::npos);
    CHECK(text.find("idem_run_finished_seconds{command=\"reconcile\"} 1800000000\n") !=
          std::string::npos);
    CHECK(text.find("idem_run_records{command=\"reconcile\",count=\"lost\"} 2\n") !=
          std::string::npos);
    CHECK(text.find("idem_run_part_ratio{command=\"reconcile\",hop=\"a>b\",ratio=\"loss_rate\"} "
                    "0.2\n") != std::string::npos);
    for (const auto& family : families)
        CHECK(family.type == MetricFamily::Type::gauge); // one text, both formats
}
