// idem-docgen: the man pages and shell completions, written from the same
// CLI::App the binary runs (cli/app.cpp), so they never drift from --help.
//
//   idem-docgen man OUTDIR EXIT_CODES_MD    idem.1 and idem-COMMAND.1 for every command
//   idem-docgen completion bash|zsh|fish [FILE]   the completion script (stdout without FILE)

#include "app.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <fmt/format.h>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

// --- what the app says ----------------------------------------------------

struct Flag {
    std::vector<std::string> names; // "-o", "--output"
    std::string description;
    bool takes_value = false;
    std::string value_name;           // TEXT, UINT...
    std::vector<std::string> choices; // from an IsMember check: {first,last}
    bool file = false;                // its value is a path
};

struct Command {
    std::string name, description, footer;
    std::vector<Flag> flags;
};

// Flags whose value is a file or a directory, by name: what a shell should
// complete with paths.
const std::set<std::string> k_path_flags = {
    "output",       "reject",   "dups",      "gaps",     "late",          "invalid",
    "invalid-file", "members",  "unmatched", "rules",    "machine",       "secret-file",
    "csv",          "sqlite",   "spill-dir", "store",    "replay-ledger", "verdicts",
    "out",          "key-file", "keys",      "template", "ledger",        "effects-sqlite"};

std::vector<std::string> choices_of(const std::string& type_name) {
    auto open = type_name.find('{');
    auto close = type_name.find('}', open);
    std::vector<std::string> choices;
    if (open == std::string::npos || close == std::string::npos) return choices;
    std::stringstream list(type_name.substr(open + 1, close - open - 1));
    std::string item;
    while (std::getline(list, item, ','))
        if (!item.empty()) choices.push_back(item);
    return choices;
}

Command command_of(const CLI::App& app) {
    Command command;
    command.name = app.get_name();
    command.description = app.get_description();
    command.footer = app.get_footer();
    for (const auto* option : app.get_options()) {
        if (option->get_positional()) continue;
        Flag flag;
        for (const auto& name : option->get_snames())
            flag.names.push_back("-" + name);
        for (const auto& name : option->get_lnames())
            flag.names.push_back("--" + name);
        if (flag.names.empty()) continue;
        flag.description = option->get_description();
        flag.takes_value = option->get_type_size() != 0 && option->get_expected_max() != 0;
        auto type_name = option->get_type_name();
        flag.choices = choices_of(type_name);
        flag.value_name = type_name.substr(0, type_name.find(':'));
        for (const auto& name : option->get_lnames())
            if (k_path_flags.count(name)) flag.file = true;
        command.flags.push_back(std::move(flag));
    }
    return command;
}

std::vector<Command> commands_of(CLI::App& app) {
    std::vector<Command> commands;
    for (const auto* sub : app.get_subcommands({}))
        commands.push_back(command_of(*sub));
    return commands;
}

// --- man pages --------------------------------------------------------------

// Text as roff: backslashes escaped, a leading '.' or '\'' made literal,
// hyphens as minus signs where they are options.
std::string roff(std::string_view text) {
    std::string out;
    bool line_start = true;
    for (char c : text) {
        if (line_start && (c == '.' || c == '\'')) out += "\\&";
        line_start = c == '\n';
        if (c == '\\')
            out += "\\e";
        else if (c == '-')
            out += "\\-";
        else
            out += c;
    }
    return out;
}

struct ExitCode {
    std::string code, meaning;
};

// The exit-code table of docs/exit-codes.md: the rows' code and meaning.
std::vector<ExitCode> exit_codes(const std::string& path) {
    std::ifstream in(path);
    std::vector<ExitCode> codes;
    std::string line;
    while (std::getline(in, line)) {
        if (line.size() < 4 || line[0] != '|' || !std::isdigit(static_cast<unsigned char>(line[2])))
            continue;
        std::vector<std::string> cells;
        std::stringstream row(line.substr(1));
        std::string cell;
        while (std::getline(row, cell, '|')) {
            auto first = cell.find_first_not_of(' ');
            auto last = cell.find_last_not_of(' ');
            cells.push_back(first == std::string::npos ? "" : cell.substr(first, last - first + 1));
        }
        if (cells.size() < 2) continue;
        auto meaning = cells[1];
        if (cells.size() > 2 && !cells[2].empty()) meaning += ": " + cells[2];
        std::string plain; // no markdown emphasis in a man page
        for (char c : meaning)
            if (c != '*' && c != '`') plain += c;
        codes.push_back({cells[0], plain});
    }
    return codes;
}

