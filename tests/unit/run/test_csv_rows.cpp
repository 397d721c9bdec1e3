// A CSV file's header and rows (run/rows.hpp, CsvRowReader).

#include "idem/run/rows.hpp"
#include "idem/util/errors.hpp"

#include <doctest/doctest.h>
#include <sstream>
#include <string>

using namespace idem;

namespace {
std::string rows_of(const std::string& text) {
    std::istringstream in(text);
    run::CsvRowReader reader(in, "t.csv", ',', run::CsvValues::text, 1 << 24);
    std::string all, json;
    std::uint64_t line = 0;
    while (reader.next(json, line))
        all += std::to_string(line) + " " + json + "\n";
    return all;
}
} // namespace

TEST_CASE("rows are objects of the header's names, members by name, at their lines") {
    CHECK(rows_of("\xef\xbb\xbfid,amount\nevt_1,10\n\nevt_2,\"5\nmore\"\n") ==
          "2 {\"amount\":\"10\",\"id\":\"evt_1\"}\n4 {\"amount\":\"5\\nmore\",\"id\":\"evt_2\"}\n");
}

TEST_CASE("a name given twice names the first column that repeats one, and the one it repeats") {
    CHECK_THROWS_WITH_AS(rows_of("b,a,c,a,b\n"), doctest::Contains("'a' twice (columns 2 and 4)"),
                         InputError);
    CHECK_THROWS_WITH_AS(rows_of("x,x,x\n"), doctest::Contains("columns 1 and 2"), InputError);
}

TEST_CASE("a header of many names is checked without comparing every pair") {
    // 300,000 distinct names and one repeated at the end: a pass over pairs
    // of columns would compare 4.5e10 of them.
    std::string header;
    for (int n = 0; n < 300000; ++n)
        header += "c" + std::to_string(n) + ",";
    header += "c7\n";
    CHECK_THROWS_WITH_AS(rows_of(header), doctest::Contains("columns 8 and 300001"), InputError);
}
