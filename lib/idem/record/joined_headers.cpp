#include "idem/record/joined_headers.hpp"

#include "idem/util/text.hpp"

namespace idem::record {

namespace {
bool any_name_repeats(const std::vector<Header>& headers) {
    // Envelopes carry a few dozen headers at most: pairs are cheaper than a set.
    for (std::size_t i = 0; i < headers.size(); ++i)
        for (std::size_t j = i + 1; j < headers.size(); ++j)
            if (iequals(headers[i].name, headers[j].name)) return true;
    return false;
}
} // namespace

const Envelope& JoinedHeaders::join(const Envelope& envelope) {
    if (!any_name_repeats(envelope.headers)) return envelope;
    m_values.clear();
    m_joined = envelope;
    m_joined.headers.clear();
    std::vector<bool> taken(envelope.headers.size(), false);
    for (std::size_t i = 0; i < envelope.headers.size(); ++i) {
        if (taken[i]) continue;
        const auto& first = envelope.headers[i];
        std::string* joined = nullptr;
        for (std::size_t j = i + 1; j < envelope.headers.size(); ++j) {
            if (!iequals(envelope.headers[j].name, first.name)) continue;
            taken[j] = true;
            if (!joined) joined = &m_values.emplace_back(first.value);
            joined->append(", ");
            joined->append(envelope.headers[j].value);
        }
        m_joined.headers.push_back({first.name, joined ? std::string_view(*joined) : first.value});
    }
    return m_joined;
}

} // namespace idem::record
