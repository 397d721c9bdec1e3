// dedup --counts' table (dedup/detail/key_counts.hpp).

#include "idem/dedup/detail/key_counts.hpp"

#include "support/instants.hpp"
#include "support/sink_text.hpp"

#include <algorithm>
#include <doctest/doctest.h>

using namespace idem;

namespace {

record::Fingerprint fingerprint_of(unsigned char n) {
    record::Fingerprint fingerprint;
    fingerprint.bytes.fill(n);
    return fingerprint;
}

std::string written_counts(const dedup::detail::KeyCounts& counts, std::size_t key_paths = 0) {
    return test::written_through_sink([&](io::Sink& sink) { counts.write(sink, key_paths); });
}

} // namespace

TEST_CASE("one line per key in first-seen order, counting every copy, first and last kept") {
    dedup::detail::KeyCounts counts;
    std::string a = "a.ndjson", b = "b.ndjson";
    counts.add(fingerprint_of(2), "k2", a, 1, test::instant("2026-11-30T08:00:00Z"));
    counts.add(fingerprint_of(1), "k1", a, 2, std::nullopt);
    counts.add(fingerprint_of(2), "k2", a, 3, test::instant("2026-11-30T08:00:05Z"));
    counts.add(fingerprint_of(2), "k2", b, 7, test::instant("2026-11-30T09:00:00Z"));
    CHECK(counts.keys() == 2);
    CHECK(written_counts(counts) ==
          R"({"key":"k2","count":3,"first":{"at":"a.ndjson:1","time":"2026-11-30T08:00:00.000Z"},)"
          R"("last":{"at":"b.ndjson:7","time":"2026-11-30T09:00:00.000Z"}})"
          "\n"
          R"({"key":"k1","count":1,"first":{"at":"a.ndjson:2"},"last":{"at":"a.ndjson:2"}})"
          "\n");
}

TEST_CASE("a key or a file name with quotes and controls stays one JSON string") {
    dedup::detail::KeyCounts counts;
    std::string source = "odd\"\x1b[2Jname.ndjson";
    counts.add(fingerprint_of(3), "k\"\n\x1b", source, 4, std::nullopt);
    auto text = written_counts(counts);
    CHECK(text.find('\x1b') == std::string::npos);
    CHECK(text.find("\\\"") != std::string::npos);
    CHECK(std::count(text.begin(), text.end(), '\n') == 1);
}

TEST_CASE("a key is written as the records hold it, not as it is encoded") {
    // Issue 60 item 10: "idem-key/1 key s4:pi_A" was written, not "pi_A".
    dedup::detail::KeyCounts one, two;
    one.add(fingerprint_of(4), "idem-key/1 key s4:pi_A", "a.ndjson", 1, std::nullopt);
    two.add(fingerprint_of(5), "idem-key/1 key s4:pi_A d2:42", "a.ndjson", 1, std::nullopt);
    CHECK(written_counts(one, 1).starts_with(R"({"key":"pi_A","count":1)"));
    CHECK(written_counts(two, 2).starts_with(R"({"key":["pi_A",42],"count":1)"));
}
