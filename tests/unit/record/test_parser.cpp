#include "idem/io/block_reader.hpp"
#include "idem/record/annotate.hpp"
#include "idem/record/canonical.hpp"
#include "idem/record/detail/canonical_writer.hpp"
#include "idem/record/har.hpp"
#include "idem/record/parser.hpp"
#include "idem/util/errors.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <set>

using namespace idem;
using namespace idem::record;

namespace {
// The parser needs padding after the line, as the line reader guarantees.
std::string padded(std::string text) {
    text.reserve(text.size() + io::k_padding_bytes);
    return text;
}
} // namespace

TEST_CASE("recognises a delivery envelope and exposes its parts") {
    RecordParser parser;
    auto line = padded(
        R"({"idem":1,"id":"c1","received_at":"2026-11-30T08:00:00.123Z","method":"POST","path":"/hooks/x?y=1",)"
        R"("headers":[["Content-Type","application/json"],["X-A","1"],["x-a","2"]],"body":"{\"n\":1}"})");
    REQUIRE_FALSE(parser.parse(line));
    REQUIRE(parser.shape() == RecordShape::envelope);
    const auto& envelope = parser.envelope();
    CHECK(envelope.id == "c1");
    CHECK(envelope.path == "/hooks/x?y=1");
    CHECK(envelope.body == "{\"n\":1}");
    CHECK(envelope.header("x-a") == "1"); // the first, case-insensitively
    CHECK(envelope.headers.size() == 3);
}

TEST_CASE("a body_b64 envelope carries bytes that are not UTF-8") {
    RecordParser parser;
    auto line = padded(R"({"idem":1,"headers":[],"body_b64":"/wABAg=="})");
    REQUIRE_FALSE(parser.parse(line));
    CHECK(parser.envelope().body == std::string("\xff\x00\x01\x02", 4));
}

TEST_CASE("says where a line stops being JSON") {
    RecordParser parser;
    auto line = padded(R"({"a":1,"b":x})");
    auto failure = parser.parse(line);
    REQUIRE(failure);
    CHECK(failure->column == 12);
    CHECK(failure->message ==
          "syntax error while parsing value - invalid literal; last read: '\"b\":x'");
    auto array = padded("[1,2]");
    auto not_object = parser.parse(array);
    REQUIRE(not_object);
    CHECK(not_object->message == "expected a JSON object per line, got a JSON array");
    auto bad_headers = padded(R"({"idem":1,"headers":{"a":"b"}})");
    CHECK(parser.parse(bad_headers)->message ==
          "envelope field 'headers' must be an array of [name, value] pairs");
}

TEST_CASE("field paths: dotted, array indexes, JSON Pointer, headers and body") {
    RecordParser parser;
    auto plain = padded(
        R"({"data":{"object":{"id":"pi_1","amount":1.50}},"items":[{"sku":"a"},{"sku":"b"}],"a.b":true})");
    REQUIRE_FALSE(parser.parse(plain));
    CHECK(parser.find(FieldPath::parse("data.object.id"))->text == "pi_1");
    CHECK(parser.find(FieldPath::parse("items.1.sku"))->text == "b");
    CHECK(parser.find(FieldPath::parse("/data/object/amount"))->text == "1.5");
    CHECK(parser.find(FieldPath::parse("/a.b"))->type == FieldValue::Type::boolean);
    CHECK(parser.find(FieldPath::parse("data.object"))->text == R"({"amount":1.5,"id":"pi_1"})");
    CHECK_FALSE(parser.find(FieldPath::parse("data.missing")));
    CHECK_FALSE(parser.find(FieldPath::parse("items.7.sku")));

    auto envelope = padded(
        R"({"idem":1,"headers":[["X-GitHub-Delivery","d-1"]],"body":"{\"data\":{\"id\":42}}"})");
    REQUIRE_FALSE(parser.parse(envelope));
    CHECK(parser.find(FieldPath::parse("headers.x-github-delivery"))->text == "d-1");
    CHECK(parser.find(FieldPath::parse("body.data.id"))->text == "42");
    CHECK(parser.find(FieldPath::parse("/body/data/id"))->type == FieldValue::Type::number);
}

