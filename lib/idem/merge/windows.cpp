#include "idem/merge/windows.hpp"

#include "idem/crypto/crypto.hpp"
#include "idem/util/encoding.hpp"
#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace idem::merge {

namespace {

using Json = nlohmann::json;

std::int64_t micros(Timestamp time) {
    return time.time_since_epoch().count();
}

Timestamp from_micros(std::int64_t value) {
    return Timestamp(Duration(value));
}

// A JSON number's text as a double, and whether it is an integer that fits.
struct Number {
    double value = 0;
    bool integral = false;
    std::int64_t integer = 0;
};

Number number_of(std::string_view text) {
    Number number;
    auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), number.integer);
    if (error == std::errc{} && end == text.data() + text.size()) {
        number.integral = true;
        number.value = static_cast<double>(number.integer);
        return number;
    }
    std::from_chars(text.data(), text.data() + text.size(), number.value);
    return number;
}

// `kept` is the member's copy of `value` for the windows that keep it,
// made on first use.
void accumulate(Accumulator& accumulator, const Aggregate& aggregate, Value& value, KeptValue& kept,
                std::uint64_t* live_bytes) {
    auto keep = [&]() -> const KeptValue& {
        if (!kept.present) kept = {true, value.type, SharedText(std::move(value.text), live_bytes)};
        return kept;
    };
    if (aggregate.function == Function::count) {
        ++accumulator.n;
        return;
    }
    if (!value.present) return;
    ++accumulator.n;
    switch (aggregate.function) {
    case Function::first:
        if (!accumulator.first.present) accumulator.first = keep();
        break;
    case Function::last:
        accumulator.last = keep();
        break;
    case Function::append:
        accumulator.items.push_back(keep());
        break;
    case Function::distinct: {
        bool seen = std::any_of(
            accumulator.items.begin(), accumulator.items.end(), [&](const KeptValue& item) {
                // Moved into `kept` by a window before.
                auto text = kept.present ? kept.text.view() : std::string_view(value.text);
                return item.type == value.type && item.text.view() == text;
            });
        if (!seen) accumulator.items.push_back(keep());
        break;
    }
    case Function::concat:
        if (accumulator.n > 1) accumulator.joined += aggregate.separator;
        accumulator.joined += value.text;
        break;
    case Function::sum:
    case Function::avg:
    case Function::min:
    case Function::max: {
        auto number = number_of(value.text);
        accumulator.sum += number.value;
        if (accumulator.integral && number.integral &&
            !__builtin_add_overflow(accumulator.int_sum, number.integer, &accumulator.int_sum)) {
        } else {
            accumulator.integral = false;
        }
        if (!accumulator.min || number.value < *accumulator.min) {
            accumulator.min = number.value;
            accumulator.min_text = value.text;
        }
        if (!accumulator.max || number.value > *accumulator.max) {
            accumulator.max = number.value;
            accumulator.max_text = value.text;
        }
        break;
    }
    case Function::count:
        break;
    }
}

// --- persistence ----------------------------------------------------------

Json::binary_t bytes_of(std::string_view text) {
    return Json::binary_t(std::vector<std::uint8_t>(text.begin(), text.end()));
}

std::string text_of(const Json& value) {
    const auto& bytes = value.get_binary();
    return std::string(bytes.begin(), bytes.end());
}

Json value_to_json(const KeptValue& value) {
    if (!value.present) return nullptr;
    return Json::array({static_cast<int>(value.type), bytes_of(value.text.view())});
}

KeptValue value_from_json(const Json& json, std::uint64_t* live_bytes) {
    KeptValue value;
    if (json.is_null()) return value;
    value.present = true;
    value.type = static_cast<record::FieldValue::Type>(json.at(0).get<int>());
    value.text = SharedText(text_of(json.at(1)), live_bytes);
    return value;
}

Json accumulator_to_json(const Accumulator& accumulator) {
    Json items = Json::array();
    for (const auto& item : accumulator.items)
        items.push_back(value_to_json(item));
    return Json::array({accumulator.n, accumulator.integral, accumulator.int_sum, accumulator.sum,
                        accumulator.min ? Json(*accumulator.min) : Json(nullptr),
                        accumulator.max ? Json(*accumulator.max) : Json(nullptr),
                        bytes_of(accumulator.min_text), bytes_of(accumulator.max_text),
                        value_to_json(accumulator.first), value_to_json(accumulator.last), items,
                        bytes_of(accumulator.joined)});
}

