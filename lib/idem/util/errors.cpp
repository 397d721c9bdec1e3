#include "idem/util/errors.hpp"

#include "idem/util/text.hpp"

#include <fmt/format.h>

namespace idem {

// A file name is input too: a line break or an escape sequence in it must
// never start a line of its own on stderr (a forged "idem: error:" or a CI
// log's "::" command), so it is written as a report value is.
std::string SourcePosition::to_string() const {
    auto name = terminal_text(source);
    if (line == 0) return name;
    if (column == 0) return fmt::format("{}:{}", name, line);
    return fmt::format("{}:{}:{}", name, line, column);
}

InputError::InputError(SourcePosition position, const std::string& message)
    : Error(position.source.empty() ? message : position.to_string() + ": " + message),
      m_position(std::move(position)) {}

} // namespace idem
