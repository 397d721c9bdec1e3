#include "keys.hpp"

#include "common.hpp"
#include "idem/crypto/crypto.hpp"
#include "idem/util/errors.hpp"
#include "idem/util/files.hpp"
#include "idem/util/text.hpp"
#include "idem/verify/provider_spec.hpp"
#include "idem/verify/scheme.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/prctl.h>
#include <sys/resource.h>

namespace idem::cli {

void add_key_options(CLI::App& command, KeyOptions& options) {
    // The names in its type, {a,b,...}, are what shells complete (tools/docgen.cpp).
    auto names = verify::scheme_names();
    command
        .add_option("--scheme", options.scheme,
                    "github, stripe, slack, standard, svix, shopify, discord, twilio, square, "
                    "pagerduty, braintree, hmac, a provider of --provider-file, or auto "
                    "(default: from the headers)")
        ->type_name(fmt::format("SCHEME:{{{}}}", fmt::join(names, ",")));
    command
        .add_option("--secret", options.secrets,
                    "shared secret, every byte as given; repeat for rotation (named #1, #2... "
                    "in verdicts)")
        ->allow_extra_args(false);
    command
        .add_option("--secret-file", options.secret_files,
                    "[LABEL=]FILE: one secret per line, every byte but the line end (named "
                    "LABEL or the file's name, ':LINE' when it holds several)")
        ->allow_extra_args(false);
    command
        .add_option("--secret-env", options.secret_envs,
                    "[LABEL=]NAME: the secret is all of variable NAME (named LABEL or NAME); "
                    "keeps it out of the process list")
        ->allow_extra_args(false);
    command
        .add_option(
            "--public-key", options.public_keys,
            "ed25519 public key (hex, base64 or whpk_...) for discord and Standard Webhooks v1a")
        ->allow_extra_args(false);
    command.add_option("--url", options.url,
                       "the full public URL the provider called (twilio, square)");
    command.add_option(
        "--url-base", options.url_base,
        "https://host[:port] to which each envelope's path is appended (twilio, square)");
    command.add_flag("--allow-sha1", options.allow_sha1,
                     "accept the legacy SHA-1 signatures of GitHub (X-Hub-Signature) and Square");
    command
        .add_option("--param", options.params,
                    "NAME=VALUE a provider file requires of a header ({param:NAME}): "
                    "pusher's app_key; braintree's public_key (repeatable)")
        ->allow_extra_args(false);
    command
        .add_option("--provider-file", options.provider_files,
                    "FILE or DIR: providers described in JSON or YAML (docs/verify.md); "
                    "--scheme NAME picks one, auto detects them by their headers")
        ->allow_extra_args(false);
    command.add_option("--hmac-header", options.hmac_header,
                       "hmac scheme: signature header (X-Signature)");
    command.add_option("--hmac-prefix", options.hmac_prefix,
                       "hmac scheme: prefix before the digest, e.g. sha256=");
    command.add_option("--hmac-algorithm", options.hmac_algorithm,
                       "hmac scheme: sha1, sha256 (default), sha512");
    command.add_option("--hmac-encoding", options.hmac_encoding,
                       "hmac scheme: hex (default), base64 or base64url (unpadded)");
    command.add_option(
        "--hmac-message", options.hmac_message,
        "hmac scheme: what is signed, with {body}, {timestamp}, {id} (default {body})");
    command.add_option("--hmac-timestamp-header", options.hmac_timestamp_header,
                       "hmac scheme: header holding {timestamp} (checked against --tolerance)");
    command.add_option("--hmac-id-header", options.hmac_id_header,
                       "hmac scheme: header holding {id}");
}

void add_key_options_as(CLI::App& command, KeyOptions& options, const std::string& heading) {
    auto before = command.get_options().size();
    add_key_options(command, options);
    command.remove_option(command.get_option("--scheme"));
    auto added = command.get_options();
    for (auto i = before; i < added.size(); ++i)
        added[i]->group(heading);
}

namespace {
// A file of secrets, one a line: a few dozen bytes each, so 1 MiB is far
// past any real one.
constexpr std::uint64_t k_max_secret_file_bytes = 1ULL << 20;

std::string read_secret_file(const std::string& path) {
    return read_bounded_file(path, "--secret-file", k_max_secret_file_bytes);
}
} // namespace

// A process that holds a secret leaves no core dump (a SIGQUIT or a crash
// would write the secret to disk) unless IDEM_ALLOW_CORE_DUMPS=1 asks for
// one: not dumpable (which also keeps other users' ptrace out), and a core
// size limit of 0.
void keep_secrets_out_of_core_dumps() {
    if (const char* allow = std::getenv("IDEM_ALLOW_CORE_DUMPS");
        allow && std::string_view(allow) == "1")
        return;
    (void)::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    struct rlimit none {};
    (void)::setrlimit(RLIMIT_CORE, &none);
}

verify::VerifyConfig key_config(const KeyOptions& options) {
    verify::VerifyConfig config;
    if (!options.secrets.empty() || !options.secret_files.empty() || !options.secret_envs.empty())
        keep_secrets_out_of_core_dumps();
    config.providers = verify::load_provider_specs(std::vector<std::filesystem::path>(
        options.provider_files.begin(), options.provider_files.end()));
    // --param NAME=VALUE: only names some provider file asks for, so a
    // typo is refused rather than leaving its header unchecked.
    std::vector<std::string> asked;
    for (const auto& spec : config.providers)
        for (const auto& required : spec.require)
            for (const auto& value : required.values)
                if (auto param = verify::ProviderSpec::required_param(value); !param.empty())
                    asked.emplace_back(param);
    for (const auto& spec : config.providers)
        asked.insert(asked.end(), spec.message_params.begin(), spec.message_params.end());
    // braintree: the API key pair's public key names its bt_signature pair.
    if (options.scheme == "braintree") asked.emplace_back("public_key");
    for (const auto& param : options.params) {
        auto equals = param.find('=');
        if (equals == std::string::npos || equals == 0)
            throw UsageError(fmt::format("--param: expected NAME=VALUE, got {}", quote(param)));
        auto name = param.substr(0, equals);
        if (std::find(asked.begin(), asked.end(), name) == asked.end()) {
            auto hint = closest_name(name, asked);
            throw UsageError(fmt::format(
                "--param {}: no provider file asks for it{}", name,
                hint.empty()
                    ? (asked.empty() ? std::string(" (give --provider-file first)")
                                     : fmt::format(" (they ask for {})", fmt::join(asked, ", ")))
                    : fmt::format("; did you mean {}?", hint)));
        }
        config.params[name] = param.substr(equals + 1);
    }
    // Provider names never shadow a built-in scheme (load_provider_specs).
    auto named = std::find_if(config.providers.begin(), config.providers.end(),
                              [&](const auto& spec) { return spec.name == options.scheme; });
    if (named != config.providers.end()) {
        config.scheme = verify::Scheme::provider;
        config.provider = static_cast<std::size_t>(named - config.providers.begin());
    } else {
        config.scheme = verify::parse_scheme(options.scheme);
    }
    // A secret's bytes are never split: labels come from outside the value.
    for (const auto& text : options.secrets)
        config.secrets.push_back(
            verify::make_secret(text, fmt::format("#{}", config.secrets.size() + 1)));
    for (const auto& text : options.secret_files) {
        // A path that names a file as it is wins over a LABEL= reading of it.
        auto reference = std::filesystem::exists(text) ? verify::LabelledReference{"", text}
                                                       : verify::parse_labelled_reference(text);
        auto label = reference.label.empty()
                         ? std::filesystem::path(reference.reference).filename().string()
                         : reference.label;
        auto lines = read_secret_file(reference.reference);
        for (auto& secret : verify::parse_secret_lines(lines, label))
            config.secrets.push_back(std::move(secret));
        crypto::cleanse(lines);
    }
    for (const auto& text : options.secret_envs) {
        auto reference = verify::parse_labelled_reference(text);
        config.secrets.push_back(
            verify::make_secret(require_env(reference.reference, "--secret-env"),
                                reference.label.empty() ? reference.reference : reference.label));
    }
    for (const auto& text : options.public_keys) {
        // A path that names a file (a PEM or a JWK as saved) is read; a public
        // key is no secret, but the same bound keeps a stray path small.
        std::error_code error;
        auto key_text = std::filesystem::is_regular_file(text, error)
                            ? read_bounded_file(text, "--public-key", k_max_secret_file_bytes)
                            : text;
        config.public_keys.push_back(
            verify::parse_public_key(key_text, config.public_keys.size() + 1));
    }
    config.url = options.url;
    config.url_base = options.url_base;
    config.sha1 = options.allow_sha1 ? verify::Sha1Policy::allow : verify::Sha1Policy::reject;
    config.hmac.header = options.hmac_header;
    config.hmac.prefix = options.hmac_prefix;
    config.hmac.algorithm = verify::parse_hash_algorithm(options.hmac_algorithm);
    config.hmac.encoding = verify::parse_signature_encoding(options.hmac_encoding);
    config.hmac.message_template = options.hmac_message;
    config.hmac.timestamp_header = options.hmac_timestamp_header;
    config.hmac.id_header = options.hmac_id_header;
    if (config.hmac.message_template.find("{timestamp}") != std::string::npos &&
        config.hmac.timestamp_header.empty() && config.scheme == verify::Scheme::hmac)
        throw UsageError("--hmac-message uses {timestamp}: say where it comes from with "
                         "--hmac-timestamp-header");
    return config;
}

} // namespace idem::cli
