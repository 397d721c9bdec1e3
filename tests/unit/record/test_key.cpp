#include "idem/io/block_reader.hpp"
#include "idem/record/key.hpp"

#include <doctest/doctest.h>

using namespace idem;
using namespace idem::record;
using record::FieldPath;

namespace {

// The fingerprint of `line` under `spec`, and the encoded key.
struct Keyed {
    std::optional<Fingerprint> fingerprint;
    std::string encoded;
    std::string missing;
};

Keyed key_of(const std::string& json, const KeySpec& spec) {
    std::string line = json;
    line.reserve(line.size() + io::k_padding_bytes);
    record::RecordParser parser;
    REQUIRE_FALSE(parser.parse(line));
    Fingerprinter fingerprinter(spec);
    auto outcome = fingerprinter.fingerprint(parser);
    return {outcome.fingerprint, fingerprinter.encoded_key(), outcome.missing_path};
}

KeySpec keys(std::string_view paths) {
    return {FieldPath::parse_list(paths), {}};
}

} // namespace

TEST_CASE("the key encoding is type-tagged and length-prefixed") {
    CHECK(key_of(R"({"a":"x","b":1})", keys("a,b")).encoded == "idem-key/1 key s1:x d1:1");
    CHECK(key_of(R"({"a":{"z":1,"y":[true,null]}})", keys("a")).encoded ==
          R"(idem-key/1 key o23:{"y":[true,null],"z":1})");
}

TEST_CASE("values that would run together as text never collide") {
    auto split_one = key_of(R"({"a":"a","b":"bc"})", keys("a,b"));
    auto split_two = key_of(R"({"a":"ab","b":"c"})", keys("a,b"));
    CHECK(split_one.fingerprint != split_two.fingerprint);
    auto number = key_of(R"({"a":1})", keys("a"));
    auto text = key_of(R"({"a":"1"})", keys("a"));
    CHECK(number.fingerprint != text.fingerprint);
    auto null_value = key_of(R"({"a":null,"b":1})", keys("a,b"));
    auto separator_inside = key_of(R"({"a":"x d1:1","b":1})", keys("a,b"));
    CHECK(null_value.fingerprint != separator_inside.fingerprint);
}

TEST_CASE("a missing key field is different from null, and is reported by its path") {
    auto missing = key_of(R"({"b":1})", keys("a"));
    CHECK_FALSE(missing.fingerprint);
    CHECK(missing.missing == "a");
    auto null_value = key_of(R"({"a":null})", keys("a"));
    CHECK(null_value.fingerprint);
}

TEST_CASE(
    "the whole event: key order, whitespace, number spelling and ignored fields do not matter") {
    KeySpec spec{{}, FieldPath::parse_list("request.id,attempt")};
    auto first =
        key_of(R"({"id":"evt_1","amount":100,"request":{"id":"req_1"},"attempt":1})", spec);
    auto redelivered = key_of(
        R"({ "attempt": 3, "request": {"id": "req_9"}, "amount": 1.00e2, "id": "evt_1" })", spec);
    auto other =
        key_of(R"({"id":"evt_1","amount":101,"request":{"id":"req_1"},"attempt":1})", spec);
    CHECK(first.fingerprint == redelivered.fingerprint);
    CHECK(first.fingerprint != other.fingerprint);
    CHECK(first.encoded ==
          R"(idem-key/1 event idem-canonical/1 c40:{"amount":100,"id":"evt_1","request":{}})");
}

TEST_CASE("in an envelope, keys reach headers and the body") {
    auto envelope =
        key_of(R"({"idem":1,"headers":[["X-GitHub-Delivery","d-1"]],"body":"{\"id\":7}"})",
               keys("headers.x-github-delivery,body.id"));
    CHECK(envelope.encoded == "idem-key/1 key s3:d-1 d1:7");
    auto whole = key_of(R"({"idem":1,"headers":[],"body":"{\"b\":1, \"a\":2}"})", KeySpec{});
    CHECK(whole.encoded == R"(idem-key/1 event idem-canonical/1 c13:{"a":2,"b":1})");
}
