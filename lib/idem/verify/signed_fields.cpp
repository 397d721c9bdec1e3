// construction: signed-fields: a JSON body of items, each signed over some
// of its own fields (Adyen's HMAC notifications: a batch of
// NotificationRequestItems, each with additionalData.hmacSignature over
// pspReference:originalReference:...:success).

#include "idem/util/text.hpp"
#include "idem/verify/detail/schemes.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace idem::verify::detail {

namespace {

// At most this many items are checked: a batch past it is refused, so a
// hostile body cannot multiply the work per record.
constexpr std::size_t k_max_signed_items = 1000;

const nlohmann::json* member(const nlohmann::json& at, const std::vector<std::string>& path) {
    const auto* node = &at;
    for (const auto& name : path) {
        if (!node->is_object()) return nullptr;
        auto found = node->find(name);
        if (found == node->end()) return nullptr;
        node = &*found;
    }
    return node;
}

// A field's text as the providers' SDKs join it: a string as it is, a
// number or a boolean as written, nothing (absent, null) as empty.
std::string field_text(const nlohmann::json* value) {
    if (!value || value->is_null()) return {};
    if (value->is_string()) return value->get<std::string>();
    if (value->is_boolean() || value->is_number_integer() || value->is_number_unsigned())
        return value->dump();
    return value->dump();
}

Verdict refused_item(std::size_t position, std::size_t count, const std::string& why) {
    return invalid(Scheme::provider, fmt::format("item {} of {}: {}", position + 1, count, why));
}

} // namespace

Verdict verify_signed_fields(Input& input, const ProviderSpec& spec) {
    auto body = nlohmann::json::parse(input.envelope.body, nullptr, false);
    if (body.is_discarded())
        return invalid(Scheme::provider, fmt::format("the body is no JSON: {} signs the items "
                                                     "of a JSON body",
                                                     spec.name));
    const auto* items = member(body, spec.signed_items);
    auto items_name = fmt::format("{}", fmt::join(spec.signed_items, "."));
    if (!items || !items->is_array() || items->empty())
        return invalid(Scheme::provider,
                       fmt::format("no items at {} in the body (a non-empty array)", items_name));
    if (items->size() > k_max_signed_items)
        return invalid(Scheme::provider,
                       fmt::format("{} holds {} items: at most {} are checked", items_name,
                                   items->size(), k_max_signed_items));
    const auto& keys = input.keys.hmac(key_derivation(spec), spec.algorithm, Scheme::provider);
    std::optional<std::string> label;
    std::string first_signature;
    std::string signed_content; // every item's signed text, a line each
    auto count = items->size();
    for (std::size_t position = 0; position < count; ++position) {
        const auto* item = &(*items)[position];
        if (!spec.item_member.empty()) item = member(*item, {spec.item_member});
        if (!item || !item->is_object())
            return refused_item(position, count,
                                spec.item_member.empty()
                                    ? std::string("not an object")
                                    : fmt::format("no {} object", quote(spec.item_member, 40)));
        const auto* signature = member(*item, spec.signature_path);
        if (!signature || !signature->is_string() || signature->get<std::string>().empty())
            return refused_item(
                position, count,
                fmt::format("no signature at {}", fmt::join(spec.signature_path, ".")));
        auto text = signature->get<std::string>();
        auto decoded = decode_signature(text, spec.encoding, crypto::digest_size(spec.algorithm),
                                        "the signature");
        if (!decoded.bytes) return refused_item(position, count, decoded.problem);
        std::string data;
        for (std::size_t n = 0; n < spec.signed_fields.size(); ++n) {
            if (n > 0) data += spec.field_separator;
            data += field_text(member(*item, spec.signed_fields[n]));
        }
        SignatureSet one;
        one.push_back(*decoded.bytes);
        auto matched_by = match_hmac(keys, one, {data});
        if (!matched_by) return refused_item(position, count, no_match_reason(keys.size(), 1));
        if (!label) {
            label = matched_by;
            first_signature = text;
        }
        signed_content.append(data).push_back('\n');
    }
    auto verdict =
        matched(input, Scheme::provider, *label, first_signature, std::nullopt, {signed_content});
    if (count > 1) verdict.reason = fmt::format("all {} items' signatures match", count);
    return verdict;
}

} // namespace idem::verify::detail
