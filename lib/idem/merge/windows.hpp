#pragma once
// The windows of `idem merge`, as pure logic (docs/merge.md): members go
// in, closed windows come out in close order. No I/O: the run (run.cpp)
// reads records, renders closed windows and saves open ones.

#include "idem/merge/rules.hpp"
#include "idem/record/parser.hpp"
#include "idem/util/time.hpp"
#include "idem/util/time_zone.hpp"

#include "idem/util/string_map.hpp"

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace idem::merge {

// Text that windows share: a member of several sliding windows keeps one
// copy of its bytes and values, however many windows hold it (a copy per
// window made 999 records of 100 KB cost 16 GB). Immutable; made and
// dropped on the run's own thread only. Its bytes count in `live_bytes`
// from when it is made until the last window holding it is gone: what
// the open windows hold, exactly, however they share it.
class SharedText {
public:
    SharedText() = default;
    // `live_bytes` must outlive every copy (the Merger's counter does).
    SharedText(std::string text, std::uint64_t* live_bytes)
        : m_text(std::make_shared<const Counted>(std::move(text), live_bytes)) {}
    [[nodiscard]] std::string_view view() const {
        return m_text ? std::string_view(m_text->text) : std::string_view();
    }
    [[nodiscard]] std::size_t size() const { return m_text ? m_text->text.size() : 0; }
    [[nodiscard]] bool empty() const { return size() == 0; }
    friend bool operator==(const SharedText& a, const SharedText& b) {
        return a.view() == b.view();
    }

private:
    struct Counted {
        Counted(std::string bytes, std::uint64_t* live) : text(std::move(bytes)), live_bytes(live) {
            if (live_bytes) *live_bytes += text.size();
        }
        ~Counted() {
            if (live_bytes) *live_bytes -= text.size();
        }
        Counted(const Counted&) = delete;
        Counted& operator=(const Counted&) = delete;
        std::string text;
        std::uint64_t* live_bytes;
    };
    std::shared_ptr<const Counted> m_text;
};

// One aggregate's input value in one member, as a worker read it.
struct Value {
    bool present = false;
    record::FieldValue::Type type = record::FieldValue::Type::null;
    std::string text; // as record::FieldValue::text (strings unescaped)
};

// A value a window keeps (first, last, append, distinct): one copy for
// every window the member joins.
struct KeptValue {
    bool present = false;
    record::FieldValue::Type type = record::FieldValue::Type::null;
    SharedText text;
};

// What a run hands the merger for one record of a rule.
struct Member {
    std::size_t rule = 0;
    std::string_view group; // the group values, encoded (record/key.hpp)
    Timestamp time;
    std::string_view bytes; // the record, for the base and previews
    // Where it was, for the evidence ("file:line").
    const std::string* source = nullptr;
    std::uint64_t line = 0;
    // One per aggregate of the rule; the windows it joins share one copy of
    // what they keep of them, moved from here.
    Value* values = nullptr;
};

// One aggregate's running value.
struct Accumulator {
    std::uint64_t n = 0;
    bool integral = true; // sum: every value an integer so far
    std::int64_t int_sum = 0;
    double sum = 0;
    std::optional<double> min, max;
    std::string min_text, max_text; // as written, for the output
    KeptValue first, last;
    std::vector<KeptValue> items; // append, distinct (distinct: each once)
    std::string joined;           // concat
};

// A window's state while it is open, and what a closed one renders from.
struct WindowState {
    std::size_t rule = 0;
    std::string group;
    Timestamp start, end;     // session: first_at, and last_at + gap
    std::uint64_t part = 0;   // windows of one key closed early by max_count
    std::uint64_t opened = 0; // the order windows opened in: ties in close order
    std::uint64_t count = 0;
    Timestamp first_at, last_at;
    SharedText base;                    // the first member's bytes, or the last's
    std::vector<std::string> positions; // "file:line", capped
    std::vector<std::string> held;      // --preview: the members' bytes, capped
    std::vector<Accumulator> accumulators;
    std::uint64_t bytes = 0;      // about what it holds, for the memory figures
    std::uint64_t kept_bytes = 0; // of that, the members' values it keeps
    // Not saved: when it opened or last grew, by the wall clock, to close
    // it on live input gone quiet.
    std::chrono::steady_clock::time_point touched;
};

// How many member positions a window keeps as evidence (the count is whole).
inline constexpr std::size_t k_positions_kept = 100;

// The id of a merged record: the same rule, group, window and part give
// the same id in every run ("m_" and 16 hex digits).
[[nodiscard]] std::string window_id(const std::string& rule_name, const WindowState& window);

struct MergerOptions {
    Duration max_lateness{0};
    std::uint64_t max_open = 1'000'000;
    // What the open windows may hold (their bytes as join() counts them;
    // RSS stays within 2x that + 50 MB, docs/merge.md).
    std::uint64_t max_open_bytes = 1ULL << 30;
    std::size_t preview_members = 0; // --preview: member bytes kept per window
    std::optional<TimeZone> zone;    // tumbling and sliding windows aligned to this zone's clock
    bool track_changes = false;      // for drain_changes() (with -o)
};

class Merger {
public:
    Merger(const std::vector<MergeRule>& rules, MergerOptions options);

    // Adds a member to every window of its rule and group its time falls
    // in, and returns how many it joined: 0 when every one had closed (a
    // late record). With `ids`, their ids go there. May close windows
    // (max_count, max_span). Throws InputError past max_open.
    std::size_t add(const Member& member, std::vector<std::string>* ids = nullptr);

    // The event time moved on: the watermark is the latest time seen minus
    // max_lateness, and every window that ends at or before it closes.
    void advance(Timestamp event_time);
    // Live input gone quiet: windows open longer by the wall clock than
    // their span plus max_lateness close.
    void close_idle(std::chrono::steady_clock::time_point now);
    // The input ended: every window closes.
    void close_all();

    // Closed windows, in close order, taken by the caller.
    [[nodiscard]] std::vector<WindowState> take_closed();

    [[nodiscard]] std::size_t open_windows() const { return m_open.size(); }
    [[nodiscard]] std::size_t peak_open() const { return m_peak_open; }
    // About the bytes the open windows hold (bases, kept values, evidence),
    // at most so far: what --max-open bounds.
    [[nodiscard]] std::uint64_t peak_open_bytes() const { return m_peak_bytes; }
    [[nodiscard]] std::optional<Timestamp> watermark() const { return m_watermark; }

    // Persistence (with -o): what changed since the last call, as opaque
    // keys and serialized states (JSON), and restoring them.
    struct Changes {
        std::vector<std::pair<std::string, std::string>> saved;
        std::vector<std::string> removed;
        std::string meta; // the watermark and counters
    };
    [[nodiscard]] Changes drain_changes();
    void restore(const std::vector<std::pair<std::string, std::string>>& windows,
                 std::string_view meta);

private:
    struct Ordered {
        Timestamp close_at;
        std::uint64_t opened;
        friend auto operator<=>(const Ordered&, const Ordered&) = default;
    };

    using OpenWindows = StringMap<WindowState>;

    WindowState& open_window(const Member& member, const std::string& key, Timestamp start,
                             Timestamp end);
    // `bytes`: the member's, shared by the `shares` windows it joins now
    // (what each counts of it is its part).
    // `bytes` and `kept` (one per aggregate): the member's, made by the
    // first window that keeps them and shared by the `shares` windows it
    // joins now (what each counts of them is its part).
    void join(WindowState& window, const Member& member, SharedText& bytes,
              std::vector<KeptValue>& kept, std::size_t shares);
    void mark_dirty(const std::string& key) {
        if (m_options.track_changes) m_dirty.insert(key);
    }
    void close(const std::string& key);
    void schedule(const std::string& key, const WindowState& window);
    void close_until(Timestamp watermark);
    void restore_unchecked(const std::vector<std::pair<std::string, std::string>>& windows,
                           std::string_view meta);
    [[nodiscard]] Timestamp align(Timestamp time, Duration size) const;
    // The key of a window, built in m_key (valid until the next call).
    const std::string& key_of(std::size_t rule, std::string_view group,
                              std::optional<Timestamp> start);

    std::unique_ptr<std::uint64_t> m_shared_bytes = std::make_unique<std::uint64_t>(0);
    const std::vector<MergeRule>& m_rules;
    MergerOptions m_options;
    OpenWindows m_open;
    std::map<Ordered, std::string> m_close_queue; // by close time; sessions re-queued as they grow
    std::unordered_map<std::string, std::uint64_t> m_next_part;
    std::vector<WindowState> m_closed;
    std::optional<Timestamp> m_latest;
    std::optional<Timestamp> m_watermark;
    std::uint64_t m_opened = 0;
    std::size_t m_peak_open = 0;
    // What the open windows hold: their own bytes, and the texts they
    // share (m_shared_bytes, declared first so it outlives every window).
    std::uint64_t m_open_bytes = 0, m_peak_bytes = 0;
    std::set<std::string> m_dirty;
    std::vector<std::string> m_removed;
    std::string m_key;             // reused
    std::vector<KeptValue> m_kept; // reused: a member's kept values
};

} // namespace idem::merge
