#pragma once
// Internal: what the per-scheme verifiers and signers share. One function per
// scheme each way, so the bytes a scheme signs are defined once (in the
// *_message helpers) and the verifier and signer cannot drift apart.

#include "idem/crypto/crypto.hpp"
#include "idem/record/parser.hpp"
#include "idem/verify/config.hpp"

#include <array>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace idem::verify::detail {

// Stripe uses the secret string itself as the HMAC key; Standard Webhooks
// decodes the base64 after "whsec_"; a provider file may say `secret: base64`
// or `secret: hex`.
enum class KeyDerivation { raw, standard_base64, base64, hex, nfkd, whsec_or_text, sha1_digest };

// The HMAC key a secret gives under `derivation` (UsageError naming the
// secret when it cannot), for verifying and for signing alike.
[[nodiscard]] std::string derive_key(const Secret& secret, KeyDerivation derivation);
// The one rule every HMAC key obeys, for verifying and signing alike: a
// key of no bytes (a secret that decodes to nothing) is a UsageError
// naming the secret by its label.
void require_key_bytes(const Secret& secret, std::string_view key);
// What a provider file's `secret` says.
[[nodiscard]] KeyDerivation key_derivation(const ProviderSpec& spec);

struct PreparedKey {
    std::string label;
    crypto::HmacKey key;
};

struct NamedPublicKey {
    std::string label;
    crypto::Ed25519PublicKey key;
};

struct NamedEcdsaKey {
    std::string label;
    crypto::EcdsaP256PublicKey key;
};

struct NamedRsaKey {
    std::string label;
    crypto::RsaPublicKey key;
};

// Keys prepared once per (derivation, algorithm), on first use.
class KeyRing {
public:
    explicit KeyRing(const VerifyConfig& config);
    // Throws UsageError when no secret was given or one cannot be derived.
    const std::vector<PreparedKey>& hmac(KeyDerivation derivation, crypto::HashAlgorithm algorithm,
                                         Scheme scheme);
    // Throws UsageError when no public key of the kind was given.
    const std::vector<NamedPublicKey>& ed25519(Scheme scheme);
    const std::vector<NamedEcdsaKey>& ecdsa_p256(std::string_view provider);
    const std::vector<NamedRsaKey>& rsa(std::string_view provider);

private:
    const VerifyConfig& m_config;
    std::map<std::pair<KeyDerivation, crypto::HashAlgorithm>, std::vector<PreparedKey>> m_hmac;
    std::optional<std::vector<NamedPublicKey>> m_ed25519;
    std::optional<std::vector<NamedEcdsaKey>> m_ecdsa_p256;
    std::optional<std::vector<NamedRsaKey>> m_rsa;
};

struct Input {
    const record::Envelope& envelope;
    Timestamp now;
    const VerifyConfig& config;
    KeyRing& keys;
};

using VerifyFunction = Verdict (*)(Input&);

Verdict verify_github(Input& input);
Verdict verify_stripe(Input& input);
Verdict verify_slack(Input& input);
Verdict verify_standard(Input& input);
Verdict verify_svix(Input& input);
Verdict verify_shopify(Input& input);
Verdict verify_discord(Input& input);
Verdict verify_twilio(Input& input);
Verdict verify_square(Input& input);
Verdict verify_pagerduty(Input& input);
Verdict verify_braintree(Input& input);
Verdict verify_hmac(Input& input);
Verdict verify_provider(Input& input, const ProviderSpec& spec);
// construction: signed-fields (Adyen's HMAC notifications).
Verdict verify_signed_fields(Input& input, const ProviderSpec& spec);
// A JSON body's members by dotted path ("signature.token"), the body
// parsed once, when first asked: a provider file may read its signature,
// time and token from one body.
class BodyMembers {
public:
    explicit BodyMembers(std::string_view body);
    ~BodyMembers();
    BodyMembers(const BodyMembers&) = delete;
    BodyMembers& operator=(const BodyMembers&) = delete;
    // A string's value, an integer as written; nullopt for another kind of
    // member, none at all, or a body that is no JSON.
    [[nodiscard]] std::optional<std::string> text(const std::vector<std::string>& path);

private:
    struct Document;
    std::string_view m_body;
    std::unique_ptr<Document> m_document;
};

