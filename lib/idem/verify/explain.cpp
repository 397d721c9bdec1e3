#include "idem/verify/explain.hpp"
#include "idem/net/url.hpp"

#include "idem/record/annotate.hpp"
#include "idem/record/joined_headers.hpp"
#include "idem/util/encoding.hpp"
#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"

#include <algorithm>
#include <charconv>
#include <fmt/format.h>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>

namespace idem::verify {

namespace {

// Past this size a body is not re-serialized in several ways per delivery.
constexpr std::size_t k_max_body_reworked = 1 << 20;

// A variant of the configuration, verified against as it is.
struct Variant {
    std::string kind;
    std::string detail;
    VerifyConfig config;
    std::unique_ptr<Verifier> verifier;
};

std::string with_separators_spaced(std::string_view compact) {
    // Python's json.dumps default (", " and ": ") from compact JSON: spaces
    // after the separators that are not inside strings.
    std::string out;
    out.reserve(compact.size() + compact.size() / 8);
    bool in_string = false, escaped = false;
    for (char c : compact) {
        out += c;
        if (in_string) {
            if (escaped)
                escaped = false;
            else if (c == '\\')
                escaped = true;
            else if (c == '"')
                in_string = false;
            continue;
        }
        if (c == '"') in_string = true;
        if (c == ',' || c == ':') out += ' ';
    }
    return out;
}

// The '&'-separated pairs of a form body or a query string, sorted and
// joined again: what a sender that orders its parameters would have signed.
// A form decoded and encoded again loses its empty fields (`drop_empty`); a
// query keeps every pair.
std::string sorted_pairs(std::string_view text, bool drop_empty) {
    auto pairs = split(text, '&');
    if (drop_empty) std::erase(pairs, std::string_view());
    std::sort(pairs.begin(), pairs.end());
    std::string joined;
    for (std::size_t i = 0; i < pairs.size(); ++i) {
        if (i > 0) joined += '&';
        joined += pairs[i];
    }
    return joined;
}

std::string replace_all(std::string text, std::string_view from, std::string_view to) {
    std::size_t at = 0;
    while ((at = text.find(from, at)) != std::string::npos) {
        text.replace(at, from.size(), to);
        at += to.size();
    }
    return text;
}

bool looks_like_form(const record::Envelope& envelope) {
    if (auto type = envelope.header("Content-Type"))
        if (type->find("application/x-www-form-urlencoded") != std::string_view::npos) return true;
    auto body = envelope.body;
    return !body.empty() && body.front() != '{' && body.front() != '[' &&
           body.find('=') != std::string_view::npos && body.find('\n') == std::string_view::npos;
}

// The body as the provider may have signed it, when what reached the
// verifier was changed on the way: kind, words, bytes.
struct BodyCandidate {
    std::string kind, detail, body;
};

std::vector<BodyCandidate> body_candidates(const record::Envelope& envelope) {
    std::vector<BodyCandidate> candidates;
    std::string_view body = envelope.body;
    auto add = [&](std::string kind, std::string detail, std::string text) {
        if (text == body) return;
        for (const auto& earlier : candidates)
            if (earlier.body == text) return;
        candidates.push_back({std::move(kind), std::move(detail), std::move(text)});
    };
    if (body.size() <= k_max_body_reworked) {
        // The smallest changes first: they name the cause most exactly.
        std::string text(body);
        add("trailing-newline",
            "a trailing newline was added on the way: the provider signed the "
            "body without it",
            text.ends_with("\r\n") ? text.substr(0, text.size() - 2)
            : text.ends_with('\n') ? text.substr(0, text.size() - 1)
                                   : text);
        add("trailing-newline",
            "a trailing newline was lost on the way: the provider signed the "
            "body with one",
            text + "\n");
        if (text.find("\r\n") != std::string::npos)
            add("line-endings",
                "line endings were changed on the way: the provider signed LF, "
                "the body has CRLF",
                replace_all(text, "\r\n", "\n"));
        else if (text.find('\n') != std::string::npos)
            add("line-endings",
                "line endings were changed on the way: the provider signed CRLF, "
                "the body has LF",
                replace_all(text, "\n", "\r\n"));
        if (looks_like_form(envelope)) {
            add("form-reencoded",
                "the form body was decoded and encoded again: the provider "
                "signed spaces as %20, the body has +",
                replace_all(text, "+", "%20"));
            add("form-reencoded",
                "the form body was decoded and encoded again: the provider "
                "signed spaces as +, the body has %20",
                replace_all(text, "%20", "+"));
            add("form-reencoded", "the form body's fields were put in another order on the way",
                sorted_pairs(text, true));
        }
        auto ordered = nlohmann::ordered_json::parse(body, nullptr, false);
        if (!ordered.is_discarded() && (ordered.is_object() || ordered.is_array())) {
            auto said = [](std::string_view how) {
                return fmt::format("the body was re-serialized on its way (a proxy, a framework's "
                                   "body parser, or the logger): the provider signed it {}",
                                   how);
            };
            auto compact = ordered.dump();
            add("body-reserialized", said("as compact JSON"), compact);
            add("body-reserialized", said("pretty-printed with 2 spaces"), ordered.dump(2));
            add("body-reserialized", said("pretty-printed with 4 spaces"), ordered.dump(4));
            add("body-reserialized",
                said("with \", \" and \": \" separators (Python's json.dumps)"),
                with_separators_spaced(compact));
            add("body-reserialized", said("with non-ASCII characters escaped (\\uXXXX)"),
                ordered.dump(-1, ' ', true));
            auto sorted = nlohmann::json::parse(body, nullptr, false);
            if (!sorted.is_discarded()) {
                add("body-reserialized", said("with its keys in another order"), sorted.dump());
                add("body-reserialized", said("with its keys in another order, pretty-printed"),
                    sorted.dump(2));
            }
        }
    }
    return candidates;
}

// The public URL variants a proxy or a misconfigured --url makes.
struct UrlCandidate {
    std::string kind, detail, url;
};

std::vector<UrlCandidate> url_candidates(const std::string& url, const record::Envelope& envelope) {
    std::vector<UrlCandidate> candidates;
    auto add = [&](std::string kind, std::string detail, std::string text) {
        if (text == url) return;
        for (const auto& earlier : candidates)
            if (earlier.url == text) return;
        candidates.push_back({std::move(kind), std::move(detail), std::move(text)});
    };
    auto scheme_end = url.find("://");
    if (scheme_end == std::string::npos) return candidates;
    auto scheme = url.substr(0, scheme_end);
    auto rest = url.substr(scheme_end + 3);
    auto path_at = rest.find_first_of("/?");
    auto authority = rest.substr(0, path_at);
    auto path = path_at == std::string::npos ? std::string("/") : rest.substr(path_at);
    auto build = [&](std::string_view s, std::string_view a, std::string_view p) {
        return fmt::format("{}://{}{}", s, a, p);
    };
    add("url-scheme", "the provider called the other scheme (http/https) than the URL checked",
        build(scheme == "https" ? "http" : "https", authority, path));
    if (auto spellings = net::port_spellings(url)) {
        if (spellings->with_default_port)
            add("url-port", "the provider signed the URL with its default port written out",
                *spellings->with_default_port);
        if (spellings->without_port)
            add("url-port", "the provider signed the URL without the port",
                *spellings->without_port);
    }
    auto query_at = path.find('?');
    auto bare = path.substr(0, query_at);
    auto query = query_at == std::string::npos ? std::string() : path.substr(query_at);
    add("url-trailing-slash", "the provider signed the URL with a different trailing slash",
        build(scheme, authority,
              (bare.size() > 1 && bare.ends_with('/') ? bare.substr(0, bare.size() - 1)
                                                      : bare + "/") +
                  query));
    if (!query.empty()) {
        add("url-query-order", "the provider signed the query in another order",
            build(scheme, authority,
                  bare + "?" + sorted_pairs(std::string_view(query).substr(1), false)));
    }
    // Behind a proxy the URL idem was told may not be the one the provider
    // called: the host the request itself names.
    for (const char* header : {"X-Forwarded-Host", "Host"})
        if (auto named = envelope.header(header); named && !named->empty())
            add("url-host",
                fmt::format("the provider called host {} ({} header), not the one checked",
                            quote(*named), header),
                build(scheme, *named, path));
    return candidates;
}

std::string strip_trailing_whitespace(std::string text) {
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ' ||
                             text.back() == '\t'))
        text.pop_back();
    return text;
}

} // namespace

