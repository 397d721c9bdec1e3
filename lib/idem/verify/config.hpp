#pragma once
// What a verification needs besides the delivery: the scheme, the keys, and
// the rules for time. Secret values live only here and in the crypto module;
// no message, log line or verdict ever contains one.

#include "idem/crypto/crypto.hpp"
#include "idem/util/time.hpp"
#include "idem/verify/scheme.hpp"

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace idem::verify {

struct Secret {
    // Never part of the value: "#1" by position for --secret, the variable's
    // name (or LABEL) for --secret-env, the file's name (or LABEL), with
    // ":LINE" when it holds several, for --secret-file.
    std::string label;
    std::string value; // the bytes as given: never split, trimmed or reinterpreted
    // Every copy's bytes are wiped when it goes (crypto::cleanse), so no
    // freed buffer holds a secret a core dump or a later allocation shows.
    ~Secret() { crypto::cleanse(value); }
};

struct PublicKey {
    std::string label;
    // ed25519: the 32 raw bytes; ECDSA P-256 and RSA: the DER
    // SubjectPublicKeyInfo.
    std::string raw;
    enum class Kind { ed25519, ecdsa_p256, rsa } kind = Kind::ed25519;
};

// A secret whose bytes are all of `value`. Throws UsageError (naming the
// label, never the value) when it is empty.
[[nodiscard]] Secret make_secret(std::string value, std::string label);

// "LABEL=REFERENCE" or "REFERENCE", for --secret-env NAME and --secret-file
// PATH: the label names the secret in verdicts; the reference (a variable
// name or a path) is not secret, so splitting it reinterprets no secret.
// A LABEL is 1 to 64 of [A-Za-z0-9_.-].
struct LabelledReference {
    std::string label; // "" when none was given
    std::string reference;
};
[[nodiscard]] LabelledReference parse_labelled_reference(std::string_view text);

// Hex (64 digits), base64 (32 bytes) or the Standard Webhooks "whpk_<base64>"
// form, with an optional "label=" prefix. Throws UsageError that never
// echoes the key.
[[nodiscard]] PublicKey parse_public_key(std::string_view text, std::size_t position);

// Key material as users write it: "<prefix><base64>" (whpk_, whsk_), 64 hex
// digits, or base64. nullopt when it is none of these.
[[nodiscard]] std::optional<std::string> decode_key_text(std::string_view text,
                                                         std::string_view prefix);

// The HMAC key of a Standard Webhooks secret: the base64 after "whsec_".
// Throws UsageError naming the secret by its label only.
[[nodiscard]] std::string standard_webhooks_key(const Secret& secret);
// The bytes a base64 secret spells (an optional "whsec_" first), for
// provider files with `secret: base64`; throws UsageError naming the secret.
[[nodiscard]] std::string base64_key(const Secret& secret);
// The bytes a hex secret spells, for `secret: hex`.
[[nodiscard]] std::string hex_key(const Secret& secret);

// A --secret-file's secrets: each line that is not empty is one secret,
// all of its bytes but the line ending (LF or CRLF). Labelled `label`, or
// "label:LINE" when the file holds more than one.
[[nodiscard]] std::vector<Secret> parse_secret_lines(std::string_view text,
                                                     const std::string& label);

enum class TimestampCheck { enforce, ignore };
// What a signed timestamp counts: seconds, as every built-in scheme's
// provider sends it; milliseconds only as `verify --explain` tries it (a
// sender that signs Date.now()).
enum class TimestampUnit { seconds, milliseconds };
// What a Standard Webhooks / Svix secret's HMAC key is: the bytes its
// base64 spells after whsec_ (the specification); or, as `--explain` tries
// it, the secret's text, as a sender that skipped the decoding keys it.
enum class StandardKey { decoded, text, text_after_prefix };
enum class Sha1Policy { reject, allow };
// base64 decodes either alphabet; base64url is the URL-safe one, unpadded,
// and matters when signing.
enum class SignatureEncoding { hex, base64, base64url };
// Whether verdicts carry the nonce (`verify --nonce` needs it; copying it
// per record costs an allocation otherwise).
enum class NonceCapture { keep, skip };

// The generic `hmac` scheme, described by flags.
struct GenericHmacSpec {
    std::string header = "X-Signature";
    std::string prefix;
    crypto::HashAlgorithm algorithm = crypto::HashAlgorithm::sha256;
    // `algorithm: [sha1, sha256]`: the account chooses (Cloudinary); the
    // signature's length tells which. `algorithm` is the first, the one
    // `sign` uses.
    std::vector<crypto::HashAlgorithm> other_algorithms;
    SignatureEncoding encoding = SignatureEncoding::hex;
    std::string message_template = "{body}";
    std::string timestamp_header; // where {timestamp} comes from
    std::string id_header;        // where {id} comes from
};

// A provider described by a file (provider_spec.hpp loads it): see
// docs/verify.md, "Provider files".
struct ProviderSpec {
    std::string name;   // what --scheme and verdicts call it
    std::string origin; // the file it came from, for messages
    std::string source; // where the provider documents it (a URL)
    // `scheme: svix`: the provider signs with a built-in scheme (Clerk and
    // Resend are Svix's customers): `--scheme NAME` verifies and signs with
    // it and verdicts name the provider. Its deliveries carry that scheme's
    // headers, so `auto` names the scheme, never such a spec.
    std::optional<Scheme> builtin;

    std::string signature_header;
    // Every header a signature may come in, signature_header first: a
    // provider that signs with two keys while it rotates them (Box's
    // BOX-SIGNATURE-PRIMARY and -SECONDARY) is valid by either.
    std::vector<std::string> signature_headers;
    // The header's value is "key=value" items (Paddle's "ts=...;h1=...",
    // Calendly's "t=...,v1=..."): split by `separator`, the signatures are
    // the items named `signature_key`, the timestamp the one named
    // `timestamp_key`. With no separator the whole value is one signature.
    char separator = 0;
    // What `sign` writes between items: the separator, or ", " / "; " when
    // the spec says so (WorkOS's SDK splits on ", " exactly).
    std::string separator_text;
    char key_separator = '='; // within an item: "v1=..." ('='), Finch's "v1,..." (',')
    // `positional: true`: items without keys, the timestamp first and the
    // signatures after it (Recurly's "<ms>,<sig>,<sig>"); `positional:
    // signatures`: every item a signature (Plivo's "<sig>,<sig>").
    bool positional = false;
    bool positional_timestamp = true;
    std::string signature_key;
    std::string timestamp_key;
    std::string prefix; // before each signature ("sha256=", "v0=")

    crypto::HashAlgorithm algorithm = crypto::HashAlgorithm::sha256;
    // `algorithm: [sha1, sha256]`: the account chooses (Cloudinary); the
    // signature's length tells which. `algorithm` is the first, the one
    // `sign` uses.
    std::vector<crypto::HashAlgorithm> other_algorithms;
    SignatureEncoding encoding = SignatureEncoding::hex;
    // How the signature is made from the secret and the message: an HMAC
    // keyed by the secret (nearly all); a plain hash of the secret's bytes
    // followed by the message (HubSpot's v1 and v2), or of the message
    // followed by the secret when the template ends in {secret}
    // (Cloudinary); or none at all, `token`: the header carries the shared
    // secret itself (GitLab, Telegram, HTTP Basic auth).
    // `ecdsa-p256`: an ECDSA signature (DER, in base64) over SHA-256 of the
    // message, checked with the --public-key (SendGrid's event webhook).
    // `jwt`: the header is a JSON Web Token (JWS compact form) signed with
    // `jwt_algorithm`: HS256 keyed by the secret (Netlify) or ES256 checked
    // with a P-256 --public-key (Plaid); its claims are checked below.
    // `rsa`: a PKCS #1 v1.5 RSA signature (base64) over the message with
    // `algorithm`, checked with an RSA --public-key or certificate (PayPal).
    // `ed25519`: an ed25519 signature (base64) over the message, checked
    // with an ed25519 --public-key (Telnyx).
    // `signed-fields`: the JSON body holds items (`signed_items`, each in
    // `item_member`), each with its own signature at `signature_path` over
    // its `signed_fields` joined by `field_separator` (Adyen's HMAC
    // notifications); the delivery is valid when every item is.
    enum class Construction {
        hmac,
        digest,
        token,
        ecdsa_p256,
        jwt,
        rsa,
        ed25519,
        signed_fields
    } construction = Construction::hmac;
    enum class JwtAlgorithm { hs256, es256 } jwt_algorithm = JwtAlgorithm::hs256;
    // Claims that must hold exactly these strings (Netlify's iss: netlify).
    std::vector<std::pair<std::string, std::string>> jwt_claims;
    // The claim that holds the hex SHA-256 of the raw body (Netlify's
    // sha256, Plaid's request_body_sha256): it binds the token to the body.
    std::string jwt_body_hash;
    // The claim that holds the signing time in Unix seconds (Plaid's iat),
    // checked against the tolerance.
    std::string jwt_time_claim;
    // {body} {timestamp} {id} {method} {path} {url}: what is signed.
    std::string message = "{body}";
    // A digest's template ended in {secret} (removed from `message`).
    bool secret_last = false;
    // A token written in base64 (HTTP Basic: "Basic " + base64 of
    // "user:password"), else as is.
    bool token_base64 = false;
    // The HMAC key: the secret's bytes as given, or the bytes it spells in
    // base64 (after an optional "whsec_"; Finch) or in hex (Adyen).
    // `whsec-or-text`: whsec_<base64> decoded, any other secret as its text
    // (OpenAI's SDK).
    enum class SecretForm { raw, base64, hex, whsec_or_text } secret_form = SecretForm::raw;
    // `secret_normalize: nfkd`: the secret's text is NFKD-normalised first
    // (EasyPost's libraries), so a secret typed with a precomposed é keys
    // as its SDK keys it.
    bool secret_nfkd = false;
    // `strict_encoding: true`: a signature counts only written exactly as
    // `encoding` writes it (the provider's SDK compares the text: a base64
    // whose last character carries stray bits decodes to the same bytes
    // but is another string). Off by default: idem compares bytes.
    bool strict_encoding = false;

    std::string timestamp_header; // when the timestamp is a header of its own
    // `timestamp_path`: the timestamp is a member of the JSON body (Pusher's
    // time_ms, Linear's webhookTimestamp), dotted; empty: none.
    std::vector<std::string> timestamp_path;
    // `signature_path`: the signature is a member of the JSON body, dotted
    // (Mailgun's signature.signature), not a header. Such a provider has no
    // header to be told by: `--scheme NAME` picks it, never auto.
    std::vector<std::string> signature_path;
    // `signature_form_field`: the signature is a field of the form body
    // (Paddle Classic's p_signature), not a header; picked by --scheme only.
    std::string signature_form_field;
    // The {json:PATH} placeholders `message` holds: the text of that member
    // of the JSON body (Mailgun's token), its path split when loaded.
    struct JsonPlaceholder {
        std::string placeholder; // "{json:signature.token}"
        std::string path_text;   // "signature.token"
        std::vector<std::string> path;
    };
    std::vector<JsonPlaceholder> json_placeholders;
    // The {param:NAME} placeholders `message` holds: values the user gives
    // with --param (PayPal's webhook_id).
    std::vector<std::string> message_params;
    // The request parts `message` names: {header:NAME} (a header's value),
    // {query:NAME} and {query_lowercase:NAME} (a query parameter of the
    // request target, form-decoded; lowercased: Mercado Pago's data.id).
    // A delivery without one is invalid, naming it.
    struct RequestPart {
        enum class From { header, query, query_lowercase } from;
        std::string name;
        std::string placeholder; // "{query:data.id}"
    };
    std::vector<RequestPart> request_parts;
    // construction: signed-fields (above).
    std::vector<std::string> signed_items; // the array's dotted path
    std::string item_member;               // each element's member holding the item
    std::vector<std::string> signed_field_names;
    std::vector<std::vector<std::string>> signed_fields; // each name's path, split
    std::string field_separator = ":";
    // `tolerance`: the provider's own age limit (its SDK's), used unless
    // --tolerance is given; `none` (Duration::max()): its SDK checks no age.
    std::optional<Duration> tolerance;
    enum class TimestampUnit {
        seconds,
        milliseconds,
        rfc3339,
        http_date // "Mon, 02 Jan 2006 22:04:05 GMT" (Metronome's Date header)
    } timestamp_unit = TimestampUnit::seconds;
    // Whether a timestamp ahead of the clock is refused too (most), or only
    // one too old (Stripe-like libraries).
    bool future_refused = true;

    // Headers whose value must be one of these (Box's BOX-SIGNATURE-VERSION
    // 1): a delivery without one, or with another value, is invalid, under
    // --scheme NAME as under auto. A value written {param:NAME} is the one
    // the user gives with --param NAME=VALUE (Pusher's app key); without
    // it, the header must be there, its value unchecked.
    struct RequiredHeader {
        std::string name;
        std::vector<std::string> values;
    };
    // The NAME of a required value written {param:NAME}; empty for a value.
    [[nodiscard]] static std::string_view required_param(std::string_view value) {
        constexpr std::string_view open = "{param:";
        if (!value.starts_with(open) || !value.ends_with('}')) return {};
        return value.substr(open.size(), value.size() - open.size() - 1);
    }
    std::vector<RequiredHeader> require;

    std::string id_header; // the provider's message id, for --nonce
    // For --scheme auto: every one of these headers is present, with the
    // value given when one is ("X-Version: v2"; default: the signature
    // header).
    struct DetectHeader {
        std::string name;
        std::string value;   // empty: any value
        bool prefix = false; // "Name: text*": a value that starts with `value`
    };
    std::vector<DetectHeader> detect;
};

struct VerifyConfig {
    Scheme scheme = Scheme::auto_detect;
    std::vector<Secret> secrets;
    std::vector<PublicKey> public_keys;
    Duration tolerance = std::chrono::minutes(5);
    bool tolerance_given = false; // --tolerance: a provider spec's own then yields
    // --param NAME=VALUE: values provider specs require ({param:NAME}).
    std::map<std::string, std::string> params;
    TimestampCheck timestamp_check = TimestampCheck::enforce;
    TimestampUnit timestamp_unit = TimestampUnit::seconds;
    StandardKey standard_key = StandardKey::decoded;
    Sha1Policy sha1 = Sha1Policy::reject;
    std::string url;      // the full public URL (twilio, square)
    std::string url_base; // https://host[:port], the envelope's path appended
    GenericHmacSpec hmac;
    // --provider-file: specs, checked by `auto` after the built-in schemes;
    // with Scheme::provider, `provider` is the one --scheme named.
    std::vector<ProviderSpec> providers;
    std::size_t provider = 0;
    NonceCapture nonce_capture = NonceCapture::keep;
};

// Throws UsageError for a malformed --hmac-* description.
[[nodiscard]] crypto::HashAlgorithm parse_hash_algorithm(std::string_view name);
[[nodiscard]] SignatureEncoding parse_signature_encoding(std::string_view name);
[[nodiscard]] std::string_view encoding_name(SignatureEncoding encoding);

struct Verdict {
    bool valid = false;
    Scheme scheme = Scheme::auto_detect;
    std::string key_label; // which secret or public key matched
    std::string reason;
    // What --nonce remembers: "sha256:" and the hex SHA-256 of the bytes
    // the matched signature covers. A replay is the same signed content,
    // however its signature is spelled (docs/verify.md, "Replays").
    std::string nonce;
    // What the delivery calls itself: its message id header, else its
    // signature's text (what idem 0.2 and earlier keyed --nonce on).
    std::string message_id;
    std::optional<Timestamp> signed_at;
    std::string provider; // the provider file's name, when one judged it
};

// What a verdict calls its scheme: the provider's name for a provider file.
[[nodiscard]] std::string_view verdict_scheme_name(const Verdict& verdict);

} // namespace idem::verify