// The bytes a provider file's spec signs for one delivery; `members`
// reads the envelope's body. `params`: the --param values a {param:NAME}
// names.
[[nodiscard]] std::string provider_message(const ProviderSpec& spec,
                                           const record::Envelope& envelope, BodyMembers& members,
                                           std::string_view timestamp, std::string_view id,
                                           std::string_view url,
                                           const std::map<std::string, std::string>& params);
// Whether a provider's message signs the URL it was called at ({url},
// {plivo_v3_url}): --url or --url-base is then needed.
[[nodiscard]] bool message_signs_url(const ProviderSpec& spec);
// A {header:NAME} or {query:NAME} placeholder's value in `envelope`;
// nullopt when the request has none.
[[nodiscard]] std::optional<std::string> request_part(const ProviderSpec::RequestPart& part,
                                                      const record::Envelope& envelope);
// A form body's fields but `left_out`, sorted by name, as PHP's
// serialize() writes an array of strings (Paddle Classic signs it).
[[nodiscard]] std::string php_serialized_form(std::string_view body, std::string_view left_out);
// A "{json:a.b}" placeholder's dotted path, split.
[[nodiscard]] std::vector<std::string> dotted_path(std::string_view text);
// The value a spec's required header must have: the --param a {param:NAME}
// names (nullopt when not given: presence only), or the value itself.
[[nodiscard]] std::optional<std::string> required_value(const VerifyConfig& config,
                                                        const std::string& value);

// ---- shared helpers -------------------------------------------------------

[[nodiscard]] Verdict invalid(Scheme scheme, std::string reason);
// A valid verdict. `message_id`: what the delivery calls itself (its id
// header, else its signature's text); `signed_content`: the bytes the
// matched signature covers, in pieces, whose digest is the verdict's
// nonce. Both are kept only when the run remembers nonces.
[[nodiscard]] Verdict matched(const Input& input, Scheme scheme, std::string label,
                              std::string_view message_id, std::optional<Timestamp> signed_at,
                              std::initializer_list<std::string_view> signed_content);
// The nonce of a delivery whose signature covers `signed_content`.
[[nodiscard]] std::string
signed_content_nonce(std::initializer_list<std::string_view> signed_content);

// A decoded signature, held inline: the per-record path allocates nothing.
struct SignatureBytes {
    std::array<char, 64> bytes{};
    std::size_t size = 0;
    [[nodiscard]] std::string_view view() const { return {bytes.data(), size}; }
};

// A header may list several signatures; at most this many are checked, so a
// hostile header cannot multiply the work per record.
inline constexpr std::size_t k_max_signatures_per_header = 8;

// A small fixed-capacity list (of signatures, or of their texts).
template <typename T> class SmallList {
public:
    void push_back(T value) {
        if (m_size < m_items.size()) m_items[m_size++] = std::move(value);
    }
    [[nodiscard]] bool empty() const { return m_size == 0; }
    [[nodiscard]] std::size_t size() const { return m_size; }
    [[nodiscard]] const T* begin() const { return m_items.data(); }
    [[nodiscard]] const T* end() const { return m_items.data() + m_size; }
    [[nodiscard]] const T& front() const { return m_items[0]; }

private:
    std::array<T, k_max_signatures_per_header> m_items{};
    std::size_t m_size = 0;
};

using SignatureSet = SmallList<SignatureBytes>;
using SignatureTexts = SmallList<std::string_view>;

// A decoded signature, or the reason it could not be decoded.
struct Decoded {
    std::optional<SignatureBytes> bytes;
    std::string problem;
};
[[nodiscard]] Decoded decode_signature(std::string_view text, SignatureEncoding encoding,
                                       std::size_t expected_bytes, std::string_view what);
