#include "idem/util/detail/yaml_support.hpp"

#include "idem/util/errors.hpp"
#include "idem/util/files.hpp"
#include "idem/util/text.hpp"

#include <fmt/format.h>
#include <map>

namespace idem::detail {

std::string read_config_file(const std::string& path, std::string_view what) {
    return read_bounded_file(path, fmt::format("{} file", what), k_max_config_file_bytes);
}

namespace {

// Every mapping under `node` has each key once.
void refuse_duplicate_keys(const YAML::Node& node, const std::string& name) {
    if (node.IsSequence()) {
        for (const auto& item : node)
            refuse_duplicate_keys(item, name);
        return;
    }
    if (!node.IsMap()) return;
    std::map<std::string, YAML::Mark> seen;
    for (const auto& entry : node) {
        if (!entry.first.IsScalar())
            fail_at(name, entry.first, "a key must be a plain name, not null, a list or a map");
        auto key = entry.first.Scalar();
        auto [first, added] = seen.try_emplace(key, entry.first.Mark());
        if (!added)
            fail_at(name, entry.first,
                    fmt::format("key {} is given twice in one mapping (first at {}:{})", quote(key),
                                first->second.line + 1, first->second.column + 1));
        refuse_duplicate_keys(entry.second, name);
    }
}

} // namespace

YAML::Node load_yaml(std::string_view text, const std::string& name) {
    YAML::Node document;
    try {
        document = YAML::Load(std::string(text));
    } catch (const YAML::ParserException& error) {
        throw yaml_error(name, error);
    }
    refuse_duplicate_keys(document, name);
    return document;
}

UsageError yaml_error(const std::string& file, const YAML::Exception& error) {
    if (error.mark.is_null()) return UsageError(fmt::format("{}: {}", file, error.msg));
    return UsageError(
        fmt::format("{}:{}:{}: {}", file, error.mark.line + 1, error.mark.column + 1, error.msg));
}

void fail_at(const std::string& file, const YAML::Node& node, const std::string& message) {
    auto mark = node.Mark();
    if (mark.is_null()) throw UsageError(fmt::format("{}: {}", file, message));
    throw UsageError(fmt::format("{}:{}:{}: {}", file, mark.line + 1, mark.column + 1, message));
}

std::string scalar(const std::string& file, const YAML::Node& node, std::string_view key) {
    if (!node.IsScalar()) fail_at(file, node, fmt::format("{} must be a single value", key));
    auto text = node.as<std::string>();
    if (text.empty()) fail_at(file, node, fmt::format("{} is empty", key));
    return text;
}

} // namespace idem::detail