struct Explainer::Impl {
    const VerifyConfig& config;
    std::size_t budget;
    std::unique_ptr<Verifier> base, timeless;
    std::vector<Variant> variants; // secrets, schemes, algorithms: tried on the original body
    record::JoinedHeaders joined;

    Impl(const VerifyConfig& base_config, std::size_t budget_)
        : config(base_config), budget(budget_), base(std::make_unique<Verifier>(base_config)) {
        auto timeless_config = config;
        timeless_config.timestamp_check = TimestampCheck::ignore;
        variants.reserve(32);
        timeless = std::make_unique<Verifier>(keep(std::move(timeless_config)));
        add_secret_variants();
        add_key_and_time_variants();
        add_scheme_variants();
    }

    // The secret, as users get it wrong.
    void add_secret_variants() {
        auto secrets = [&](std::string kind, std::string detail,
                           const std::function<std::optional<std::string>(const Secret&)>& change) {
            auto changed = config;
            bool any = false;
            for (auto& secret : changed.secrets)
                if (auto value = change(secret);
                    value && !value->empty() && *value != secret.value) {
                    secret.value = std::move(*value);
                    any = true;
                }
            if (any) add(std::move(kind), std::move(detail), std::move(changed));
        };
        secrets("secret-prefix",
                "the secret's whsec_ prefix must go: the provider signs with what "
                "follows it",
                [](const Secret& s) -> std::optional<std::string> {
                    if (!s.value.starts_with("whsec_")) return std::nullopt;
                    return s.value.substr(6);
                });
        secrets("secret-prefix",
                "the secret lacks its whsec_ prefix (Standard Webhooks and Svix "
                "secrets are written with it)",
                [](const Secret& s) -> std::optional<std::string> {
                    if (s.value.starts_with("whsec_")) return std::nullopt;
                    return "whsec_" + s.value;
                });
        secrets("secret-encoding",
                "the secret is base64: the provider signs with its decoded bytes",
                [](const Secret& s) -> std::optional<std::string> {
                    auto text = s.value.starts_with("whsec_") ? s.value.substr(6) : s.value;
                    return base64_decode(text);
                });
        secrets("secret-whitespace",
                "the secret has trailing whitespace or a line end (as read "
                "from a file): the provider's has none",
                [](const Secret& s) -> std::optional<std::string> {
                    return strip_trailing_whitespace(s.value);
                });
    }

