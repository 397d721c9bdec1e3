#include "file_flags.hpp"

#include "common.hpp"

#include "idem/io/file_paths.hpp"
#include "idem/run/input_paths.hpp"
#include "idem/store/location.hpp"
#include "idem/util/errors.hpp"

#include <filesystem>
#include <string_view>

namespace idem::cli {

namespace {

enum class FileFlag {
    input,           // a file read: inputs, --rules, --csv
    labelled_input,  // [LABEL=]FILE (--secret-file): a path that exists as given wins
    stage_input,     // NAME=FILE (reconcile --stage): NAME=span:... names no file
    output,          // written in place or replaced (-o, --reject, --dups)
    replaced_output, // replaced whole by a rename (--metrics): a regular file or nothing
    store,           // --store: a SQLite file (and its journals) written, or a URI
};

struct FileFlagEntry {
    std::string_view command; // "" for every command that has the flag
    std::string_view flag;    // the long name, or "inputs" for the positional files
    FileFlag kind;
};

// Every flag of every command that names a file. A flag that names a file
// and is missing here escapes the check: tests/e2e/test_outputs.py names
// each output flag of each command.
constexpr FileFlagEntry k_file_flags[] = {
    {"", "inputs", FileFlag::input},
    {"", "--csv", FileFlag::input},
    {"", "--sqlite", FileFlag::input},
    {"", "--replay-ledger", FileFlag::input},
    {"", "--traces", FileFlag::input},
    {"", "--rules", FileFlag::input},
    {"", "--machine", FileFlag::input},
    {"", "--provider-file", FileFlag::input},
    {"", "--secret-file", FileFlag::labelled_input},
    {"", "--stage", FileFlag::stage_input},
    {"", "--output", FileFlag::output},
    {"", "--out", FileFlag::output},
    {"", "--reject", FileFlag::output},
    {"", "--dups", FileFlag::output},
    {"", "--counts", FileFlag::output},
    {"reorder", "--late", FileFlag::output}, // probe's --late is a duration
    {"merge", "--late", FileFlag::output},
    {"probe", "--template", FileFlag::input},
    {"probe", "--effects-sqlite", FileFlag::input},
    {"probe", "--ledger", FileFlag::output},
    {"", "--unmatched", FileFlag::output},
    {"", "--members", FileFlag::output},
    {"", "--gaps", FileFlag::output},
    {"", "--invalid", FileFlag::output},
    {"reconcile", "--missing", FileFlag::output}, // dedup's and merge's --missing is a policy
    {"", "--metrics", FileFlag::replaced_output},
    {"", "--store", FileFlag::store},
};

const FileFlagEntry* entry_of(std::string_view command, std::string_view flag) {
    for (const auto& entry : k_file_flags)
        if (entry.flag == flag && (entry.command.empty() || entry.command == command))
            return &entry;
    return nullptr;
}

// The file a value names, or "" when it names none.
std::string file_of(const std::string& value, FileFlag kind) {
    switch (kind) {
    case FileFlag::labelled_input: {
        std::error_code ignored;
        auto equals = value.find('=');
        if (equals == std::string::npos || std::filesystem::exists(value, ignored)) return value;
        return value.substr(equals + 1);
    }
    case FileFlag::stage_input: {
        auto equals = value.find('=');
        if (equals == std::string::npos) return "";
        auto file = value.substr(equals + 1);
        return file.starts_with("span:") ? "" : file;
    }
    case FileFlag::store: {
        if (value.empty()) return ""; // audit's and reconcile's --store have no default
        auto location = store::parse_store_uri(value);
        return location.kind == store::StoreKind::sqlite ? location.path : "";
    }
    case FileFlag::input:
    case FileFlag::output:
    case FileFlag::replaced_output:
        return value;
    }
    return value;
}

} // namespace

void check_file_flags(const CLI::App& app) {
    for (const auto* command : app.get_subcommands()) {
        std::vector<io::NamedPath> inputs;
        std::vector<io::NamedOutput> outputs;
        std::vector<std::string> written;
        for (const auto* option : command->get_options()) {
            auto flag = option->get_positional() || option->get_lnames().empty()
                            ? option->get_name()
                            : "--" + option->get_lnames().front();
            const auto* entry = entry_of(command->get_name(), flag);
            if (!entry) continue;
            auto values = option->results();
            // The store a command keeps state in when --store is not given.
            if (values.empty() && entry->kind == FileFlag::store)
                values.push_back(option->get_default_str());
            for (const auto& value : values) {
                auto file = file_of(value, entry->kind);
                if (file.empty()) continue;
                if (entry->kind == FileFlag::output || entry->kind == FileFlag::store)
                    outputs.push_back({flag, file, io::OutputKind::any});
                else if (entry->kind == FileFlag::replaced_output)
                    outputs.push_back({flag, file, io::OutputKind::regular_only});
                else if (flag == "inputs" && run::is_input_pattern(file))
                    continue; // its matches never include what the run writes
                else
                    inputs.push_back({flag, file});
                if (entry->kind == FileFlag::store)
                    for (const char* journal : {"-wal", "-shm", "-journal"})
                        written.push_back(file + journal);
                if (entry->kind != FileFlag::input && entry->kind != FileFlag::labelled_input &&
                    entry->kind != FileFlag::stage_input)
                    written.push_back(file);
            }
        }
        if (auto clash = io::find_path_clash(inputs, outputs)) throw UsageError(*clash);
        set_written_files(command->get_name(), std::move(written));
    }
}

} // namespace idem::cli
