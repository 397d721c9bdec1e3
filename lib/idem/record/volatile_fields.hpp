#pragma once
// Fields that differ between deliveries of one request, whatever was sent
// (times, request and trace ids, attempt counters, idem's own _idem): left
// out wherever two records' payloads are compared (audit's payloads,
// reconcile's `changed`); docs/audit.md lists them.

namespace idem::record {

inline constexpr const char* k_volatile_fields[] = {
    "ts",         "timestamp", "time",           "created_at", "sent_at",     "received_at",
    "request_id", "requestId", "trace_id",       "traceId",    "span_id",     "spanId",
    "attempt",    "attempts",  "attempt_number", "retry",      "retry_count", "delivery_attempt",
    "_idem"};

} // namespace idem::record
