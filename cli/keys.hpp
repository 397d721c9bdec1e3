#pragma once
// The flags `verify` and `sign` share: scheme, secrets, public keys, the
// signed URL and the generic hmac description.

#include "idem/verify/config.hpp"

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace idem::cli {

struct KeyOptions {
    std::string scheme = "auto";
    std::vector<std::string> secrets;
    std::vector<std::string> secret_files;
    std::vector<std::string> secret_envs;
    std::vector<std::string> public_keys;
    std::string url;
    std::string url_base;
    std::string hmac_header = "X-Signature";
    std::string hmac_prefix;
    std::string hmac_algorithm = "sha256";
    std::string hmac_encoding = "hex";
    std::string hmac_message = "{body}";
    std::string hmac_timestamp_header;
    std::string hmac_id_header;
    bool allow_sha1 = false;
    std::vector<std::string> provider_files;
    std::vector<std::string> params; // --param NAME=VALUE
};

void add_key_options(CLI::App& command, KeyOptions& options);

// The same flags for a command where signing keys are a side matter
// (listen --verify, replay --resign): without --scheme (that command's own
// flag names it), under their own heading in --help.
void add_key_options_as(CLI::App& command, KeyOptions& options, const std::string& heading);

// Reads secret files and variables; throws UsageError (never echoing a secret).
[[nodiscard]] verify::VerifyConfig key_config(const KeyOptions& options);

} // namespace idem::cli