Accumulator accumulator_from_json(const Json& json, std::uint64_t* live_bytes) {
    Accumulator accumulator;
    accumulator.n = json.at(0).get<std::uint64_t>();
    accumulator.integral = json.at(1).get<bool>();
    accumulator.int_sum = json.at(2).get<std::int64_t>();
    accumulator.sum = json.at(3).get<double>();
    if (!json.at(4).is_null()) accumulator.min = json.at(4).get<double>();
    if (!json.at(5).is_null()) accumulator.max = json.at(5).get<double>();
    accumulator.min_text = text_of(json.at(6));
    accumulator.max_text = text_of(json.at(7));
    accumulator.first = value_from_json(json.at(8), live_bytes);
    accumulator.last = value_from_json(json.at(9), live_bytes);
    for (const auto& item : json.at(10))
        accumulator.items.push_back(value_from_json(item, live_bytes));
    accumulator.joined = text_of(json.at(11));
    return accumulator;
}

std::string serialize(const WindowState& window) {
    Json accumulators = Json::array();
    for (const auto& accumulator : window.accumulators)
        accumulators.push_back(accumulator_to_json(accumulator));
    Json positions = Json::array();
    for (const auto& position : window.positions)
        positions.push_back(bytes_of(position));
    Json held = Json::array();
    for (const auto& bytes : window.held)
        held.push_back(bytes_of(bytes));
    Json json =
        Json::array({window.rule, bytes_of(window.group), micros(window.start), micros(window.end),
                     window.part, window.opened, window.count, micros(window.first_at),
                     micros(window.last_at), bytes_of(window.base.view()), positions, held,
                     accumulators, window.kept_bytes, window.bytes});
    auto cbor = Json::to_cbor(json);
    return std::string(cbor.begin(), cbor.end());
}

WindowState deserialize(std::string_view bytes, std::uint64_t* live_bytes) {
    auto json = Json::from_cbor(bytes.begin(), bytes.end());
    WindowState window;
    window.rule = json.at(0).get<std::size_t>();
    window.group = text_of(json.at(1));
    window.start = from_micros(json.at(2).get<std::int64_t>());
    window.end = from_micros(json.at(3).get<std::int64_t>());
    window.part = json.at(4).get<std::uint64_t>();
    window.opened = json.at(5).get<std::uint64_t>();
    window.count = json.at(6).get<std::uint64_t>();
    window.first_at = from_micros(json.at(7).get<std::int64_t>());
    window.last_at = from_micros(json.at(8).get<std::int64_t>());
    window.base = SharedText(text_of(json.at(9)), live_bytes);
    for (const auto& position : json.at(10))
        window.positions.push_back(text_of(position));
    for (const auto& member : json.at(11))
        window.held.push_back(text_of(member));
    for (const auto& accumulator : json.at(12))
        window.accumulators.push_back(accumulator_from_json(accumulator, live_bytes));
    window.kept_bytes = json.at(13).get<std::uint64_t>();
    window.bytes = json.at(14).get<std::uint64_t>();
    window.touched = std::chrono::steady_clock::now();
    return window;
}

} // namespace

std::string window_id(const std::string& rule_name, const WindowState& window) {
    auto identity = fmt::format("{}\n{}\n{}\n{}", rule_name, window.group,
                                window.start.time_since_epoch().count(), window.part);
    auto digest = crypto::hash(crypto::HashAlgorithm::sha256, identity);
    return "m_" + hex_encode(digest.view().substr(0, 8));
}

Merger::Merger(const std::vector<MergeRule>& rules, MergerOptions options)
    : m_rules(rules), m_options(std::move(options)) {}

const std::string& Merger::key_of(std::size_t rule, std::string_view group,
                                  std::optional<Timestamp> start) {
    auto& key = m_key;
    key.clear();
    auto rule_number = static_cast<std::uint32_t>(rule);
    key.append(reinterpret_cast<const char*>(&rule_number), sizeof rule_number);
    key.append(group);
    if (start) {
        key += '\0';
        auto at = micros(*start);
        key.append(reinterpret_cast<const char*>(&at), sizeof at);
    }
    return key;
}

