// idem listen: capture, judge and answer each request (docs/listen.md).

#include "idem/listen/run.hpp"

#include "idem/io/block_reader.hpp"
#include "idem/listen/capture.hpp"
#include "idem/listen/detail/counters.hpp"
#include "idem/net/target.hpp"
#include "idem/net/trace_context.hpp"
#include "idem/record/annotate.hpp"
#include "idem/record/envelope_writer.hpp"
#include "idem/record/parser.hpp"
#include "idem/store/fingerprints.hpp"
#include "idem/store/nonces.hpp"
#include "idem/store/store.hpp"
#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"
#include "idem/verify/verifier.hpp"

#include <fmt/format.h>
#include <mutex>
#include <thread>

namespace idem::listen {

namespace {

using detail::Counters;

// The trace of one delivery (W3C trace context): the sender's, or one
// listen started; the listen hop's own span is the parent of what goes on.
struct Trace {
    std::string trace_id, span_id, parent_id, flags, state;
    bool started = false; // by listen (--trace-ids): the delivery had none
};

// Capture ids sort by arrival within a run and differ between runs: the
// run's start in milliseconds, then the arrival number.
std::string capture_id_prefix() {
    auto start = std::chrono::duration_cast<std::chrono::milliseconds>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count();
    return fmt::format("cap_{:x}", start);
}

// What --dedup decided for one delivery.
struct DedupOutcome {
    enum class Kind { first, duplicate, missing_key };
    Kind kind = Kind::first;
    bool degraded = false; // judged by the store in this process: the shared one failed
    record::Fingerprint fingerprint;
    std::uint64_t seen_count = 1;
    std::string missing_path;
};

// One request on its way through the gateway.
struct Delivery {
    std::string id;
    std::optional<verify::Verdict> verdict;
    FlakyDecision decision;
    int status = 200;
    bool accepted = false; // goes on to the dedup store and upstream
    bool duplicate = false;
    bool store_failed = false;         // the dedup store could not answer: 503
    std::string line;                  // the envelope
    std::string live;                  // what _idem.listen says besides the status
    std::optional<DedupOutcome> claim; // a first copy's claim this delivery holds
    std::optional<net::TransferResult> upstream;
    std::optional<Trace> trace;

    [[nodiscard]] bool success() const { return status >= 200 && status < 300; }
    [[nodiscard]] bool dropped() const { return decision.kind == FlakyDecision::Kind::drop; }
};

class Gateway {
public:
    Gateway(const ListenOptions& options, CaptureFile& capture, io::Diagnostics& diagnostics)
        : m_options(options), m_capture(capture), m_diagnostics(diagnostics),
          m_id_prefix(capture_id_prefix()) {
        if (options.verify) m_verifier.emplace(*options.verify);
        if (options.dedup) {
            auto location = store::parse_store_uri(options.dedup->store_uri);
            // A sender waits on this: a SQLite file another process holds
            // locked is a 503 after a moment, not a minute's queue.
            location.lock_timeout = std::chrono::seconds(2);
            location.cache_bytes = store::k_fingerprint_store_cache_bytes;
            m_store = store::open_store(location);
            m_fingerprinter.emplace(options.dedup->key);
        }
        if (!options.forward_to.empty())
            m_forward_target = net::parse_target(options.forward_to, "--forward-to");
    }

    net::Response handle(net::IncomingRequest& request);
    void refused(const net::RefusedRequest& refusal);
    void notice(const std::string& message) { warn("listen", message); }
    void show_progress() {
        std::lock_guard lock(m_diagnostics_mutex);
        m_diagnostics.progress(m_counters.requests, m_counters.captured_bytes, std::nullopt);
    }
    [[nodiscard]] const Counters& counters() const { return m_counters; }
    // The endpoint's answer to a scrape.
    [[nodiscard]] net::Response metrics(const net::IncomingRequest& request) const;

private:
    std::optional<verify::Verdict> judge(const net::IncomingRequest& request, std::string_view id);
    DedupOutcome claim(std::string_view envelope_line, Timestamp received_at);
    void release(const DedupOutcome& outcome);
    void write_back_locked();
    net::TransferResult forward(const net::IncomingRequest& request,
                                const std::optional<Trace>& trace);
    std::optional<Trace> trace_of(const net::IncomingRequest& request);
    void screen_duplicate(Delivery& delivery, const net::IncomingRequest& request);
    void pass_on(Delivery& delivery, const net::IncomingRequest& request);
    net::Response capture_and_answer(Delivery& delivery, const net::IncomingRequest& request);
    net::Response answer(Delivery& delivery) const;
    void warn(const std::string& where, const std::string& message);