// A footer's "Examples:" lines, and the prose before them.
std::pair<std::string, std::vector<std::string>> split_footer(const std::string& footer) {
    auto at = footer.find("Examples:");
    std::string prose = footer.substr(0, at);
    std::vector<std::string> examples;
    if (at != std::string::npos) {
        std::stringstream lines(footer.substr(at + 9));
        std::string line;
        while (std::getline(lines, line)) {
            auto first = line.find_first_not_of(' ');
            if (first != std::string::npos) examples.push_back(line.substr(first));
        }
    }
    while (!prose.empty() && (prose.back() == '\n' || prose.back() == ' '))
        prose.pop_back();
    return {prose, examples};
}

void write_exit_status(std::ostream& out, const std::vector<ExitCode>& codes) {
    out << ".SH EXIT STATUS\n";
    for (const auto& code : codes)
        out << ".TP\n.B " << code.code << "\n" << roff(code.meaning) << "\n";
    out << ".PP\nAny record set aside makes the exit status at least 1; a run that set aside "
           "every record it read exits 3.\n";
}

void write_command_page(std::ostream& out, const Command& command, const std::string& version,
                        const std::vector<ExitCode>& codes, const std::vector<Command>& all) {
    auto upper = command.name;
    std::transform(upper.begin(), upper.end(), upper.begin(), ::toupper);
    out << ".TH IDEM\\-" << upper << " 1 \"\" \"" << version << "\" \"User Commands\"\n";
    out << ".SH NAME\nidem\\-" << command.name << " \\- " << roff(command.description) << "\n";
    out << ".SH SYNOPSIS\n.B idem " << command.name << "\n[\\fIOPTIONS\\fR] [\\fIFILE\\fR...]\n";
    auto [prose, examples] = split_footer(command.footer);
    out << ".SH DESCRIPTION\n" << roff(command.description) << ".\n";
    if (!prose.empty()) out << ".PP\n" << roff(prose) << "\n";
    out << ".PP\nInputs are NDJSON files (or - for standard input), read in order; see "
           "records.md in idem's documentation (share/doc/idem under the install prefix).\n";
    out << ".SH OPTIONS\n";
    for (const auto& flag : command.flags) {
        out << ".TP\n";
        for (std::size_t i = 0; i < flag.names.size(); ++i)
            out << (i ? ", " : "") << "\\fB" << roff(flag.names[i]) << "\\fR";
        if (flag.takes_value)
            out << " \\fI"
                << roff(flag.choices.empty() ? flag.value_name
                                             : "{" +
                                                   [&] {
                                                       std::string joined;
                                                       for (const auto& choice : flag.choices)
                                                           joined +=
                                                               (joined.empty() ? "" : "|") + choice;
                                                       return joined;
                                                   }() +
                                                   "}")
                << "\\fR";
        out << "\n"
            << roff(flag.description.empty() ? "(no description)" : flag.description) << "\n";
    }
    if (!examples.empty()) {
        out << ".SH EXAMPLES\n";
        for (const auto& example : examples)
            out << ".PP\n.nf\n" << roff(example) << "\n.fi\n";
    }
    write_exit_status(out, codes);
    out << ".SH SEE ALSO\n.BR idem (1)";
    for (const auto& other : all)
        if (other.name != command.name) out << ",\n.BR idem\\-" << other.name << " (1)";
    out << "\n";
}

