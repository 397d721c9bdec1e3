#include "idem/merge/rules.hpp"

#include "idem/util/detail/yaml_support.hpp"
#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"

#include <charconv>
#include <fmt/format.h>

namespace idem::merge {

namespace {

using idem::detail::fail_at;
using idem::detail::scalar;

struct FunctionName {
    std::string_view name;
    Function function;
};
constexpr FunctionName k_functions[] = {
    {"first", Function::first},       {"last", Function::last}, {"append", Function::append},
    {"concat", Function::concat},     {"sum", Function::sum},   {"avg", Function::avg},
    {"min", Function::min},           {"max", Function::max},   {"count", Function::count},
    {"distinct", Function::distinct},
};

// Splits on commas outside parentheses and quotes.
std::vector<std::string_view> split_top_level(std::string_view text) {
    std::vector<std::string_view> pieces;
    int depth = 0;
    char quote_char = 0;
    std::size_t start = 0;
    for (std::size_t i = 0; i < text.size(); ++i) {
        char c = text[i];
        if (quote_char) {
            if (c == quote_char) quote_char = 0;
        } else if (c == '\'' || c == '"') {
            quote_char = c;
        } else if (c == '(') {
            ++depth;
        } else if (c == ')') {
            --depth;
        } else if (c == ',' && depth == 0) {
            pieces.push_back(text.substr(start, i - start));
            start = i + 1;
        }
    }
    pieces.push_back(text.substr(start));
    return pieces;
}

bool valid_output_name(std::string_view name) {
    if (name.empty() || name == "_idem") return false;
    return std::all_of(name.begin(), name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
    });
}

Aggregate parse_aggregate(std::string_view piece) {
    auto text = trim(piece);
    auto equals = text.find('=');
    auto open = text.find('(');
    if (equals == std::string_view::npos || open == std::string_view::npos || open < equals ||
        text.back() != ')')
        throw UsageError(fmt::format("--agg: {} is not OUTPUT=FUNCTION(FIELD), as in "
                                     "value=avg(value) or n=count()",
                                     quote(text)));
    Aggregate aggregate;
    aggregate.output = std::string(trim(text.substr(0, equals)));
    if (!valid_output_name(aggregate.output))
        throw UsageError(fmt::format("--agg: {} is not a field name for the merged record "
                                     "(letters, digits, _ and -; not _idem)",
                                     quote(aggregate.output)));
    auto name = trim(text.substr(equals + 1, open - equals - 1));
    const auto* found =
        std::find_if(std::begin(k_functions), std::end(k_functions),
                     [&](const FunctionName& candidate) { return candidate.name == name; });
    if (found == std::end(k_functions))
        throw UsageError(fmt::format("--agg: unknown function {} in {} (first, last, append, "
                                     "concat, sum, avg, min, max, count, distinct)",
                                     quote(name), quote(text)));
    aggregate.function = found->function;
    auto arguments = split_top_level(text.substr(open + 1, text.size() - open - 2));
    auto field = trim(arguments.front());
    if (aggregate.function == Function::count) {
        if (!field.empty() || arguments.size() > 1)
            throw UsageError(fmt::format("--agg: count() takes no field, in {}", quote(text)));
        return aggregate;
    }
    if (field.empty())
        throw UsageError(fmt::format("--agg: {}() needs a field, in {}", name, quote(text)));
    if (field == ".") {
        if (aggregate.function != Function::append && aggregate.function != Function::distinct &&
            aggregate.function != Function::first && aggregate.function != Function::last)
            throw UsageError(fmt::format("--agg: the whole event (.) goes with append, distinct, "
                                         "first or last, not {}(), in {}",
                                         name, quote(text)));
        aggregate.whole_event = true;
    } else {
        aggregate.input = record::FieldPath::parse(field);
    }
    if (arguments.size() > 1) {
        if (aggregate.function != Function::concat || arguments.size() > 2)
            throw UsageError(
                fmt::format("--agg: only concat(FIELD, 'SEPARATOR') takes a second argument, "
                            "in {}",
                            quote(text)));
        auto separator = trim(arguments[1]);
        if (separator.size() < 2 || (separator.front() != '\'' && separator.front() != '"') ||
            separator.back() != separator.front())
            throw UsageError(fmt::format("--agg: concat's separator is quoted, as in "
                                         "concat(text, ' | '), in {}",
                                         quote(text)));
        aggregate.separator = std::string(separator.substr(1, separator.size() - 2));
    }
    return aggregate;
}

// --- rules files ---------------------------------------------------------

Duration duration_at(const std::string& file, const YAML::Node& node, std::string_view key) {
    auto text = scalar(file, node, key);
    try {
        auto value = parse_duration(text);
        if (value.count() <= 0) fail_at(file, node, fmt::format("{} must be longer than 0", key));
        return value;
    } catch (const UsageError& error) {
        fail_at(file, node, fmt::format("{}: {}", key, error.what()));
    }
}

std::vector<std::string> strings_at(const std::string& file, const YAML::Node& node,
                                    std::string_view key) {
    std::vector<std::string> values;
    if (node.IsScalar()) {
        auto text = node.as<std::string>(); // the pieces point into it
        for (auto piece : split(text, ','))
            if (!trim(piece).empty()) values.emplace_back(trim(piece));
    } else if (node.IsSequence()) {
        for (const auto& item : node)
            values.push_back(scalar(file, item, key));
    } else {
        fail_at(file, node, fmt::format("{} must be a list or a comma-separated value", key));
    }
    return values;
}

template <typename Parse>
auto parsed_at(const std::string& file, const YAML::Node& node, Parse parse) -> decltype(parse()) {
    try {
        return parse();
    } catch (const UsageError& error) {
        fail_at(file, node, error.what());
    }
}

// `match:` as a map (field: value) or a list of "field=value".
void read_match(const std::string& file, const YAML::Node& value, MergeRule& rule) {
    if (value.IsMap()) {
        for (const auto& condition : value) {
            auto text =
                condition.first.as<std::string>() + "=" + scalar(file, condition.second, "match");
            rule.match.push_back(
                parsed_at(file, condition.second, [&] { return parse_condition(text); }));
        }
        return;
    }
    for (const auto& text : strings_at(file, value, "match"))
        rule.match.push_back(parsed_at(file, value, [&] { return parse_condition(text); }));
}

WindowKind window_kind_at(const std::string& file, const YAML::Node& value,
                          const std::string& key) {
    auto kind = scalar(file, value, key);
    if (kind == "tumbling") return WindowKind::tumbling;
    if (kind == "sliding") return WindowKind::sliding;
    if (kind == "session") return WindowKind::session;
    fail_at(file, value,
            fmt::format("window kind {} is not tumbling, sliding or session", quote(kind)));
}

// The window's own keys (`every:` and `gap:` may also stand beside it).
struct WindowKeys {
    bool given = false;
    std::optional<Duration> every, gap;
};

// `window:` as a duration (5m) or a map (kind:, size:, every:, gap:).
void read_window(const std::string& file, const YAML::Node& value, MergeRule& rule,
                 WindowKeys& keys) {
    keys.given = true;
    if (value.IsScalar()) {
        rule.window.size = duration_at(file, value, "window");
        return;
    }
    if (!value.IsMap())
        fail_at(file, value, "window is a duration (5m) or a map (kind:, size:, ...)");
    for (const auto& part : value) {
        auto name = part.first.as<std::string>();
        if (name == "kind" || name == "type")
            rule.window.kind = window_kind_at(file, part.second, name);
        else if (name == "size")
            rule.window.size = duration_at(file, part.second, name);
        else if (name == "every")
            keys.every = duration_at(file, part.second, name);
        else if (name == "gap")
            keys.gap = duration_at(file, part.second, name);
        else
            fail_at(file, part.first,
                    fmt::format("unknown window key {} (kind, size, every, gap)", quote(name)));
    }
}

// `gap:` makes a session window, `every:` a sliding one; a session's gap
// is its size when it names none.
void settle_window(const std::string& file, const YAML::Node& node, MergeRule& rule,
                   const WindowKeys& keys) {
    if (keys.gap) {
        rule.window.kind = WindowKind::session;
        rule.window.gap = *keys.gap;
    } else if (rule.window.kind == WindowKind::session && !keys.given) {
        fail_at(file, node, fmt::format("rule {}: a session window needs gap:", rule.name));
    }
    if (keys.every) {
        rule.window.kind = WindowKind::sliding;
        rule.window.every = *keys.every;
    }
    if (rule.window.kind == WindowKind::session && rule.window.gap.count() == 0 &&
        rule.window.size.count() > 0)
        rule.window.gap = rule.window.size;
}

// `aggregate:` as a map (name: "fn(field)") or one "name=fn(field),...".
void read_aggregates(const std::string& file, const YAML::Node& value, MergeRule& rule) {
    auto add = [&](const YAML::Node& at, const std::string& text) {
        auto parsed = parsed_at(file, at, [&] { return parse_aggregates(text); });
        rule.aggregates.insert(rule.aggregates.end(), parsed.begin(), parsed.end());
    };
    if (!value.IsMap()) {
        add(value, scalar(file, value, "aggregate"));
        return;
    }
    for (const auto& part : value)
        add(part.second,
            part.first.as<std::string>() + "=" + scalar(file, part.second, "aggregate"));
}

std::uint64_t count_at(const std::string& file, const YAML::Node& value, const std::string& key) {
    auto text = scalar(file, value, key);
    std::uint64_t count = 0;
    auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), count);
    if (error != std::errc{} || end != text.data() + text.size() || count == 0)
        fail_at(file, value, fmt::format("{} is a whole number above 0", key));
    return count;
}

