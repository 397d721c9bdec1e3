#pragma once
// The subcommand table: each register_<command> adds its flags and, when the
// command is chosen, sets `action` to run it and return the exit code.

#include <CLI/CLI.hpp>
#include <functional>

namespace idem::cli {

void register_verify(CLI::App& app, std::function<int()>& action);
void register_sign(CLI::App& app, std::function<int()>& action);
void register_dedup(CLI::App& app, std::function<int()>& action);
void register_reorder(CLI::App& app, std::function<int()>& action);
void register_merge(CLI::App& app, std::function<int()>& action);
void register_states(CLI::App& app, std::function<int()>& action);
void register_reconcile(CLI::App& app, std::function<int()>& action);
void register_audit(CLI::App& app, std::function<int()>& action);
void register_listen(CLI::App& app, std::function<int()>& action);
void register_replay(CLI::App& app, std::function<int()>& action);
void register_probe(CLI::App& app, std::function<int()>& action);

} // namespace idem::cli
