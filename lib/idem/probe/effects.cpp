#include "idem/probe/effects.hpp"

#include "idem/net/http_client.hpp"
#include "idem/net/target.hpp"
#include "idem/util/errors.hpp"
#include "idem/util/shell_command.hpp"
#include "idem/util/text.hpp"
#include "idem/util/unique_fd.hpp"

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <sqlite3.h>
#include <system_error>
#include <unistd.h>

namespace idem::probe {

namespace {

constexpr std::size_t k_max_reading_bytes = 64 << 10;

std::int64_t parse_count(std::string_view text, std::string_view kind) {
    auto trimmed = trim(text);
    std::int64_t count = -1;
    auto [end, error] = std::from_chars(trimmed.data(), trimmed.data() + trimmed.size(), count);
    if (error != std::errc() || end != trimmed.data() + trimmed.size() || count < 0)
        throw StoreError(fmt::format("--effects-{}: expected a count (a whole number from 0), got "
                                     "{}",
                                     kind, quote(trimmed.substr(0, 80))));
    return count;
}

struct SqliteCloser {
    void operator()(sqlite3* db) const { sqlite3_close(db); }
    void operator()(sqlite3_stmt* statement) const { sqlite3_finalize(statement); }
};

class SqliteObserver final : public EffectObserver {
public:
    SqliteObserver(const std::string& path, const std::string& query) : m_path(path) {
        sqlite3* db = nullptr;
        // Read-only, and never created: a mistyped path is an error, not an
        // empty database that counts nothing.
        int opened = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
        m_db.reset(db);
        if (opened != SQLITE_OK)
            throw UsageError(fmt::format("--effects-sqlite {}: {}", quote(path),
                                         db ? sqlite3_errmsg(db) : "out of memory"));
        sqlite3_busy_timeout(db, 5000);
        sqlite3_stmt* statement = nullptr;
        const char* rest = nullptr;
        if (sqlite3_prepare_v2(db, query.c_str(), -1, &statement, &rest) != SQLITE_OK)
            throw UsageError(fmt::format("--effects-query: {}", sqlite3_errmsg(db)));
        m_statement.reset(statement);
        if (!statement) throw UsageError("--effects-query is empty");
        if (rest && !trim(rest).empty()) throw UsageError("--effects-query must be one statement");
        if (!sqlite3_stmt_readonly(statement))
            throw UsageError("--effects-query must only read (a SELECT): probe never writes to "
                             "the handler's database");
        m_key_index = sqlite3_bind_parameter_index(statement, ":key");
        m_id_index = sqlite3_bind_parameter_index(statement, ":id");
        if (m_key_index == 0 && m_id_index == 0)
            throw UsageError("--effects-query binds neither :key nor :id: it would count the "
                             "same for every delivery");
        if (sqlite3_bind_parameter_count(statement) != (m_key_index ? 1 : 0) + (m_id_index ? 1 : 0))
            throw UsageError("--effects-query: only :key and :id are bound");
    }

    std::string read(std::string_view key, std::string_view id) override {
        auto* statement = m_statement.get();
        sqlite3_reset(statement);
        if (m_key_index)
            sqlite3_bind_text(statement, m_key_index, key.data(), static_cast<int>(key.size()),
                              SQLITE_TRANSIENT);
        if (m_id_index)
            sqlite3_bind_text(statement, m_id_index, id.data(), static_cast<int>(id.size()),
                              SQLITE_TRANSIENT);
        int step = sqlite3_step(statement);
        if (step == SQLITE_DONE) return "0";
        if (step != SQLITE_ROW)
            throw StoreError(
                fmt::format("--effects-sqlite {}: {}", quote(m_path), sqlite3_errmsg(m_db.get())));
        const auto* text = sqlite3_column_text(statement, 0);
        std::string reading = text ? reinterpret_cast<const char*>(text) : "null";
        sqlite3_reset(statement);
        return reading;
    }

