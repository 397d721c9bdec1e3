#pragma once
// Internal: what a list of ignored paths says of the member names at one
// depth of an event.

#include "idem/record/field_path.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

namespace idem::record::detail {

// The names the paths hold at one depth, each with what it means there:
// the member is left out, or these paths reach further inside it. Looked
// up through a 256-bit sketch of (length, first byte, last byte): a name
// outside it is no path's, and most members are none. Looking every
// member of every record up among ~20 ignored paths (the volatile fields)
// was a sixth of audit's per-record work.
class IgnoredNames {
public:
    struct Name {
        std::string_view name;
        bool skip = false;                   // a path ends at it
        std::vector<const FieldPath*> inner; // paths that go on inside it
        // What `inner` says one level down, made with this: a record's
        // nested objects then make none of their own (building them per
        // record, with their vectors, was a tenth of audit's payload hash
        // on Stripe events keyed by data.object.id).
        std::shared_ptr<const IgnoredNames> inside;
    };

    IgnoredNames() = default;
    IgnoredNames(const std::vector<const FieldPath*>& ignored, std::size_t depth) {
        for (const auto* path : ignored) {
            const auto& segments = path->segments();
            if (segments.size() <= depth) continue;
            std::string_view name = segments[depth];
            auto at = position(name);
            m_bits[at / 64] |= std::uint64_t{1} << (at % 64);
            auto entry = std::find_if(m_names.begin(), m_names.end(),
                                      [&](const Name& known) { return known.name == name; });
            if (entry == m_names.end())
                entry = m_names.insert(entry, Name{name, false, {}, nullptr});
            if (segments.size() == depth + 1)
                entry->skip = true;
            else
                entry->inner.push_back(path);
        }
        for (auto& entry : m_names)
            if (!entry.inner.empty())
                entry.inside = std::make_shared<const IgnoredNames>(entry.inner, depth + 1);
    }
    [[nodiscard]] bool any() const { return !m_names.empty(); }
    // What the paths say of member `name`; nullptr: nothing.
    [[nodiscard]] const Name* find(std::string_view name) const {
        auto at = position(name);
        if (!((m_bits[at / 64] >> (at % 64)) & 1)) return nullptr;
        for (const auto& entry : m_names)
            if (entry.name.size() == name.size() && entry.name == name) return &entry;
        return nullptr;
    }

private:
    static std::size_t position(std::string_view name) {
        if (name.empty()) return 0;
        return (name.size() * 31 + static_cast<unsigned char>(name.front()) * 7 +
                static_cast<unsigned char>(name.back())) %
               256;
    }
    std::array<std::uint64_t, 4> m_bits{};
    std::vector<Name> m_names; // in the order the paths first name them
};

} // namespace idem::record::detail
