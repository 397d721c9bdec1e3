// Merged records as they are written (detail/render.hpp).

#include "idem/merge/detail/render.hpp"

#include "idem/record/annotate.hpp"
#include "idem/record/key.hpp"
#include "idem/util/time.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <simdjson.h>
#include <utility>

namespace idem::merge::detail {

namespace {

void append_value(std::string& out, const KeptValue& value) {
    if (!value.present) {
        out += "null";
        return;
    }
    if (value.type == record::FieldValue::Type::string)
        record::append_json_string(out, value.text.view());
    else
        out += value.text.view(); // a number, true/false/null, or JSON text
}

void append_number(std::string& out, double value) {
    if (std::isfinite(value))
        fmt::format_to(std::back_inserter(out), "{}", value);
    else
        out += "null";
}

void append_aggregate(std::string& out, const Aggregate& aggregate,
                      const Accumulator& accumulator) {
    switch (aggregate.function) {
    case Function::count:
        fmt::format_to(std::back_inserter(out), "{}", accumulator.n);
        return;
    case Function::first:
        append_value(out, accumulator.first);
        return;
    case Function::last:
        append_value(out, accumulator.last);
        return;
    case Function::append:
    case Function::distinct:
        out += '[';
        for (std::size_t i = 0; i < accumulator.items.size(); ++i) {
            if (i > 0) out += ',';
            append_value(out, accumulator.items[i]);
        }
        out += ']';
        return;
    case Function::concat:
        if (accumulator.n == 0)
            out += "null";
        else
            record::append_json_string(out, accumulator.joined);
        return;
    case Function::sum:
        if (accumulator.n == 0)
            out += "null";
        else if (accumulator.integral)
            fmt::format_to(std::back_inserter(out), "{}", accumulator.int_sum);
        else
            append_number(out, accumulator.sum);
        return;
    case Function::avg:
        if (accumulator.n == 0)
            out += "null";
        else
            append_number(out, accumulator.sum / static_cast<double>(accumulator.n));
        return;
    case Function::min:
        out += accumulator.min ? accumulator.min_text : std::string("null");
        return;
    case Function::max:
        out += accumulator.max ? accumulator.max_text : std::string("null");
        return;
    }
}

} // namespace

struct Renderer::Impl {
    std::string render(const WindowState& window, const MergeRule& rule) {
        std::string out;
        out.reserve(window.base.size() + 256);
        out += '{';
        bool first = true;
        auto separator = [&] {
            if (!first) out += ',';
            first = false;
        };
        std::string_view idem_members; // the base's own "_idem" members, kept
        simdjson::dom::object base;
        auto base_bytes = window.base.view();
        bool parsed =
            m_parser.parse(base_bytes.data(), base_bytes.size()).get(base) == simdjson::SUCCESS;
        // An action's figure whose name the record already uses goes under
        // _idem.merge: the record's own field stays as it was.
        m_displaced.assign(rule.aggregates.size(), false);
        if (parsed)
            for (std::size_t i = 0; i < rule.aggregates.size(); ++i)
                if (rule.aggregates[i].from_action) {
                    simdjson::dom::element own;
                    m_displaced[i] =
                        base.at_key(rule.aggregates[i].output).get(own) == simdjson::SUCCESS;
                    if (m_displaced[i] && std::find(m_collided.begin(), m_collided.end(),
                                                    rule.aggregates[i].output) == m_collided.end())
                        m_collided.push_back(rule.aggregates[i].output);
                }
        if (parsed) {
            for (auto field : base) {
                if (field.key == "_idem") {
                    simdjson::dom::object annotations;
                    if (field.value.get(annotations) == simdjson::SUCCESS) {
                        m_annotations.clear();
                        for (auto annotation : annotations) {
                            if (annotation.key == "merge") continue;
                            if (!m_annotations.empty()) m_annotations += ',';
                            record::append_json_string(m_annotations, annotation.key);
                            m_annotations += ':';
                            m_annotations += simdjson::minify(annotation.value);
                        }
                        idem_members = m_annotations;
                    }
                    continue;
                }
                bool replaced = false;
                for (std::size_t i = 0; i < rule.aggregates.size(); ++i)
                    if (rule.aggregates[i].output == field.key && !m_displaced[i]) replaced = true;
                if (replaced) continue;
                separator();
                record::append_json_string(out, field.key);
                out += ':';
                out += simdjson::minify(field.value);
            }
        }
        std::string displaced;
        for (std::size_t i = 0; i < rule.aggregates.size(); ++i) {
            // _idem.merge.count is the window's count already.
            if (m_displaced[i] && rule.aggregates[i].output == "count" &&
                rule.aggregates[i].function == Function::count)
                continue;
            auto& to = m_displaced[i] ? displaced : out;
            if (m_displaced[i])
                to += ',';
            else
                separator();
            record::append_json_string(to, rule.aggregates[i].output);
            to += ':';
            append_aggregate(to, rule.aggregates[i], window.accumulators[i]);
        }
        separator();
        out += R"("_idem":{)";
        if (!idem_members.empty()) {
            out += idem_members;
            out += ',';
        }
        append_evidence(out, window, rule, displaced);
        out += "}}";
        return out;
    }

