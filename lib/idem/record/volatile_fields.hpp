#pragma once
// Fields that differ between deliveries of one request, whatever was sent
// (times, request and trace ids, attempt counters, idem's own _idem): left
// out wherever two records' payloads are compared (audit's payloads,
// reconcile's `changed`); docs/audit.md lists them.

namespace idem::record {

// Top-level names, then the paths where providers put theirs: Stripe's
// event names the API request that caused it (request.id, and the
// request's own idempotency key), which a redelivery may carry anew, and
// counts the endpoints still pending (pending_webhooks), which falls as
// others answer.
inline constexpr const char* k_volatile_fields[] = {"ts",
                                                    "timestamp",
                                                    "time",
                                                    "created_at",
                                                    "sent_at",
                                                    "received_at",
                                                    "request_id",
                                                    "requestId",
                                                    "trace_id",
                                                    "traceId",
                                                    "span_id",
                                                    "spanId",
                                                    "attempt",
                                                    "attempts",
                                                    "attempt_number",
                                                    "retry",
                                                    "retry_count",
                                                    "delivery_attempt",
                                                    "_idem",
                                                    "request.id",
                                                    "request.idempotency_key",
                                                    "pending_webhooks"};

} // namespace idem::record
