#include "idem/probe/report.hpp"

#include "idem/util/render.hpp"
#include "idem/util/text.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace idem::probe {

namespace {

double seconds_of(Duration duration) {
    return std::chrono::duration<double>(duration).count();
}

std::string totals(const ProbeResult& result) {
    return fmt::format("{} passed, {} failed, {} warned, {} skipped; {} requests to {}",
                       result.count(Verdict::pass), result.count(Verdict::fail),
                       result.count(Verdict::warn), result.count(Verdict::skipped), result.requests,
                       result.target);
}

std::string render_table(const ProbeResult& result, std::size_t width) {
    std::size_t name_width = 5;
    for (const auto& check : result.checks)
        name_width = std::max(name_width, check_name(check.check).size());
    std::string out =
        fmt::format("{:<{}}  {:<7}  {}\n", "check", name_width, "verdict", "evidence");
    for (const auto& check : result.checks)
        out += fit_line(fmt::format("{:<{}}  {:<7}  {}", check_name(check.check), name_width,
                                    verdict_name(check.verdict), terminal_text(check.reason)),
                        width) +
               "\n";
    out += fit_line(terminal_text(totals(result)) + fmt::format("; effects: {}", result.effects),
                    width) +
           "\n";
    return out;
}

std::string render_json(const ProbeResult& result, std::string_view version) {
    nlohmann::ordered_json report{{"version", version},
                                  {"command", "probe"},
                                  {"target", result.target},
                                  {"effects", result.effects},
                                  {"requests", result.requests},
                                  {"passed", result.count(Verdict::pass)},
                                  {"failed", result.count(Verdict::fail)},
                                  {"warned", result.count(Verdict::warn)},
                                  {"skipped", result.count(Verdict::skipped)}};
    auto checks = nlohmann::ordered_json::array();
    for (const auto& check : result.checks)
        checks.push_back({{"check", check_name(check.check)},
                          {"verdict", verdict_name(check.verdict)},
                          {"reason", check.reason},
                          {"seconds", std::round(seconds_of(check.elapsed) * 1000) / 1000},
                          {"evidence", check.evidence}});
    report["checks"] = std::move(checks);
    return json_report_text(report.dump(2, ' ', false, nlohmann::json::error_handler_t::replace)) +
           "\n";
}

std::string render_markdown(const ProbeResult& result) {
    std::string out = fmt::format("## idem probe: {}\n\n", markdown_text(result.target));
    out += "| check | verdict | evidence |\n|---|---|---|\n";
    for (const auto& check : result.checks)
        out += fmt::format("| `{}` | **{}** | {} |\n", check_name(check.check),
                           verdict_name(check.verdict), markdown_text(check.reason));
    out += fmt::format("\n{}; effects: {}\n", markdown_text(totals(result)),
                       markdown_text(result.effects));
    return out;
}

std::string render_junit(const ProbeResult& result) {
    double total = 0;
    for (const auto& check : result.checks)
        total += seconds_of(check.elapsed);
    std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
    out += fmt::format("<testsuites name=\"idem probe\" tests=\"{}\" failures=\"{}\" "
                       "skipped=\"{}\" time=\"{:.3f}\">\n",
                       result.checks.size(), result.count(Verdict::fail),
                       result.count(Verdict::skipped), total);
    out += fmt::format("  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"0\" "
                       "skipped=\"{}\" time=\"{:.3f}\">\n",
                       xml_text(result.target), result.checks.size(), result.count(Verdict::fail),
                       result.count(Verdict::skipped), total);
    for (const auto& check : result.checks) {
        out += fmt::format("    <testcase classname=\"idem.probe\" name=\"{}\" time=\"{:.3f}\">\n",
                           check_name(check.check), seconds_of(check.elapsed));
        auto evidence =
            check.evidence.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        switch (check.verdict) {
        case Verdict::fail:
            out += fmt::format("      <failure message=\"{}\" type=\"idempotency\">{}</failure>\n",
                               xml_text(check.reason), xml_text(evidence));
            break;
        case Verdict::skipped:
            out += fmt::format("      <skipped message=\"{}\"/>\n", xml_text(check.reason));
            break;
        case Verdict::warn:
            out += fmt::format("      <system-out>warn: {}\n{}</system-out>\n",
                               xml_text(check.reason), xml_text(evidence));
            break;
        case Verdict::pass:
            out += fmt::format("      <system-out>{}\n{}</system-out>\n", xml_text(check.reason),
                               xml_text(evidence));
            break;
        }
        out += "    </testcase>\n";
    }
    out += "  </testsuite>\n</testsuites>\n";
    return out;
}

} // namespace

std::string render_report(const ProbeResult& result, ReportFormat format, std::size_t width,
                          std::string_view version) {
    switch (format) {
    case ReportFormat::table:
        return render_table(result, width);
    case ReportFormat::json:
        return render_json(result, version);
    case ReportFormat::markdown:
        return render_markdown(result);
    case ReportFormat::junit:
        return render_junit(result);
    }
    return {};
}

} // namespace idem::probe
