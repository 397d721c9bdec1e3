// dedup's worker side, one record at a time: what it fingerprints, and why
// it sets a record aside (docs/dedup.md).

#include "idem/dedup/detail/judge.hpp"
#include "idem/io/block_reader.hpp"

#include <doctest/doctest.h>

using namespace idem;
using namespace idem::dedup;
using namespace idem::dedup::detail;

namespace {

// A record with the padding the parser reads past its end.
struct Line {
    std::string bytes;
    explicit Line(std::string_view text) : bytes(text) { bytes.append(io::k_padding_bytes, ' '); }
    [[nodiscard]] std::string_view view() const {
        return std::string_view(bytes).substr(0, bytes.size() - io::k_padding_bytes);
    }
};

DedupRunOptions keyed_by(std::initializer_list<const char*> paths) {
    DedupRunOptions options;
    for (const auto* path : paths)
        options.key.key_paths.push_back(record::FieldPath::parse(path));
    return options;
}

Outcome judged(std::string_view text, const DedupRunOptions& options) {
    WorkerState state(options.key);
    Line line(text);
    return judge_record(line.view(), state, options);
}

} // namespace

TEST_CASE("one event's copies share a fingerprint, whatever their key order and spacing") {
    auto options = keyed_by({"data.object.id", "type"});
    auto first = judged(
        R"({"id":"evt_1","type":"charge.succeeded","data":{"object":{"id":"ch_1"}}})", options);
    auto again =
        judged(R"({"data": {"object": {"id": "ch_1"}}, "type": "charge.succeeded", "id": "evt_2"})",
               options);
    auto other = judged(R"({"type":"charge.refunded","data":{"object":{"id":"ch_1"}}})", options);
    REQUIRE(first.kind == Outcome::Kind::keyed);
    REQUIRE(again.kind == Outcome::Kind::keyed);
    CHECK(first.fingerprint.bytes == again.fingerprint.bytes);
    CHECK(first.fingerprint.bytes != other.fingerprint.bytes);
}

TEST_CASE("a record is set aside with the reason: no key, a time that does not read, not JSON") {
    auto options = keyed_by({"id"});
    auto missing = judged(R"({"type":"x"})", options);
    CHECK(missing.kind == Outcome::Kind::missing_key);
    CHECK(missing.message == "id");
    options.time_field = record::FieldPath::parse("ts");
    auto bad_time = judged(R"({"id":"a","ts":"yesterday"})", options);
    CHECK(bad_time.kind == Outcome::Kind::bad_time);
    CHECK(bad_time.message.find("ts") != std::string::npos);
    CHECK(judged(R"({"id":)", options).kind == Outcome::Kind::failed_to_parse);
}

TEST_CASE("--bucket day folds the calendar day into the key, in --tz's calendar") {
    auto options = keyed_by({"id"});
    options.time_field = record::FieldPath::parse("ts");
    options.bucket = BucketSize::day;
    auto morning = judged(R"({"id":"a","ts":"2026-11-30T08:00:00Z"})", options);
    auto evening = judged(R"({"id":"a","ts":"2026-11-30T23:30:00Z"})", options);
    auto next_day = judged(R"({"id":"a","ts":"2026-12-01T00:30:00Z"})", options);
    CHECK(morning.fingerprint.bytes == evening.fingerprint.bytes);
    CHECK(evening.fingerprint.bytes != next_day.fingerprint.bytes);
    // At +08:00 the evening copy is already the next day.
    options.zone = TimeZone::fixed(std::chrono::hours(8));
    auto late = judged(R"({"id":"a","ts":"2026-11-30T23:30:00Z"})", options);
    auto early = judged(R"({"id":"a","ts":"2026-12-01T00:30:00Z"})", options);
    CHECK(late.fingerprint.bytes == early.fingerprint.bytes);
    CHECK(late.event_time == evening.event_time);
}
