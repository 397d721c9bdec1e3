#pragma once
// Internal to replay: records in, requests out. Reads the inputs, selects
// (--since, --until, --filter, --limit), keys each record and builds its
// request; what cannot be read or keyed goes to the rejects with its file
// and line.

#include "idem/io/diagnostics.hpp"
#include "idem/net/http_client.hpp"
#include "idem/record/parser.hpp"
#include "idem/record/path_census.hpp"
#include "idem/replay/request.hpp"
#include "idem/replay/run.hpp"
#include "idem/run/input.hpp"
#include "idem/run/rejects.hpp"

#include <memory>
#include <optional>
#include <string>

namespace idem::replay {

struct Candidate {
    std::string key;
    net::OutgoingRequest request;
    std::string source; // "file:line"
    std::optional<Timestamp> time;
};

struct ReadCounts {
    std::uint64_t records = 0;
    std::uint64_t filtered_out = 0;
    std::uint64_t selected = 0;
};

class CandidateReader {
public:
    // Throws FileSystemError (the reject file), UsageError (--to).
    CandidateReader(const ReplayOptions& options, io::Diagnostics& diagnostics);

    // The next selected record as a request; nullopt at the end of input
    // (or of --limit). Throws InputError (under --strict, or unreadable input).
    std::optional<Candidate> next();

    [[nodiscard]] bool done() const { return m_done; }
    [[nodiscard]] const ReadCounts& counts() const { return m_counts; }
    [[nodiscard]] std::uint64_t rejected() const { return m_rejects->count(); }
    [[nodiscard]] std::uint64_t bytes_read() const { return m_input->bytes_read(); }
    // --filter's, --key's and --time-field's paths against what was read.
    [[nodiscard]] const record::PathCensus& census() const { return m_census; }

private:
    bool selected(const run::InputRecord& raw, std::optional<Timestamp>& time);

    const ReplayOptions& m_options;
    net::Target m_target;
    KeyMaker m_keys;
    std::unique_ptr<io::Sink> m_reject_sink;
    std::optional<run::RejectRouter> m_rejects;
    std::optional<run::InputStream> m_input;
    record::RecordParser m_parser;
    record::PathCensus m_census;
    ReadCounts m_counts;
    bool m_done = false;
};

} // namespace idem::replay