void write_main_page(std::ostream& out, CLI::App& app, const std::vector<Command>& commands,
                     const std::string& version, const std::vector<ExitCode>& codes) {
    out << ".TH IDEM 1 \"\" \"" << version << "\" \"User Commands\"\n";
    out << ".SH NAME\nidem \\- " << roff(app.get_description().substr(6)) << "\n";
    out << ".SH SYNOPSIS\n.B idem\n\\fICOMMAND\\fR [\\fIOPTIONS\\fR] [\\fIFILE\\fR...]\n"
           ".br\n.B idem\n\\-\\-help | \\-\\-version\n";
    out << ".SH DESCRIPTION\nidem checks, dedups, reorders, merges and safely re-sends webhook "
           "deliveries and event streams, and explains afterwards, with evidence, what "
           "happened. Records are NDJSON: plain events or delivery envelopes.\n";
    out << ".SH COMMANDS\n";
    for (const auto& command : commands)
        out << ".TP\n.BR idem\\-" << command.name << " (1)\n" << roff(command.description) << "\n";
    write_exit_status(out, codes);
    out << ".SH FILES\nshare/doc/idem/ under the install prefix (/usr/share/doc/idem from the "
           "package) holds the documentation: records, stores, each command.\n.SH SEE ALSO\n";
    for (std::size_t i = 0; i < commands.size(); ++i)
        out << (i ? ",\n" : "") << ".BR idem\\-" << commands[i].name << " (1)";
    out << "\n";
}

int write_man_pages(CLI::App& app, const std::string& directory, const std::string& exit_codes_md) {
    auto commands = commands_of(app);
    auto codes = exit_codes(exit_codes_md);
    if (codes.empty()) {
        std::cerr << "idem-docgen: no exit codes in " << exit_codes_md << "\n";
        return 1;
    }
    auto version = idem::cli::version_line();
    {
        std::ofstream out(directory + "/idem.1");
        write_main_page(out, app, commands, version, codes);
    }
    for (const auto& command : commands) {
        std::ofstream out(directory + "/idem-" + command.name + ".1");
        write_command_page(out, command, version, codes, commands);
    }
    return 0;
}

// --- completions ----------------------------------------------------------

std::string first_sentence(std::string text, std::size_t most = 70) {
    auto end = text.find_first_of(".;:(");
    if (end != std::string::npos) text = text.substr(0, end);
    while (!text.empty() && text.back() == ' ')
        text.pop_back();
    if (text.size() > most) text = text.substr(0, most - 3) + "...";
    return text;
}

void write_bash(std::ostream& out, const std::vector<Command>& commands) {
    out << "# bash completion for idem (written by idem-docgen from idem's own flags)\n"
           "_idem() {\n"
           "    local cur prev\n"
           "    COMPREPLY=()\n"
           "    cur=\"${COMP_WORDS[COMP_CWORD]}\"\n"
           "    prev=\"${COMP_WORDS[COMP_CWORD-1]}\"\n"
           "    if [ \"$COMP_CWORD\" -eq 1 ]; then\n"
           "        COMPREPLY=($(compgen -W \"";
    for (const auto& command : commands)
        out << command.name << " ";
    out << "--help --version\" -- \"$cur\"))\n        return\n    fi\n"
           "    case \"${COMP_WORDS[1]}\" in\n";
    for (const auto& command : commands) {
        out << "    " << command.name << ")\n        case \"$prev\" in\n";
        std::string files, flags;
        for (const auto& flag : command.flags) {
            for (const auto& name : flag.names)
                flags += name + " ";
            if (!flag.takes_value) continue;
            std::string names;
            for (const auto& name : flag.names)
                names += (names.empty() ? "" : "|") + name;
            if (!flag.choices.empty()) {
                std::string words;
                for (const auto& choice : flag.choices)
                    words += choice + " ";
                out << "        " << names << ") COMPREPLY=($(compgen -W \"" << words
                    << "\" -- \"$cur\")); return ;;\n";
            } else if (flag.file) {
                files += (files.empty() ? "" : "|") + names;
            } else {
                out << "        " << names << ") return ;;\n";
            }
        }
        if (!files.empty())
            out << "        " << files << ") COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n";
        out << "        esac\n"
               "        if [[ \"$cur\" == -* ]]; then\n"
               "            COMPREPLY=($(compgen -W \""
            << flags
            << "\" -- \"$cur\"))\n"
               "        else\n"
               "            COMPREPLY=($(compgen -f -- \"$cur\"))\n"
               "        fi ;;\n";
    }
    out << "    esac\n}\ncomplete -o filenames -F _idem idem\n";
}

