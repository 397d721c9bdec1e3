#include "idem/probe/run.hpp"

#include "idem/crypto/crypto.hpp"
#include "idem/io/sink.hpp"
#include "idem/net/hang_up.hpp"
#include "idem/net/http_client.hpp"
#include "idem/net/target.hpp"
#include "idem/record/parser.hpp"
#include "idem/util/encoding.hpp"
#include "idem/util/errors.hpp"
#include "idem/util/shell_command.hpp"
#include "idem/util/text.hpp"
#include "idem/verify/signer.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <fmt/format.h>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <system_error>

namespace idem::probe {

namespace {

using Json = nlohmann::ordered_json;

// The delivery every check starts from: its event (parsed, so ids can be
// made unique per check) and the headers an envelope template carried.
struct Template {
    Json event;
    net::HeaderPairs headers;
    std::string source; // "file:line", or "built-in"
};

Json built_in_event() {
    return Json::parse(R"({"id":"evt_idem_probe","object":"event","type":"idem.probe",)"
                       R"("data":{"object":{"id":"obj_idem_probe","amount":100}}})");
}

// A header name (a token) or value (visible ASCII, spaces and tabs, and
// UTF-8 bytes; never CR, LF, NUL or another control).
bool header_safe(std::string_view text, bool value) {
    if (!value && text.empty()) return false;
    return std::all_of(text.begin(), text.end(), [value](char c) {
        auto byte = static_cast<unsigned char>(c);
        if (value) return byte >= 0x80 || (byte >= 0x20 && byte != 0x7f) || byte == '\t';
        return byte > 0x20 && byte < 0x7f && byte != ':';
    });
}

std::vector<Template> read_templates(const ProbeOptions& options) {
    std::vector<Template> read;
    if (!options.has_templates) {
        read.push_back({built_in_event(), {}, "built-in"});
        return read;
    }
    run::InputStream input(options.templates, nullptr);
    record::RecordParser parser;
    while (auto raw = input.next()) {
        auto where = fmt::format("{}:{}", *raw->source, raw->line);
        if (raw->oversized_bytes || parser.parse(raw->bytes))
            throw UsageError(fmt::format("--template {}: not a JSON record", where));
        Template made;
        made.source = where;
        std::string_view body = record::event_text(raw->bytes);
        if (parser.shape() == record::RecordShape::envelope) {
            const auto& envelope = parser.envelope();
            body = envelope.body;
            for (const auto& header : envelope.headers) {
                if (net::is_hop_by_hop(header.name) || iequals(header.name, options.key_header))
                    continue;
                // A template may come from a capture: nothing in it may add
                // a header line or end the head of the request.
                if (!header_safe(header.name, false) || !header_safe(header.value, true))
                    throw UsageError(fmt::format("--template {}: header {} holds a character no "
                                                 "HTTP header may (a line break, a control)",
                                                 where, quote(header.name, 40)));
                made.headers.emplace_back(std::string(header.name), std::string(header.value));
            }
        }
        made.event = Json::parse(body, nullptr, false);
        if (!made.event.is_object())
            throw UsageError(fmt::format("--template {}: the event (an envelope's body) is not a "
                                         "JSON object, which probe needs to give each check its "
                                         "own ids",
                                         where));
        read.push_back(std::move(made));
    }
    if (read.empty()) throw UsageError("--template: no record in the template files");
    return read;
}

// The value at `path` in `event`, or null when there is none.
Json* value_at(Json& event, const record::FieldPath& path) {
    Json* at = &event;
    for (const auto& segment : path.segments()) {
        if (at->is_object()) {
            auto found = at->find(segment);
            if (found == at->end()) return nullptr;
            at = &*found;
        } else if (at->is_array() && !segment.empty() &&
                   segment.find_first_not_of("0123456789") == std::string::npos) {
            auto index = std::stoul(segment);
            if (index >= at->size()) return nullptr;
            at = &(*at)[index];
        } else {
            return nullptr;
        }
    }
    return at;
}

// Sets `value` at `path` in `event`, making the objects on the way; false
// when something on the way is not an object (the template has a value
// there that a provider's field could not be under).
bool set_at(Json& event, const record::FieldPath& path, Json value) {
    Json* at = &event;
    const auto& segments = path.segments();
    for (std::size_t i = 0; i < segments.size(); ++i) {
        if (!at->is_object()) return false;
        at = &(*at)[segments[i]];
        if (i + 1 < segments.size() && at->is_null()) *at = Json::object();
    }
    *at = std::move(value);
    return true;
}

std::string scalar_text(const Json& value) {
    return value.is_string() ? value.get<std::string>() : value.dump();
}

// One delivery to make: an event with its ids, the key it goes under.
struct Delivery {
    std::string label;
    Json event;
    net::HeaderPairs headers;
    std::string key;
    std::string id;
    std::string url; // "" : --to
};

class Prober {
public:
    Prober(ProbeOptions& options, io::Diagnostics& diagnostics)
        : m_options(options), m_diagnostics(diagnostics),
          m_target(net::parse_target(options.to, "--to")), m_templates(read_templates(options)),
          m_client(net::Timeouts{std::chrono::seconds(2), request_timeout(options.deadline)},
                   64 << 10) {
        std::random_device random;
        m_tag = fmt::format("{:08x}", random());
        if (options.key_path)
            for (auto& made : m_templates) {
                auto* value = value_at(made.event, *options.key_path);
                if (!value || !(value->is_string() || value->is_number_integer()))
                    throw UsageError(fmt::format("--key {}: {} holds no string or integer there",
                                                 options.key_path->text(), made.source));
            }
        if (options.order_path) {
            if (m_templates.size() < 2)
                throw UsageError("--order: out-of-order needs two or more --template events "
                                 "(sent newest first)");
            for (auto& made : m_templates)
                if (!value_at(made.event, *options.order_path))
                    throw UsageError(fmt::format("--order {}: {} has no value there",
                                                 options.order_path->text(), made.source));
        }
        for (const auto& field : options.vary)
            for (auto& made : m_templates) {
                auto trial = made.event;
                if (!set_at(trial, field.path, Json(1)))
                    throw UsageError(fmt::format("--vary {}: {} holds a value on the way that is "
                                                 "not an object",
                                                 field.path.text(), made.source));
            }
        if (options.signing) {
            m_signer = std::make_unique<verify::Signer>(*options.signing);
            m_forger = forger(*options.signing);
        }
        if (!options.ledger_path.empty()) m_ledger = io::Sink::create_file(options.ledger_path);
    }