// One rule of a rules file, key by key; every failure names the file, the
// line and the column of the value at fault.
MergeRule rule_of(const std::string& file, const YAML::Node& node, std::size_t index) {
    if (!node.IsMap()) fail_at(file, node, "a rule is a map (type:, fields:, window:, action:)");
    MergeRule rule;
    std::string action, value_field = "value";
    YAML::Node action_node;
    WindowKeys window;
    bool has_aggregate = false;
    for (const auto& item : node) {
        auto key = item.first.as<std::string>();
        const auto& value = item.second;
        if (key == "name") {
            rule.name = scalar(file, value, key);
        } else if (key == "type") {
            auto type = scalar(file, value, key);
            rule.match.push_back({record::FieldPath::parse("type"), type, "type=" + type});
            if (rule.name.empty()) rule.name = type;
        } else if (key == "match") {
            read_match(file, value, rule);
        } else if (key == "fields" || key == "group") {
            for (const auto& text : strings_at(file, value, key))
                rule.group.push_back(
                    parsed_at(file, value, [&] { return record::FieldPath::parse(text); }));
        } else if (key == "window") {
            read_window(file, value, rule, window);
        } else if (key == "every") {
            window.every = duration_at(file, value, key);
        } else if (key == "gap") {
            window.gap = duration_at(file, value, key);
        } else if (key == "action") {
            action = scalar(file, value, key);
            action_node = value; // an unknown action is reported where it is written
        } else if (key == "value") {
            value_field = scalar(file, value, key);
        } else if (key == "aggregate") {
            has_aggregate = true;
            read_aggregates(file, value, rule);
        } else if (key == "base") {
            auto base = scalar(file, value, key);
            if (base != "first" && base != "last")
                fail_at(file, value, fmt::format("base {} is not first or last", quote(base)));
            rule.base = base == "first" ? Base::first : Base::last;
        } else if (key == "max_count" || key == "max-count") {
            rule.max_count = count_at(file, value, key);
        } else if (key == "max_span" || key == "max-span") {
            rule.max_span = duration_at(file, value, key);
        } else {
            fail_at(file, item.first,
                    fmt::format("unknown rule key {} (name, type, match, fields, window, every, "
                                "gap, action, value, aggregate, base, max_count, max_span)",
                                quote(key)));
        }
    }
    if (rule.name.empty()) rule.name = fmt::format("rule {}", index + 1);
    settle_window(file, node, rule, window);
    if (!action.empty()) {
        if (action == "aggregate" && !has_aggregate)
            fail_at(file, node,
                    fmt::format("rule {}: action aggregate needs aggregate:", rule.name));
        parsed_at(file, action_node, [&] {
            apply_action(rule, action, value_field);
            return 0;
        });
    }
    parsed_at(file, node, [&] {
        validate(rule);
        return 0;
    });
    return rule;
}

} // namespace