// A signature's bytes written as `encoding` says (for signing).
[[nodiscard]] std::string encode_signature(std::string_view bytes, SignatureEncoding encoding);

// The label of the first key whose MAC over `parts` equals a candidate.
[[nodiscard]] std::optional<std::string> match_hmac(const std::vector<PreparedKey>& keys,
                                                    const SignatureSet& candidates,
                                                    std::initializer_list<std::string_view> parts);

// Decodes every text; when none decodes, `problem` holds the first reason.
struct DecodedSet {
    SignatureSet signatures;
    std::string problem;
};
[[nodiscard]] DecodedSet decode_all(const SignatureTexts& texts, SignatureEncoding encoding,
                                    std::size_t expected_bytes, std::string_view what);

enum class ClockSides { past_only, both };
// Parses whole seconds since the epoch (as providers send them).
[[nodiscard]] std::optional<Timestamp> parse_unix_seconds(std::string_view text);
// A signed timestamp in the unit `config` says (parse_unix_seconds for seconds).
[[nodiscard]] std::optional<Timestamp> parse_signed_time(const VerifyConfig& config,
                                                         std::string_view text);
// A reason when `signed_at` is outside the tolerance, else nullopt.
// A provider's own `tolerance` counts unless --tolerance was given.
[[nodiscard]] std::optional<std::string>
check_age(const Input& input, Timestamp signed_at, ClockSides sides,
          std::optional<Duration> provider_tolerance = std::nullopt);
[[nodiscard]] std::string no_match_reason(std::size_t keys, std::size_t candidates);
[[nodiscard]] std::string missing_header(std::string_view name);

// The URL a URL-signing scheme signed: --url, or --url-base + the path.
[[nodiscard]] std::optional<std::string> signed_url(const VerifyConfig& config,
                                                    const record::Envelope& envelope);

// Twilio: the data signed for a form body (sorted name+value pairs).
[[nodiscard]] std::string twilio_form_suffix(std::string_view body);
// Plivo's V3 base string (plivo-python's construct_post_url): the URL
// without its query; '?' and the query's parameters sorted (name=value,
// joined by '&') when there is a query or a form field; '.' when there are
// both; then each form field's name and value, sorted by name.
[[nodiscard]] std::string plivo_v3_base(std::string_view url, std::string_view form_body);
// Twilio's libraries try the URL as given, with the default port added, and
// with any port removed.
[[nodiscard]] std::vector<std::string> twilio_url_variants(const std::string& url);
// The generic scheme's message: the template with {body}, {timestamp}, {id}.
// What a message template's placeholders stand for; one with no value is
// left as written.
struct TemplateValues {
    std::optional<std::string_view> body, timestamp, id, method, path, url;
    // The body's CRC-32 in decimal (PayPal's {crc32}).
    std::optional<std::string_view> crc32;
    // A provider file's own placeholders and their text: "{json:PATH}" (the
    // body member's), "{param:NAME}" (the --param value).
    std::vector<std::pair<std::string, std::string>> extra;
};
[[nodiscard]] std::string expand_message_template(std::string_view pattern,
                                                  const TemplateValues& values);
[[nodiscard]] std::string generic_hmac_message(const GenericHmacSpec& spec, std::string_view body,
                                               std::string_view timestamp, std::string_view id);

// Standard Webhooks: the header family an envelope uses ("webhook-" or "svix-").
struct StandardHeaders {
    std::string_view id;
    std::string_view timestamp;
    std::string_view signature;
};
[[nodiscard]] StandardHeaders standard_header_names(Scheme scheme);

// An item of a list whose separator is not a comma (Standard Webhooks'
// spaces), trimmed, without the "," that ends it when its header came on
// several lines (record::JoinedHeaders joins them with ", ").
[[nodiscard]] std::string_view list_item(std::string_view item);

[[nodiscard]] std::optional<std::string> query_parameter(std::string_view url,
                                                         std::string_view name);

} // namespace idem::verify::detail
