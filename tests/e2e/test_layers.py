"""The layering of lib/idem/ (docs/architecture.md, "Layers"): every
#include of a header of another folder is one the doc's table allows, and
nothing in lib/ includes cli/. The table is read from the doc itself, so
the doc and the code cannot drift apart."""
import os
import re
import unittest

from harness import ROOT

LIB = os.path.join(ROOT, "lib", "idem")
DOC = os.path.join(ROOT, "docs", "architecture.md")


def allowed_includes():
    """folder -> (folders it may include whole, headers it may include)."""
    table = {}
    with open(DOC) as doc:
        text = doc.read()
    section = text[text.index("| folder | may include |"):]
    for line in section.splitlines()[2:]:
        if not line.startswith("|"):
            break
        folder, allowed = [cell.strip() for cell in line.strip("|").split("|")]
        names = [name.strip() for name in allowed.split(",") if name.strip()]
        table[folder] = ({n for n in names if "/" not in n}, {n for n in names if "/" in n})
    return table


def includes_of_lib():
    """(file, line number, folder of the file, the included "folder/header")."""
    pattern = re.compile(r'#\s*include\s+"(idem/)?([^"]+)"')
    for root, _, files in os.walk(LIB):
        for name in sorted(files):
            path = os.path.join(root, name)
            folder = os.path.relpath(path, LIB).split(os.sep)[0]
            with open(path) as source:
                for number, line in enumerate(source, 1):
                    match = pattern.match(line.strip())
                    if match:
                        yield os.path.relpath(path, ROOT), number, folder, match.group(1), match.group(2)


class Layers(unittest.TestCase):
    def test_every_folder_is_in_the_table(self):
        table = allowed_includes()
        folders = {name for name in os.listdir(LIB) if os.path.isdir(os.path.join(LIB, name))}
        self.assertEqual(folders, set(table), "docs/architecture.md's table and lib/idem/ differ")

    def test_every_include_is_one_the_table_allows(self):
        table = allowed_includes()
        wrong = []
        for path, number, folder, rooted, included in includes_of_lib():
            if not rooted:
                if "cli/" in included or included.startswith("../"):
                    wrong.append(f"{path}:{number}: includes {included}")
                continue
            target = included.split("/")[0]
            if target == folder:
                continue
            folders, headers = table.get(folder, (set(), set()))
            if target not in folders and included not in headers:
                wrong.append(f"{path}:{number}: {folder} includes {included}")
        self.assertEqual(wrong, [], "includes against docs/architecture.md's table:\n" + "\n".join(wrong))

    def test_the_check_catches_a_wrong_include(self):
        # The rule itself, on a made-up line: a subcommand including another's header.
        table = allowed_includes()
        folders, headers = table["dedup"]
        self.assertNotIn("audit", folders)
        self.assertNotIn("verify/run.hpp", table["listen"][1])


if __name__ == "__main__":
    unittest.main()
