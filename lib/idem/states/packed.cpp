// How an event waits in `idem states`' sequencer, and how an entity's state
// is kept in the store (detail/worker.hpp).

#include "idem/states/detail/worker.hpp"

#include <cstring>
#include <nlohmann/json.hpp>

namespace idem::states::detail {

namespace {

bool take(std::string_view& in, std::string_view& text) {
    std::uint32_t size = 0;
    if (in.size() < sizeof size) return false;
    std::memcpy(&size, in.data(), sizeof size);
    in.remove_prefix(sizeof size);
    if (in.size() < size) return false;
    text = in.substr(0, size);
    in.remove_prefix(size);
    return true;
}

template <typename Number> bool take_number(std::string_view& in, Number& number) {
    if (in.size() < sizeof number) return false;
    std::memcpy(&number, in.data(), sizeof number);
    in.remove_prefix(sizeof number);
    return true;
}

} // namespace

std::optional<Packed> unpack(std::string_view in) {
    Packed packed;
    std::uint8_t versioned = 0;
    std::int64_t version = 0, time = 0;
    if (!take(in, packed.event.entity) || !take(in, packed.event.state) ||
        !take(in, packed.event.operation) || !take(in, packed.event.position) ||
        !take_number(in, versioned) || !take_number(in, version) || !take_number(in, time) ||
        !take_number(in, packed.event.entity_hash))
        return std::nullopt;
    if (versioned) packed.event.version = version;
    packed.event.time = Timestamp(Duration(time));
    packed.record = in;
    return packed;
}

std::string encode_state(const EntityState& state) {
    nlohmann::json json = nlohmann::json::array(
        {state.state, state.operation,
         state.version ? nlohmann::json(*state.version) : nlohmann::json(nullptr),
         state.last_at.time_since_epoch().count(), state.events, state.findings});
    auto cbor = nlohmann::json::to_cbor(json);
    return {cbor.begin(), cbor.end()};
}

std::optional<EntityState> decode_state(std::string_view bytes) {
    try {
        auto json = nlohmann::json::from_cbor(bytes.begin(), bytes.end());
        EntityState state;
        state.state = json.at(0).get<std::string>();
        state.operation = json.at(1).get<std::string>();
        if (!json.at(2).is_null()) state.version = json.at(2).get<std::int64_t>();
        state.last_at = Timestamp(Duration(json.at(3).get<std::int64_t>()));
        state.events = json.at(4).get<std::uint64_t>();
        state.findings = json.at(5).get<std::uint32_t>();
        return state;
    } catch (const nlohmann::json::exception&) {
        return std::nullopt;
    }
}

} // namespace idem::states::detail
