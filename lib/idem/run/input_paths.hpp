#pragma once
// What a command's input arguments name (docs/records.md, "Many inputs"):
// files, "-" (stdin), directories (with --recursive) and quoted globs that
// idem expands itself, so a day of captures is one argument and a
// shell's argument limit never matters.

#include <string>
#include <vector>

namespace idem::run {

// Each input as the files it names, in order: a file as it is; "-" as it
// is; a directory, with `recursive`, as every regular file under it whose
// name does not start with '.' (idem's own partial files, editors'
// swap files), sorted by path; a pattern with *, ? or [...] that names no
// file itself as its matches, sorted (directories among them as
// directories are). Throws InputError naming the input for a directory
// without `recursive` and for a pattern that matches nothing.
[[nodiscard]] std::vector<std::string> expand_inputs(const std::vector<std::string>& inputs,
                                                     bool recursive);

} // namespace idem::run
