#pragma once
// The entity-state role (states): each entity's last state and version, so
// that tomorrow's log is judged against today's end state. States are
// opaque bytes here (states/ encodes them).

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace idem::store {

class EntityStore {
public:
    virtual ~EntityStore() = default;

    // The state of each named entity within `scope`, nullopt for one the
    // store does not know.
    virtual std::vector<std::optional<std::string>>
    load_entities(std::string_view scope, const std::vector<std::string>& entities) = 0;
    // Saved within the transaction that commit() ends.
    virtual void save_entities(std::string_view scope,
                               const std::vector<std::pair<std::string, std::string>>& states) = 0;
    virtual void clear_entities(std::string_view scope) = 0;
};

} // namespace idem::store
