#pragma once
// What replay sends for a record (docs/replay.md): an envelope keeps its
// method, path, query and headers (minus hop-by-hop ones); a plain event is
// POSTed as JSON. The idempotency key comes from --key paths or the
// record's fingerprint, so it is the same on every retry and every rerun.

#include "idem/net/http_client.hpp"
#include "idem/net/target.hpp"
#include "idem/record/field_path.hpp"
#include "idem/record/parser.hpp"

#include <optional>
#include <string>
#include <vector>

namespace idem::replay {

// The request for the record `parser` holds (`line` is its raw text), with
// `key_header: key` replacing any header of that name.
[[nodiscard]] net::OutgoingRequest build_request(const record::RecordParser& parser,
                                                 std::string_view line, const net::Target& target,
                                                 std::string_view key_header, std::string_view key);

// The idempotency key of a record, or the path that was missing.
struct KeyResult {
    std::optional<std::string> key;
    std::string missing_path;
};

class KeyMaker {
public:
    // No paths: the fingerprint of the whole event (an envelope's body).
    explicit KeyMaker(std::vector<record::FieldPath> key_paths);
    ~KeyMaker();
    KeyMaker(const KeyMaker&) = delete;
    KeyMaker& operator=(const KeyMaker&) = delete;

    // One path whose value is a short string or number of header-safe
    // characters: that text (an event id stays readable). Anything else:
    // "idem-" and the dedup fingerprint of the values (docs/dedup.md).
    KeyResult key_for(record::RecordParser& parser, std::string_view line);

private:
    struct Impl;
    std::unique_ptr<Impl> m_impl;
};

} // namespace idem::replay