Timestamp Merger::align(Timestamp time, Duration size) const {
    auto offset = m_options.zone ? Duration(m_options.zone->offset_at(time)) : Duration(0);
    auto local = time.time_since_epoch() + offset;
    auto floored = local - ((local % size) + size) % size;
    return Timestamp(floored - offset);
}

WindowState& Merger::open_window(const Member& member, const std::string& key, Timestamp start,
                                 Timestamp end) {
    if (m_open.size() >= m_options.max_open)
        throw InputError({member.source ? *member.source : std::string(), member.line, 0, 0},
                         fmt::format("merge holds {} open windows here, the most --max-open "
                                     "allows: shorten the windows, lower --max-lateness, or "
                                     "raise --max-open",
                                     m_open.size()));
    WindowState window;
    window.rule = member.rule;
    window.group = std::string(member.group);
    window.start = start;
    window.end = end;
    window.opened = m_opened++;
    if (auto part = m_next_part.find(key); part != m_next_part.end()) window.part = part->second;
    window.accumulators.resize(m_rules[member.rule].aggregates.size());
    auto [slot, inserted] = m_open.emplace(key, std::move(window));
    (void)inserted;
    m_peak_open = std::max(m_peak_open, m_open.size());
    return slot->second;
}

// What a window costs beyond what it names, for the byte bound: its entry
// in the open windows' table and in the close queue (nodes and key
// copies), a shared text's control block and allocation, a position's
// string and its slot. Measured against RSS by bench/run_merge_memory.sh.
constexpr std::uint64_t k_window_index_bytes = 160;
constexpr std::uint64_t k_shared_text_bytes = 48;
constexpr std::uint64_t k_position_bytes = 64;

void Merger::join(WindowState& window, const Member& member, SharedText& bytes,
                  std::vector<KeptValue>& kept, std::size_t shares) {
    const auto& rule = m_rules[member.rule];
    auto before = window.bytes;
    ++window.count;
    // The member's bytes are copied once, when the first window takes them.
    auto take_bytes = [&] {
        if (bytes.empty()) bytes = SharedText(std::string(member.bytes), m_shared_bytes.get());
        window.base = bytes;
    };
    if (window.count == 1) {
        window.first_at = window.last_at = member.time;
        take_bytes();
    } else {
        window.first_at = std::min(window.first_at, member.time);
        window.last_at = std::max(window.last_at, member.time);
        if (rule.base == Base::last) take_bytes();
    }
    if (window.positions.size() < k_positions_kept)
        window.positions.push_back(
            fmt::format("{}:{}", member.source ? *member.source : std::string(), member.line));
    if (window.held.size() < m_options.preview_members) window.held.emplace_back(member.bytes);
    // What the window keeps of each member (append, distinct: its part of
    // the one copy the windows share; concat: a copy of its own), its base
    // (its part likewise), evidence.
    for (std::size_t i = 0; i < rule.aggregates.size(); ++i) {
        auto function = rule.aggregates[i].function;
        if (function == Function::append || function == Function::distinct)
            window.kept_bytes += k_shared_text_bytes / shares + sizeof(KeptValue);
        else if (function == Function::concat)
            window.kept_bytes += member.values[i].text.size();
    }
    for (std::size_t i = 0; i < rule.aggregates.size(); ++i)
        accumulate(window.accumulators[i], rule.aggregates[i], member.values[i], kept[i],
                   m_shared_bytes.get());
    window.bytes = k_window_index_bytes + sizeof(WindowState) + 3 * window.group.size() +
                   window.accumulators.size() * sizeof(Accumulator) + k_shared_text_bytes / shares +
                   window.kept_bytes + window.positions.size() * k_position_bytes;
    for (const auto& held : window.held)
        window.bytes += held.size();
    m_open_bytes += window.bytes - before;
    auto held = m_open_bytes + *m_shared_bytes;
    m_peak_bytes = std::max(m_peak_bytes, held);
    if (held > m_options.max_open_bytes)
        throw InputError({member.source ? *member.source : std::string(), member.line, 0, 0},
                         fmt::format("merge holds {} in {} open windows here, more than "
                                     "--max-open-bytes {} allows: shorten the windows, lower "
                                     "--max-lateness, or raise --max-open-bytes",
                                     format_bytes(held), m_open.size(),
                                     format_bytes(m_options.max_open_bytes)));
    window.touched = std::chrono::steady_clock::now();
}

