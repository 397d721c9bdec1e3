#pragma once
// Internal to audit's reports: the sink a report is written to in pieces,
// the groups rendered on several threads, and one renderer per format
// (report_table.cpp, report_json.cpp, report_markdown.cpp, report_html.cpp;
// the what-if section of each in report_what_if.cpp).

#include "idem/audit/report.hpp"
#include "idem/io/sink.hpp"
#include "idem/util/render.hpp"
#include "idem/util/text.hpp"

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace idem::audit::detail {

// The report's text, handed to the sink a megabyte at a time when there is
// one: a report of a million groups is never one string.
class ReportOut {
public:
    // `json`: the report is JSON, and every piece passes json_report_text
    // on its way out (pieces end between values, never inside a character).
    ReportOut(io::Sink* sink, bool json) : m_sink(sink), m_json(json) {}
    std::string& text() { return m_text; }
    void flush_when_large() {
        if (m_sink && m_text.size() >= k_chunk_bytes) {
            write(m_text);
            m_text.clear();
        }
    }
    // A piece rendered elsewhere, after the text so far.
    void append(const std::string& piece) {
        if (!m_sink) {
            m_text += piece;
            return;
        }
        if (!m_text.empty()) {
            write(m_text);
            m_text.clear();
        }
        write(piece);
    }
    // The rest of the text: written to the sink, or returned without one.
    std::string finish() {
        if (!m_sink)
            return m_json && !is_json_report_text(m_text) ? json_report_text(m_text)
                                                          : std::move(m_text);
        write(m_text);
        m_text.clear();
        return {};
    }

private:
    void write(const std::string& text) {
        if (m_json && !is_json_report_text(text))
            m_sink->write(json_report_text(text));
        else
            m_sink->write(text);
    }
    static constexpr std::size_t k_chunk_bytes = 1 << 20;
    io::Sink* m_sink;
    bool m_json;
    std::string m_text;
};

// Appends group `g`'s text to `out`.
using RenderGroup = std::function<void(const Findings& findings, const Explanation& group,
                                       std::size_t g, std::string& out)>;

// Every group rendered in order, on `threads` threads past a few hundred.
void render_groups(GroupShelf& groups, ReportOut& report, std::size_t threads,
                   const RenderGroup& render);

// One line of the table report: its values escaped (terminal_text: no
// control byte, C1 or bidi character from a log reaches the terminal, and
// no value breaks the line), then cut to the reader's width (fit_line).
struct TableLine {
    std::size_t width = k_never_cut;
    std::string operator()(std::string_view raw) const {
        return fit_line(terminal_text(raw), width);
    }
};

// --what-if and --suggest, as text (a table or Markdown), and as JSON.
void render_what_if(const FindingsSummary& summary, std::string& out, bool markdown,
                    const TableLine& fit = {});
[[nodiscard]] nlohmann::json what_if_json(const FindingsSummary& summary);

void render_table(GroupShelf& groups, const FindingsSummary& summary, ReportOut& report,
                  std::size_t threads, std::size_t width);
void render_json(GroupShelf& groups, const FindingsSummary& summary, ReportOut& report,
                 std::size_t threads);
void render_markdown(GroupShelf& groups, const FindingsSummary& summary, ReportOut& report,
                     std::size_t threads);

} // namespace idem::audit::detail
