// reorder's worker side over a block: each record's partition and order
// key, and why a record is set aside (docs/reorder.md).

#include "idem/reorder/detail/judge.hpp"

#include <cstring>
#include <doctest/doctest.h>

using namespace idem;
using namespace idem::reorder;
using namespace idem::reorder::detail;

namespace {

run::InputBlock block_of(std::string_view lines) {
    run::InputBlock block;
    block.block.bytes.reserve(lines.size() + io::k_padding_bytes, 0);
    std::memcpy(block.block.bytes.data(), lines.data(), lines.size());
    std::memset(block.block.bytes.data() + lines.size(), ' ', io::k_padding_bytes);
    block.block.size = lines.size();
    return block;
}

BlockOutcome judged(std::string_view lines, const ReorderRunOptions& options) {
    auto block = block_of(lines);
    WorkerState state;
    BlockOutcome result;
    judge_block(block, state, options, result);
    return result;
}

} // namespace

TEST_CASE("each record's partition and sequence number, in block order") {
    ReorderRunOptions options;
    options.sequence_field = record::FieldPath::parse("seq");
    options.partition_fields = {record::FieldPath::parse("account")};
    auto result = judged("{\"account\":\"a\",\"seq\":2}\n{\"account\":\"b\",\"seq\":\"7\"}\n\n"
                         "{\"account\":\"a\",\"seq\":1}\n",
                         options);
    REQUIRE(result.outcomes.size() == 3);
    CHECK(result.lines == 4); // the blank line counts for line numbers
    CHECK(result.outcomes[0].key.primary == 2);
    CHECK(result.outcomes[1].key.primary == 7); // digits in a string
    CHECK(result.outcomes[2].key.primary == 1);
    CHECK(result.partition_of(result.outcomes[0]) == result.partition_of(result.outcomes[2]));
    CHECK(result.partition_of(result.outcomes[0]) != result.partition_of(result.outcomes[1]));
}

TEST_CASE("a record without a usable sequence number is set aside with the reason") {
    ReorderRunOptions options;
    options.sequence_field = record::FieldPath::parse("seq");
    auto result = judged("{\"seq\":-1}\n{\"seq\":1.5}\n{\"other\":1}\nnot json\n", options);
    REQUIRE(result.outcomes.size() == 4);
    for (std::size_t i = 0; i < 3; ++i)
        CHECK(result.outcomes[i].kind == Outcome::Kind::bad_field);
    CHECK(result.outcomes[3].kind == Outcome::Kind::failed_to_parse);
    REQUIRE(result.failures.size() == 4);
    CHECK(result.failures[2].message.find("seq") != std::string::npos);
}
