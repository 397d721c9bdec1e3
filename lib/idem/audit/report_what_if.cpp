// The what-if section of `idem audit`'s reports (--what-if, --suggest).

#include "idem/audit/detail/report_out.hpp"
#include "idem/audit/detail/wording.hpp"
#include "idem/record/annotate.hpp"
#include "idem/util/render.hpp"
#include "idem/util/text.hpp"
#include "idem/util/time.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <set>

namespace idem::audit::detail {

// --what-if and --suggest, as text (a table or Markdown).
void render_what_if(const FindingsSummary& summary, std::string& out, bool markdown,
                    const TableLine& fit) {
    if (!summary.what_if) return;
    const auto& what_if = *summary.what_if;
    auto mib = [](std::uint64_t held, std::uint64_t per) {
        auto bytes = static_cast<double>(held * per);
        if (bytes < 1024) return fmt::format("{:.0f} B", bytes);
        if (bytes < 1024.0 * 1024) return fmt::format("{:.1f} KiB", bytes / 1024);
        if (bytes < 1024.0 * 1024 * 1024) return fmt::format("{:.1f} MiB", bytes / (1024 * 1024));
        return fmt::format("{:.1f} GiB", bytes / (1024.0 * 1024 * 1024));
    };
    // A duplicate a setting let through: a row of the table, or an indented line.
    auto missed_line = [&](const WhatIf::Missed& missed, std::string_view indent) {
        out += markdown
                   ? fmt::format("| | missed: {} came {} after its claim | | | | | |\n",
                                 markdown_text(missed.key), format_duration(missed.after_claim))
                   : fit(fmt::format("{}missed {}: came {} after its claim", indent, missed.key,
                                     format_duration(missed.after_claim))) +
                         "\n";
    };
    if (!what_if.settings.empty())
        out += markdown
                   ? "\n### What if the dedup key had lived longer?\n\n"
                     "| TTL | duplicates | caught | missed | fingerprints held | SQLite | Redis |\n"
                     "|---|---|---|---|---|---|---|\n"
                   : "\nwhat if the dedup key had lived...\n";
    for (const auto& setting : what_if.settings) {
        auto ttl = format_duration(setting.ttl);
        out +=
            markdown
                ? fmt::format("| {} | {} | {} | {} | {} | {} | {} |\n", ttl, setting.duplicates,
                              setting.caught, setting.missed, setting.held,
                              mib(setting.held, k_bytes_per_fingerprint_sqlite),
                              mib(setting.held, k_bytes_per_fingerprint_redis))
                : fit(fmt::format("  {:>6}: caught {} of {}, missed {}; ~{} held (SQLite {}, "
                                  "Redis {})",
                                  ttl, setting.caught, setting.duplicates, setting.missed,
                                  setting.held, mib(setting.held, k_bytes_per_fingerprint_sqlite),
                                  mib(setting.held, k_bytes_per_fingerprint_redis))) +
                      "\n";
        for (const auto& missed : setting.examples)
            missed_line(missed, "          ");
    }
    if (!what_if.keys.empty())
        out += markdown ? "\n### What if another key had been the idempotency key?\n\n"
                          "| key | records | duplicates | caught | missed | groups mixing "
                          "payloads | copies swallowed |\n|---|---|---|---|---|---|---|\n"
                        : "\nwhat if the idempotency key had been...\n";
    for (const auto& key : what_if.keys) {
        auto ttl = format_duration(key.ttl);
        out +=
            markdown
                ? fmt::format("| {} (TTL {}) | {} | {} | {} | {} | {} | {} |\n",
                              markdown_text(key.key), ttl, key.records, key.duplicates, key.caught,
                              key.missed, key.conflicting_groups, key.swallowed)
                : fit(fmt::format("  {}: caught {} of {} (TTL {}), missed {}; {} group{} "
                                  "mixing payloads",
                                  key.key, key.caught, key.duplicates, ttl, key.missed,
                                  key.conflicting_groups, key.conflicting_groups == 1 ? "" : "s")) +
                      "\n";
        for (const auto& conflict : key.conflict_examples)
            out += markdown
                       ? fmt::format("| | would swallow another intent under {} | | | | | |\n",
                                     markdown_text(conflict))
                       : fit(fmt::format("      would swallow another intent under {}", conflict)) +
                             "\n";
        for (const auto& missed : key.examples)
            missed_line(missed, "      ");
    }
    if (summary.other_keys > 0)
        out += fmt::format("{}{} duplicate{} came under a new key (key-regenerated): no TTL on the "
                           "key catches {}; dedup on the business fingerprint would\n",
                           markdown ? "\n" : "  ", summary.other_keys,
                           summary.other_keys == 1 ? "" : "s",
                           summary.other_keys == 1 ? "it" : "them");
    if (!what_if.suggestions.empty()) {
        out += markdown ? "\n### Suggested TTL\n\n| covers | TTL | fingerprints held | SQLite "
                          "| Redis |\n|---|---|---|---|---|\n"
                        : "the TTL that would have caught, of the duplicates,\n";
        for (const auto& suggestion : what_if.suggestions) {
            auto covers = fmt::format("{:g}%", suggestion.coverage * 100);
            out += markdown ? fmt::format("| {} | {} | {} | {} | {} |\n", covers,
                                          format_duration(suggestion.ttl), suggestion.held,
                                          mib(suggestion.held, k_bytes_per_fingerprint_sqlite),
                                          mib(suggestion.held, k_bytes_per_fingerprint_redis))
                            : fmt::format("  {:>6}: --ttl {} (~{} held, SQLite {}, Redis {})\n",
                                          covers, format_duration(suggestion.ttl), suggestion.held,
                                          mib(suggestion.held, k_bytes_per_fingerprint_sqlite),
                                          mib(suggestion.held, k_bytes_per_fingerprint_redis));
        }
        std::string histogram;
        for (std::size_t b = 0; b < what_if.delays.size(); ++b)
            if (what_if.delays[b] > 0)
                histogram += fmt::format("{}{} {}", histogram.empty() ? "" : ", ",
                                         k_delay_buckets[b], what_if.delays[b]);
        out += fmt::format("{}delays of duplicates after their key's first copy: {}\n",
                           markdown ? "\n" : "  ", histogram);
    }
}

nlohmann::json what_if_json(const FindingsSummary& summary) {
    const auto& what_if = *summary.what_if;
    // Keys are JSON text in the report's tables; here, the value.
    auto key_value = [](const std::string& text) {
        auto value = nlohmann::json::parse(text, nullptr, false);
        return value.is_discarded() ? nlohmann::json(text) : value;
    };
    auto missed_examples = [&](const std::vector<WhatIf::Missed>& examples) {
        auto missed = nlohmann::json::array();
        for (const auto& example : examples)
            missed.push_back({{"key", key_value(example.key)},
                              {"after_claim_seconds",
                               std::chrono::duration<double>(example.after_claim).count()}});
        return missed;
    };
    nlohmann::json json;
    auto& settings = json["settings"] = nlohmann::json::array();
    for (const auto& setting : what_if.settings) {
        nlohmann::json item{{"ttl", format_duration(setting.ttl)},
                            {"ttl_seconds", std::chrono::duration<double>(setting.ttl).count()},
                            {"duplicates", setting.duplicates},
                            {"caught", setting.caught},
                            {"missed", setting.missed},
                            {"fingerprints_held", setting.held},
                            {"bytes_sqlite", setting.held * k_bytes_per_fingerprint_sqlite},
                            {"bytes_redis", setting.held * k_bytes_per_fingerprint_redis}};
        item["missed_examples"] = missed_examples(setting.examples);
        settings.push_back(std::move(item));
    }
    auto& keys = json["keys"] = nlohmann::json::array();
    for (const auto& key : what_if.keys) {
        nlohmann::json item{{"key", key.key},
                            {"ttl", format_duration(key.ttl)},
                            {"records", key.records},
                            {"duplicates", key.duplicates},
                            {"caught", key.caught},
                            {"missed", key.missed},
                            {"groups_mixing_payloads", key.conflicting_groups},
                            {"copies_swallowed", key.swallowed}};
        auto& conflicts = item["mixing_examples"] = nlohmann::json::array();
        for (const auto& conflict : key.conflict_examples)
            conflicts.push_back(key_value(conflict));
        item["missed_examples"] = missed_examples(key.examples);
        keys.push_back(std::move(item));
    }
    json["other_keys"] = summary.other_keys;
    auto& suggestions = json["suggestions"] = nlohmann::json::array();
    for (const auto& suggestion : what_if.suggestions)
        suggestions.push_back(
            {{"coverage", suggestion.coverage},
             {"ttl", format_duration(suggestion.ttl)},
             {"ttl_seconds", std::chrono::duration<double>(suggestion.ttl).count()},
             {"fingerprints_held", suggestion.held},
             {"bytes_sqlite", suggestion.held * k_bytes_per_fingerprint_sqlite},
             {"bytes_redis", suggestion.held * k_bytes_per_fingerprint_redis}});
    auto& delays = json["delays"] = nlohmann::json::object();
    for (std::size_t b = 0; b < what_if.delays.size(); ++b)
        delays[k_delay_buckets[b]] = what_if.delays[b];
    json["timed_duplicates"] = what_if.timed_duplicates;
    return json;
}

} // namespace idem::audit::detail
