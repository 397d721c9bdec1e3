#pragma once
// What a run reports at the end: counts that prove nothing was lost
// (in = out + side outputs + rejected), rendered as one human line for stderr
// or as JSON for scripts (--summary json).

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace idem::io {

struct Summary {
    // Which idem judged ("idem 0.2.0 (abc1234)"): the CLI sets it, and it
    // opens the JSON, so an incident report records it.
    std::string version;
    std::string command;
    // In display order; "in" first by convention.
    std::vector<std::pair<std::string, std::uint64_t>> counts;
    // Fractions (0..1): a number in JSON, a percentage in text.
    std::vector<std::pair<std::string, double>> ratios;
    // Extra facts shown after the counts (scheme, store, ...).
    std::vector<std::pair<std::string, std::string>> facts;
    // Counts per part of the run (merge: per rule), under `parts_name`:
    // a JSON array of objects, and a clause each in text.
    struct Part {
        std::string name;
        std::vector<std::pair<std::string, std::uint64_t>> counts;
        std::vector<std::pair<std::string, double>> ratios;
    };
    std::string parts_name;
    std::vector<Part> parts;
    double seconds = 0;

    [[nodiscard]] std::uint64_t count(const std::string& name) const;
};

// Seconds since `start`, for Summary::seconds.
[[nodiscard]] double seconds_since(std::chrono::steady_clock::time_point start);

// "idem verify: 1000 in, 998 valid, 2 invalid, 0 rejected (0.21 s, 4.8k records/s)"
[[nodiscard]] std::string render_summary_text(const Summary& summary);
// {"command":"verify","in":1000,...,"seconds":0.21}
[[nodiscard]] std::string render_summary_json(const Summary& summary);

} // namespace idem::io
