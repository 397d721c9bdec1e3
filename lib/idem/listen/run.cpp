// idem listen: capture, judge and answer each request (docs/listen.md).

#include "idem/listen/run.hpp"

#include "idem/listen/capture.hpp"
#include "idem/record/annotate.hpp"
#include "idem/record/envelope_writer.hpp"
#include "idem/record/parser.hpp"
#include "idem/util/errors.hpp"
#include "idem/verify/verifier.hpp"

#include <fmt/format.h>
#include <mutex>
#include <thread>

namespace idem::listen {

namespace {

struct Counters {
    std::atomic<std::uint64_t> requests{0};
    std::atomic<std::uint64_t> captured{0};
    std::atomic<std::uint64_t> failed_writes{0};
    std::atomic<std::uint64_t> answered_2xx{0};
    std::atomic<std::uint64_t> answered_other{0};
    std::atomic<std::uint64_t> invalid{0};
    std::atomic<std::uint64_t> dropped{0};
    std::atomic<std::uint64_t> refused{0};
};

// Capture ids sort by arrival within a run and differ between runs: the
// run's start in milliseconds, then the arrival number.
std::string capture_id_prefix() {
    auto start = std::chrono::duration_cast<std::chrono::milliseconds>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count();
    return fmt::format("cap_{:x}", start);
}

class Gateway {
public:
    Gateway(const ListenOptions& options, CaptureFile& capture, io::Diagnostics& diagnostics)
        : m_options(options), m_capture(capture), m_diagnostics(diagnostics),
          m_id_prefix(capture_id_prefix()) {
        if (options.verify) m_verifier.emplace(*options.verify);
    }

    net::Response handle(net::IncomingRequest& request);
    void refused(const net::RefusedRequest& refusal);
    [[nodiscard]] const Counters& counters() const { return m_counters; }

private:
    std::optional<verify::Verdict> judge(const net::IncomingRequest& request, std::string_view id);
    void warn(const std::string& where, const std::string& message);

    const ListenOptions& m_options;
    CaptureFile& m_capture;
    io::Diagnostics& m_diagnostics;
    std::string m_id_prefix;
    Counters m_counters;
    std::mutex m_verify_mutex;
    std::optional<verify::Verifier> m_verifier;
    std::mutex m_diagnostics_mutex;
};

std::optional<verify::Verdict> Gateway::judge(const net::IncomingRequest& request,
                                              std::string_view id) {
    if (!m_verifier) return std::nullopt;
    record::Envelope envelope;
    envelope.id = id;
    envelope.method = request.head.method;
    envelope.path = request.head.target;
    envelope.body = request.body;
    envelope.headers.reserve(request.head.headers.size());
    for (const auto& [name, value] : request.head.headers)
        envelope.headers.push_back({name, value});
    std::lock_guard lock(m_verify_mutex);
    return m_verifier->verify(envelope, request.received_at);
}

void Gateway::warn(const std::string& where, const std::string& message) {
    std::lock_guard lock(m_diagnostics_mutex);
    m_diagnostics.warning(SourcePosition{where, 0, 0, 0}, message);
}

net::Response Gateway::handle(net::IncomingRequest& request) {
    auto number = ++m_counters.requests;
    auto id = fmt::format("{}_{:06}", m_id_prefix, number);
    auto verdict = judge(request, id);
    auto decision = decide(m_options.flaky, number);
    int status = decision.status;
    if (verdict && !verdict->valid) {
        status = 401;
        decision.kind = FlakyDecision::Kind::answer;
        ++m_counters.invalid;
    }

    std::string line;
    line.reserve(request.body.size() + 512);
    record::append_envelope(line,
                            {id, request.received_at, request.head.method, request.head.target,
                             &request.head.headers, request.body, request.remote});
    std::string member = decision.kind == FlakyDecision::Kind::drop
                             ? std::string("\"listen\":{\"dropped\":true}")
                             : fmt::format("\"listen\":{{\"status\":{}}}", status);
    if (verdict) {
        member += ',';
        verify::append_verdict(member, *verdict);
    }
    line = record::annotate(line, false, member);

    net::Response response;
    if (!m_capture.append_line(line)) {
        // Never answer 2xx for what is not in the capture: the sender retries.
        ++m_counters.failed_writes;
        warn(request.remote, fmt::format("cannot write the capture {} ({}): answered 503 to {} {}",
                                         m_capture.name(), m_capture.last_error(),
                                         request.head.method, request.head.target));
        response.status = 503;
        response.headers.emplace_back("Retry-After", "5");
        response.body = "capture failed; retry later\n";
        return response;
    }
    ++m_counters.captured;
    if (m_options.flaky.delay.count() > 0) std::this_thread::sleep_for(m_options.flaky.delay);
    if (decision.kind == FlakyDecision::Kind::drop) {
        ++m_counters.dropped;
        response.drop_connection = true;
        return response;
    }
    response.status = status;
    bool success = status >= 200 && status < 300;
    (success ? m_counters.answered_2xx : m_counters.answered_other)++;
    if (!success && m_options.flaky.retry_after)
        response.headers.emplace_back(
            "Retry-After",
            std::to_string(
                std::chrono::ceil<std::chrono::seconds>(*m_options.flaky.retry_after).count()));
    response.headers.emplace_back("Content-Type", "application/json");
    response.body = "{\"captured\":";
    record::append_json_string(response.body, id);
    if (verdict && !verdict->valid) {
        response.body += ",\"error\":";
        record::append_json_string(response.body, "invalid signature: " + verdict->reason);
    }
    response.body += "}\n";
    return response;
}

void Gateway::refused(const net::RefusedRequest& refusal) {
    ++m_counters.refused;
    warn(refusal.remote, refusal.status == 0
                             ? refusal.reason
                             : fmt::format("answered {}: {}", refusal.status, refusal.reason));
}

} // namespace

ListenResult run_listen(const ListenOptions& options, const std::atomic<bool>& stop,
                        io::Diagnostics& diagnostics,
                        const std::function<void(int port)>& on_listening) {
    auto start = std::chrono::steady_clock::now();
    CaptureFile capture(options.out_path);
    net::HttpServer server(options.bind_address, options.port, options.limits);
    Gateway gateway(options, capture, diagnostics);
    net::ServerCallbacks callbacks;
    callbacks.handle = [&gateway](net::IncomingRequest& request) {
        return gateway.handle(request);
    };
    callbacks.refused = [&gateway](const net::RefusedRequest& refusal) {
        gateway.refused(refusal);
    };
    if (on_listening) on_listening(server.port());
    server.serve(callbacks, stop);
    capture.sync();

    const auto& counters = gateway.counters();
    ListenResult result;
    result.failed_writes = counters.failed_writes;
    result.summary.command = "listen";
    result.summary.counts = {{"in", counters.requests},
                             {"captured", counters.captured},
                             {"capture_failed", counters.failed_writes},
                             {"answered_2xx", counters.answered_2xx},
                             {"answered_other", counters.answered_other},
                             {"dropped", counters.dropped},
                             {"invalid", counters.invalid},
                             {"refused", counters.refused}};
    result.summary.facts = {{"capture", capture.name()}};
    result.summary.seconds = io::seconds_since(start);
    return result;
}

} // namespace idem::listen
