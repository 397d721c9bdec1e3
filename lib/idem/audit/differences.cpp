#include "idem/audit/differences.hpp"

#include "idem/util/render.hpp"

#include <fmt/format.h>

namespace idem::audit {

namespace {

void compare(const nlohmann::json& before, const nlohmann::json& after, const std::string& path,
             std::vector<FieldDifference>& out) {
    if (before.is_object() && after.is_object()) {
        // nlohmann's objects keep their keys sorted: one merge walk.
        auto left = before.begin(), right = after.begin();
        auto child = [&](const std::string& key) { return path.empty() ? key : path + "." + key; };
        while (left != before.end() || right != after.end()) {
            if (right == after.end() || (left != before.end() && left.key() < right.key())) {
                out.push_back({child(left.key()), left.value().dump(), std::nullopt});
                ++left;
            } else if (left == before.end() || right.key() < left.key()) {
                out.push_back({child(right.key()), std::nullopt, right.value().dump()});
                ++right;
            } else {
                compare(left.value(), right.value(), child(left.key()), out);
                ++left;
                ++right;
            }
        }
        return;
    }
    if (before.is_array() && after.is_array() && before.size() == after.size()) {
        for (std::size_t i = 0; i < before.size(); ++i)
            compare(before[i], after[i], fmt::format("{}[{}]", path, i), out);
        return;
    }
    if (before != after)
        out.push_back({path.empty() ? "(the payload)" : path, before.dump(), after.dump()});
}

std::string shown(const std::optional<std::string>& value) {
    if (!value) return "(absent)";
    constexpr std::size_t k_longest = 40;
    if (value->size() <= k_longest) return *value;
    // Cut on a character boundary (fit_line), marked.
    return fit_line(*value, k_longest);
}

} // namespace

std::vector<FieldDifference> differences(const nlohmann::json& before,
                                         const nlohmann::json& after) {
    std::vector<FieldDifference> out;
    compare(before, after, {}, out);
    return out;
}

std::string describe_difference(const FieldDifference& difference) {
    return fmt::format("{}: {} -> {}", difference.path, shown(difference.before),
                       shown(difference.after));
}

} // namespace idem::audit