    ProbeResult run() {
        if (!m_options.effects)
            m_diagnostics.warning({m_options.to, 0, 0, 0},
                                  "no --effects-sqlite, --effects-url or --effects-cmd: the "
                                  "checks judge statuses only (effects: unobserved)");
        ProbeResult made;
        made.target = m_options.to;
        made.effects = m_options.effects ? std::string(m_options.effects->kind()) : "unobserved";
        JudgeRules rules{m_options.expect_payload_dedup,
                         m_options.deadline,
                         m_target.path.empty() ? std::string("/") : m_target.path,
                         m_options.also_to,
                         {}};
        for (const auto& field : m_options.vary)
            rules.varied.push_back(field.path.text());
        rules.expect_draft = m_options.expect_draft;
        std::vector<Observation> observed;
        bool slow_answer = false;
        for (auto check : all_checks()) {
            if (!chosen(check)) continue;
            if (check == Check::slow_answer) {
                slow_answer = true;
                continue;
            }
            auto started = steady_now();
            m_observed_lag = Duration{0};
            auto observation = observe(check);
            if (m_observed_lag > m_options.settle) observation.acted_after_answer = m_observed_lag;
            auto judged = judge(check, observation, rules);
            judged.elapsed = std::chrono::duration_cast<Duration>(steady_now() - started);
            made.checks.push_back(std::move(judged));
            observed.push_back(std::move(observation));
        }
        if (slow_answer) made.checks.push_back(judge_slow_answer(made.checks, observed, rules));
        if (m_ledger) m_ledger->flush();
        made.requests = m_requests;
        return made;
    }

private:
    static Duration request_timeout(Duration deadline) {
        return std::max<Duration>(deadline * 2, deadline + std::chrono::seconds(5));
    }

    // A signer whose signatures no secret of the user's makes.
    static std::unique_ptr<verify::Signer> forger(const verify::VerifyConfig& config) {
        auto forged = config;
        forged.secrets.clear();
        forged.public_keys.clear();
        bool standard =
            config.scheme == verify::Scheme::standard || config.scheme == verify::Scheme::svix;
        // Valid as raw bytes, hex, base64 and an ed25519 seed alike.
        std::string wrong = standard ? "whsec_aWRlbS1wcm9iZS1mb3JnZWQtc2lnbmF0dXJlLWtleQ=="
                                     : "f0e1d2c3b4a5968778695a4b3c2d1e0ff0e1d2c3b4a5968778695a4b3c2"
                                       "d1e0f";
        forged.secrets.push_back(verify::make_secret(wrong, "forged"));
        return std::make_unique<verify::Signer>(forged);
    }

