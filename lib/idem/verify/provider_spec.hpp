#pragma once
// Webhook providers described by a file instead of C++ (docs/verify.md,
// "Provider files"): the header that carries the signature, how it is
// written, the message it signs, where its timestamp and message id come
// from, and which headers tell it apart for `--scheme auto`. The built-in
// schemes stay in C++ for speed; a spec covers the long tail of providers
// that sign an HMAC of the body and a few request parts.

#include "idem/verify/config.hpp"

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace idem::verify {

// The specs of every --provider-file: in FILE (one spec, or a list of them,
// in JSON or YAML) or in every *.json, *.yaml and *.yml file of a
// directory, sorted by name. Throws UsageError naming the file, line and
// column of what is wrong, for two specs of one name (wherever each is), and
// for a name a built-in scheme has.
[[nodiscard]] std::vector<ProviderSpec>
load_provider_specs(const std::vector<std::filesystem::path>& paths);

// One spec from its text; `origin` names the file in messages.
[[nodiscard]] std::vector<ProviderSpec> parse_provider_specs(std::string_view text,
                                                             const std::string& origin);

// The spec whose detection headers a delivery carries, the most specific
// (the one that needs the most headers). Specs that tie there are all
// `candidates` and none is `spec`: a delivery never goes to one by the
// order the files load in.
struct ProviderDetection {
    const ProviderSpec* spec = nullptr;
    std::vector<const ProviderSpec*> candidates;
};
[[nodiscard]] ProviderDetection detect_provider(const std::vector<ProviderSpec>& specs,
                                                const record::Envelope& envelope);

} // namespace idem::verify