TEST_CASE("field path syntax errors are usage errors") {
    CHECK_THROWS_WITH_AS((void)FieldPath::parse("a..b"),
                         "invalid field path 'a..b': empty segment (use a JSON Pointer such as "
                         "/a.b for keys that contain dots)",
                         UsageError);
    CHECK_THROWS_AS((void)FieldPath::parse("/a~2"), UsageError);
    CHECK(FieldPath::parse("/a~1b/c~0").segments() == std::vector<std::string>{"a/b", "c~"});
    CHECK(FieldPath::parse_list("data.object.id, type").size() == 2);
}

TEST_CASE("canonical JSON: key order, whitespace, number and string spelling do not matter") {
    auto a = canonical_json(R"({"b":1, "a":{"y":[1,2.0,-0.0],"x":"\u0041\n"}})");
    auto b = canonical_json("{\"a\":{\"x\":\"A\\n\",\"y\":[1.0,2,0]},\"b\":1e0}");
    REQUIRE(a);
    CHECK(*a == R"({"a":{"x":"A\n","y":[1,2,0]},"b":1})");
    CHECK(*a == *b);
    CHECK(*canonical_json(R"({"x":0.1,"y":1e300,"z":"é"})") == R"({"x":0.1,"y":1e+300,"z":"é"})");
    CHECK_FALSE(canonical_json("{"));
}

TEST_CASE("canonical JSON drops ignored paths") {
    std::vector<FieldPath> ignored{FieldPath::parse("request.id"), FieldPath::parse("attempt")};
    auto one =
        canonical_json(R"({"id":"evt_1","attempt":1,"request":{"id":"req_a","k":"v"}})", ignored);
    auto two =
        canonical_json(R"({"request":{"k":"v","id":"req_b"},"attempt":3,"id":"evt_1"})", ignored);
    CHECK(*one == R"({"id":"evt_1","request":{"k":"v"}})");
    CHECK(*one == *two);
}

TEST_CASE("the canonical event of an envelope is its parsed body; body. paths are stripped") {
    RecordParser parser;
    auto line = padded(R"({"idem":1,"headers":[],"body":"{\"b\":2,\"a\":1,\"request\":\"r1\"}"})");
    REQUIRE_FALSE(parser.parse(line));
    CHECK(*parser.canonical_event({FieldPath::parse("body.request")}) == R"({"a":1,"b":2})");
}

TEST_CASE("canonical JSON sorts small and large objects alike, repeated keys in order") {
    // Small objects are sorted by insertion, large ones by stable_sort: both
    // must give key-byte order with repeats kept as they came.
    std::string large = "{";
    std::string expected = "{";
    for (int i = 39; i >= 0; --i)
        large += fmt::format("\"k{:02}\":{},", i, i);
    for (int i = 0; i < 40; ++i)
        expected += fmt::format("\"k{:02}\":{},", i, i);
    large += R"("k05":"again"})";
    expected.insert(expected.find(R"("k06")"), R"("k05":"again",)");
    expected.back() = '}';
    CHECK(*canonical_json(large) == expected);
    CHECK(*canonical_json(R"({"b":{"z":1,"a":{"d":[{"y":1,"x":2}],"c":0}},"a":1,"a":0})") ==
          R"({"a":1,"a":0,"b":{"a":{"c":0,"d":[{"x":2,"y":1}]},"z":1}})");
}

TEST_CASE("two canonical events of one record are both valid until the next parse") {
    RecordParser parser;
    auto line = padded(R"({"b":2,"a":1,"c":3})");
    REQUIRE_FALSE(parser.parse(line));
    auto whole = parser.canonical_event(IgnoredPaths());
    auto without_c = parser.canonical_event({FieldPath::parse("c")});
    CHECK(*whole == R"({"a":1,"b":2,"c":3})");
    CHECK(*without_c == R"({"a":1,"b":2})");
}