    bool chosen(Check check) const {
        return m_options.checks.empty() ||
               std::find(m_options.checks.begin(), m_options.checks.end(), check) !=
                   m_options.checks.end();
    }

    Timestamp logical_now() const { return now_utc() + m_jump; }

    // Waits `logical` as the handler's clock sees it: with a clock header
    // probe tells it the time, so only logical/--speed passes for real.
    void wait(Duration logical, bool compressible) {
        auto real = logical;
        if (compressible) {
            real = std::chrono::duration_cast<Duration>(logical / m_options.speed);
            if (!m_options.clock_header.empty()) m_jump += logical - real;
        }
        pause(real);
    }

    void pause(Duration real) {
        if (real <= Duration{0}) return;
        if (m_options.pause) m_options.pause(real);
    }

    // The delivery of template `index` for `check`, its ids made its own.
    Delivery delivery(std::string_view check, std::string label, std::size_t index = 0,
                      std::string_view suffix = {}) {
        const auto& from = m_templates.at(index);
        Delivery made{std::move(label), from.event, from.headers, {}, {}, {}};
        auto tag = fmt::format("{}-{}{}", m_tag, check, suffix);
        if (m_options.key_path) {
            auto* value = value_at(made.event, *m_options.key_path);
            made.id = fmt::format("{}.probe-{}", scalar_text(*value), tag);
            *value = made.id;
            // The event's own value is the key when a header can carry it
            // as it is (replay's rule); otherwise a digest of it.
            made.key =
                header_safe(made.id, false) && made.id.size() <= 200
                    ? made.id
                    : "idem-" +
                          hex_encode(crypto::hash(crypto::HashAlgorithm::sha256, made.id).view())
                              .substr(0, 32);
            return made;
        }
        made.key = fmt::format("probe-{}", tag);
        auto id = made.event.find("id");
        if (id != made.event.end() && (id->is_string() || id->is_number_integer())) {
            made.id = fmt::format("{}.probe-{}", scalar_text(*id), tag);
            *id = made.id;
        } else {
            made.id = made.key;
        }
        return made;
    }

    enum class Signature { valid, forged, stale };

    net::OutgoingRequest request_for(const Delivery& delivery, Signature signature) {
        net::OutgoingRequest request;
        request.method = "POST";
        // Never a path or host from the template: --to, or --also-to's path
        // on --to's origin.
        request.url = delivery.url.empty() ? m_options.to : delivery.url;
        request.body = varied(delivery).dump();
        bool has_content_type = false;
        for (const auto& [name, value] : delivery.headers) {
            if (iequals(name, "Content-Type")) has_content_type = true;
            request.headers.emplace_back(name, value);
        }
        if (!has_content_type) request.headers.emplace_back("Content-Type", "application/json");
        if (!m_options.key_header.empty())
            request.headers.emplace_back(m_options.key_header, delivery.key);
        auto now = logical_now();
        if (!m_options.clock_header.empty())
            request.headers.emplace_back(m_options.clock_header, format_rfc3339(now));
        if (m_signer) {
            auto at = signature == Signature::stale ? now - stale_age() : now;
            const auto& signer = signature == Signature::forged ? *m_forger : *m_signer;
            for (auto& signed_header : sign(signer, request, at)) {
                const auto& name = signed_header.first;
                std::erase_if(request.headers,
                              [&](const auto& header) { return iequals(header.first, name); });
                request.headers.emplace_back(std::move(signed_header));
            }
        }
        return request;
    }

    // The delivery's event with each --vary field set for this copy: its
    // attempt (1 for the first copy of the key sent, 2 for the next...), the
    // time probe sends it, a fresh UUID.
    Json varied(const Delivery& delivery) {
        if (m_options.vary.empty()) return delivery.event;
        auto event = delivery.event;
        auto attempt = ++m_attempts[delivery.key];
        for (const auto& field : m_options.vary) {
            Json value;
            switch (field.kind) {
            case VariedField::Kind::attempt:
                value = attempt;
                break;
            case VariedField::Kind::now:
                value = format_rfc3339(logical_now());
                break;
            case VariedField::Kind::uuid:
                value = random_uuid();
                break;
            }
            set_at(event, field.path, std::move(value));
        }
        return event;
    }

