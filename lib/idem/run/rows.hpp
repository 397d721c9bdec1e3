#pragma once
// Records that are not NDJSON, for `audit` and `reconcile` (docs/audit.md):
// the rows of CSV files with a header row, and of a query over any SQLite
// database (the affected service's own tables). Each row becomes a JSON object, so field
// paths, canonical payloads and the rest work on it as on any record.

#include <cstdint>
#include <functional>
#include <istream>
#include <string>
#include <string_view>
#include <vector>

namespace idem::run {

// Where a row came from: "orders.csv:12" (the line it starts on) or
// "service.db:row 3".
struct RowPosition {
    const std::string& input;
    bool row = false;
    std::uint64_t number = 0;
};

// A row as a JSON object, and where it came from.
using RowHandler = std::function<void(std::string_view json, const RowPosition& position)>;

// RFC 4180: commas, double quotes around fields that hold commas, quotes or
// newlines, "" for a quote inside them. Values are strings. Throws
// InputError naming the file and line for a row that does not parse.
void read_csv_rows(const std::string& path, const RowHandler& handle);
// How a CSV row's values become JSON: all strings (as the file has them),
// or, typed (--csv-types), an unquoted number a JSON number and an unquoted
// true or false a boolean.
enum class CsvValues { text, typed };

// A CSV row (its raw bytes, quoted line breaks included) longer than this
// is an error where no --max-record-size applies (--csv for reconcile).
inline constexpr std::uint64_t k_max_csv_row_bytes = 16ULL << 20;

// The same over `in`, named `name`, fields split at `delimiter`.
void read_csv_rows(std::istream& in, const std::string& name, char delimiter, CsvValues values,
                   const RowHandler& handle);

// A CSV file's rows one at a time, as they are read: memory is the header
// (each name held once) and the row in hand, never the file. The header
// is read when constructed: a byte order mark before it is dropped, and a
// name given twice is an InputError naming both columns. A row (or the
// header) longer than `max_row_bytes` is an InputError at its line.
class CsvRowReader {
public:
    CsvRowReader(std::istream& in, std::string name, char delimiter, CsvValues values,
                 std::uint64_t max_row_bytes);
    // The next row as a JSON object (members by name) and the line it
    // starts on; false at the end. Throws InputError for a row that does
    // not parse or has the wrong number of fields.
    bool next(std::string& json, std::uint64_t& line);

private:
    std::istream& m_in;
    std::string m_name;
    char m_delimiter;
    CsvValues m_values;
    std::uint64_t m_max_row_bytes;
    std::vector<std::string> m_names; // each name as JSON, with its ':'
    std::vector<std::size_t> m_order; // the columns by name
    std::vector<std::string> m_fields;
    std::vector<bool> m_quoted;
    std::uint64_t m_line = 0;
};

// Runs `query` on the database at `path`, opened read-only. Integers and
// reals become numbers, text strings, NULL null, blobs base64 strings.
// Throws InputError for a database or query that fails.
void read_sqlite_rows(const std::string& path, const std::string& query, const RowHandler& handle);

// The result columns of `query` that are a table's primary key (or its
// rowid): they tell rows apart and say nothing of the event, so audit never
// counts them as payload. Throws InputError as read_sqlite_rows does.
[[nodiscard]] std::vector<std::string> sqlite_primary_key_columns(const std::string& path,
                                                                  const std::string& query);

} // namespace idem::run
