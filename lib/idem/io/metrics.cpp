#include "idem/io/metrics.hpp"

#include <cmath>
#include <fmt/format.h>

namespace idem::io {

namespace {

// Label values: backslash, double quote and line feed escaped (both formats).
void append_label_value(std::string& out, std::string_view value) {
    for (char c : value) {
        if (c == '\\')
            out += "\\\\";
        else if (c == '"')
            out += "\\\"";
        else if (c == '\n')
            out += "\\n";
        else
            out += c;
    }
}

// HELP text: backslash and line feed escaped (OpenMetrics escapes double
// quotes there too; the classic format does not, and reads \" back as is).
void append_help(std::string& out, std::string_view help, MetricsFormat format) {
    for (char c : help) {
        if (c == '\\')
            out += "\\\\";
        else if (c == '\n')
            out += "\\n";
        else if (c == '"' && format == MetricsFormat::openmetrics)
            out += "\\\"";
        else
            out += c;
    }
}

void append_labels(std::string& out, const MetricLabels& labels,
                   const std::pair<std::string, std::string>* extra = nullptr) {
    if (labels.empty() && !extra) return;
    out += '{';
    bool first = true;
    auto add = [&](const std::string& name, const std::string& value) {
        if (!first) out += ',';
        first = false;
        out += name;
        out += "=\"";
        append_label_value(out, value);
        out += '"';
    };
    for (const auto& [name, value] : labels)
        add(name, value);
    if (extra) add(extra->first, extra->second);
    out += '}';
}

std::string number(double value) {
    if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
    if (std::isnan(value)) return "NaN";
    if (value == std::floor(value) && std::fabs(value) < 1e15)
        return fmt::format("{}", static_cast<long long>(value));
    return fmt::format("{}", value);
}

std::string_view type_name(MetricFamily::Type type) {
    switch (type) {
    case MetricFamily::Type::counter:
        return "counter";
    case MetricFamily::Type::gauge:
        return "gauge";
    case MetricFamily::Type::histogram:
        return "histogram";
    }
    return "gauge";
}

} // namespace

std::string render_metrics(const std::vector<MetricFamily>& families, MetricsFormat format) {
    std::string out;
    for (const auto& family : families) {
        bool counter = family.type == MetricFamily::Type::counter;
        // The classic format names a counter's family by its sample
        // ("x_total"); OpenMetrics by the name without the suffix.
        auto declared =
            counter && format == MetricsFormat::prometheus ? family.name + "_total" : family.name;
        out += "# HELP " + declared + ' ';
        append_help(out, family.help, format);
        out += "\n# TYPE " + declared + ' ';
        out += type_name(family.type);
        out += '\n';
        for (const auto& sample : family.samples) {
            out += counter ? family.name + "_total" : family.name;
            append_labels(out, sample.labels);
            out += ' ' + number(sample.value) + '\n';
        }
        for (const auto& histogram : family.histograms) {
            for (std::size_t i = 0; i <= family.bounds.size(); ++i) {
                std::pair<std::string, std::string> le{
                    "le", i < family.bounds.size() ? number(family.bounds[i]) : "+Inf"};
                out += family.name + "_bucket";
                append_labels(out, histogram.labels, &le);
                out += ' ' +
                       number(static_cast<double>(
                           i < histogram.cumulative.size() ? histogram.cumulative[i] : 0)) +
                       '\n';
            }
            out += family.name + "_sum";
            append_labels(out, histogram.labels);
            out += ' ' + number(histogram.sum) + '\n';
            out += family.name + "_count";
            append_labels(out, histogram.labels);
            out += ' ' +
                   number(static_cast<double>(
                       histogram.cumulative.empty() ? 0 : histogram.cumulative.back())) +
                   '\n';
        }
    }
    if (format == MetricsFormat::openmetrics) out += "# EOF\n";
    return out;
}

std::string_view metrics_content_type(MetricsFormat format) {
    return format == MetricsFormat::openmetrics
               ? "application/openmetrics-text; version=1.0.0; charset=utf-8"
               : "text/plain; version=0.0.4; charset=utf-8";
}

MetricsFormat metrics_format_for(std::string_view accept) {
    return accept.find("application/openmetrics-text") != std::string_view::npos
               ? MetricsFormat::openmetrics
               : MetricsFormat::prometheus;
}

std::vector<MetricFamily> run_metrics(const Summary& summary, int exit_code, Timestamp finished) {
    std::vector<MetricFamily> families;
    MetricLabels command{{"command", summary.command}};
    auto gauge = [&](std::string name, std::string help) -> MetricFamily& {
        auto& family = families.emplace_back();
        family.name = std::move(name);
        family.help = std::move(help);
        family.type = MetricFamily::Type::gauge;
        return family;
    };
    if (!summary.version.empty()) {
        auto& version = gauge("idem_run_version", "which idem ran (always 1)");
        auto labels = command;
        labels.emplace_back("version", summary.version);
        version.samples.push_back({labels, 1});
    }
    gauge("idem_run_exit_code", "the exit code of the last run (0 clean, 1 findings, 2 usage, "
                                "3 bad input, 4 store or I/O failure)")
        .samples.push_back({command, static_cast<double>(exit_code)});
    gauge("idem_run_finished_seconds", "when the last run ended, in seconds since the epoch")
        .samples.push_back(
            {command, static_cast<double>(finished.time_since_epoch().count()) / 1e6});
    gauge("idem_run_duration_seconds", "how long the last run took")
        .samples.push_back({command, summary.seconds});
    if (!summary.counts.empty()) {
        auto& counts = gauge("idem_run_records", "the last run's counts, as its summary gives "
                                                 "them (in, out, rejected, findings...)");
        for (const auto& [name, value] : summary.counts) {
            auto labels = command;
            labels.emplace_back("count", name);
            counts.samples.push_back({labels, static_cast<double>(value)});
        }
    }
    if (!summary.ratios.empty()) {
        auto& ratios = gauge("idem_run_ratio", "the last run's ratios (0 to 1)");
        for (const auto& [name, value] : summary.ratios) {
            auto labels = command;
            labels.emplace_back("ratio", name);
            ratios.samples.push_back({labels, value});
        }
    }
    if (!summary.parts.empty()) {
        auto& parts = gauge("idem_run_part_records",
                            "the last run's counts per part (merge: per rule; reconcile: per hop)");
        std::vector<MetricFamily::Sample> ratios;
        for (const auto& part : summary.parts) {
            for (const auto& [name, value] : part.counts) {
                auto labels = command;
                labels.emplace_back(summary.parts_name.empty() ? "part" : summary.parts_name,
                                    part.name);
                labels.emplace_back("count", name);
                parts.samples.push_back({labels, static_cast<double>(value)});
            }
            for (const auto& [name, value] : part.ratios) {
                auto labels = command;
                labels.emplace_back(summary.parts_name.empty() ? "part" : summary.parts_name,
                                    part.name);
                labels.emplace_back("ratio", name);
                ratios.push_back({labels, value});
            }
        }
        if (!ratios.empty())
            gauge("idem_run_part_ratio", "the last run's ratios per part (0 to 1)").samples =
                std::move(ratios);
    }
    return families;
}

} // namespace idem::io