std::string_view function_name(Function function) {
    for (const auto& candidate : k_functions)
        if (candidate.function == function) return candidate.name;
    return "?";
}

bool is_numeric(Function function) {
    return function == Function::sum || function == Function::avg || function == Function::min ||
           function == Function::max;
}

std::vector<Aggregate> parse_aggregates(std::string_view spec) {
    std::vector<Aggregate> aggregates;
    for (auto piece : split_top_level(spec)) {
        if (trim(piece).empty()) continue;
        auto aggregate = parse_aggregate(piece);
        for (const auto& earlier : aggregates)
            if (earlier.output == aggregate.output)
                throw UsageError(fmt::format("--agg: {} is set twice", quote(aggregate.output)));
        aggregates.push_back(std::move(aggregate));
    }
    if (aggregates.empty()) throw UsageError("--agg: no aggregate given");
    return aggregates;
}

Condition parse_condition(std::string_view text) {
    auto trimmed = trim(text);
    if (trimmed.empty()) throw UsageError("an empty condition: give FIELD=VALUE or FIELD");
    Condition condition;
    condition.text = std::string(trimmed);
    auto equals = trimmed.find('=');
    condition.path = record::FieldPath::parse(trim(trimmed.substr(0, equals)));
    if (equals != std::string_view::npos)
        condition.value = std::string(trim(trimmed.substr(equals + 1)));
    return condition;
}