void Merger::schedule(const std::string& key, const WindowState& window) {
    m_close_queue.emplace(Ordered{window.end, window.opened}, key);
}

std::size_t Merger::add(const Member& member, std::vector<std::string>* ids) {
    const auto& rule = m_rules[member.rule];
    std::size_t joined = 0;
    if (ids) ids->clear();
    SharedText bytes;       // the member's, made by the first window that keeps them
    std::size_t shares = 1; // the windows it joins now
    m_kept.assign(rule.aggregates.size(), KeptValue{});
    auto finish_join = [&](const std::string& key, WindowState& window, bool closes_in_queue) {
        join(window, member, bytes, m_kept, shares);
        ++joined;
        if (ids) ids->push_back(window_id(rule.name, window));
        mark_dirty(key);
        if (closes_in_queue) schedule(key, window);
        if (rule.max_count > 0 && window.count >= rule.max_count) {
            m_next_part[key] = window.part + 1;
            close(key);
        }
    };
    if (rule.window.kind == WindowKind::session) {
        auto gap = rule.window.gap;
        const auto& key = key_of(member.rule, member.group, std::nullopt);
        auto found = m_open.find(std::string_view(key));
        if (found != m_open.end()) {
            auto& session = found->second;
            auto first = std::min(session.first_at, member.time);
            auto last = std::max(session.last_at, member.time);
            if (member.time < session.first_at - gap) return joined; // its session is gone
            bool too_long = rule.max_span.count() > 0 && last - first > rule.max_span;
            if (member.time > session.last_at + gap || too_long) {
                close(key);
                found = m_open.end();
            }
        } else if (m_watermark && member.time + gap <= *m_watermark) {
            return joined; // a session it could belong to has closed
        }
        if (found == m_open.end()) {
            auto& session = open_window(member, key, member.time, member.time + gap);
            finish_join(key, session, false);
            if (auto still = m_open.find(key); still != m_open.end()) {
                still->second.start = still->second.first_at;
                still->second.end = still->second.last_at + gap;
                schedule(key, still->second);
            }
            return joined;
        }
        auto& session = found->second;
        finish_join(key, session, false);
        if (auto still = m_open.find(key); still != m_open.end()) {
            auto& open = still->second;
            auto end = open.last_at + gap;
            open.start = open.first_at;
            if (end != open.end) {
                open.end = end;
                schedule(key, open); // the entry of its old end is now stale
            }
        }
        return joined;
    }
    auto size = rule.window.size;
    auto every = rule.window.kind == WindowKind::sliding ? rule.window.every : size;
    auto first_start = align(member.time, every);
    auto still_open = [&](Timestamp start) { return !m_watermark || start + size > *m_watermark; };
    shares = 0;
    for (auto start = first_start; start > member.time - size; start -= every)
        if (still_open(start)) ++shares;
    shares = std::max<std::size_t>(shares, 1);
    for (auto start = first_start; start > member.time - size; start -= every) {
        if (!still_open(start)) continue; // that window has closed
        auto end = start + size;
        const auto& key = key_of(member.rule, member.group, start);
        auto found = m_open.find(std::string_view(key));
        if (found == m_open.end()) {
            auto& window = open_window(member, key, start, end);
            finish_join(key, window, true);
        } else {
            finish_join(key, found->second, false);
        }
    }
    return joined;
}

void Merger::close(const std::string& key) {
    auto found = m_open.find(key);
    if (found == m_open.end()) return;
    m_open_bytes -= std::min(m_open_bytes, found->second.bytes);
    m_closed.push_back(std::move(found->second));
    m_open.erase(found);
    m_dirty.erase(key);
    m_removed.push_back(key);
}

