#include "idem/record/canonical.hpp"

#include "idem/record/detail/canonical_writer.hpp"
#include "idem/util/text.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <deque>
#include <fmt/format.h>
#include <optional>
#include <xxhash.h>

namespace idem::record {

namespace detail {

namespace {

// How many bytes `text` starts with that JSON writes as they are (none
// below 0x20, no '"', no '\\'), eight a step: most texts are all such
// bytes, and a byte at a time was most of writing a report's strings.
// Per word, a byte below 0x20 (or, after the xor, equal to '"' or '\\':
// zero) is found exactly by the borrow its subtraction leaves in its top
// bit where the byte's own top bit is clear.
std::size_t plain_prefix(std::string_view text) {
    constexpr std::uint64_t k_ones = 0x0101010101010101ULL;
    constexpr std::uint64_t k_tops = 0x8080808080808080ULL;
    auto below = [&](std::uint64_t word, std::uint64_t limit) {
        return (word - k_ones * limit) & ~word & k_tops;
    };
    std::size_t at = 0;
    for (; at + sizeof(std::uint64_t) <= text.size(); at += sizeof(std::uint64_t)) {
        std::uint64_t word = 0;
        std::memcpy(&word, text.data() + at, sizeof word);
        if (below(word, 0x20) | below(word ^ (k_ones * '"'), 1) | below(word ^ (k_ones * '\\'), 1))
            break;
    }
    for (; at < text.size(); ++at) {
        auto byte = static_cast<unsigned char>(text[at]);
        if (byte < 0x20 || byte == '"' || byte == '\\') break;
    }
    return at;
}

} // namespace

void write_canonical_string(std::string_view text, std::string& out) {
    out += '"';
    auto plain = plain_prefix(text);
    std::size_t run_start = 0;
    for (std::size_t i = plain; i < text.size(); ++i) {
        char c = text[i];
        auto byte = static_cast<unsigned char>(c);
        if (byte >= 0x20 && c != '"' && c != '\\') continue;
        // Copy the plain run before this character in one go.
        out.append(text.substr(run_start, i - run_start));
        run_start = i + 1;
        switch (c) {
        case '"':
            out += "\\\"";
            break;
        case '\\':
            out += "\\\\";
            break;
        case '\b':
            out += "\\b";
            break;
        case '\f':
            out += "\\f";
            break;
        case '\n':
            out += "\\n";
            break;
        case '\r':
            out += "\\r";
            break;
        case '\t':
            out += "\\t";
            break;
        default:
            out += fmt::format("\\u{:04x}", byte);
        }
    }
    out.append(text.substr(run_start));
    out += '"';
}

// One spelling per number: integers (and doubles with an exact integer value
// below 2^53) in plain decimal, other doubles in the shortest form that
// reads back to the same double; -0 is 0.
void write_canonical_number(simdjson::dom::element element, std::string& out) {
    if (element.is_int64()) {
        append_decimal(out, int64_t(element));
        return;
    }
    if (element.is_uint64()) {
        append_decimal(out, uint64_t(element));
        return;
    }
    double value = double(element);
    constexpr double k_exact_integer_limit = 9007199254740992.0; // 2^53
    if (value == 0) {
        out += '0';
    } else if (std::trunc(value) == value && std::fabs(value) < k_exact_integer_limit) {
        append_decimal(out, static_cast<int64_t>(value));
    } else {
        fmt::format_to(std::back_inserter(out), "{}", value);
    }
}

namespace {

const std::vector<const FieldPath*> k_nothing_ignored;

// What the ignored paths say of the names at `depth`: `given` when made
// ready (the run's top level, and what it says one level down, and so
// on), nothing when no path reaches this deep, else made here.
const IgnoredNames& names_at(const IgnoredNames* given,
                             const std::vector<const FieldPath*>& ignored, std::size_t depth,
                             std::optional<IgnoredNames>& here) {
    static const IgnoredNames k_no_names;
    if (given) return *given;
    if (ignored.empty()) return k_no_names;
    return here.emplace(ignored, depth);
}

// By key bytes, stably, so repeated keys keep their order and stay
// distinguishable. Insertion sort for the usual few members: stable, and
// no buffer to allocate.
void sort_members(std::vector<std::pair<std::string_view, simdjson::dom::element>>& members) {
    constexpr std::size_t k_insertion_sort_limit = 24;
    auto by_key = [](const auto& a, const auto& b) { return a.first < b.first; };
    if (members.size() > k_insertion_sort_limit) {
        std::stable_sort(members.begin(), members.end(), by_key);
        return;
    }
    for (std::size_t i = 1; i < members.size(); ++i) {
        auto member = members[i];
        auto j = i;
        for (; j > 0 && by_key(member, members[j - 1]); --j)
            members[j] = members[j - 1];
        members[j] = member;
    }
}

} // namespace

namespace {

// Tags keep values of different types apart (1 and "1", [] and {}).
enum class HashTag : std::uint64_t { null = 1, yes, no, integer, big, real, text, array, object };

// The murmur3 finalizer: every input bit moves every output bit.
std::uint64_t mix(std::uint64_t value) {
    value ^= value >> 33;
    value *= 0xff51afd7ed558ccdULL;
    value ^= value >> 33;
    value *= 0xc4ceb9fe1a85ec53ULL;
    value ^= value >> 33;
    return value;
}

std::uint64_t tagged(HashTag tag, std::uint64_t value) {
    return mix(value + 0x9e3779b97f4a7c15ULL * static_cast<std::uint64_t>(tag));
}

// The high and low halves of a 64 x 64-bit product, folded.
__extension__ using Product = unsigned __int128; // GCC's and Clang's, on 64-bit targets
std::uint64_t multiply_fold(std::uint64_t a, std::uint64_t b) {
    auto product = static_cast<Product>(a) * b;
    return static_cast<std::uint64_t>(product) ^ static_cast<std::uint64_t>(product >> 64);
}

std::uint64_t load_u32(const char* bytes) {
    std::uint32_t value;
    std::memcpy(&value, bytes, sizeof value);
    return value;
}

// A text hashed with a seed. Member names and most values are 16 bytes or
// fewer: those take two folded multiplications of their bytes (read as
// wyhash reads them, overlapping, never past the text), inline; a call
// into XXH3 for each was most of the hash of an event's ~30 members.
// Longer texts go to XXH3. Only compared within one run.
std::uint64_t seeded_hash(std::string_view text, std::uint64_t seed) {
    constexpr std::uint64_t k_spread = 0xa0761d6478bd642fULL, k_other = 0xe7037ed1a0b428dbULL;
    auto size = text.size();
    if (size > 16) return XXH3_64bits_withSeed(text.data(), size, seed);
    const char* bytes = text.data();
    std::uint64_t a = 0, b = 0;
    if (size >= 4) {
        auto step = (size >> 3) << 2; // 0 below 8 bytes, 4 from 8
        a = (load_u32(bytes) << 32) | load_u32(bytes + step);
        b = (load_u32(bytes + size - 4) << 32) | load_u32(bytes + size - 4 - step);
    } else if (size > 0) {
        auto byte = [&](std::size_t at) {
            return std::uint64_t{static_cast<unsigned char>(bytes[at])};
        };
        a = (byte(0) << 16) | (byte(size >> 1) << 8) | byte(size - 1);
    }
    return multiply_fold(k_other ^ size, multiply_fold(a ^ k_other, b ^ seed ^ k_spread));
}

std::uint64_t hash_text(std::string_view text) {
    return seeded_hash(text, static_cast<std::uint64_t>(HashTag::text));
}

// A member: its name hashed with its value's hash as the seed (a seed
// moves every output bit), so one pass over the name ties the two, with
// no mixing rounds of its own for each member to wait on: the hash of an
// event's ~30 members is bound by such chains, not by its bytes.
std::uint64_t hash_member(std::string_view name, std::uint64_t value) {
    return seeded_hash(name, value);
}

// The same equalities as write_canonical_number's spellings: an INT64
// element is an integer, a UINT64 one a big integer (simdjson makes one
// only past INT64_MAX), and a double an integer when it is one exactly.
std::uint64_t hash_double(double value) {
    constexpr double k_exact_integer_limit = 9007199254740992.0; // 2^53
    if (value == 0) return tagged(HashTag::integer, 0);
    if (std::trunc(value) == value && std::fabs(value) < k_exact_integer_limit)
        return tagged(HashTag::integer, static_cast<std::uint64_t>(static_cast<int64_t>(value)));
    return tagged(HashTag::real, std::bit_cast<std::uint64_t>(value));
}

} // namespace

std::uint64_t hash_canonical(simdjson::dom::element element,
                             const std::vector<const FieldPath*>& ignored, std::size_t depth,
                             const IgnoredNames* names_here) {
    using simdjson::dom::element_type;
    switch (element.type()) {
    case element_type::OBJECT: {
        std::uint64_t sum = 0, members = 0;
        if (!names_here && ignored.empty()) {
            // No path reaches here (most objects of a record): no names
            // to look each member up among.
            for (auto field : simdjson::dom::object(element)) {
                sum += hash_member(field.key,
                                   hash_canonical(field.value, k_nothing_ignored, depth + 1));
                ++members;
            }
            return tagged(HashTag::object, sum ^ mix(members));
        }
        std::optional<IgnoredNames> here;
        const auto& names = names_at(names_here, ignored, depth, here);
        for (auto field : simdjson::dom::object(element)) {
            const auto* said = names.find(field.key);
            if (said && said->skip) continue;
            auto value = hash_canonical(field.value, said ? said->inner : k_nothing_ignored,
                                        depth + 1, said ? said->inside.get() : nullptr);
            sum += hash_member(field.key, value);
            ++members;
        }
        return tagged(HashTag::object, sum ^ mix(members));
    }
    case element_type::ARRAY: {
        std::uint64_t hash = static_cast<std::uint64_t>(HashTag::array);
        std::size_t index = 0;
        std::optional<IgnoredNames> here;
        const auto& names = names_at(names_here, ignored, depth, here);
        for (auto item : simdjson::dom::array(element)) {
            const IgnoredNames::Name* said = nullptr;
            if (names.any()) said = names.find(std::to_string(index++));
            if (said && said->skip) continue;
            auto value = hash_canonical(item, said ? said->inner : k_nothing_ignored, depth + 1,
                                        said ? said->inside.get() : nullptr);
            hash = mix(hash * 0x9e3779b97f4a7c15ULL + value);
        }
        return tagged(HashTag::array, hash);
    }
    case element_type::STRING:
        return hash_text(std::string_view(element));
    // The type is known: read without checking it again.
    case element_type::INT64:
        return tagged(HashTag::integer,
                      static_cast<std::uint64_t>(element.get_int64().value_unsafe()));
    case element_type::UINT64:
        return tagged(HashTag::big, element.get_uint64().value_unsafe());
    case element_type::DOUBLE:
        return hash_double(element.get_double().value_unsafe());
    case element_type::BOOL:
        return tagged(bool(element) ? HashTag::yes : HashTag::no, 0);
    case element_type::NULL_VALUE:
        return tagged(HashTag::null, 0);
    }
    return 0;
}

void write_canonical(simdjson::dom::element element, const std::vector<const FieldPath*>& ignored,
                     std::size_t depth, std::string& out, const IgnoredNames* names_here) {
    using simdjson::dom::element_type;
    switch (element.type()) {
    case element_type::OBJECT: {
        // One member list per depth, kept by the thread: this runs per
        // record on the hot path, and a fresh vector (and stable_sort's
        // buffer) per object was most of its allocations. A deque, so a
        // deeper level never moves a shallower one's list.
        thread_local std::deque<std::vector<std::pair<std::string_view, simdjson::dom::element>>>
            lists;
        while (lists.size() <= depth)
            lists.emplace_back();
        auto& members = lists[depth];
        members.clear();
        for (auto field : simdjson::dom::object(element))
            members.emplace_back(field.key, field.value);
        sort_members(members);
        out += '{';
        bool first = true;
        std::optional<IgnoredNames> here;
        const auto& names = names_at(names_here, ignored, depth, here);
        for (const auto& [key, value] : members) {
            const auto* said = names.find(key);
            if (said && said->skip) continue;
            if (!first) out += ',';
            first = false;
            write_canonical_string(key, out);
            out += ':';
            write_canonical(value, said ? said->inner : k_nothing_ignored, depth + 1, out,
                            said ? said->inside.get() : nullptr);
        }
        out += '}';
        return;
    }
    case element_type::ARRAY: {
        out += '[';
        std::size_t index = 0;
        bool first = true;
        std::optional<IgnoredNames> here;
        const auto& names = names_at(names_here, ignored, depth, here);
        for (auto item : simdjson::dom::array(element)) {
            const IgnoredNames::Name* said = nullptr;
            if (names.any()) said = names.find(std::to_string(index++));
            if (said && said->skip) continue;
            if (!first) out += ',';
            first = false;
            write_canonical(item, said ? said->inner : k_nothing_ignored, depth + 1, out,
                            said ? said->inside.get() : nullptr);
        }
        out += ']';
        return;
    }
    case element_type::STRING:
        write_canonical_string(std::string_view(element), out);
        return;
    case element_type::INT64:
    case element_type::UINT64:
    case element_type::DOUBLE:
        write_canonical_number(element, out);
        return;
    case element_type::BOOL:
        out += bool(element) ? "true" : "false";
        return;
    case element_type::NULL_VALUE:
        out += "null";
        return;
    }
}

} // namespace detail

std::optional<std::string> canonical_json(std::string_view json,
                                          const std::vector<FieldPath>& ignored) {
    simdjson::dom::parser parser;
    simdjson::dom::element root;
    simdjson::padded_string padded(json);
    if (parser.parse(padded).get(root) != simdjson::SUCCESS) return std::nullopt;
    std::vector<const FieldPath*> ignored_paths;
    for (const auto& path : ignored)
        ignored_paths.push_back(&path);
    std::string out;
    detail::write_canonical(root, ignored_paths, 0, out);
    return out;
}

} // namespace idem::record
