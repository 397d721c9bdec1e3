#include "app.hpp"

#include "commands.hpp"
#include "idem_version.hpp"

#include <fmt/format.h>

namespace idem::cli {

std::string version_line() {
    return fmt::format("idem {} ({})", k_idem_version, k_idem_commit);
}

void build_app(CLI::App& app, std::function<int()>& action) {
    app.description(
        "idem: check, dedup, reorder and safely re-send webhook deliveries and event streams");
    app.name("idem");
    app.require_subcommand(1);
    app.set_version_flag("--version", version_line());
    app.footer("Records are NDJSON (plain events or delivery envelopes); see docs/records.md.\n"
               "Exit codes: 0 clean, 1 findings, 2 usage, 3 bad input, 4 store or I/O failure.\n"
               "Run 'idem COMMAND --help' for a command's flags and an example.");
    register_verify(app, action);
    register_sign(app, action);
    register_dedup(app, action);
    register_reorder(app, action);
    register_merge(app, action);
    register_states(app, action);
    register_reconcile(app, action);
    register_audit(app, action);
    register_listen(app, action);
    register_replay(app, action);
    register_probe(app, action);
}

} // namespace idem::cli