    // A Standard Webhooks / Svix secret keyed as text by the sender, and a
    // time signed in milliseconds.
    void add_key_and_time_variants() {
        if (!config.secrets.empty() &&
            (config.scheme == Scheme::standard || config.scheme == Scheme::svix ||
             config.scheme == Scheme::auto_detect)) {
            for (auto form : {StandardKey::text, StandardKey::text_after_prefix}) {
                auto changed = config;
                changed.standard_key = form;
                add("secret-as-text",
                    form == StandardKey::text
                        ? "the sender keys its HMAC with the secret's text, whsec_ and all, not "
                          "the bytes its base64 spells (Standard Webhooks and Svix key with the "
                          "decoded bytes): a bug in the sender's signing"
                        : "the sender keys its HMAC with the text after whsec_, not the bytes "
                          "that base64 spells (Standard Webhooks and Svix key with the decoded "
                          "bytes): a bug in the sender's signing",
                    std::move(changed));
            }
        }
        // A timestamp signed in milliseconds where the scheme's is seconds
        // (Date.now()): judged without the clock, which that unit cannot
        // be trusted for.
        if (!config.secrets.empty() || !config.public_keys.empty()) {
            auto changed = config;
            changed.timestamp_unit = TimestampUnit::milliseconds;
            changed.timestamp_check = TimestampCheck::ignore;
            add("timestamp-milliseconds",
                "the signed timestamp is in milliseconds, not the seconds the scheme counts: "
                "the sender signs Date.now() (or the like); the signature over it is genuine",
                std::move(changed));
        }
    }

    // Another provider's format than the one checked, and another
    // algorithm or encoding than --hmac-* says.
    void add_scheme_variants() {
        for (auto scheme : {Scheme::stripe, Scheme::github, Scheme::slack, Scheme::standard,
                            Scheme::svix, Scheme::shopify, Scheme::pagerduty}) {
            if (scheme == config.scheme || config.secrets.empty()) continue;
            auto changed = config;
            changed.scheme = scheme;
            add("scheme",
                fmt::format("the delivery is signed the {} way, not the {} way checked",
                            scheme_name(scheme), scheme_name(config.scheme)),
                std::move(changed));
        }
        if (config.sha1 == Sha1Policy::reject && !config.secrets.empty()) {
            auto changed = config;
            changed.sha1 = Sha1Policy::allow;
            add("algorithm",
                "the only signature is HMAC-SHA1 (X-Hub-Signature), which idem "
                "refuses unless --allow-sha1",
                std::move(changed));
        }
        if (config.scheme == Scheme::hmac) {
            for (auto algorithm : {crypto::HashAlgorithm::sha1, crypto::HashAlgorithm::sha256,
                                   crypto::HashAlgorithm::sha512}) {
                if (algorithm == config.hmac.algorithm) continue;
                auto changed = config;
                changed.hmac.algorithm = algorithm;
                add("algorithm", "the signature uses another hash than --hmac-algorithm says",
                    std::move(changed));
            }
            auto changed = config;
            changed.hmac.encoding = config.hmac.encoding == SignatureEncoding::hex
                                        ? SignatureEncoding::base64
                                        : SignatureEncoding::hex;
            // Worded before `changed` is moved into add(): arguments are
            // evaluated in no set order.
            auto why = fmt::format("the signature is {}, not {} as --hmac-encoding says",
                                   encoding_name(changed.hmac.encoding),
                                   encoding_name(config.hmac.encoding));
            add("encoding", std::move(why), std::move(changed));
        }
    }