std::string zsh_text(const std::string& text) {
    std::string out;
    for (char c : first_sentence(text)) {
        if (c == '[' || c == ']' || c == ':' || c == '\\') out += '\\';
        if (c == '\'') {
            out += "'\\''";
            continue;
        }
        out += c;
    }
    return out;
}

void write_zsh(std::ostream& out, const std::vector<Command>& commands) {
    out << "#compdef idem\n# zsh completion for idem (written by idem-docgen from idem's own "
           "flags)\n\n_idem() {\n    local -a commands\n    commands=(\n";
    for (const auto& command : commands)
        out << "        '" << command.name << ":" << zsh_text(command.description) << "'\n";
    out << "    )\n    if (( CURRENT == 2 )); then\n        _describe 'command' commands\n"
           "        return\n    fi\n    case $words[2] in\n";
    for (const auto& command : commands) {
        out << "    " << command.name << ")\n        _arguments -s \\\n";
        for (const auto& flag : command.flags) {
            std::string action;
            if (flag.takes_value) {
                if (!flag.choices.empty()) {
                    action = ":value:(";
                    for (std::size_t i = 0; i < flag.choices.size(); ++i)
                        action += (i ? " " : "") + flag.choices[i];
                    action += ")";
                } else {
                    action = flag.file ? ":file:_files" : ":value:";
                }
            }
            for (const auto& name : flag.names)
                out << "            '" << name << "[" << zsh_text(flag.description) << "]" << action
                    << "' \\\n";
        }
        out << "            '*:file:_files' ;;\n";
    }
    out << "    esac\n}\n\n_idem \"$@\"\n";
}

std::string fish_text(const std::string& text) {
    std::string out;
    for (char c : first_sentence(text)) {
        if (c == '\'' || c == '\\') out += '\\';
        out += c;
    }
    return out;
}

void write_fish(std::ostream& out, const std::vector<Command>& commands) {
    out << "# fish completion for idem (written by idem-docgen from idem's own flags)\n"
           "complete -c idem -f\n";
    std::string names;
    for (const auto& command : commands)
        names += (names.empty() ? "" : " ") + command.name;
    for (const auto& command : commands)
        out << "complete -c idem -n 'not __fish_seen_subcommand_from " << names << "' -a "
            << command.name << " -d '" << fish_text(command.description) << "'\n";
    for (const auto& command : commands) {
        auto when = " -n '__fish_seen_subcommand_from " + command.name + "'";
        out << "complete -c idem" << when << " -F\n";
        for (const auto& flag : command.flags) {
            out << "complete -c idem" << when;
            for (const auto& name : flag.names)
                out << (name.starts_with("--") ? " -l " + name.substr(2) : " -s " + name.substr(1));
            if (flag.takes_value) {
                if (!flag.choices.empty()) {
                    out << " -x -a '";
                    for (std::size_t i = 0; i < flag.choices.size(); ++i)
                        out << (i ? " " : "") << flag.choices[i];
                    out << "'";
                } else {
                    out << (flag.file ? " -r -F" : " -x");
                }
            }
            out << " -d '" << fish_text(flag.description) << "'\n";
        }
    }
}

} // namespace

int main(int argc, char** argv) {
    CLI::App app;
    std::function<int()> action;
    idem::cli::build_app(app, action);
    std::vector<std::string> args(argv + 1, argv + argc);
    if (args.size() == 3 && args[0] == "man") return write_man_pages(app, args[1], args[2]);
    if ((args.size() == 2 || args.size() == 3) && args[0] == "completion") {
        auto commands = commands_of(app);
        std::ofstream file;
        if (args.size() == 3) file.open(args[2]);
        std::ostream& out = args.size() == 3 ? file : std::cout;
        if (args[1] == "bash")
            write_bash(out, commands);
        else if (args[1] == "zsh")
            write_zsh(out, commands);
        else if (args[1] == "fish")
            write_fish(out, commands);
        else
            return 2;
        return out ? 0 : 1;
    }
    std::cerr << "usage: idem-docgen man OUTDIR EXIT_CODES_MD | completion bash|zsh|fish [FILE]\n";
    return 2;
}
