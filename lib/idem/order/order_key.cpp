#include "idem/order/order_key.hpp"

#include "idem/record/annotate.hpp"
#include "idem/record/key.hpp"
#include "idem/util/time.hpp"

#include <charconv>

namespace idem::order {

namespace {

bool all_digits(std::string_view text) {
    if (text.empty()) return false;
    for (char c : text)
        if (c < '0' || c > '9') return false;
    return true;
}

} // namespace

std::optional<std::int64_t> parse_sequence(const record::FieldValue& value) {
    using Type = record::FieldValue::Type;
    if (value.type != Type::number && value.type != Type::string) return std::nullopt;
    if (!all_digits(value.text)) return std::nullopt;
    std::int64_t sequence = 0;
    auto [end, error] =
        std::from_chars(value.text.data(), value.text.data() + value.text.size(), sequence);
    if (error != std::errc{} || end != value.text.data() + value.text.size()) return std::nullopt;
    if (sequence > k_last_sequence) return std::nullopt;
    return sequence;
}

std::optional<std::int64_t> find_sequence(record::RecordParser& parser,
                                          const record::FieldPath& path,
                                          std::optional<record::FieldValue>& found) {
    if (auto sequence = parser.find_integer(path))
        if (*sequence >= 0 && *sequence <= k_last_sequence) return sequence;
    found = parser.find(path);
    return found ? parse_sequence(*found) : std::nullopt;
}

std::optional<order::OrderKey> parse_stamp(const record::FieldValue& value) {
    using Type = record::FieldValue::Type;
    if (value.type != Type::number && value.type != Type::string) return std::nullopt;
    auto text = value.text;
    auto dot = text.find('.');
    if (dot != std::string_view::npos && dot >= 12 && all_digits(text.substr(0, dot)) &&
        all_digits(text.substr(dot + 1))) {
        std::int64_t physical = 0;
        std::uint64_t logical = 0;
        auto [physical_end, physical_error] =
            std::from_chars(text.data(), text.data() + dot, physical);
        auto [logical_end, logical_error] =
            std::from_chars(text.data() + dot + 1, text.data() + text.size(), logical);
        if (physical_error != std::errc{} || logical_error != std::errc{}) return std::nullopt;
        auto at = timestamp_from_epoch_number(static_cast<double>(physical));
        return order::OrderKey{at.time_since_epoch().count(), logical};
    }
    auto at = parse_timestamp(text);
    if (!at) return std::nullopt;
    return order::OrderKey{at->time_since_epoch().count(), 0};
}

const record::FieldPath* encode_partition(record::RecordParser& parser,
                                          const std::vector<record::FieldPath>& paths,
                                          std::string& out) {
    for (std::size_t i = 0; i < paths.size(); ++i) {
        auto value = parser.find(paths[i]);
        if (!value) return &paths[i];
        if (i > 0) out += ' ';
        record::append_encoded_value(out, *value);
    }
    return nullptr;
}

std::string partition_label(std::string_view encoded, std::size_t paths) {
    return record::encoded_values_json(encoded, paths);
}

} // namespace idem::order
