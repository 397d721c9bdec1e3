"""Installing idem the ways users do (docs/install.md): `cmake --install`
into a prefix, the man pages rendered by groff without a warning, bash,
zsh and fish completions working from the installed files, `make
uninstall`, and the .deb `make package` builds."""
import glob
import json
import os
import shutil
import subprocess
import tempfile
import unittest

from harness import IDEM, ROOT, run

BUILD = os.path.dirname(os.path.abspath(IDEM))
COMMANDS = ["verify", "sign", "dedup", "reorder", "merge", "states", "reconcile", "audit", "listen", "replay", "probe"]


def installed_files(prefix):
    return {os.path.relpath(os.path.join(d, f), prefix) for d, _, files in os.walk(prefix) for f in files}


@unittest.skipUnless(os.path.exists(os.path.join(BUILD, "cmake_install.cmake")), "needs the CMake build dir")
class Install(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.prefix = os.path.join(cls.tmp.name, "prefix")
        result = subprocess.run(["cmake", "--install", BUILD, "--prefix", cls.prefix], capture_output=True,
                                text=True, timeout=300)
        assert result.returncode == 0, result.stderr

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_every_file_goes_to_its_usual_place(self):
        files = installed_files(self.prefix)
        expected = {"bin/idem", "share/man/man1/idem.1", "share/bash-completion/completions/idem",
                    "share/zsh/site-functions/_idem", "share/fish/vendor_completions.d/idem.fish",
                    "share/doc/idem/README.md", "share/doc/idem/CHANGELOG.md", "share/doc/idem/merge.md",
                    "share/idem/providers/paddle.yaml"}
        expected |= {f"share/man/man1/idem-{command}.1" for command in COMMANDS}
        self.assertEqual(expected - files, set())

    def test_the_installed_binary_runs_and_says_its_version_and_commit(self):
        binary = os.path.join(self.prefix, "bin", "idem")
        result = subprocess.run([binary, "--version"], capture_output=True, text=True)
        self.assertEqual(result.returncode, 0)
        self.assertRegex(result.stdout.strip(), r"^idem \d+\.\d+\.\d+ \(([0-9a-f]{7,}|unknown)\)$")
        self.assertIn("dedup", subprocess.run([binary, "--help"], capture_output=True, text=True).stdout)
        # The same line opens --summary json, so an incident report says which idem judged.
        code, _, err = run(["dedup", "--key", "id", "--store", ":memory:", "--summary", "json"], stdin=b'{"id":1}\n')
        summary = json.loads(err.strip().splitlines()[-1])
        self.assertEqual(list(summary)[0], "version")
        self.assertEqual(summary["version"], result.stdout.strip())

    @unittest.skipUnless(shutil.which("groff"), "groff is needed (make test-deps installs groff-base)")
    def test_every_man_page_renders_without_a_warning(self):
        pages = glob.glob(os.path.join(self.prefix, "share/man/man1/*.1"))
        self.assertEqual(len(pages), len(COMMANDS) + 1)
        for page in pages:
            result = subprocess.run(["groff", "-ww", "-z", "-man", page], capture_output=True, text=True)
            self.assertEqual((result.returncode, result.stderr), (0, ""), page)
        with open(os.path.join(self.prefix, "share/man/man1/idem-dedup.1")) as f:
            page = f.read()
        for section in (".SH SYNOPSIS", ".SH OPTIONS", ".SH EXAMPLES", ".SH EXIT STATUS", ".SH SEE ALSO"):
            self.assertIn(section, page)
        self.assertIn(r"\-\-keep", page)  # the same flags as --help
        self.assertIn("store, file\\-system or network failure", page)  # docs/exit-codes.md's table
        rendered = subprocess.run(["man", "-l", os.path.join(self.prefix, "share/man/man1/idem-dedup.1")],
                                  capture_output=True, text=True, env=dict(os.environ, MANPAGER="cat", MANWIDTH="80"))
        self.assertIn("idem dedup [OPTIONS]", rendered.stdout)

    def test_bash_completes_commands_flags_and_their_values(self):
        script = os.path.join(self.prefix, "share/bash-completion/completions/idem")
        probe = f"""source '{script}'
complete -p idem
COMP_WORDS=(idem de); COMP_CWORD=1; _idem; echo "1:${{COMPREPLY[*]}}"
COMP_WORDS=(idem dedup --ke); COMP_CWORD=2; _idem; echo "2:${{COMPREPLY[*]}}"
COMP_WORDS=(idem dedup --keep ""); COMP_CWORD=3; _idem; echo "3:${{COMPREPLY[*]}}"
COMP_WORDS=(idem verify --scheme st); COMP_CWORD=3; _idem; echo "4:${{COMPREPLY[*]}}"
"""
        result = subprocess.run(["bash", "-c", probe], capture_output=True, text=True)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("complete -o filenames -F _idem idem", result.stdout)
        self.assertIn("1:dedup", result.stdout)
        self.assertIn("2:--key --keep", result.stdout)
        self.assertIn("3:first last", result.stdout)
        self.assertRegex(result.stdout, r"4:.*stripe")

    @unittest.skipUnless(shutil.which("fish"), "fish is needed (make test-deps installs it)")
    def test_fish_completes_commands_and_flags(self):
        script = os.path.join(self.prefix, "share/fish/vendor_completions.d/idem.fish")
        result = subprocess.run(["fish", "--no-config", "-c",
                                 f"source '{script}'; complete -C 'idem de'; echo ---; complete -C 'idem dedup --ke';"
                                 f" echo ---; complete -C 'idem dedup --keep '"],
                                capture_output=True, text=True)
        self.assertEqual(result.returncode, 0, result.stderr)
        commands, flags, values = result.stdout.split("---")
        self.assertIn("dedup", commands)
        self.assertIn("--key", flags)
        self.assertIn("--keep", flags)
        self.assertEqual(sorted(line.split("\t")[0] for line in values.strip().splitlines()), ["first", "last"])

    @unittest.skipUnless(shutil.which("zsh"), "zsh is needed (make test-deps installs it)")
    def test_zsh_loads_the_completion_and_it_knows_the_commands(self):
        script = os.path.join(self.prefix, "share/zsh/site-functions/_idem")
        result = subprocess.run(["zsh", "-n", script], capture_output=True, text=True)
        self.assertEqual((result.returncode, result.stderr), (0, ""))
        with open(script) as f:
            text = f.read()
        self.assertTrue(text.startswith("#compdef idem"))
        # With compinit, the function is found on fpath and bound to idem.
        site = os.path.dirname(script)
        probe = (f"fpath=('{site}' $fpath); autoload -U compinit; compinit -u -d {self.tmp.name}/zcompdump; "
                 "print -r -- $_comps[idem]")
        result = subprocess.run(["zsh", "-f", "-c", probe], capture_output=True, text=True)
        self.assertEqual(result.stdout.strip(), "_idem", result.stderr)

    def test_make_uninstall_removes_what_was_installed(self):
        # What `make install PREFIX=...` runs once its build is done (the
        # test must not rebuild the binary the other suites are running).
        prefix = os.path.join(self.tmp.name, "other")
        build = os.path.relpath(BUILD, ROOT)
        with open(os.path.join(ROOT, "Makefile")) as f:
            self.assertIn("cmake --install $(BUILD) --prefix $(PREFIX)", f.read())
        result = subprocess.run(["cmake", "--install", BUILD, "--prefix", prefix], capture_output=True, text=True,
                                timeout=300)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("bin/idem", installed_files(prefix))
        result = subprocess.run(["make", "-s", "uninstall", f"BUILD={build}"], cwd=ROOT, capture_output=True,
                                text=True)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(installed_files(prefix), set())


@unittest.skipUnless(shutil.which("cpack") and shutil.which("dpkg-deb") and shutil.which("dpkg-shlibdeps"),
                     "cpack and dpkg-dev are needed (make test-deps installs them)")
class Package(unittest.TestCase):
    def test_the_deb_holds_the_files_declares_its_libraries_and_runs(self):
        result = subprocess.run(["cpack", "-G", "DEB"], cwd=BUILD, capture_output=True, text=True, timeout=600)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        (deb,) = glob.glob(os.path.join(BUILD, "idem_*.deb"))
        contents = subprocess.run(["dpkg-deb", "-c", deb], capture_output=True, text=True).stdout
        for path in ("./usr/bin/idem", "./usr/share/man/man1/idem-dedup.1",
                     "./usr/share/bash-completion/completions/idem", "./usr/share/doc/idem/README.md"):
            self.assertIn(path, contents)
        info = subprocess.run(["dpkg-deb", "-I", deb], capture_output=True, text=True).stdout
        depends = [line for line in info.splitlines() if line.strip().startswith("Depends:")]
        self.assertTrue(depends, info)
        for library in ("libsqlite3", "libhiredis", "libcurl", "libyaml-cpp"):
            self.assertIn(library, depends[0])
        with tempfile.TemporaryDirectory() as root:
            subprocess.run(["dpkg-deb", "-x", deb, root], check=True)
            result = subprocess.run([os.path.join(root, "usr/bin/idem"), "--version"], capture_output=True, text=True)
            self.assertEqual(result.returncode, 0)
            self.assertTrue(result.stdout.startswith("idem "))


if __name__ == "__main__":
    unittest.main()
