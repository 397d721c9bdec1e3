// Reading, selecting and keying the records replay sends.

#include "idem/replay/reader.hpp"

#include "idem/record/event_time.hpp"
#include "idem/util/text.hpp"

#include <fmt/format.h>

namespace idem::replay {

CandidateReader::CandidateReader(const ReplayOptions& options, io::Diagnostics& diagnostics)
    : m_options(options), m_target(net::parse_target(options.to)), m_keys(options.key_paths),
      m_census(options.input.allow_absent) {
    for (const auto& [path, value] : options.selection.filters)
        m_census.expect_value("--filter", path, value);
    for (const auto& path : options.key_paths)
        m_census.expect_path("--key", path);
    if (options.selection.time_field)
        m_census.expect_path("--time-field", *options.selection.time_field);
    m_parser.report_paths_to(&m_census);
    if (!options.reject_path.empty()) m_reject_sink = io::Sink::create_file(options.reject_path);
    m_rejects.emplace(m_reject_sink.get(), options.strictness, diagnostics,
                      options.input.max_record_bytes);
    m_input.emplace(options.input, &*m_rejects);
}

bool CandidateReader::selected(const run::InputRecord& raw, std::optional<Timestamp>& time) {
    auto& parser = m_parser;
    const auto& selection = m_options.selection;
    for (const auto& [path, value] : selection.filters) {
        auto found = parser.find(path);
        if (!found || found->text != value) return false;
    }
    auto event_time =
        record::event_time(parser, selection.time_field ? &*selection.time_field : nullptr);
    time = event_time.time;
    if (selection.since || selection.until || m_options.timing == Timing::original) {
        if (!time) {
            m_rejects->reject(raw, 0,
                              selection.time_field
                                  ? record::describe_failure(event_time, *selection.time_field) +
                                        ": nothing to select or pace by"
                                  : std::string("no received_at to select or pace by (a plain "
                                                "event needs --time-field)"));
            return false;
        }
        if (selection.since && *time < *selection.since) return false;
        if (selection.until && *time >= *selection.until) return false;
    }
    return true;
}

// The next selected record as a request, or nullopt at the end of input
// (or of --limit).
std::optional<Candidate> CandidateReader::next() {
    while (!m_done) {
        if (m_options.selection.limit && m_counts.selected >= *m_options.selection.limit) break;
        auto raw = m_input->next();
        if (!raw) break;
        ++m_counts.records;
        if (raw->oversized_bytes) {
            m_rejects->reject_oversized(*raw);
            continue;
        }
        if (auto failure = m_parser.parse(raw->bytes)) {
            m_rejects->reject(*raw, failure->column, failure->message);
            continue;
        }
        std::optional<Timestamp> time;
        auto rejected_before = m_rejects->count();
        if (!selected(*raw, time)) {
            if (m_rejects->count() == rejected_before) ++m_counts.filtered_out;
            continue;
        }
        auto key = m_keys.key_for(m_parser, raw->bytes);
        if (!key.key) {
            m_rejects->reject(*raw, 0,
                              fmt::format("no value at key path {}", quote(key.missing_path)));
            continue;
        }
        if (m_parser.shape() == record::RecordShape::envelope) {
            if (auto problem = net::captured_path_problem(m_parser.envelope().path)) {
                m_rejects->reject(*raw, 0, *problem + ": not sent");
                continue;
            }
        }
        Candidate candidate;
        candidate.key = std::move(*key.key);
        candidate.source = fmt::format("{}:{}", raw->source ? *raw->source : "<stdin>", raw->line);
        candidate.time = time;
        candidate.request =
            build_request(m_parser, raw->bytes, m_target, m_options.key_header, candidate.key);
        const auto& request = candidate.request;
        if (auto problem = net::request_problem(request.method, request.url, request.headers)) {
            m_rejects->reject(*raw, 0, *problem + ": not sent");
            continue;
        }
        ++m_counts.selected;
        return candidate;
    }
    m_done = true;
    return std::nullopt;
}

} // namespace idem::replay
