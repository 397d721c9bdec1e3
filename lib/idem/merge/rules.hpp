#pragma once
// What `idem merge` merges (docs/merge.md): rules that pick records, group
// them by field values, gather each group's records of a time window, and
// say how the merged record is built from them.

#include "idem/record/field_path.hpp"
#include "idem/record/parser.hpp"
#include "idem/util/time.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace idem::merge {

// How an aggregate folds the members' values of its input field.
enum class Function { first, last, append, concat, sum, avg, min, max, count, distinct };

[[nodiscard]] std::string_view function_name(Function function);
// Whether the function reads numbers (a member without one is rejected).
[[nodiscard]] bool is_numeric(Function function);

// One field of the merged record: `output` = function(input).
struct Aggregate {
    std::string output; // a top-level field name
    Function function = Function::count;
    std::optional<record::FieldPath> input; // none: count(), or the whole event (".")
    bool whole_event = false;               // append(.), distinct(.): the member's event
    std::string separator = ", ";           // concat
    // Made by a rule's `action:` (merged, count), not named by the user: it
    // never overwrites a field the record has of its own (the figure then
    // goes under _idem.merge). An aggregate of a field into itself
    // (average's value=avg(value)) replaces it, as the action says.
    bool from_action = false;
};

// "value=avg(value),n=count(),last_ts=max(ts),texts=concat(text,' | ')".
// Throws UsageError naming the piece that is wrong.
[[nodiscard]] std::vector<Aggregate> parse_aggregates(std::string_view spec);

enum class WindowKind { tumbling, sliding, session };

struct WindowSpec {
    WindowKind kind = WindowKind::tumbling;
    Duration size{0};  // tumbling, sliding: the window's length
    Duration every{0}; // sliding: how often a window starts
    Duration gap{0};   // session: how much quiet closes it
};

// A record matches when the field holds the value (as text: strings
// unescaped, numbers as written), or, without a value, when the field is there.
struct Condition {
    record::FieldPath path;
    std::optional<std::string> value;
    std::string text; // as given, for messages
};

// "priority=critical", "type=notification", "urgent". Throws UsageError.
[[nodiscard]] Condition parse_condition(std::string_view text);
[[nodiscard]] bool holds(record::RecordParser& parser, const Condition& condition);

// The rest of the merged record: the first member's or the last's.
enum class Base { first, last };

struct MergeRule {
    std::string name;
    std::vector<Condition> match; // all must hold; empty: every record
    std::vector<record::FieldPath> group;
    WindowSpec window;
    std::vector<Aggregate> aggregates;
    Base base = Base::first;
    std::uint64_t max_count = 0; // a window this full closes at once; 0: no limit
    Duration max_span{0};        // session: at most this long; 0: no limit
};

// The aggregates a rule file's `action:` stands for (the seed's names):
// merge_content and append gather every member's event into "merged";
// average averages `value_field` into a field of the same name; overwrite
// keeps the last member; aggregate takes `aggregate:`. Also counts members
// into "count" except for overwrite. Throws UsageError.
void apply_action(MergeRule& rule, std::string_view action, std::string_view value_field);

// Checks a rule is complete (a group, a window) and its parts agree.
// Throws UsageError naming the rule.
void validate(const MergeRule& rule);

// A rules file, JSON or YAML (docs/merge.md): the seed's
// `message_merger: {rules: [...]}`, `{rules: [...]}` or a bare list. Throws
// UsageError naming the file, and the line where the YAML or JSON says one.
[[nodiscard]] std::vector<MergeRule> parse_rules_file(const std::string& path);
// The same from text, `name` standing for the file in messages.
[[nodiscard]] std::vector<MergeRule> parse_rules_text(std::string_view text,
                                                      const std::string& name);

} // namespace idem::merge
