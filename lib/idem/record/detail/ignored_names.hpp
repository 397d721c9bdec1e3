#pragma once
// Internal: which member names a list of ignored paths holds at one depth.

#include "idem/record/field_path.hpp"

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

namespace idem::record::detail {

// A 256-bit sketch of the names' (length, first byte, last byte). A name
// outside the sketch is no path's, so the paths are not looked through for
// it: that look was a sixth of audit's per-record work, with ~20 ignored
// names (the volatile fields) and most members matching none.
class IgnoredNames {
public:
    IgnoredNames() = default;
    IgnoredNames(const std::vector<const FieldPath*>& ignored, std::size_t depth) {
        for (const auto* path : ignored)
            if (path->segments().size() > depth) {
                auto at = position(path->segments()[depth]);
                m_bits[at / 64] |= std::uint64_t{1} << (at % 64);
                m_any = true;
            }
    }
    [[nodiscard]] bool any() const { return m_any; }
    [[nodiscard]] bool may_hold(std::string_view name) const {
        auto at = position(name);
        return (m_bits[at / 64] >> (at % 64)) & 1;
    }

private:
    static std::size_t position(std::string_view name) {
        if (name.empty()) return 0;
        return (name.size() * 31 + static_cast<unsigned char>(name.front()) * 7 +
                static_cast<unsigned char>(name.back())) %
               256;
    }
    std::array<std::uint64_t, 4> m_bits{};
    bool m_any = false;
};

} // namespace idem::record::detail