TEST_CASE("annotations are spliced in without touching the record's bytes") {
    CHECK(annotate(R"({"a" : [1, 2] })", false, R"("verify":{"valid":true})") ==
          R"({"a" : [1, 2] ,"_idem":{"verify":{"valid":true}}})");
    CHECK(annotate("{}", false, R"("x":1)") == R"({"_idem":{"x":1}})");
    CHECK(annotate(R"({"_idem":{"dedup":{"n":1}},"z":"}"})", true, R"("verify":{})") ==
          R"({"_idem":{"dedup":{"n":1},"verify":{}},"z":"}"})");
    CHECK(annotate(R"({"k":"{\"_idem\":1}","_idem":{}})", true, R"("v":1)") ==
          R"({"k":"{\"_idem\":1}","_idem":{"v":1}})");
}

TEST_CASE("HAR entries become envelopes") {
    std::string har = R"({"log":{"version":"1.2","entries":[
      {"startedDateTime":"2026-11-29T10:00:00.250+01:00","request":{"method":"POST","url":"https://example.com/hooks/gh?x=1",
       "headers":[{"name":":authority","value":"example.com"},{"name":"X-Hub-Signature-256","value":"sha256=00"}],
       "postData":{"mimeType":"application/json","text":"{\"a\":1}"}}}]}})";
    auto envelopes = har_to_envelopes(har, "capture.har");
    REQUIRE(envelopes.size() == 1);
    CHECK(
        envelopes[0] ==
        R"({"idem":1,"id":"har-1","received_at":"2026-11-29T09:00:00.250Z","method":"POST","path":"/hooks/gh?x=1",)"
        R"("headers":[["X-Hub-Signature-256","sha256=00"]],"body":"{\"a\":1}"})");
    CHECK_THROWS_WITH_AS((void)har_to_envelopes("{\"log\":{}}", "x.har"),
                         "x.har: not a HAR file: expected {\"log\":{\"entries\":[...]}}",
                         InputError);
    // Found by fuzz/fuzz_har: a number nlohmann cannot hold used to escape as out_of_range.
    CHECK_THROWS_WITH_AS((void)har_to_envelopes(R"({"log":{"entries":[8e888866]}})", "x.har"),
                         "x.har: not a HAR file: a number is too large to read", InputError);
    CHECK_THROWS_WITH_AS((void)har_to_envelopes("{\n  \"log\": nope}", "x.har"),
                         "x.har:2:11: not a HAR file: syntax error while parsing value - invalid "
                         "literal; last read: '\"log\": no'",
                         InputError);
}

namespace {
std::uint64_t hash_of(RecordParser& parser, const std::string& json,
                      const std::vector<FieldPath>& ignored = {}) {
    auto line = padded(json);
    REQUIRE_FALSE(parser.parse(line));
    auto hash = parser.event_hash(ignored);
    REQUIRE(hash);
    return *hash;
}

std::string canonical_of(RecordParser& parser, const std::string& json,
                         const std::vector<FieldPath>& ignored = {}) {
    auto line = padded(json);
    REQUIRE_FALSE(parser.parse(line));
    return std::string(*parser.canonical_event(ignored));
}
} // namespace

TEST_CASE("the event hash is equal exactly where the canonical forms are") {
    RecordParser parser;
    // Same canonical form: key order, whitespace, number spelling, escapes.
    std::vector<std::pair<std::string, std::string>> same = {
        {R"({"b":2,"a":1})", R"({ "a" : 1, "b" : 2 })"},
        {R"({"n":1.0,"z":-0.0,"e":1e2})", R"({"e":100,"z":0,"n":1})"},
        {R"({"s":"\u0041\n"})", R"({"s":"A\u000a"})"},
        {R"({"x":{"q":[1,{"k":true,"j":null}]}})", R"({"x":{"q":[1,{"j":null,"k":true}]}})"},
    };
    for (const auto& [a, b] : same) {
        CAPTURE(a);
        REQUIRE(canonical_of(parser, a) == canonical_of(parser, b));
        CHECK(hash_of(parser, a) == hash_of(parser, b));
    }
    // Different canonical forms.
    std::vector<std::pair<std::string, std::string>> different = {
        {R"({"a":1})", R"({"a":"1"})"},
        {R"({"a":[]})", R"({"a":{}})"},
        {R"({"a":[1,2]})", R"({"a":[2,1]})"},
        {R"({"a":1})", R"({"b":1})"},
        {R"({"a":1,"b":2})", R"({"a":2,"b":1})"},
        {R"({"a":null})", R"({"a":false})"},
        {R"({"a":0.5})", R"({"a":0.25})"},
        {R"({"a":{"b":1}})", R"({"a":{"b":1},"c":1})"},
        {R"({"a":["x","y"]})", R"({"a":["xy"]})"},
        {R"({"a":1e300})", R"({"a":1e301})"},
    };
    for (const auto& [a, b] : different) {
        CAPTURE(a);
        REQUIRE(canonical_of(parser, a) != canonical_of(parser, b));
        CHECK(hash_of(parser, a) != hash_of(parser, b));
    }
}

