#include "idem/reconcile/detail/pending_store.hpp"

#include "idem/store/open_windows.hpp"
#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <limits>
#include <nlohmann/json.hpp>

namespace idem::reconcile::detail {

PendingStore::PendingStore(const ReconcileRunOptions& options)
    : m_current("reconcile " + options.scope), m_before(m_current + " (before)"),
      m_settled(m_current + " (settled)"), m_inputs(fingerprint(options)),
      m_run(std::hash<std::string>{}(m_inputs) | 1) {
    auto location = store::parse_store_uri(options.store_uri);
    if (location.kind == store::StoreKind::memory)
        throw UsageError("reconcile --store keeps pending keys for the next run: a file or "
                         "redis://, not :memory:");
    location.lock_timeout = options.lock_timeout;
    location.cache_bytes = store::k_entity_store_cache_bytes;
    m_store = store::open_store(location);
}

std::vector<CarriedKey> PendingStore::load(std::size_t stages) {
    auto& windows = m_store->open_windows();
    std::string meta;
    auto rows = windows.load_windows(m_current, meta);
    if (!meta.empty() && inputs_of(meta) == m_inputs) {
        // These very inputs were judged already: start from what that run started from.
        m_rerun = true;
        rows = windows.load_windows(m_before, meta);
    } else {
        m_previous = rows;
        m_previous_meta = meta;
    }
    std::vector<CarriedKey> carried;
    carried.reserve(rows.size());
    for (auto& [key, bytes] : rows) {
        auto decoded = decode_carried(key, bytes, stages);
        if (!decoded)
            throw StoreError(fmt::format(
                "store {}: the pending keys of {} were kept for another set of stages (or "
                "are damaged); use another --scope for this flow",
                m_store->describe(), quote(m_current)));
        carried.push_back(std::move(*decoded));
    }
    return carried;
}

void PendingStore::save(const std::vector<CarriedKey>& carry) {
    auto& windows = m_store->open_windows();
    if (!m_rerun) {
        windows.clear_windows(m_before);
        if (!m_previous_meta.empty())
            windows.save_windows(m_before, {std::move(m_previous), {}, m_previous_meta});
    }
    windows.clear_windows(m_current);
    store::WindowChanges changes;
    changes.saved.reserve(carry.size());
    for (const auto& carried : carry)
        changes.saved.emplace_back(carried.key, encode_carried(carried));
    changes.meta = nlohmann::json{{"inputs", m_inputs}}.dump();
    windows.save_windows(m_current, changes);
    m_store->commit();
}

RememberedKeys PendingStore::load_settled(std::size_t stages) {
    std::string meta;
    RememberedKeys remembered(stages);
    for (auto& [key, bytes] : m_store->open_windows().load_windows(m_settled, meta)) {
        auto decoded = decode_remembered(bytes, stages);
        if (!decoded)
            throw StoreError(fmt::format("store {}: the settled keys of {} were kept for "
                                         "another set of stages (or are damaged); use "
                                         "another --scope for this flow",
                                         m_store->describe(), quote(m_current)));
        if (decoded->run == m_run) continue;
        remembered.add(key, *decoded);
    }
    return remembered;
}

void PendingStore::save_settled(
    std::vector<std::tuple<std::string, std::string, std::int64_t>>& settled,
    const RememberedKeys& remembered, std::optional<Timestamp> now, Duration remember) {
    store::WindowChanges changes;
    auto cutoff = now ? now->time_since_epoch().count() - remember.count()
                      : std::numeric_limits<std::int64_t>::min();
    remembered.for_each([&](std::string_view key, std::int64_t settled_us) {
        if (settled_us != 0 && settled_us < cutoff) changes.removed.emplace_back(key);
    });
    for (auto& [key, bytes, settled_us] : settled) {
        if (settled_us != 0 && settled_us < cutoff) continue;
        // The run that settled it: the last 8 bytes (encode_remembered).
        std::memcpy(bytes.data() + bytes.size() - sizeof m_run, &m_run, sizeof m_run);
        changes.saved.emplace_back(std::move(key), std::move(bytes));
    }
    m_store->open_windows().save_windows(m_settled, changes);
    m_store->commit();
}

std::string PendingStore::fingerprint(const ReconcileRunOptions& options) {
    nlohmann::json inputs = nlohmann::json::array();
    auto add = [&](const std::string& name, const std::string& path) {
        if (path == "-") {
            inputs.push_back(
                {name, "-", std::chrono::system_clock::now().time_since_epoch().count()});
            return;
        }
        std::error_code error;
        auto size = std::filesystem::file_size(path, error);
        auto modified = std::filesystem::last_write_time(path, error);
        inputs.push_back({name, std::filesystem::absolute(path, error).string(), error ? 0 : size,
                          modified.time_since_epoch().count()});
    };
    for (const auto& stage : options.stages)
        if (stage.span.empty()) add(stage.name, stage.path);
    if (!options.traces_path.empty()) add("traces", options.traces_path);
    return inputs.dump();
}

std::string PendingStore::inputs_of(const std::string& meta) {
    auto json = nlohmann::json::parse(meta, nullptr, false);
    if (!json.is_object() || !json.contains("inputs") || !json["inputs"].is_string()) return {};
    return json["inputs"].get<std::string>();
}

} // namespace idem::reconcile::detail