    // The names of an action's figures that a record already had as fields
    // of its own, since the last call (for one warning).
    std::vector<std::string> take_collisions() { return std::exchange(m_collided, {}); }

    static void append_evidence(std::string& out, const WindowState& window, const MergeRule& rule,
                                std::string_view displaced) {
        auto start = rule.window.kind == WindowKind::session ? window.first_at : window.start;
        auto end =
            rule.window.kind == WindowKind::session ? window.last_at + rule.window.gap : window.end;
        out += R"("merge":{"id":)";
        record::append_json_string(out, window_id(rule.name, window));
        out += R"(,"rule":)";
        record::append_json_string(out, rule.name);
        out += R"(,"group":)";
        out += record::encoded_values_json(window.group, rule.group.size());
        fmt::format_to(std::back_inserter(out), R"(,"window":{{"start":"{}","end":"{}"}})",
                       format_rfc3339(start), format_rfc3339(end));
        if (window.part > 0) fmt::format_to(std::back_inserter(out), R"(,"part":{})", window.part);
        fmt::format_to(std::back_inserter(out), R"(,"count":{},"first_at":"{}","last_at":"{}")",
                       window.count, format_rfc3339(window.first_at),
                       format_rfc3339(window.last_at));
        out += R"(,"members":[)";
        for (std::size_t i = 0; i < window.positions.size(); ++i) {
            if (i > 0) out += ',';
            record::append_json_string(out, window.positions[i]);
        }
        out += ']';
        if (window.count > window.positions.size())
            fmt::format_to(std::back_inserter(out), R"(,"members_more":{})",
                           window.count - window.positions.size());
        out += displaced; // ,"count":3 ... when the record had its own
        out += '}';
    }

    simdjson::dom::parser m_parser;
    std::string m_annotations;
    std::vector<bool> m_displaced; // per aggregate, for the window being rendered
    std::vector<std::string> m_collided;
};

Renderer::Renderer() : m_impl(std::make_unique<Impl>()) {}
Renderer::~Renderer() = default;

std::string Renderer::render(const WindowState& window, const MergeRule& rule) {
    return m_impl->render(window, rule);
}

std::vector<std::string> Renderer::take_collisions() {
    return m_impl->take_collisions();
}

std::string describe_window(const WindowState& window, const MergeRule& rule) {
    auto end =
        rule.window.kind == WindowKind::session ? window.last_at + rule.window.gap : window.end;
    auto start = rule.window.kind == WindowKind::session ? window.first_at : window.start;
    return fmt::format("rule {} · group {} · {} .. {} · {} member{}", rule.name,
                       record::encoded_values_json(window.group, rule.group.size()),
                       format_rfc3339(start), format_rfc3339(end), window.count,
                       window.count == 1 ? "" : "s");
}

} // namespace idem::merge::detail