    std::string random_uuid() {
        std::uniform_int_distribution<std::uint32_t> word;
        std::array<std::uint32_t, 4> bits{word(m_random), word(m_random), word(m_random),
                                          word(m_random)};
        bits[1] = (bits[1] & 0xffff0fffU) | 0x00004000U; // version 4
        bits[2] = (bits[2] & 0x3fffffffU) | 0x80000000U; // RFC 9562 variant
        return fmt::format("{:08x}-{:04x}-{:04x}-{:04x}-{:04x}{:08x}", bits[0], bits[1] >> 16,
                           bits[1] & 0xffffU, bits[2] >> 16, bits[2] & 0xffffU, bits[3]);
    }

    Duration stale_age() const { return m_options.signing->tolerance + std::chrono::minutes(1); }

    verify::HeaderList sign(const verify::Signer& signer, const net::OutgoingRequest& request,
                            Timestamp at) {
        Json envelope;
        envelope["idem"] = 1;
        envelope["method"] = request.method;
        envelope["path"] =
            m_target.path.empty() ? std::string("/") : m_target.path + m_target.query;
        auto headers = Json::array();
        for (const auto& [name, value] : request.headers)
            headers.push_back({name, value});
        envelope["headers"] = headers;
        envelope["body"] = request.body;
        m_envelope_text = envelope.dump();
        m_envelope_text.reserve(m_envelope_text.size() + 64);
        if (m_parser.parse(m_envelope_text))
            throw std::logic_error("probe: an envelope it made does not parse");
        return signer.signature_headers(m_parser.envelope(), at);
    }

    // Whether the scheme signs a time: a signature made at another time differs.
    bool signs_time() {
        if (!m_signer) return false;
        net::OutgoingRequest request;
        request.body = "{}";
        auto now = now_utc();
        return sign(*m_signer, request, now) !=
               sign(*m_signer, request, now - std::chrono::hours(1));
    }

    Answer answer_of(const Delivery& delivery, const net::TransferResult& transfer,
                     Timestamp sent_at) {
        Answer answer;
        answer.label = delivery.label;
        answer.key = delivery.key;
        answer.sent_at = sent_at;
        answer.latency = transfer.latency;
        switch (transfer.transport) {
        case net::TransferResult::Transport::answered:
            answer.outcome = Answer::Outcome::answered;
            answer.status = transfer.status;
            answer.digest = transfer.digest;
            answer.body_start = utf8_prefix(transfer.body, k_answer_excerpt);
            answer.retry_after = transfer.retry_after.substr(0, 64);
            answer.key_headers = transfer.key_headers;
            break;
        case net::TransferResult::Transport::not_sent:
            answer.outcome = Answer::Outcome::unreachable;
            answer.error = transfer.error;
            break;
        case net::TransferResult::Transport::lost_after_send:
            answer.outcome = Answer::Outcome::no_answer;
            answer.error = transfer.error;
            break;
        }
        return answer;
    }

    // The target is unreachable when the run's first request cannot
    // connect: nothing can be judged (exit 4).
    void first_contact(const Answer& answer) {
        if (m_requests > 1) return;
        if (answer.outcome == Answer::Outcome::unreachable)
            throw NetworkError(
                fmt::format("cannot reach {}: {}", quote(m_options.to), answer.error));
    }