TEST_CASE("a canonical string escapes exactly the bytes JSON requires, wherever they lie") {
    // Plain runs are found eight bytes a step: every byte value at every
    // place of a word, of the word after it and of the tail.
    auto escaped = [](unsigned char byte) -> std::string {
        switch (byte) {
        case '"':
            return "\\\"";
        case '\\':
            return "\\\\";
        case '\b':
            return "\\b";
        case '\f':
            return "\\f";
        case '\n':
            return "\\n";
        case '\r':
            return "\\r";
        case '\t':
            return "\\t";
        default:
            return byte < 0x20 ? fmt::format("\\u{:04x}", byte)
                               : std::string(1, static_cast<char>(byte));
        }
    };
    for (std::size_t size : {1U, 7U, 8U, 9U, 16U, 19U})
        for (std::size_t at = 0; at < size; ++at)
            for (unsigned byte = 0; byte < 256; ++byte) {
                std::string text(size, 'a');
                text[at] = static_cast<char>(byte);
                auto expected = "\"" + text.substr(0, at) +
                                escaped(static_cast<unsigned char>(byte)) + text.substr(at + 1) +
                                "\"";
                std::string written;
                detail::write_canonical_string(text, written);
                CAPTURE(size);
                CAPTURE(at);
                CAPTURE(byte);
                CHECK(written == expected);
            }
    std::string written;
    detail::write_canonical_string("", written);
    CHECK(written == "\"\"");
}

TEST_CASE("the event hash tells apart texts and names by every byte, short and long") {
    // Texts of up to 16 bytes are hashed inline from overlapping reads,
    // longer ones by XXH3: every length around both ways, each byte changed
    // in turn, as a value and as a member name, gives a hash of its own.
    RecordParser parser;
    std::set<std::uint64_t> values, names;
    std::size_t made = 0;
    for (std::size_t size = 0; size <= 24; ++size) {
        for (std::size_t changed = 0; changed <= size; ++changed) {
            std::string text(size, 'a');
            if (changed < size) text[changed] = 'b'; // changed == size: the text unchanged
            values.insert(hash_of(parser, R"({"s":")" + text + R"("})"));
            names.insert(hash_of(parser, R"({")" + text + R"(":1})"));
            ++made;
            // The same text hashes the same again.
            CHECK(hash_of(parser, R"({"s":")" + text + R"("})") ==
                  hash_of(parser, R"({ "s" : ")" + text + R"(" })"));
        }
    }
    CHECK(values.size() == made);
    CHECK(names.size() == made);
}

