#pragma once
// Counters in the text formats Prometheus scrapes (docs/metrics.md): the
// classic text format 0.0.4, which node_exporter's textfile collector
// reads, and OpenMetrics 1.0. Pure: families in, text out.

#include "idem/io/summary.hpp"
#include "idem/util/time.hpp"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace idem::io {

enum class MetricsFormat { prometheus, openmetrics };

using MetricLabels = std::vector<std::pair<std::string, std::string>>;

struct MetricFamily {
    enum class Type { counter, gauge, histogram };
    // Without a counter's "_total": the formats name a counter's family
    // differently, and the renderer adds it where each wants it.
    std::string name;
    std::string help;
    Type type = Type::gauge;
    struct Sample {
        MetricLabels labels;
        double value = 0;
    };
    std::vector<Sample> samples; // counters and gauges
    // Histograms: the upper bounds (ascending; +Inf is added), and per
    // label set the cumulative count at each bound, the sum and the count.
    std::vector<double> bounds;
    struct Histogram {
        MetricLabels labels;
        std::vector<std::uint64_t> cumulative; // one per bound, then +Inf
        double sum = 0;
    };
    std::vector<Histogram> histograms;
};

// The exposition text; OpenMetrics ends with "# EOF".
[[nodiscard]] std::string render_metrics(const std::vector<MetricFamily>& families,
                                         MetricsFormat format);
// The Content-Type an HTTP answer of this format carries.
[[nodiscard]] std::string_view metrics_content_type(MetricsFormat format);
// What a scraper's Accept header asks for: OpenMetrics when it names
// application/openmetrics-text, else the classic text format.
[[nodiscard]] MetricsFormat metrics_format_for(std::string_view accept);

// A batch run's figures (`--metrics FILE`), as gauges: the last run's
// counts, per part, how long it took, its exit code and when it finished,
// so that a cron job's alerts can ask "did it run, and how did it end?".
// Valid in both formats: every family a gauge, names without the suffixes
// either reserves.
[[nodiscard]] std::vector<MetricFamily> run_metrics(const Summary& summary, int exit_code,
                                                    Timestamp finished);

} // namespace idem::io
