#pragma once
// W3C Trace Context (https://www.w3.org/TR/trace-context/ level 1) as
// `idem listen` uses it: read a delivery's `traceparent`, give the listen
// hop a span of its own, and pass the trace on to --forward-to
// (docs/listen.md). Pure, but for the random ids.

#include <optional>
#include <string>
#include <string_view>

namespace idem::net {

struct TraceParent {
    std::string trace_id;  // 32 lowercase hex, not all zero
    std::string parent_id; // 16 lowercase hex, not all zero
    std::string flags;     // 2 hex (01: sampled)
};

// A traceparent header's value, or nullopt for one the spec says to treat
// as absent: a version other than 2 hex or "ff", ids of the wrong length,
// upper case or all zero. A later version's extra fields are ignored, as
// the spec asks of a version-00 reader.
[[nodiscard]] std::optional<TraceParent> parse_traceparent(std::string_view value);

// "00-<trace>-<span>-<flags>".
[[nodiscard]] std::string format_traceparent(std::string_view trace_id, std::string_view span_id,
                                             std::string_view flags);

// Random ids from the system's CSPRNG (OpenSSL): 16 bytes for a trace, 8
// for a span, as lowercase hex; never all zero.
[[nodiscard]] std::string new_trace_id();
[[nodiscard]] std::string new_span_id();

} // namespace idem::net