    void record(std::string_view check, const Delivery& delivery, const Answer& answer) {
        if (!m_ledger) return;
        nlohmann::ordered_json line{{"check", check},
                                    {"request", answer.label},
                                    {"key", delivery.key},
                                    {"id", delivery.id},
                                    {"sent_at", format_rfc3339(answer.sent_at)}};
        switch (answer.outcome) {
        case Answer::Outcome::answered:
            line["outcome"] = "answered";
            line["status"] = answer.status;
            line["body_sha256"] = answer.digest;
            break;
        case Answer::Outcome::unreachable:
            line["outcome"] = "unreachable";
            break;
        case Answer::Outcome::no_answer:
            line["outcome"] = "no_answer";
            break;
        case Answer::Outcome::hung_up:
            line["outcome"] = "hung_up";
            break;
        }
        if (!answer.error.empty()) line["error"] = answer.error;
        line["latency_ms"] =
            std::round(std::chrono::duration<double, std::milli>(answer.latency).count() * 1000) /
            1000;
        m_ledger->write_record(line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    }

    Answer send(std::string_view check, const Delivery& delivery,
                Signature signature = Signature::valid, const net::HeaderPairs& extra = {}) {
        auto request = request_for(delivery, signature);
        for (const auto& header : extra)
            request.headers.push_back(header);
        auto sent_at = logical_now();
        ++m_requests;
        auto answer = answer_of(delivery, m_client.send(std::move(request)), sent_at);
        first_contact(answer);
        record(check, delivery, answer);
        return answer;
    }

    // --restart-cmd, waited for, then the handler asked (a GET to --to:
    // any answer will do) until it answers again. Empty, or why the
    // restart did not happen.
    std::string restart() {
        ShellCommand shell;
        shell.command = m_options.restart_cmd;
        shell.timeout = m_options.restart_timeout;
        // A handler started in the background keeps what it inherits:
        // never probe's output (or a test's pipe that reads it).
        shell.capture_output = false;
        shell.discard_errors = true;
        ShellCommandResult ran;
        try {
            ran = run_shell_command(shell);
        } catch (const std::system_error& error) {
            return fmt::format("--restart-cmd cannot start: {}", error.what());
        }
        if (ran.timed_out)
            return fmt::format("--restart-cmd did not end within {}",
                               format_duration(m_options.restart_timeout));
        if (ran.exit_code != 0)
            return fmt::format("--restart-cmd exited {}: the handler was not restarted",
                               ran.exit_code);
        auto until = steady_now() + m_options.restart_timeout;
        while (steady_now() < until) {
            net::OutgoingRequest ask;
            ask.method = "GET";
            ask.url = m_options.to;
            ++m_requests;
            auto answer = m_client.send(std::move(ask));
            if (answer.transport == net::TransferResult::Transport::answered) return {};
            pause(std::chrono::milliseconds(100));
        }
        return fmt::format("the handler did not answer within {} of --restart-cmd",
                           format_duration(m_options.restart_timeout));
    }

    // A delivery's side effects, read after --settle. A handler that acts
    // after it answers (a queue) shows them late: while the reading is 0
    // and one is expected it is read again, for up to k_longest_lag; how
    // long after the answer it grew is the handler's lag, learned for the
    // run. Every later reading then waits for the lag (and half again)
    // before it counts, and is read again until it holds, so a second
    // effect that comes after the first reading is still counted.
    enum class Expect { some, none };
    static constexpr Duration k_longest_lag = std::chrono::seconds(5);
    std::optional<std::int64_t> effects(const Delivery& delivery, Expect expect = Expect::some) {
        if (!m_options.effects) return std::nullopt;
        auto answered = steady_now();
        auto read = [&] { return m_options.effects->count(delivery.key, delivery.id); };
        auto lag_wait = m_lag * 3 / 2;
        pause(std::max(m_options.settle, lag_wait));
        auto count = read();
        auto until = answered + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                    std::max(k_longest_lag, lag_wait * 2));
        auto steady_for = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
            std::max<Duration>(std::chrono::milliseconds(200), m_lag / 2));
        auto last_change = steady_now();
        while (steady_now() < until) {
            bool waiting_for_first = count == 0 && expect == Expect::some;
            if (!waiting_for_first && steady_now() - last_change >= steady_for) break;
            pause(std::chrono::milliseconds(50));
            auto again = read();
            if (again == count) continue;
            count = again;
            last_change = steady_now();
            auto lag = std::chrono::duration_cast<Duration>(last_change - answered);
            if (lag > m_options.settle && lag > m_lag) m_lag = lag;
            m_observed_lag = std::max(m_observed_lag, lag);
        }
        return count;
    }

