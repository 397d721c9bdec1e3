#include "idem/util/detail/yaml_support.hpp"

#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"

#include <fmt/format.h>
#include <fstream>
#include <sstream>

namespace idem::detail {

std::string read_config_file(const std::string& path, std::string_view what) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw UsageError(fmt::format("cannot read {} file {}", what, quote(path)));
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

YAML::Node load_yaml(std::string_view text, const std::string& name) {
    try {
        return YAML::Load(std::string(text));
    } catch (const YAML::ParserException& error) {
        throw UsageError(fmt::format("{}:{}:{}: {}", name, error.mark.line + 1,
                                     error.mark.column + 1, error.msg));
    }
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
