// The nonce rule every store applies (nonces.hpp, docs/stores.md).

#include "idem/store/nonces.hpp"

namespace idem::store {

NonceDecision judge_nonce(const std::optional<NonceEntry>& kept, const NonceSighting& sighting,
                          Duration window) {
    NonceDecision decision;
    if (!kept) {
        decision.store = true;
        return decision;
    }
    // The same position and the same received_at: this record, read again
    // (a rerun over the same file or the same stdin). A later copy at the
    // same position of another stdin has another received_at.
    if (kept->source == sighting.source && kept->line == sighting.line &&
        kept->first_seen == sighting.received_at) {
        decision.claim = {NonceVerdict::same_record, kept->first_seen};
        return decision;
    }
    auto at = sighting.received_at;
    if (at > kept->first_seen + window) {
        decision.store = true; // the kept one is out of this one's window
        return decision;
    }
    if (at < kept->first_seen - window) return decision; // far earlier: fresh, kept stays
    if (at >= kept->first_seen) {
        decision.claim = {NonceVerdict::replay, kept->first_seen};
        return decision;
    }
    decision.store = true; // it came first: the kept one is its replay
    return decision;
}

std::vector<NonceClaim> NonceStore::claim_nonces(std::span<const NonceRequest> requests) {
    auto claims = claim_batch(requests);
    std::vector<std::size_t> asked;
    std::vector<NonceName> names;
    for (std::size_t i = 0; i < requests.size(); ++i)
        if (claims[i].verdict == NonceVerdict::fresh && !requests[i].earlier_form.empty() &&
            requests[i].earlier_form != requests[i].nonce) {
            asked.push_back(i);
            names.push_back({requests[i].scope, requests[i].earlier_form});
        }
    if (asked.empty()) return claims;
    auto kept = kept_nonces(names);
    for (std::size_t n = 0; n < asked.size(); ++n) {
        if (!kept[n]) continue;
        const auto& request = requests[asked[n]];
        auto decision = judge_nonce(kept[n], request.sighting, request.window);
        if (decision.claim.verdict != NonceVerdict::fresh) claims[asked[n]] = decision.claim;
    }
    return claims;
}

std::vector<NonceClaim> NonceStore::claim_batch(std::span<const NonceRequest> requests) {
    std::vector<NonceClaim> claims;
    claims.reserve(requests.size());
    for (const auto& request : requests)
        claims.push_back(claim_nonce(request.scope, request.nonce, request.sighting, request.window,
                                     request.keep_until));
    return claims;
}

} // namespace idem::store