    Observation observe(Check check) {
        auto name = check_name(check);
        Observation observed;
        switch (check) {
        case Check::sequential_duplicate: {
            auto made = delivery(name, "copy 1");
            observed.answers.push_back(send(name, made));
            // A handler still at work on the first (one that answers before
            // it acts) says 409; the provider delivers again later.
            retry_while_in_progress(name, made, observed, "copy 2, attempt");
            observed.effects = effects(made);
            break;
        }
        case Check::concurrent_duplicates:
            observe_concurrent(name, observed);
            break;
        case Check::key_reuse: {
            auto made = delivery(name, "first payload");
            observed.answers.push_back(send(name, made));
            auto other = made;
            other.label = "other payload, same key";
            other.event["idem_probe_variant"] = 2;
            observed.answers.push_back(send(name, other));
            observed.effects = effects(made);
            break;
        }
        case Check::other_endpoint: {
            if (m_options.also_to.empty()) {
                observed.skip_reason = "give --also-to PATH (another endpoint of the same "
                                       "handler) to send the same key there";
                break;
            }
            auto made = delivery(name, "first endpoint");
            observed.answers.push_back(send(name, made));
            auto other = made;
            other.label = fmt::format("same key at {}", m_options.also_to);
            other.url = m_target.origin + m_options.also_to;
            observed.answers.push_back(send(name, other));
            observed.effects = effects(made);
            break;
        }
        case Check::retry_after_drop:
            observe_drop(name, observed);
            break;
        case Check::retry_after_5xx:
            observe_retry_after_5xx(name, observed);
            break;
        case Check::late_retry: {
            if (m_options.clock_header.empty() && !m_options.late_given) {
                observed.skip_reason = fmt::format(
                    "waits {} of real time: give --clock-header for a handler whose clock probe "
                    "may set (then --speed compresses it), or --late to wait",
                    format_duration(m_options.late));
                break;
            }
            auto made = delivery(name, "first");
            observed.answers.push_back(send(name, made));
            wait(m_options.late, !m_options.clock_header.empty());
            made.label = fmt::format("again {} later", format_duration(m_options.late));
            observed.answers.push_back(send(name, made));
            observed.effects = effects(made);
            break;
        }
        case Check::retry_after_restart: {
            if (m_options.restart_cmd.empty()) {
                observed.skip_reason = "give --restart-cmd CMD (how the handler is restarted, as "
                                       "a deploy or a crash does) to restart it between a "
                                       "delivery and its retry";
                break;
            }
            auto made = delivery(name, "before the restart");
            observed.answers.push_back(send(name, made));
            effects(made); // its work is done before the handler goes
            observed.restart_problem = restart();
            if (!observed.restart_problem.empty()) break;
            made.label = "again after the restart";
            observed.answers.push_back(send(name, made));
            observed.effects = effects(made);
            break;
        }
        case Check::regenerated_key: {
            if (m_options.key_path) {
                observed.skip_reason = "--key takes the key from the event: a new key would be "
                                       "a new payload";
                break;
            }
            auto made = delivery(name, "first key");
            observed.answers.push_back(send(name, made));
            auto again = made;
            again.label = "same payload, new key";
            again.key = made.key + "-regenerated";
            observed.answers.push_back(send(name, again));
            if (m_options.effects)
                observed.effects = *effects(made) + *effects(again, Expect::none);
            break;
        }
        case Check::forged_signature: {
            if (!m_signer) {
                observed.skip_reason = "give --scheme and --secret (the handler's) to send "
                                       "signed deliveries";
                break;
            }
            auto made = delivery(name, "forged");
            observed.answers.push_back(send(name, made, Signature::forged));
            observed.effects = effects(made, Expect::none);
            break;
        }
        case Check::stale_replay: {
            if (!m_signer) {
                observed.skip_reason = "give --scheme and --secret (the handler's) to send "
                                       "signed deliveries";
                break;
            }
            if (!signs_time()) {
                observed.skip_reason = fmt::format(
                    "{} signs no timestamp: a replayed delivery cannot be told by its age",
                    verify::scheme_name(m_options.signing->scheme));
                break;
            }
            auto made = delivery(name, fmt::format("signed {} ago", format_duration(stale_age())));
            observed.answers.push_back(send(name, made, Signature::stale));
            observed.effects = effects(made, Expect::none);
            break;
        }
        case Check::out_of_order:
            observe_out_of_order(name, observed);
            break;
        case Check::slow_answer:
            break;
        }
        return observed;
    }