    std::deque<VerifyConfig> kept_configs;
    const VerifyConfig& keep(VerifyConfig changed) {
        kept_configs.push_back(std::move(changed));
        return kept_configs.back();
    }
    void add(std::string kind, std::string detail, VerifyConfig changed) {
        const auto& kept = keep(std::move(changed));
        try {
            variants.push_back(
                {std::move(kind), std::move(detail), kept, std::make_unique<Verifier>(kept)});
        } catch (const Error&) {
            // A variant this configuration cannot express (a scheme whose key
            // it lacks): not a candidate.
        }
    }
};

Explainer::Explainer(const VerifyConfig& config, std::size_t budget)
    : m_impl(std::make_unique<Impl>(config, budget)) {}

Explainer::~Explainer() = default;

namespace {

// What the delivery shows by itself: bytes missing, or decompressed.
std::optional<Diagnosis> read_off(const record::Envelope& envelope) {
    Diagnosis diagnosis;
    if (auto length = envelope.header("Content-Length")) {
        std::uint64_t declared = 0;
        auto text = trim(*length);
        auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), declared);
        if (error == std::errc{} && end == text.data() + text.size() &&
            declared > envelope.body.size()) {
            diagnosis.kind = "truncated";
            diagnosis.detail = fmt::format("the body is {} bytes, Content-Length says {}: it was "
                                           "cut short on the way, and no signature can match it",
                                           envelope.body.size(), declared);
            return diagnosis;
        }
    }
    if (auto encoding = envelope.header("Content-Encoding")) {
        auto coding = trim(*encoding);
        bool gzip_bytes = envelope.body.size() >= 2 &&
                          static_cast<unsigned char>(envelope.body[0]) == 0x1f &&
                          static_cast<unsigned char>(envelope.body[1]) == 0x8b;
        if ((iequals(coding, "gzip") && !gzip_bytes) || iequals(coding, "br") ||
            iequals(coding, "deflate")) {
            diagnosis.kind = "decompressed";
            diagnosis.detail = fmt::format("the provider signed the body {}-compressed "
                                           "(Content-Encoding), and it was stored decompressed: "
                                           "verify the bytes as they came over the wire",
                                           coding);
            return diagnosis;
        }
    }
    return std::nullopt;
}

// The mutations tried on one delivery, within the budget: the first whose
// check passes is the diagnosis, proven.
class Attempts {
public:
    Attempts(Timestamp now, std::size_t budget) : m_now(now), m_budget(budget) {}

    [[nodiscard]] bool out_of_budget() const { return m_diagnosis.tried >= m_budget; }

    // The verdict when `copy` verifies with `verifier`.
    std::optional<Verdict> try_with(Verifier& verifier, const record::Envelope& copy) {
        if (out_of_budget()) return std::nullopt;
        ++m_diagnosis.tried;
        try {
            auto verdict = verifier.verify(copy, m_now);
            if (!verdict.valid) return std::nullopt;
            return verdict;
        } catch (const Error&) {
            return std::nullopt; // the variant needs a key this run was not given
        }
    }

    Diagnosis found(std::string kind, std::string detail, const Verdict& verdict) {
        m_diagnosis.kind = std::move(kind);
        m_diagnosis.detail = std::move(detail);
        m_diagnosis.key_label = verdict.key_label;
        m_diagnosis.proven = true;
        return m_diagnosis;
    }

    Diagnosis unexplained() {
        m_diagnosis.kind = "unexplained";
        m_diagnosis.detail =
            out_of_budget()
                ? fmt::format("no mutation explained it within {} tries: treat as forged",
                              m_diagnosis.tried)
                : fmt::format("no known mutation explains it ({} tried): treat as forged",
                              m_diagnosis.tried);
        return m_diagnosis;
    }

    [[nodiscard]] Timestamp now() const { return m_now; }

private:
    Timestamp m_now;
    std::size_t m_budget;
    Diagnosis m_diagnosis;
};