bool holds(record::RecordParser& parser, const Condition& condition) {
    auto value = parser.find(condition.path);
    if (!value) return false;
    return !condition.value || value->text == *condition.value;
}

void apply_action(MergeRule& rule, std::string_view action, std::string_view value_field) {
    auto add = [&](std::string_view spec) {
        for (auto& aggregate : parse_aggregates(spec)) {
            bool taken = std::any_of(rule.aggregates.begin(), rule.aggregates.end(),
                                     [&](const auto& a) { return a.output == aggregate.output; });
            aggregate.from_action = !aggregate.input || aggregate.input->text() != aggregate.output;
            if (!taken) rule.aggregates.push_back(std::move(aggregate));
        }
    };
    if (action == "merge_content" || action == "append") {
        add("merged=append(.),count=count()");
    } else if (action == "average") {
        auto field = std::string(value_field);
        auto name = field.substr(field.rfind('.') == std::string::npos ? 0 : field.rfind('.') + 1);
        add(fmt::format("{}=avg({}),count=count()", name, field));
        rule.base = Base::last;
    } else if (action == "overwrite") {
        rule.base = Base::last;
    } else if (action == "aggregate") {
        if (rule.aggregates.empty()) throw UsageError("action aggregate needs aggregates");
        add("count=count()");
    } else {
        throw UsageError(fmt::format("unknown action {} (merge_content, append, average, "
                                     "overwrite, aggregate)",
                                     quote(action)));
    }
}

void validate(const MergeRule& rule) {
    auto named = [&](const std::string& message) {
        return UsageError(fmt::format("rule {}: {}", quote(rule.name), message));
    };
    if (rule.group.empty()) throw named("no group fields (--group, or fields: in a rules file)");
    const auto& window = rule.window;
    switch (window.kind) {
    case WindowKind::tumbling:
        if (window.size.count() <= 0) throw named("no window length (--window 5m)");
        break;
    case WindowKind::sliding:
        if (window.size.count() <= 0 || window.every.count() <= 0)
            throw named("a sliding window needs a length and --every");
        if (window.every > window.size)
            throw named("--every is longer than the window: records between windows would "
                        "belong to none");
        if (window.size / window.every > 1000)
            throw named("a sliding window here would hold each record in over 1000 windows: "
                        "make --every longer");
        break;
    case WindowKind::session:
        if (window.gap.count() <= 0) throw named("a session window needs --gap");
        break;
    }
    if (rule.max_span.count() > 0 && window.kind != WindowKind::session)
        throw named("--max-span caps a session: it goes with --gap");
}

namespace {

std::vector<MergeRule> read_rules(std::string_view text, const std::string& name) {
    auto document = idem::detail::load_yaml(text, name);
    YAML::Node rules = document;
    if (document.IsMap()) {
        auto merger = document["message_merger"];
        const YAML::Node& holder = merger ? merger : document;
        if (!holder.IsMap() || !holder["rules"])
            fail_at(name, document, "no rules: give `rules:` (or `message_merger: {rules:}`)");
        for (const auto& item : holder)
            if (item.first.as<std::string>() != "rules")
                fail_at(name, item.first,
                        fmt::format("unknown key {} beside rules",
                                    quote(item.first.as<std::string>())));
        rules = holder["rules"];
    }
    if (!rules.IsSequence() || rules.size() == 0)
        fail_at(name, rules, "rules is a list of at least one rule");
    std::vector<MergeRule> parsed;
    for (std::size_t i = 0; i < rules.size(); ++i) {
        parsed.push_back(rule_of(name, rules[i], i));
        for (std::size_t j = 0; j + 1 < parsed.size(); ++j)
            if (parsed[j].name == parsed.back().name)
                fail_at(name, rules[i],
                        fmt::format("two rules are named {}: give each a name:",
                                    quote(parsed.back().name)));
    }
    return parsed;
}

} // namespace

std::vector<MergeRule> parse_rules_text(std::string_view text, const std::string& name) {
    return idem::detail::interpret_yaml(name, [&] { return read_rules(text, name); });
}

std::vector<MergeRule> parse_rules_file(const std::string& path) {
    return parse_rules_text(idem::detail::read_config_file(path, "rules"), path);
}

} // namespace idem::merge
