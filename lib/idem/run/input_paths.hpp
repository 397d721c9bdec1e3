#pragma once
// What a command's input arguments name (docs/records.md, "Many inputs"):
// files, "-" (stdin), directories (with --recursive) and quoted globs that
// idem expands itself, so a day of captures is one argument and a
// shell's argument limit never matters.
//
// The trust rule (docs/security.md, "Inputs"): an input named one by one is
// read as it is (a FIFO, /dev/stdin); what a folder or a pattern expands to
// is only regular files whose real path stays inside the folder (or the
// pattern's fixed prefix), never under /proc, /sys or /dev, and never a
// file the run itself writes. Everything left out is said, never silent.

#include <string>
#include <vector>

namespace idem::run {

// Whether a link found by a folder walk or a pattern may lead out of it.
enum class LinkPolicy {
    stay_inside,  // a link whose target is outside is skipped, with a note
    follow_links, // --follow-links: any regular file it names (not /proc, /sys, /dev)
};

struct InputExpansion {
    bool recursive = false; // --recursive: a folder among the inputs is walked
    LinkPolicy links = LinkPolicy::stay_inside;
    // The files the run writes (its outputs, its SQLite store and that
    // store's journals): never what a folder or pattern expands to.
    std::vector<std::string> written;
};

// A file a folder or a pattern found and left out, and why (for a warning).
struct SkippedInput {
    std::string path;
    std::string reason;
};

struct ExpandedInputs {
    std::vector<std::string> files;
    std::vector<SkippedInput> skipped;
};

// Each input as the files it names, in order: a file as it is; "-" as it
// is; a directory, with `recursive`, as every regular file under it whose
// name does not start with '.' (idem's own partial files, editors' swap
// files), sorted by path; a pattern with *, ? or [...] that names no file
// itself as its regular-file matches, sorted (directories among them
// walked as directories are). Throws InputError naming the input for a
// directory without `recursive`, a pattern that matches nothing, and a
// folder or file under a walk that cannot be read (before any record is).
[[nodiscard]] ExpandedInputs expand_inputs(const std::vector<std::string>& inputs,
                                           const InputExpansion& expansion);

// Whether `input` is a pattern idem expands: it holds *, ? or [ and names
// no file as it is.
[[nodiscard]] bool is_input_pattern(const std::string& input);

} // namespace idem::run
