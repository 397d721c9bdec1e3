#include "idem/run/record_run.hpp"

namespace idem::run {

RecordRunFrame::RecordRunFrame(const RecordRunSetup& setup, io::Diagnostics& diagnostics)
    : m_diagnostics(diagnostics), m_max_record_bytes(setup.input.max_record_bytes),
      m_threads(setup.threads), m_busy_ordered_stage(setup.busy_ordered_stage),
      m_block_bytes(setup.block_bytes), m_idle_interval(setup.idle_interval),
      m_census(setup.input.allow_absent), m_interrupt(setup.interrupt),
      m_window_active(setup.input.window.active()), m_rejects_to(setup.reject_sink) {
    m_rejects.emplace(m_rejects_to, setup.strictness, diagnostics, setup.input.max_record_bytes);
    m_input.emplace(setup.input, &*m_rejects);
}

void RecordRunFrame::flush_rejects() {
    if (m_rejects_to) m_rejects_to->flush();
}

void RecordRunFrame::report_progress() {
    if (!m_total_bytes_known) {
        m_total_bytes = m_input->total_bytes();
        m_total_bytes_known = true;
    }
    m_diagnostics.progress(m_records, m_input->bytes_read(), m_total_bytes);
}

void RecordRunFrame::reject_too_long(InputRecord& record) {
    record.oversized_bytes = record.bytes.size();
    m_rejects->reject_oversized(record);
}

} // namespace idem::run