    void observe_concurrent(std::string_view name, Observation& observed) {
        auto made = delivery(name, "copy");
        std::vector<Timestamp> sent_at(m_options.copies);
        std::vector<Delivery> copies;
        for (std::size_t i = 0; i < m_options.copies; ++i) {
            copies.push_back(made);
            copies.back().label = fmt::format("copy {}", i + 1);
        }
        // Every request is built (and signed) first, then all start at once.
        std::vector<net::OutgoingRequest> requests;
        for (const auto& copy : copies)
            requests.push_back(request_for(copy, Signature::valid));
        for (std::size_t i = 0; i < requests.size(); ++i) {
            sent_at[i] = logical_now();
            ++m_requests;
            m_client.start(i, std::move(requests[i]));
        }
        std::vector<std::optional<Answer>> answers(copies.size());
        while (m_client.in_flight() > 0)
            for (auto& [id, transfer] : m_client.poll(std::chrono::milliseconds(50)))
                answers[id] = answer_of(copies[id], transfer, sent_at[id]);
        for (std::size_t i = 0; i < answers.size(); ++i) {
            first_contact(*answers[i]);
            record(name, copies[i], *answers[i]);
            observed.answers.push_back(std::move(*answers[i]));
        }
        observed.effects = effects(made);
    }

    // In progress (409) after a drop is right; a provider tries again later.
    void retry_while_in_progress(std::string_view name, Delivery& made, Observation& observed,
                                 std::string_view label) {
        for (int attempt = 1; attempt <= 5; ++attempt) {
            made.label = fmt::format("{} {}", label, attempt);
            observed.answers.push_back(send(name, made));
            if (observed.answers.back().status != 409) return;
            pause(std::chrono::milliseconds(200 * attempt));
        }
    }

    void observe_drop(std::string_view name, Observation& observed) {
        if (auto refused = net::hang_up_refused(m_target)) {
            observed.skip_reason = *refused;
            return;
        }
        auto made = delivery(name, "dropped");
        auto request = request_for(made, Signature::valid);
        Answer dropped;
        dropped.label = made.label;
        dropped.key = made.key;
        dropped.sent_at = logical_now();
        ++m_requests;
        auto started = steady_now();
        auto problem = net::send_and_hang_up(m_target, request, std::chrono::seconds(2));
        dropped.latency = std::chrono::duration_cast<Duration>(steady_now() - started);
        dropped.outcome = problem ? Answer::Outcome::unreachable : Answer::Outcome::hung_up;
        if (problem) dropped.error = *problem;
        first_contact(dropped);
        record(name, made, dropped);
        observed.answers.push_back(dropped);
        // The handler goes on with what it read; the provider, its timeout
        // past, delivers again. With side effects observed, once the
        // dropped delivery's shows (or 3 s have passed): the check is
        // whether the handler kept its work when the sender vanished, and
        // concurrent-duplicates already races copies against each other.
        if (m_options.effects) {
            auto until = steady_now() + std::chrono::seconds(3);
            while (m_options.effects->count(made.key, made.id) == 0 && steady_now() < until)
                pause(std::chrono::milliseconds(50));
            // What follows its effect (storing the key, answering) finishes
            // too before the provider's timeout, never zero, runs out.
            pause(std::chrono::milliseconds(300));
        } else {
            pause(std::chrono::milliseconds(300));
        }
        retry_while_in_progress(name, made, observed, "retry");
        observed.effects = effects(made);
    }

    void observe_retry_after_5xx(std::string_view name, Observation& observed) {
        if (!m_options.fail_first) {
            observed.skip_reason = "give --fail-first 'HEADER: VALUE' (a fault the handler "
                                   "answers 5xx to) to test its retries";
            return;
        }
        auto made = delivery(name, "copy with the fault header");
        observed.answers.push_back(send(name, made, Signature::valid, {*m_options.fail_first}));
        for (std::size_t i = 0; i < m_options.schedule.intervals.size(); ++i) {
            wait(m_options.schedule.intervals[i], true);
            made.label = fmt::format("retry {} ({} schedule, +{})", i + 1, m_options.schedule.name,
                                     format_duration(m_options.schedule.intervals[i]));
            observed.answers.push_back(send(name, made));
            if (observed.answers.back().success()) break;
        }
        observed.effects = effects(made);
    }

