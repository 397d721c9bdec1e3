#pragma once
// idem probe's report, one renderer per medium (util/render.hpp): a table
// for a person, JSON for scripts, Markdown for a pull request, JUnit XML
// so a CI system shows each check as a test case. Every value a handler
// or a template could have put in (a status line, an error, a key) passes
// through the medium's escaping.

#include "idem/probe/run.hpp"

#include <string>

namespace idem::probe {

enum class ReportFormat { table, json, markdown, junit };

// `width`: the table's lines are cut to it (k_never_cut: never).
[[nodiscard]] std::string render_report(const ProbeResult& result, ReportFormat format,
                                        std::size_t width, std::string_view version);

} // namespace idem::probe
