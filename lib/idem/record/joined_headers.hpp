#pragma once
// An envelope's headers as HTTP reads them (RFC 9110 §5.3): the field lines
// of one name are one field, whose value is the lines' values joined by
// ", " in the order received. A signature check reads a header this way, so
// that a delivery sending its signatures on two lines is judged on both.

#include "idem/record/parser.hpp"

#include <deque>
#include <string>

namespace idem::record {

class JoinedHeaders {
public:
    // `envelope` itself when no name repeats; else a copy whose repeated
    // lines are one, valid until the next call and while `envelope` lives.
    [[nodiscard]] const Envelope& join(const Envelope& envelope);

private:
    Envelope m_joined;
    std::deque<std::string> m_values;
};

} // namespace idem::record