    void observe_out_of_order(std::string_view name, Observation& observed) {
        if (!m_options.order_path) {
            observed.skip_reason = "give --order PATH (where the template events' order is) and "
                                   "two or more --template events";
            return;
        }
        std::vector<std::size_t> order(m_templates.size());
        for (std::size_t i = 0; i < order.size(); ++i)
            order[i] = i;
        auto value = [&](std::size_t i) {
            return *value_at(m_templates[i].event, *m_options.order_path);
        };
        std::stable_sort(order.begin(), order.end(),
                         [&](std::size_t a, std::size_t b) { return value(a) < value(b); });
        auto round = [&](bool reversed, std::string_view suffix) {
            std::vector<std::size_t> sent(order);
            if (reversed) std::reverse(sent.begin(), sent.end());
            Delivery newest;
            for (auto i : sent) {
                auto made =
                    delivery(name,
                             fmt::format("{} ({} {})", reversed ? "newest first" : "in order",
                                         m_options.order_path->text(), scalar_text(value(i))),
                             i, fmt::format("{}-{}", suffix, i));
                auto answer = send(name, made);
                if (reversed) observed.answers.push_back(answer);
                if (i == order.back()) newest = made;
            }
            return newest;
        };
        auto newest_reversed = round(true, "reversed");
        if (!m_options.effects) return;
        pause(m_options.settle);
        observed.state_reversed = m_options.effects->read(newest_reversed.key, newest_reversed.id);
        auto newest_in_order = round(false, "in-order");
        pause(m_options.settle);
        observed.state_in_order = m_options.effects->read(newest_in_order.key, newest_in_order.id);
    }

    ProbeOptions& m_options;
    io::Diagnostics& m_diagnostics;
    net::Target m_target;
    std::vector<Template> m_templates;
    net::HttpClient m_client;
    std::unique_ptr<verify::Signer> m_signer, m_forger;
    std::unique_ptr<io::Sink> m_ledger;
    record::RecordParser m_parser;
    std::string m_envelope_text;
    std::string m_tag;
    Duration m_jump{0};
    std::uint64_t m_requests = 0;
    std::map<std::string, std::int64_t> m_attempts; // --vary attempt: copies sent per key
    std::mt19937_64 m_random{std::random_device{}()};
    // How long after answering the handler acts, as learned so far, and the
    // longest the current check saw (a reading that grew after the answer).
    Duration m_lag{0};
    Duration m_observed_lag{0};
};

} // namespace

Schedule parse_schedule(std::string_view text) {
    using std::chrono::hours;
    using std::chrono::minutes;
    using std::chrono::seconds;
    // The providers' documented retry intervals (docs/probe.md, "Schedules").
    if (text == "stripe")
        return {"stripe", {minutes(1), minutes(5), minutes(30), hours(2), hours(5), hours(10)}};
    if (text == "svix")
        return {"svix",
                {seconds(5), minutes(5), minutes(30), hours(2), hours(5), hours(10), hours(10)}};
    if (text == "github") return {"github", {minutes(1)}};
    if (text == "slack") return {"slack", {seconds(1), minutes(1), minutes(5)}};
    if (text.starts_with("fixed:")) {
        Schedule schedule{"fixed", {}};
        for (auto part : split(text.substr(6), ',')) {
            auto interval = parse_duration(trim(part));
            if (interval <= Duration{0})
                throw UsageError(fmt::format("--schedule {}: intervals must be above 0", text));
            schedule.intervals.push_back(interval);
        }
        if (schedule.intervals.empty())
            throw UsageError("--schedule fixed: give the intervals (fixed:1s,2s,4s)");
        return schedule;
    }
    throw UsageError(fmt::format("--schedule {}: not stripe, svix, github, slack or "
                                 "fixed:INTERVALS (fixed:1s,2s,4s)",
                                 quote(text)));
}

VariedField parse_varied_field(std::string_view text) {
    auto equals = text.rfind('=');
    if (equals == std::string_view::npos || equals == 0)
        throw UsageError(
            fmt::format("--vary {}: PATH=attempt, PATH=now or PATH=uuid", quote(text)));
    auto kind = text.substr(equals + 1);
    VariedField field{record::FieldPath::parse(text.substr(0, equals)), VariedField::Kind::attempt};
    if (kind == "attempt")
        field.kind = VariedField::Kind::attempt;
    else if (kind == "now")
        field.kind = VariedField::Kind::now;
    else if (kind == "uuid")
        field.kind = VariedField::Kind::uuid;
    else
        throw UsageError(fmt::format("--vary {}: {} is none of attempt, now and uuid", quote(text),
                                     quote(kind)));
    return field;
}

std::size_t ProbeResult::count(Verdict verdict) const {
    return static_cast<std::size_t>(
        std::count_if(checks.begin(), checks.end(),
                      [&](const CheckResult& made) { return made.verdict == verdict; }));
}

ProbeResult run_probe(ProbeOptions& options, io::Diagnostics& diagnostics) {
    Prober prober(options, diagnostics);
    return prober.run();
}

} // namespace idem::probe