void Merger::close_until(Timestamp watermark) {
    while (!m_close_queue.empty() && m_close_queue.begin()->first.close_at <= watermark) {
        auto entry = m_close_queue.begin();
        auto key = std::move(entry->second);
        auto ordered = entry->first;
        m_close_queue.erase(entry);
        auto found = m_open.find(key);
        // Stale: a session that grew since, or a window closed when full.
        if (found == m_open.end() || found->second.end != ordered.close_at ||
            found->second.opened != ordered.opened)
            continue;
        m_next_part.erase(key);
        close(key);
    }
}

void Merger::advance(Timestamp event_time) {
    if (!m_latest || event_time > *m_latest) m_latest = event_time;
    auto watermark = *m_latest - m_options.max_lateness;
    if (m_watermark && watermark <= *m_watermark) return;
    m_watermark = watermark;
    close_until(watermark);
}

void Merger::close_idle(std::chrono::steady_clock::time_point now) {
    std::vector<std::pair<Ordered, std::string>> idle;
    for (const auto& [key, window] : m_open) {
        const auto& rule = m_rules[window.rule];
        auto span =
            rule.window.kind == WindowKind::session ? rule.window.gap : window.end - window.start;
        auto waited = std::chrono::duration_cast<Duration>(now - window.touched);
        if (waited >= span + m_options.max_lateness)
            idle.emplace_back(Ordered{window.end, window.opened}, key);
    }
    std::sort(idle.begin(), idle.end());
    for (const auto& [ordered, key] : idle) {
        m_next_part.erase(key);
        close(key);
    }
}

void Merger::close_all() {
    close_until(Timestamp::max());
}

std::vector<WindowState> Merger::take_closed() {
    std::vector<WindowState> closed;
    closed.swap(m_closed);
    return closed;
}

Merger::Changes Merger::drain_changes() {
    Changes changes;
    for (const auto& key : m_dirty) {
        auto found = m_open.find(key);
        if (found != m_open.end()) changes.saved.emplace_back(key, serialize(found->second));
    }
    m_dirty.clear();
    changes.removed = std::move(m_removed);
    m_removed.clear();
    Json parts = Json::object();
    for (const auto& [key, part] : m_next_part)
        parts[hex_encode(key)] = part;
    Json meta =
        Json::array({m_latest ? Json(micros(*m_latest)) : Json(nullptr),
                     m_watermark ? Json(micros(*m_watermark)) : Json(nullptr), m_opened, parts});
    auto cbor = Json::to_cbor(meta);
    changes.meta.assign(cbor.begin(), cbor.end());
    return changes;
}

void Merger::restore(const std::vector<std::pair<std::string, std::string>>& windows,
                     std::string_view meta) {
    try {
        restore_unchecked(windows, meta);
    } catch (const Json::exception& error) {
        throw StoreError(fmt::format("the open windows a killed merge left in the store are "
                                     "damaged ({}): remove -o FILE's checkpoint by starting "
                                     "with another --scope",
                                     error.what()));
    }
}

void Merger::restore_unchecked(const std::vector<std::pair<std::string, std::string>>& windows,
                               std::string_view meta) {
    if (!meta.empty()) {
        auto json = Json::from_cbor(meta.begin(), meta.end());
        if (!json.at(0).is_null()) m_latest = from_micros(json.at(0).get<std::int64_t>());
        if (!json.at(1).is_null()) m_watermark = from_micros(json.at(1).get<std::int64_t>());
        m_opened = json.at(2).get<std::uint64_t>();
        for (const auto& [hex, part] : json.at(3).items())
            if (auto key = hex_decode(hex)) m_next_part[*key] = part.get<std::uint64_t>();
    }
    for (const auto& [key, bytes] : windows) {
        auto window = deserialize(bytes, m_shared_bytes.get());
        if (window.rule >= m_rules.size() ||
            window.accumulators.size() != m_rules[window.rule].aggregates.size())
            throw StoreError("the open windows a killed merge left were made by other rules: "
                             "run with the same rules, or remove -o FILE to start anew");
        schedule(key, window);
        m_open_bytes += window.bytes;
        m_open.emplace(key, std::move(window));
    }
    m_peak_open = std::max(m_peak_open, m_open.size());
}

} // namespace idem::merge
