#include "idem/run/rows.hpp"

#include "idem/io/byte_source.hpp"
#include "idem/util/encoding.hpp"
#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"
#include "idem/util/unique_fd.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <optional>
#include <sqlite3.h>
#include <vector>

namespace idem::run {

namespace {

// Reads one CSV record (which may span lines inside quotes) into `fields`.
// False at the end of the file.
bool next_csv_record(std::istream& in, char delimiter, std::vector<std::string>& fields,
                     std::vector<bool>& quoted_fields, std::uint64_t& line, const std::string& path,
                     std::uint64_t max_bytes) {
    fields.clear();
    quoted_fields.clear();
    std::string field;
    bool quoted = false, any = false, was_quoted = false;
    auto start_line = line + 1;
    std::uint64_t bytes = 0;
    char c = 0;
    while (in.get(c)) {
        any = true;
        // A quote never closed would otherwise read the rest of the file
        // into one field.
        if (++bytes > max_bytes)
            throw InputError(
                {path, start_line, 0, 0},
                fmt::format("a CSV row longer than {} bytes (--max-record-size)", max_bytes));
        if (quoted) {
            if (c == '"') {
                if (in.peek() == '"') {
                    in.get(c);
                    field += '"';
                } else {
                    quoted = false;
                }
            } else {
                if (c == '\n') ++line;
                field += c;
            }
            continue;
        }
        if (c == '"' && field.empty() && !was_quoted) {
            quoted = was_quoted = true;
        } else if (c == delimiter) {
            quoted_fields.push_back(was_quoted);
            fields.push_back(std::move(field));
            field.clear();
            was_quoted = false;
        } else if (c == '\n') {
            ++line;
            if (!field.empty() && field.back() == '\r') field.pop_back();
            quoted_fields.push_back(was_quoted);
            fields.push_back(std::move(field));
            return true;
        } else if (was_quoted && c != '\r') {
            throw InputError({path, line + 1, 0, 0},
                             "a quoted CSV field must end at a delimiter or the end of the line");
        } else {
            field += c;
        }
    }
    if (quoted) throw InputError({path, start_line, 0, 0}, "a quoted CSV field is not closed");
    if (!any) return false;
    ++line;
    if (!field.empty() && field.back() == '\r') field.pop_back();
    quoted_fields.push_back(was_quoted);
    fields.push_back(std::move(field));
    return true;
}

// An unquoted field that is a JSON number or boolean, as one; else text.
nlohmann::json typed_value(std::string& field, bool quoted) {
    if (!quoted && !field.empty()) {
        if (field == "true") return true;
        if (field == "false") return false;
        auto first = field.front();
        if (first == '-' || (first >= '0' && first <= '9')) {
            auto number = nlohmann::json::parse(field, nullptr, false);
            if (number.is_number()) return number;
        }
    }
    return std::move(field);
}

} // namespace

CsvRowReader::CsvRowReader(std::istream& in, std::string name, char delimiter, CsvValues values,
                           std::uint64_t max_row_bytes)
    : m_in(in), m_name(std::move(name)), m_delimiter(delimiter), m_values(values),
      m_max_row_bytes(max_row_bytes) {
    std::vector<std::string> header;
    if (!next_csv_record(m_in, m_delimiter, header, m_quoted, m_line, m_name, m_max_row_bytes))
        throw InputError({m_name, 1, 0, 0}, "the CSV file is empty: a header row is needed");
    // Excel's "CSV UTF-8" starts with a byte order mark: it is no part of
    // the first column's name.
    constexpr std::string_view k_byte_order_mark = "\xef\xbb\xbf";
    if (!header.empty() && header.front().starts_with(k_byte_order_mark))
        header.front().erase(0, k_byte_order_mark.size());
    // The columns in the order a JSON object's members are written (by
    // name; a stable sort keeps equal names in column order).
    m_order.resize(header.size());
    for (std::size_t i = 0; i < header.size(); ++i)
        m_order[i] = i;
    std::stable_sort(m_order.begin(), m_order.end(),
                     [&](std::size_t a, std::size_t b) { return header[a] < header[b]; });
    // A name twice would keep one of its values and drop the other unseen.
    // Equal names lie side by side in that order: the first column that
    // repeats an earlier one is named, with the column it repeats (a pass
    // over pairs of columns would take hours on a header of millions).
    std::optional<std::pair<std::size_t, std::size_t>> twice; // earlier, later
    for (std::size_t k = 1; k < m_order.size(); ++k) {
        auto earlier = m_order[k - 1], later = m_order[k];
        if (header[earlier] == header[later] &&
            (k < 2 || header[m_order[k - 2]] != header[later]) && (!twice || later < twice->second))
            twice.emplace(earlier, later);
    }
    if (twice)
        throw InputError({m_name, 1, 0, 0},
                         fmt::format("the header names {} twice (columns {} and {}): each column "
                                     "needs a name of its own",
                                     quote(header[twice->first]), twice->first + 1,
                                     twice->second + 1));
    for (const auto& column : header)
        m_names.push_back(
            nlohmann::json(column).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
            ":");
}

bool CsvRowReader::next(std::string& json, std::uint64_t& line) {
    while (true) {
        line = m_line + 1;
        if (!next_csv_record(m_in, m_delimiter, m_fields, m_quoted, m_line, m_name,
                             m_max_row_bytes))
            return false;
        if (m_fields.size() == 1 && m_fields[0].empty()) continue; // a blank line
        if (m_fields.size() != m_names.size())
            throw InputError({m_name, line, 0, 0}, fmt::format("{} fields where the header has {}",
                                                               m_fields.size(), m_names.size()));
        json.clear();
        json.push_back('{');
        for (std::size_t k = 0; k < m_order.size(); ++k) {
            auto i = m_order[k];
            if (k > 0) json.push_back(',');
            json.append(m_names[i]);
            auto value = m_values == CsvValues::typed ? typed_value(m_fields[i], m_quoted[i])
                                                      : nlohmann::json(std::move(m_fields[i]));
            json.append(value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
        }
        json.push_back('}');
        return true;
    }
}

void read_csv_rows(const std::string& path, const RowHandler& handle) {
    UniqueFd file(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!file.valid())
        throw InputError({path, 0, 0, 0},
                         fmt::format("cannot open the CSV file: {}", std::strerror(errno)));
    // Decoded as every input is (a .csv.gz, a .csv.zst), by io/byte_source.hpp.
    auto source = io::open_byte_source(file.get(), path);
    io::ByteSourceStreambuf buffer(*source, path, "CSV");
    std::istream in(&buffer);
    in.exceptions(std::ios::badbit);
    read_csv_rows(in, path, ',', CsvValues::text, handle);
}

void read_csv_rows(std::istream& in, const std::string& path, char delimiter, CsvValues values,
                   const RowHandler& handle) {
    CsvRowReader rows(in, path, delimiter, values, k_max_csv_row_bytes);
    std::string json;
    std::uint64_t line = 0;
    while (rows.next(json, line))
        handle(json, {path, false, line});
}

namespace {
// Closed however the reading ends (a handler may throw under --strict).
struct Database {
    sqlite3* db = nullptr;
    ~Database() { sqlite3_close(db); }
};
struct Query {
    sqlite3_stmt* statement = nullptr;
    ~Query() { sqlite3_finalize(statement); }
};

nlohmann::json column_value(sqlite3_stmt* statement, int i) {
    switch (sqlite3_column_type(statement, i)) {
    case SQLITE_INTEGER:
        return sqlite3_column_int64(statement, i);
    case SQLITE_FLOAT:
        return sqlite3_column_double(statement, i);
    case SQLITE_TEXT:
        return std::string(reinterpret_cast<const char*>(sqlite3_column_text(statement, i)),
                           static_cast<std::size_t>(sqlite3_column_bytes(statement, i)));
    case SQLITE_BLOB: {
        const auto* bytes = static_cast<const char*>(sqlite3_column_blob(statement, i));
        return base64_encode(std::string_view(
            bytes ? bytes : "", static_cast<std::size_t>(sqlite3_column_bytes(statement, i))));
    }
    default:
        return nullptr;
    }
}
} // namespace

namespace {
void open_query(const std::string& path, const std::string& query, Database& database,
                Query& rows) {
    if (sqlite3_open_v2(path.c_str(), &database.db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK)
        throw InputError({path, 0, 0, 0},
                         fmt::format("cannot open the database: {}",
                                     database.db ? sqlite3_errmsg(database.db) : "out of memory"));
    if (sqlite3_prepare_v2(database.db, query.c_str(), -1, &rows.statement, nullptr) != SQLITE_OK ||
        rows.statement == nullptr)
        throw InputError({path, 0, 0, 0}, fmt::format("the query {} does not run: {}", quote(query),
                                                      sqlite3_errmsg(database.db)));
}
} // namespace

std::vector<std::string> sqlite_primary_key_columns(const std::string& path,
                                                    const std::string& query) {
    Database database;
    Query rows;
    open_query(path, query, database, rows);
    std::vector<std::string> columns;
    for (int i = 0; i < sqlite3_column_count(rows.statement); ++i) {
        const char* table = sqlite3_column_table_name(rows.statement, i);
        const char* origin = sqlite3_column_origin_name(rows.statement, i);
        const char* name = sqlite3_column_name(rows.statement, i);
        if (!table || !origin || !name) continue; // an expression, not a column
        int primary_key = 0;
        if (sqlite3_table_column_metadata(
                database.db, sqlite3_column_database_name(rows.statement, i), table, origin,
                nullptr, nullptr, nullptr, &primary_key, nullptr) == SQLITE_OK &&
            primary_key)
            columns.emplace_back(name);
    }
    return columns;
}

void read_sqlite_rows(const std::string& path, const std::string& query, const RowHandler& handle) {
    Database database;
    Query rows;
    open_query(path, query, database, rows);
    std::uint64_t row = 0;
    int result = SQLITE_ROW;
    while ((result = sqlite3_step(rows.statement)) == SQLITE_ROW) {
        ++row;
        nlohmann::json object = nlohmann::json::object();
        for (int i = 0; i < sqlite3_column_count(rows.statement); ++i) {
            const char* name = sqlite3_column_name(rows.statement, i);
            object[name ? std::string(name) : fmt::format("column{}", i)] =
                column_value(rows.statement, i);
        }
        handle(object.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
               {path, true, row});
    }
    if (result != SQLITE_DONE)
        throw InputError({path, 0, 0, 0},
                         fmt::format("the query failed: {}", sqlite3_errmsg(database.db)));
}

} // namespace idem::run
