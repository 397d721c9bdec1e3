#include "idem/util/errors.hpp"

#include <fmt/format.h>

namespace idem {

std::string SourcePosition::to_string() const {
    if (line == 0) return source;
    if (column == 0) return fmt::format("{}:{}", source, line);
    return fmt::format("{}:{}:{}", source, line, column);
}

InputError::InputError(SourcePosition position, const std::string& message)
    : Error(position.source.empty() ? message : position.to_string() + ": " + message),
      m_position(std::move(position)) {}

} // namespace idem