// The signature verified once the time is not checked: skew, or a stale
// (replayed, held back) delivery.
Diagnosis explain_time(Attempts& attempts, const Verdict& verdict, Duration tolerance) {
    auto age = attempts.now() - *verdict.signed_at;
    auto seconds = [](Duration d) {
        return format_duration(std::chrono::duration_cast<std::chrono::seconds>(d));
    };
    if (age < Duration::zero())
        return attempts.found("clock-skew",
                              fmt::format("the signature is genuine; it was signed {} after the "
                                          "delivery was received, {} beyond the {} tolerance: a "
                                          "clock runs ahead (the sender's or this host's)",
                                          seconds(-age), seconds(-age - tolerance),
                                          seconds(tolerance)),
                              verdict);
    if (age <= 2 * tolerance)
        return attempts.found("clock-skew",
                              fmt::format("the signature is genuine; signed {} before it was "
                                          "received, {} beyond the {} tolerance: clock skew or a "
                                          "slow queue rather than a replay",
                                          seconds(age), seconds(age - tolerance),
                                          seconds(tolerance)),
                              verdict);
    return attempts.found("stale",
                          fmt::format("the signature is genuine but old: signed {} ({} before it "
                                      "was received); a replay of an earlier delivery, or one "
                                      "held back — not a forgery",
                                      format_rfc3339(*verdict.signed_at), seconds(age)),
                          verdict);
}

// The URL the provider signed (Twilio, Square): --url or --url-base with
// the delivery's path, as the provider may have written it.
std::optional<Diagnosis> explain_url(Attempts& attempts, const VerifyConfig& config, Scheme scheme,
                                     const record::Envelope& envelope) {
    std::string url = config.url;
    if (url.empty() && !config.url_base.empty()) {
        url = config.url_base;
        while (!url.empty() && url.back() == '/')
            url.pop_back();
        std::string path(envelope.path.empty() ? "/" : envelope.path);
        url += path.front() == '/' ? path : "/" + path;
    }
    for (auto& candidate : url_candidates(url, envelope)) {
        if (attempts.out_of_budget()) break;
        auto changed = config;
        changed.url = candidate.url;
        changed.url_base.clear();
        changed.scheme = scheme;
        std::optional<Verifier> verifier;
        try {
            verifier.emplace(changed);
        } catch (const Error&) {
            continue;
        }
        if (auto verdict = attempts.try_with(*verifier, envelope))
            return attempts.found(std::move(candidate.kind),
                                  candidate.detail + ": it verifies as " + candidate.url, *verdict);
    }
    return std::nullopt;
}

} // namespace

Diagnosis Explainer::explain(const record::Envelope& received, Timestamp now,
                             const Verdict& failed) {
    auto& impl = *m_impl;
    const auto& envelope = impl.joined.join(received);
    if (auto shown = read_off(envelope)) return *shown;
    Attempts attempts(now, impl.budget);
    // The signature is genuine, the time is not.
    if (auto verdict = attempts.try_with(*impl.timeless, envelope); verdict && verdict->signed_at)
        return explain_time(attempts, *verdict, impl.config.tolerance);
    // The body as the provider may have signed it.
    record::Envelope copy = envelope;
    for (auto& candidate : body_candidates(envelope)) {
        copy.body = candidate.body;
        if (auto verdict = attempts.try_with(*impl.base, copy))
            return attempts.found(std::move(candidate.kind), std::move(candidate.detail), *verdict);
    }
    // The secret, the scheme, the algorithm.
    for (auto& variant : impl.variants)
        if (auto verdict = attempts.try_with(*variant.verifier, envelope))
            return attempts.found(variant.kind, variant.detail, *verdict);
    auto scheme = failed.scheme != Scheme::auto_detect ? failed.scheme : impl.config.scheme;
    if (signs_url(scheme))
        if (auto diagnosis = explain_url(attempts, impl.config, scheme, envelope))
            return *diagnosis;
    return attempts.unexplained();
}

void append_diagnosis(std::string& out, const Diagnosis& diagnosis) {
    out += ",\"diagnosis\":{\"kind\":";
    record::append_json_string(out, diagnosis.kind);
    out += diagnosis.proven ? ",\"proven\":true" : ",\"proven\":false";
    out += ",\"detail\":";
    record::append_json_string(out, diagnosis.detail);
    if (!diagnosis.key_label.empty()) {
        out += ",\"key\":";
        record::append_json_string(out, diagnosis.key_label);
    }
    out += fmt::format(",\"tried\":{}}}", diagnosis.tried);
}

} // namespace idem::verify