    const ListenOptions& m_options;
    CaptureFile& m_capture;
    io::Diagnostics& m_diagnostics;
    std::string m_id_prefix;
    Counters m_counters;
    std::mutex m_verify_mutex;
    std::optional<verify::Verifier> m_verifier;
    std::mutex m_diagnostics_mutex;
    std::mutex m_store_mutex; // the store and fingerprinter serve one thread at a time
    std::unique_ptr<store::Store> m_store;
    std::unique_ptr<store::Store> m_local_store;          // --on-store-error local, while down
    std::vector<store::FingerprintClaim> m_to_write_back; // first copies judged locally
    std::optional<record::Fingerprinter> m_fingerprinter;
    net::Target m_forward_target;
    std::atomic<bool> m_store_down{false}; // warned of an outage not yet over
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

DedupOutcome Gateway::claim(std::string_view envelope_line, Timestamp received_at) {
    thread_local record::RecordParser parser;
    thread_local std::string padded;
    padded.assign(envelope_line);
    padded.append(io::k_padding_bytes, ' ');
    DedupOutcome outcome;
    (void)parser.parse(std::string_view(padded).substr(0, envelope_line.size()));
    std::lock_guard lock(m_store_mutex);
    auto key = m_fingerprinter->fingerprint(parser);
    if (!key.fingerprint) {
        outcome.kind = DedupOutcome::Kind::missing_key;
        outcome.missing_path = key.missing_path;
        return outcome;
    }
    outcome.fingerprint = *key.fingerprint;
    store::FingerprintClaim fingerprint_claim;
    fingerprint_claim.fingerprint = key.fingerprint->bytes;
    fingerprint_claim.event_time = received_at;
    fingerprint_claim.expires_at = received_at + m_options.dedup->ttl;
    fingerprint_claim.source = m_capture.name();
    fingerprint_claim.line = 0;
    std::vector<store::FingerprintResult> result;
    try {
        write_back_locked();
        result = m_store->fingerprints().claim_fingerprints(m_options.dedup->scope,
                                                            {fingerprint_claim}, now_utc());
        m_store->commit();
    } catch (const StoreError&) {
        if (m_options.dedup->on_store_error != LiveDedup::OnStoreError::local) throw;
        // --on-store-error local: this process judges, and remembers what
        // it let through for the store.
        if (!m_local_store) m_local_store = store::open_store(store::parse_store_uri(":memory:"));
        result = m_local_store->fingerprints().claim_fingerprints(m_options.dedup->scope,
                                                                  {fingerprint_claim}, now_utc());
        if (result.front().first) m_to_write_back.push_back(fingerprint_claim);
        outcome.degraded = true;
    }
    outcome.seen_count = result.front().seen_count;
    outcome.kind = result.front().first ? DedupOutcome::Kind::first : DedupOutcome::Kind::duplicate;
    return outcome;
}

// What was judged in the process while the store was down goes to the store
// as soon as it answers (under m_store_mutex). Throws StoreError while it
// does not.
void Gateway::write_back_locked() {
    if (m_to_write_back.empty()) return;
    auto answers = m_store->fingerprints().claim_fingerprints(m_options.dedup->scope,
                                                              m_to_write_back, now_utc());
    m_store->commit();
    auto already = std::count_if(answers.begin(), answers.end(),
                                 [](const auto& answer) { return !answer.first; });
    warn("listen", fmt::format("the dedup store is back: wrote {} fingerprint{} judged in this "
                               "process back to it{}",
                               m_to_write_back.size(), m_to_write_back.size() == 1 ? "" : "s",
                               already > 0 ? fmt::format(" ({} another instance had claimed "
                                                         "meanwhile)",
                                                         already)
                                           : std::string()));
    m_to_write_back.clear();
    m_local_store.reset();
}

// A claimed delivery that was not answered 2xx will come again: it must be
// first again then, not a duplicate of itself.
void Gateway::release(const DedupOutcome& outcome) {
    std::lock_guard lock(m_store_mutex);
    try {
        if (outcome.degraded) {
            if (m_local_store)
                m_local_store->fingerprints().release_fingerprint(
                    m_options.dedup->scope, outcome.fingerprint.bytes, now_utc());
            std::erase_if(m_to_write_back, [&](const store::FingerprintClaim& claim) {
                return claim.fingerprint == outcome.fingerprint.bytes;
            });
            return;
        }
        m_store->fingerprints().release_fingerprint(m_options.dedup->scope,
                                                    outcome.fingerprint.bytes, now_utc());
        m_store->commit();
    } catch (const StoreError& error) {
        // The claim stays: the sender's retry will be taken for a duplicate
        // until the claim expires. Said, so the capture can be replayed.
        warn("listen", fmt::format("cannot release the claim of fingerprint {} ({}): a retry of "
                                   "it may be answered as a duplicate",
                                   outcome.fingerprint.hex(), error.what()));
    }
}

net::TransferResult Gateway::forward(const net::IncomingRequest& request,
                                     const std::optional<Trace>& trace) {
    thread_local std::unique_ptr<net::HttpClient> client;
    if (!client) client = std::make_unique<net::HttpClient>(m_options.forward_timeouts);
    net::OutgoingRequest outgoing;
    outgoing.method = request.head.method;
    // OPTIONS * asks about the server as a whole: it goes to the target's own path.
    outgoing.url = net::url_for(m_forward_target, request.head.target == "*" ? std::string_view()
                                                                             : request.head.target);
    for (const auto& [name, value] : request.head.headers) {
        if (net::is_hop_by_hop(name)) continue;
        // The trace goes on with the listen hop's span as its parent.
        if (trace &&
            (iequals(name, "traceparent") || (trace->started && iequals(name, "tracestate"))))
            continue;
        outgoing.headers.emplace_back(name, value);
    }
    if (trace)
        outgoing.headers.emplace_back(
            "traceparent", net::format_traceparent(trace->trace_id, trace->span_id, trace->flags));
    outgoing.body = request.body;
    return client->send(std::move(outgoing));
}

net::Response Gateway::handle(net::IncomingRequest& request) {
    Delivery delivery;
    auto number = ++m_counters.requests;
    delivery.id = fmt::format("{}_{:06}", m_id_prefix, number);
    delivery.trace = trace_of(request);
    delivery.verdict = judge(request, delivery.id);
    delivery.decision = decide(m_options.flaky, number);
    delivery.status = delivery.decision.status;
    delivery.accepted = delivery.decision.kind == FlakyDecision::Kind::answer;
    if (delivery.verdict && !delivery.verdict->valid) {
        // Forged deliveries go no further: not into the dedup store, not upstream.
        delivery.status = 401;
        delivery.decision.kind = FlakyDecision::Kind::answer;
        delivery.accepted = false;
        ++m_counters.invalid;
        warn(request.remote,
             fmt::format("{} {}: invalid signature: {}: answered 401", request.head.method,
                         request.head.target, delivery.verdict->reason));
    }
    delivery.line.reserve(request.body.size() + 512);
    record::append_envelope(delivery.line, {delivery.id, request.received_at, request.head.method,
                                            request.head.target, &request.head.headers,
                                            request.body, request.remote});
    if (delivery.accepted && m_store) screen_duplicate(delivery, request);
    if (delivery.accepted && !m_options.forward_to.empty()) pass_on(delivery, request);
    if (delivery.claim && (!delivery.success() || delivery.dropped())) release(*delivery.claim);
    return capture_and_answer(delivery, request);
}

void Gateway::screen_duplicate(Delivery& delivery, const net::IncomingRequest& request) {
    DedupOutcome outcome;
    try {
        outcome = claim(delivery.line, request.received_at);
    } catch (const StoreError& error) {
        // Whether this is a duplicate cannot be known: the sender is told
        // to come back (503, Retry-After), the request is still captured,
        // and the store's message stays on stderr, once per outage.
        delivery.status = 503;
        delivery.accepted = false;
        delivery.store_failed = true;
        delivery.live += ",\"dedup\":{\"store\":\"unavailable\"}";
        ++m_counters.store_unavailable;
        if (!m_store_down.exchange(true))
            warn(request.remote,
                 fmt::format("the dedup store failed ({}): answering 503 until it is back",
                             error.what()));
        return;
    }
    // (With local, the write-back says the store is back.)
    if (!outcome.degraded && m_store_down.exchange(false) &&
        m_options.dedup->on_store_error == LiveDedup::OnStoreError::unavailable)
        warn(request.remote, fmt::format("the dedup store is back after {} request{} answered 503",
                                         m_counters.store_unavailable.load(),
                                         m_counters.store_unavailable == 1 ? "" : "s"));
    auto& live = delivery.live;
    if (outcome.kind == DedupOutcome::Kind::missing_key) {
        live += ",\"dedup\":{\"missing\":";
        record::append_json_string(live, outcome.missing_path);
        live += '}';
        warn(request.remote,
             fmt::format("{} {}: cannot fingerprint ({} is missing): passed on "
                         "unchecked for duplicates",
                         request.head.method, request.head.target, quote(outcome.missing_path)));
        return;
    }
    delivery.duplicate = outcome.kind == DedupOutcome::Kind::duplicate;
    live +=
        fmt::format(",\"dedup\":{{\"fingerprint\":\"{}\",\"duplicate\":{},\"seen_count\":{}{}}}",
                    outcome.fingerprint.hex(), delivery.duplicate, outcome.seen_count,
                    outcome.degraded ? ",\"degraded\":true" : "");
    if (outcome.degraded) {
        ++m_counters.degraded;
        if (!m_store_down.exchange(true))
            warn(request.remote, "the dedup store failed: judging within this process "
                                 "(--on-store-error local) until it is back");
    }
    if (delivery.duplicate) {
        ++m_counters.duplicates;
        delivery.accepted = false; // answered as the first copy was, not passed on
    } else {
        delivery.claim = outcome;
    }
}

void Gateway::pass_on(Delivery& delivery, const net::IncomingRequest& request) {
    delivery.upstream = forward(request, delivery.trace);
    const auto& upstream = *delivery.upstream;
    switch (upstream.transport) {
    case net::TransferResult::Transport::answered: {
        if (!net::is_final_status(upstream.status)) {
            ++m_counters.upstream_not_final;
            break;
        }
        ++m_counters.forwarded;
        auto family = upstream.status / 100;
        (family == 2   ? m_counters.upstream_2xx
         : family == 3 ? m_counters.upstream_3xx
         : family == 4 ? m_counters.upstream_4xx
                       : m_counters.upstream_5xx)++;
        break;
    }
    case net::TransferResult::Transport::not_sent:
        ++m_counters.upstream_not_sent;
        break;
    case net::TransferResult::Transport::lost_after_send:
        ++m_counters.upstream_lost;
        break;
    }
    if (upstream.transport == net::TransferResult::Transport::answered &&
        !net::is_final_status(upstream.status)) {
        delivery.status = 502;
        delivery.live += fmt::format(",\"forward\":{{\"status\":{},\"error\":\"not a final HTTP "
                                     "status\"}}",
                                     upstream.status);
        delivery.upstream.reset();
        warn(request.remote, fmt::format("{} answered status {}, which is not a final HTTP status "
                                         "(200-599): answered 502",
                                         m_options.forward_to, upstream.status));
        return;
    }
    if (upstream.transport == net::TransferResult::Transport::answered) {
        delivery.status = upstream.status;
        delivery.live += fmt::format(",\"forward\":{{\"status\":{}}}", delivery.status);
        return;
    }
    delivery.status = 502;
    delivery.live += ",\"forward\":{\"error\":";
    record::append_json_string(delivery.live, upstream.error);
    delivery.live += '}';
    warn(request.remote, fmt::format("cannot forward to {}: {}: answered 502", m_options.forward_to,
                                     upstream.error));
}

net::Response Gateway::capture_and_answer(Delivery& delivery, const net::IncomingRequest& request) {
    std::string member = delivery.dropped() ? "\"listen\":{\"dropped\":true" + delivery.live + "}"
                                            : fmt::format("\"listen\":{{\"status\":{}{}}}",
                                                          delivery.status, delivery.live);
    if (delivery.verdict) {
        member += ',';
        verify::append_verdict(member, *delivery.verdict);
    }
    if (delivery.trace) {
        // Lifted out of the headers for reconcile to join on (--key
        // received=_idem.trace.trace_id).
        const auto& trace = *delivery.trace;
        member += ",\"trace\":{\"trace_id\":\"" + trace.trace_id + "\",\"span_id\":\"" +
                  trace.span_id + '"';
        if (!trace.parent_id.empty()) member += ",\"parent_id\":\"" + trace.parent_id + '"';
        member += ",\"flags\":\"" + trace.flags + '"';
        if (!trace.state.empty()) {
            member += ",\"tracestate\":";
            record::append_json_string(member, trace.state);
        }
        if (trace.started) member += ",\"started\":true";
        member += '}';
    }
    auto line = record::annotate(delivery.line, false, member);
    net::Response response;
    if (!m_capture.append_line(line)) {
        // Never answer 2xx for what is not in the capture: the sender retries.
        if (delivery.claim && delivery.success()) release(*delivery.claim);
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
    m_counters.captured_bytes += line.size() + 1;
    if (m_options.flaky.delay.count() > 0) std::this_thread::sleep_for(m_options.flaky.delay);
    if (delivery.dropped()) {
        ++m_counters.dropped;
        response.drop_connection = true;
        return response;
    }
    (delivery.success() ? m_counters.answered_2xx : m_counters.answered_other)++;
    auto answered = answer(delivery);
    m_counters.observe_latency(now_utc() - request.received_at);
    return answered;
}

net::Response Gateway::answer(Delivery& delivery) const {
    net::Response response;
    response.status = delivery.status;
    if (delivery.upstream &&
        delivery.upstream->transport == net::TransferResult::Transport::answered) {
        // Only a well-formed Retry-After travels on: a value with a CR or LF
        // in it would write a header of the upstream's choosing to the sender.
        if (net::is_retry_after_value(delivery.upstream->retry_after))
            response.headers.emplace_back("Retry-After", delivery.upstream->retry_after);
        response.body = std::move(delivery.upstream->body);
        return response;
    }
    if (delivery.store_failed) {
        response.headers.emplace_back("Retry-After", "5");
        response.headers.emplace_back("Content-Type", "text/plain; charset=utf-8");
        response.body = "temporarily unavailable; retry later\n";
        return response;
    }
    if (!delivery.success() && m_options.flaky.retry_after)
        response.headers.emplace_back(
            "Retry-After",
            std::to_string(
                std::chrono::ceil<std::chrono::seconds>(*m_options.flaky.retry_after).count()));
    response.headers.emplace_back("Content-Type", "application/json");
    response.body = "{\"captured\":";
    record::append_json_string(response.body, delivery.id);
    if (delivery.verdict && !delivery.verdict->valid) {
        // Why a signature failed helps a forger; it stays in the capture and
        // on stderr unless --tell-sender-why asks for it (local development).
        response.body += ",\"error\":";
        record::append_json_string(response.body,
                                   m_options.tell_sender_why
                                       ? "invalid signature: " + delivery.verdict->reason
                                       : std::string("invalid signature"));
    }
    if (m_store) response.body += fmt::format(",\"duplicate\":{}", delivery.duplicate);
    response.body += "}\n";
    return response;
}

std::optional<Trace> Gateway::trace_of(const net::IncomingRequest& request) {
    std::optional<net::TraceParent> parent;
    std::string state;
    int parents = 0;
    for (const auto& [name, value] : request.head.headers) {
        if (iequals(name, "traceparent")) {
            ++parents;
            parent = net::parse_traceparent(value);
        } else if (iequals(name, "tracestate")) {
            // Several tracestate headers are one list (RFC 9110 field lines).
            if (!state.empty()) state += ',';
            state += value;
        }
    }
    if (parents > 1) parent.reset(); // two traceparents: neither can be trusted
    if (!parent && !m_options.trace_ids) return std::nullopt;
    Trace trace;
    if (parent) {
        trace.trace_id = std::move(parent->trace_id);
        trace.parent_id = std::move(parent->parent_id);
        trace.flags = std::move(parent->flags);
        trace.state = std::move(state);
    } else {
        // A new trace: what tracestate came with an invalid parent is
        // dropped with it, as the spec asks.
        trace.trace_id = net::new_trace_id();
        trace.flags = "01";
        trace.started = true;
        ++m_counters.traces_started;
    }
    trace.span_id = net::new_span_id();
    ++m_counters.traced;
    return trace;
}

net::Response Gateway::metrics(const net::IncomingRequest& request) const {
    return detail::metrics_response(m_counters, request);
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
                        const std::function<void(int port)>& on_listening,
                        const std::function<void(int port)>& on_metrics) {
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
    callbacks.notice = [&gateway](const std::string& message) { gateway.notice(message); };
    callbacks.tick = [&gateway] { gateway.show_progress(); };
    // The metrics endpoint: a server of its own on its own socket, so a
    // scrape is never a delivery and a flood of deliveries never starves it.
    std::unique_ptr<net::HttpServer> metrics_server;
    std::thread metrics_thread;
    // Stopped after the capture's server has finished its last request:
    // the final counts can still be scraped while it drains.
    std::atomic<bool> metrics_stop{false};
    if (options.metrics_port >= 0) {
        net::ServerLimits limits;
        limits.max_body_bytes = 0;
        limits.max_connections = 64;
        limits.max_pending_requests = 16;
        limits.handler_threads = 1;
        metrics_server = std::make_unique<net::HttpServer>(options.metrics_address,
                                                           options.metrics_port, limits);
        if (on_metrics) on_metrics(metrics_server->port());
        metrics_thread = std::thread([&] {
            net::ServerCallbacks scrape;
            scrape.handle = [&gateway](net::IncomingRequest& request) {
                return gateway.metrics(request);
            };
            scrape.refused = [](const net::RefusedRequest&) {};
            scrape.notice = [&gateway](const std::string& message) { gateway.notice(message); };
            metrics_server->serve(scrape, metrics_stop);
        });
    }
    if (on_listening) on_listening(server.port());
    auto stop_metrics = [&] {
        metrics_stop = true;
        if (metrics_thread.joinable()) metrics_thread.join();
    };
    try {
        server.serve(callbacks, stop);
    } catch (...) {
        stop_metrics();
        throw;
    }
    stop_metrics();
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
                             {"duplicates", counters.duplicates},
                             {"refused", counters.refused},
                             {"store_unavailable", counters.store_unavailable},
                             {"degraded", counters.degraded}};
    if (!options.forward_to.empty()) {
        result.summary.counts.emplace_back("forwarded", counters.forwarded);
        result.summary.counts.emplace_back("upstream_failed", counters.upstream_not_final +
                                                                  counters.upstream_not_sent +
                                                                  counters.upstream_lost);
    }
    if (counters.traced > 0 || options.trace_ids) {
        result.summary.counts.emplace_back("traced", counters.traced);
        result.summary.counts.emplace_back("traces_started", counters.traces_started);
    }
    result.summary.facts = {{"capture", capture.name()}};
    result.summary.seconds = io::seconds_since(start);
    return result;
}

} // namespace idem::listen