    [[nodiscard]] std::string_view kind() const override { return "sqlite"; }

private:
    std::string m_path;
    std::unique_ptr<sqlite3, SqliteCloser> m_db;
    std::unique_ptr<sqlite3_stmt, SqliteCloser> m_statement;
    int m_key_index = 0, m_id_index = 0;
};

// RFC 3986's unreserved characters stay; every other byte is %XX.
std::string percent_encoded(std::string_view value) {
    std::string encoded;
    for (char byte : value) {
        auto c = static_cast<unsigned char>(byte);
        if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~')
            encoded.push_back(static_cast<char>(c));
        else
            encoded += fmt::format("%{:02X}", c);
    }
    return encoded;
}

std::string replace_all(std::string text, std::string_view slot, const std::string& value) {
    for (auto at = text.find(slot); at != std::string::npos;
         at = text.find(slot, at + value.size()))
        text.replace(at, slot.size(), value);
    return text;
}

class UrlObserver final : public EffectObserver {
public:
    UrlObserver(const std::string& url_template, Duration timeout)
        : m_template(url_template), m_client(net::Timeouts{timeout, timeout}, k_max_reading_bytes) {
        auto filled = replace_all(replace_all(url_template, "{key}", "k"), "{id}", "i");
        (void)net::parse_target(filled, "--effects-url");
    }

    std::string read(std::string_view key, std::string_view id) override {
        net::OutgoingRequest request;
        request.method = "GET";
        request.url = replace_all(replace_all(m_template, "{key}", percent_encoded(key)), "{id}",
                                  percent_encoded(id));
        request.headers = {{"Accept", "application/json"}};
        auto answer = m_client.send(std::move(request));
        if (answer.transport != net::TransferResult::Transport::answered)
            throw StoreError(fmt::format("--effects-url: no answer ({})", answer.error));
        if (answer.status < 200 || answer.status >= 300)
            throw StoreError(fmt::format("--effects-url: answered {}", answer.status));
        auto json = nlohmann::json::parse(answer.body, nullptr, false);
        if (json.is_object() && json.contains("count")) json = json["count"];
        if (json.is_number_integer() || json.is_number_unsigned()) return json.dump();
        if (json.is_string()) return json.get<std::string>();
        throw StoreError("--effects-url: the answer is not a JSON count (a number, or "
                         "{\"count\": N})");
    }

    [[nodiscard]] std::string_view kind() const override { return "url"; }

private:
    std::string m_template;
    net::HttpClient m_client;
};

class CommandObserver final : public EffectObserver {
public:
    CommandObserver(std::string command, Duration timeout)
        : m_command(std::move(command)), m_timeout(timeout) {
        if (trim(m_command).empty()) throw UsageError("--effects-cmd is empty");
    }

    std::string read(std::string_view key, std::string_view id) override {
        ShellCommand shell;
        shell.command = m_command;
        shell.environment = {{"IDEM_KEY", std::string(key)}, {"IDEM_ID", std::string(id)}};
        shell.timeout = m_timeout;
        shell.max_output = k_max_reading_bytes;
        ShellCommandResult ran;
        try {
            ran = run_shell_command(shell);
        } catch (const std::system_error& error) {
            throw StoreError(fmt::format("--effects-cmd: cannot start: {}", error.what()));
        }
        if (ran.timed_out)
            throw StoreError(
                fmt::format("--effects-cmd: no answer within {}", format_duration(m_timeout)));
        if (ran.exit_code != 0)
            throw StoreError(fmt::format("--effects-cmd: exited {}", ran.exit_code));
        return std::string(trim(ran.output));
    }

    [[nodiscard]] std::string_view kind() const override { return "cmd"; }

private:
    std::string m_command;
    Duration m_timeout;
};

} // namespace

std::int64_t EffectObserver::count(std::string_view key, std::string_view id) {
    return parse_count(read(key, id), kind());
}

std::unique_ptr<EffectObserver> sqlite_observer(const std::string& path, const std::string& query) {
    return std::make_unique<SqliteObserver>(path, query);
}

std::unique_ptr<EffectObserver> url_observer(const std::string& url_template, Duration timeout) {
    return std::make_unique<UrlObserver>(url_template, timeout);
}

std::unique_ptr<EffectObserver> command_observer(const std::string& command, Duration timeout) {
    return std::make_unique<CommandObserver>(command, timeout);
}

} // namespace idem::probe
