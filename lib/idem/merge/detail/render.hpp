#pragma once
// Internal to merge: a closed window as the record it becomes, and as one
// line of --preview.

#include "idem/merge/rules.hpp"
#include "idem/merge/windows.hpp"

#include <memory>
#include <string>
#include <vector>

namespace idem::merge::detail {

// Renders merged records: the base member with each aggregate's field set
// (replacing a field of that name), and `_idem.merge` saying what went into
// it. The base is parsed once per window, never the members.
class Renderer {
public:
    Renderer();
    ~Renderer();
    Renderer(const Renderer&) = delete;
    Renderer& operator=(const Renderer&) = delete;

    [[nodiscard]] std::string render(const WindowState& window, const MergeRule& rule);
    // The names of an action's figures that a record already had as fields
    // of its own, since the last call (for one warning).
    [[nodiscard]] std::vector<std::string> take_collisions();

private:
    struct Impl; // simdjson's parser, kept from window to window
    std::unique_ptr<Impl> m_impl;
};

// "rule R · group G · start .. end · N members": a window for --preview.
[[nodiscard]] std::string describe_window(const WindowState& window, const MergeRule& rule);

} // namespace idem::merge::detail
