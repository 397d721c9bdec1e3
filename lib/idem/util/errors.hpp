#pragma once
// The typed failures that end a command. Each is caught once, in cli/main.cpp,
// and mapped to an exit code (docs/exit-codes.md). Messages never contain secrets.

#include <cstdint>
#include <stdexcept>
#include <string>

namespace idem {

// Exit codes (docs/exit-codes.md), in one place so the CLI and tests agree.
enum class ExitCode : int {
    clean = 0,
    findings = 1,
    usage = 2,
    bad_input = 3,
    store_failure = 4,
};

class Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
    [[nodiscard]] virtual ExitCode exit_code() const = 0;
};

// A bad flag or value.
class UsageError : public Error {
public:
    using Error::Error;
    [[nodiscard]] ExitCode exit_code() const override { return ExitCode::usage; }
};

// Where in the input something went wrong: file (or "<stdin>"), 1-based line,
// 1-based column (0 when unknown) and the byte offset of the line's start.
struct SourcePosition {
    std::string source;
    std::uint64_t line = 0;
    std::uint64_t column = 0;
    std::uint64_t byte_offset = 0;

    // "events.ndjson:1042:17" (column omitted when unknown), the name with
    // its control bytes escaped (terminal_text).
    [[nodiscard]] std::string to_string() const;
};

// Unreadable input, or bad data under --strict.
class InputError : public Error {
public:
    InputError(SourcePosition position, const std::string& message);
    [[nodiscard]] ExitCode exit_code() const override { return ExitCode::bad_input; }
    [[nodiscard]] const SourcePosition& position() const { return m_position; }

private:
    SourcePosition m_position;
};

// The store (SQLite, Redis) failed.
class StoreError : public Error {
public:
    using Error::Error;
    [[nodiscard]] ExitCode exit_code() const override { return ExitCode::store_failure; }
};

// Writing an output, or another file-system operation, failed.
class FileSystemError : public Error {
public:
    using Error::Error;
    [[nodiscard]] ExitCode exit_code() const override { return ExitCode::store_failure; }
};

// A network peer failed.
class NetworkError : public Error {
public:
    using Error::Error;
    [[nodiscard]] ExitCode exit_code() const override { return ExitCode::store_failure; }
};

} // namespace idem