TEST_CASE("the event hash leaves out the ignored paths, as the canonical form does") {
    RecordParser parser;
    std::vector<FieldPath> ignored = {FieldPath::parse("request"), FieldPath::parse("meta.attempt"),
                                      FieldPath::parse("list.1")};
    auto a = R"({"id":7,"request":"r1","meta":{"attempt":1,"ua":"x"},"list":[1,2,3]})";
    auto b = R"({"id":7,"request":"r2","meta":{"attempt":3,"ua":"x"},"list":[1,9,3]})";
    auto c = R"({"id":7,"request":"r2","meta":{"attempt":3,"ua":"y"},"list":[1,9,3]})";
    REQUIRE(canonical_of(parser, a, ignored) == canonical_of(parser, b, ignored));
    CHECK(hash_of(parser, a, ignored) == hash_of(parser, b, ignored));
    CHECK(hash_of(parser, a, ignored) != hash_of(parser, c, ignored));
    CHECK(hash_of(parser, a) != hash_of(parser, b));
    // Names that share an ignored name's length, first and last byte (what
    // the look-up sketches) are kept, at the top and below: only the
    // ignored name goes.
    std::vector<FieldPath> sketched = {FieldPath::parse("a_b"), FieldPath::parse("m.a_b")};
    auto kept = R"({"axb":1,"a_b":2,"m":{"a_b":5,"ayb":6}})";
    CHECK(canonical_of(parser, kept, sketched) == R"({"axb":1,"m":{"ayb":6}})");
    CHECK(hash_of(parser, kept, sketched) == hash_of(parser, R"({"axb":1,"m":{"ayb":6}})"));
    CHECK(hash_of(parser, kept, sketched) != hash_of(parser, R"({"axb":2,"m":{"ayb":6}})"));
    CHECK(hash_of(parser, kept, sketched) != hash_of(parser, R"({"axb":1,"m":{"ayb":7}})"));
    // An envelope's body is the event; body.x and x name the same field.
    auto envelope = padded(R"({"idem":1,"headers":[],"body":"{\"request\":\"r9\",\"id\":7}"})");
    REQUIRE_FALSE(parser.parse(envelope));
    auto from_body = parser.event_hash({FieldPath::parse("body.request")});
    CHECK(from_body == hash_of(parser, R"({"id":7})"));
    // Made ready once (IgnoredPaths), the paths answer as the list does, record
    // after record, plain events and envelopes in turn.
    std::vector<FieldPath> with_body = ignored;
    with_body.push_back(FieldPath::parse("body.id"));
    IgnoredPaths ready(with_body);
    for (const std::string& json :
         {std::string(a),
          std::string(R"({"idem":1,"headers":[],"body":"{\"id\":8,\"request\":1,\"k\":2}"})"),
          std::string(b), std::string(R"({"idem":1,"headers":[],"body":"{\"k\":2}"})")}) {
        CAPTURE(json);
        auto line = padded(json);
        REQUIRE_FALSE(parser.parse(line));
        auto listed = std::string(*parser.canonical_event(with_body));
        CHECK(std::string(*parser.canonical_event(ready)) == listed);
        CHECK(parser.event_hash(ready) == parser.event_hash(with_body));
    }
    REQUIRE_FALSE(parser.parse(
        padded(R"({"idem":1,"headers":[],"body":"{\"id\":8,\"request\":1,\"k\":2}"})")));
    CHECK(*parser.canonical_event(ready) == R"({"k":2})");
    // Deeper paths that share their first names: what each level says of
    // the next is made with it, and answers as the list does.
    std::vector<FieldPath> deep = {FieldPath::parse("a.b.c"), FieldPath::parse("a.d"),
                                   FieldPath::parse("a.b.e.f")};
    auto nested = R"({"a":{"b":{"c":1,"e":{"f":2,"g":3},"h":4},"d":5,"i":6},"j":7})";
    auto left = R"({"a":{"b":{"e":{"g":3},"h":4},"i":6},"j":7})";
    CHECK(canonical_of(parser, nested, deep) == left);
    CHECK(hash_of(parser, nested, deep) == hash_of(parser, left));
    CHECK(
        hash_of(parser, nested, deep) !=
        hash_of(parser, R"({"a":{"b":{"c":1,"e":{"f":2,"g":0},"h":4},"d":5,"i":6},"j":7})", deep));
    IgnoredPaths deep_ready(deep);
    auto expected = hash_of(parser, left);
    auto line = padded(nested);
    REQUIRE_FALSE(parser.parse(line));
    CHECK(std::string(*parser.canonical_event(deep_ready)) == left);
    CHECK(parser.event_hash(deep_ready) == expected);
}
