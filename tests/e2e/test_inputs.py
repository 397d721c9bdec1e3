"""Many inputs (docs/records.md, "Many inputs"): a directory with
--recursive and a quoted pattern idem expands itself read as the files they
name, in order, one log; positions keep each record's own file; a directory
without --recursive and a pattern that matches nothing are errors naming
them; an output that is one of the files read is refused."""
import gzip
import json
import os
import subprocess
import tempfile
import unittest

from harness import IDEM, read_until_closed, run, summary_of

EVENTS = [{"id": f"evt_{n % 300}", "n": n} for n in range(900)]


def lines(events):
    return "".join(json.dumps(e) + "\n" for e in events).encode()


def zstd(data):
    return subprocess.run(["zstd", "-q", "-c"], input=data, capture_output=True, check=True).stdout


class ManyInputs(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.day = os.path.join(self.tmp.name, "captures", "2026-11-30")
        os.makedirs(os.path.join(self.day, "late"))
        self.plain = os.path.join(self.tmp.name, "all.ndjson")
        with open(self.plain, "wb") as f:
            f.write(lines(EVENTS))
        # One log split over a day folder, each part as a shipper may keep it.
        parts = [("a.ndjson", lines(EVENTS[:300])),
                 ("b.ndjson.gz", gzip.compress(lines(EVENTS[300:600]))),
                 (os.path.join("late", "c.ndjson.zst"), zstd(lines(EVENTS[600:])))]
        for name, data in parts:
            with open(os.path.join(self.day, name), "wb") as f:
                f.write(data)
        with open(os.path.join(self.day, ".a.ndjson.partial"), "wb") as f:
            f.write(b"not a record\n")  # hidden: left out

    def tearDown(self):
        self.tmp.cleanup()

    def test_a_directory_read_recursively_is_the_log_it_was_split_from(self):
        code, whole, err = run(["dedup", "--key", "id", "--store", ":memory:", self.plain])
        self.assertEqual(code, 0, err)
        code, split, err = run(["dedup", "--key", "id", "--store", ":memory:", "--recursive", "--summary", "json",
                                self.day])
        self.assertEqual(code, 0, err)
        self.assertEqual(split, whole)
        self.assertEqual(summary_of(err)["in"], 900)
        self.assertEqual(summary_of(err)["rejected"], 0)  # the hidden file was not read

    def test_a_quoted_pattern_is_expanded_by_idem_in_name_order(self):
        pattern = os.path.join(self.day, "*.ndjson*")
        code, out, err = run(["dedup", "--key", "id", "--store", ":memory:", "--summary", "json", pattern])
        self.assertEqual(code, 0, err)
        self.assertEqual(summary_of(err)["in"], 600)  # a and b; late/ is a directory, left out
        self.assertEqual([json.loads(line)["n"] for line in out.splitlines()], list(range(300)))
        code, out, err = run(["dedup", "--key", "id", "--store", ":memory:", "--summary", "json", "--recursive",
                              os.path.join(self.day, "*")])
        self.assertEqual(summary_of(err)["in"], 900)

    def test_positions_name_each_file(self):
        bad = os.path.join(self.day, "late", "d.ndjson")
        with open(bad, "wb") as f:
            f.write(b'{"id": "x"}\n{broken\n')
        code, _, err = run(["audit", "--key", "id", "--recursive", self.day])
        self.assertIn(f"{bad}:2", err)

    def test_a_directory_without_recursive_is_an_error_naming_it(self):
        code, out, err = run(["dedup", "--key", "id", "--store", ":memory:", self.day])
        self.assertEqual(code, 3, err)
        self.assertIn(self.day, err)
        self.assertIn("--recursive", err)
        self.assertEqual(out, b"")
        # Issue 60 item 9: a folder named with its slash suggested 'day//*'.
        code, _, err = run(["dedup", "--key", "id", "--store", ":memory:", self.day + "/"])
        self.assertIn(f"'{self.day}/*.ndjson.gz'", err)

    def test_a_pattern_that_matches_nothing_is_an_error_naming_it(self):
        pattern = os.path.join(self.tmp.name, "captures", "2026-12-31", "*.gz")
        code, out, err = run(["dedup", "--key", "id", "--store", ":memory:", pattern])
        self.assertEqual(code, 3, err)
        self.assertIn(pattern, err)
        self.assertIn("matches no file", err)
        self.assertEqual(out, b"")

    def test_an_output_among_the_files_read_is_refused(self):
        target = os.path.join(self.day, "a.ndjson")
        with open(target, "rb") as f:
            before = f.read()
        code, _, err = run(["dedup", "--key", "id", "--store", os.path.join(self.tmp.name, "s.db"),
                            "-o", target, self.plain, target])
        self.assertEqual(code, 2, err)
        with open(target, "rb") as f:
            self.assertEqual(f.read(), before)

    def test_an_output_inside_a_folder_read_is_left_out_of_it(self):
        target = os.path.join(self.day, "late", "kept.ndjson")
        code, _, err = run(["dedup", "--key", "id", "--recursive", "--store", os.path.join(self.tmp.name, "s.db"),
                            "--summary", "json", "-o", target, self.day])
        self.assertEqual(code, 0, err)
        code, _, err = run(["dedup", "--key", "id", "--recursive", "--store", ":memory:",
                            "--summary", "json", "-o", target, self.day])
        self.assertEqual(code, 0, err)
        self.assertEqual(summary_of(err)["in"], 900)  # not the 300 kept.ndjson holds from the first run
        self.assertIn("kept.ndjson", err)

    def test_thousands_of_files_need_one_descriptor(self):
        many = os.path.join(self.tmp.name, "many")
        os.makedirs(many)
        for n in range(1500):
            with open(os.path.join(many, f"{n:05d}.ndjson"), "wb") as f:
                f.write(lines([{"id": f"k{n % 1000}", "n": n}]))
        import resource

        def few_descriptors():
            resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))

        process = subprocess.run([IDEM, "dedup", "--key", "id", "--store", ":memory:", "--summary", "json",
                                  os.path.join(many, "*.ndjson")], capture_output=True, preexec_fn=few_descriptors)
        self.assertEqual(process.returncode, 0, process.stderr)
        self.assertEqual(summary_of(process.stderr)["in"], 1500)
        self.assertEqual(summary_of(process.stderr)["duplicates"], 500)


def stderr_on_terminal(args):
    """idem with stderr on a pseudo-terminal, where progress is shown;
    returns (exit code, what it wrote there)."""
    import pty
    leader, follower = pty.openpty()
    process = subprocess.Popen([IDEM] + args, stdout=subprocess.DEVNULL, stderr=follower)
    os.close(follower)
    written = read_until_closed(leader)
    return process.wait(timeout=120), written.decode("utf-8", "replace")


class Progress(unittest.TestCase):
    """On a terminal a long run shows records, the share of the inputs read
    (a compressed one by its compressed bytes) and an ETA, at most four
    times a second, and erases the line at the end; never in a pipe, or
    with -q."""

    # Enough for a run past the first redraw (250 ms) on the release build;
    # a sanitizer's build, ~15x slower, needs a quarter.
    RECORDS = 100000 if os.environ.get("IDEM_SANITIZED") == "1" else 400000

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.log = os.path.join(self.tmp.name, "day.ndjson.gz")
        events = [{"key": f"k{n % 50000}", "n": n, "ts": f"2026-11-30T{n // 3600 % 24:02d}:{n // 60 % 60:02d}:"
                   f"{n % 60:02d}Z", "pad": "x" * 40} for n in range(self.RECORDS)]
        with open(self.log, "wb") as f:
            f.write(gzip.compress(lines(events), compresslevel=1))

    def tearDown(self):
        self.tmp.cleanup()

    def test_a_long_run_shows_its_share_and_an_eta_then_erases_them(self):
        code, written = stderr_on_terminal(["audit", "--key", "key", "--time-field", "ts", "--threads", "1",
                                            "--format", "json", self.log])
        self.assertIn(code, (0, 1), written)
        shown = [part for part in written.split("\r\x1b[K") if part.startswith("idem: ")]
        self.assertTrue(shown, written)
        self.assertRegex(shown[0], r"^idem: \d+ records, [\d.]+ [KMG]?i?B of [\d.]+ [KMG]?i?B \(\d+%\), "
                                   r"\d+ records/s, ETA \S+$")
        self.assertTrue(written.endswith("\r\x1b[K") or "\r\x1b[K" in written[-200:], written[-200:])
        self.assertLessEqual(len(shown), 4 * 60)

    def test_never_in_a_pipe_or_with_quiet(self):
        code, _, err = run(["audit", "--key", "key", "--threads", "1", "--format", "json", self.log])
        self.assertNotIn("ETA", err)
        self.assertNotIn("\r", err)
        code, written = stderr_on_terminal(["audit", "-q", "--key", "key", "--threads", "1", "--format", "json",
                                            self.log])
        self.assertNotIn("ETA", written)


if __name__ == "__main__":
    unittest.main()


def as_nobody():
    """For preexec_fn: the run as an unprivileged user, for whom a mode-000
    folder is unreadable (root reads every folder)."""
    os.setgid(65534)
    os.setuid(65534)


def open_to_everyone(root):
    """Lets the unprivileged user walk and read `root` (TemporaryDirectory
    makes it 0700)."""
    for folder, dirs, files in os.walk(root):
        os.chmod(folder, 0o755)
        for name in files:
            os.chmod(os.path.join(folder, name), 0o644)


class WhatAFolderOrPatternReads(unittest.TestCase):
    """docs/security.md, "Inputs": what a folder or a pattern expands to is
    regular files whose real path stays inside it, never under /proc, /sys
    or /dev, never a file the run writes; a folder or file the walk cannot
    read is exit 3 naming it before any record is written."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.caps = os.path.join(self.tmp.name, "caps")
        os.makedirs(os.path.join(self.caps, "sub"))
        for n in range(20):
            folder = self.caps if n < 10 else os.path.join(self.caps, "sub")
            with open(os.path.join(folder, f"{n:02d}.ndjson"), "wb") as f:
                f.write(lines([{"id": f"evt_{n}", "n": n}]))
        self.outside = os.path.join(self.tmp.name, "outside.txt")
        with open(self.outside, "wb") as f:
            f.write(b"SECRET-OUTSIDE-THE-TREE\n")

    def tearDown(self):
        self.tmp.cleanup()

    def dedup(self, *args, **kwargs):
        return run(["dedup", "--key", "id", "--store", ":memory:", "--summary", "json", *args], **kwargs)

    def test_a_link_out_of_the_folder_is_left_out_and_named(self):
        os.symlink(self.outside, os.path.join(self.caps, "sub", "zz.ndjson"))
        os.symlink("/proc/self/environ", os.path.join(self.caps, "env.ndjson"))
        reject = os.path.join(self.tmp.name, "rej.ndjson")
        code, out, err = self.dedup("--recursive", "--reject", reject, self.caps,
                                    env={"PLANTED_SECRET": "SECRET-IN-THE-ENVIRONMENT"})
        self.assertEqual(code, 0, err)
        self.assertEqual(summary_of(err)["in"], 20)
        self.assertEqual(summary_of(err)["rejected"], 0)
        self.assertNotIn(b"SECRET", out)
        self.assertNotIn("SECRET", err)
        self.assertIn("zz.ndjson", err)
        self.assertIn("--follow-links", err)
        self.assertIn("env.ndjson", err)
        self.assertIn("/proc", err)
        if os.path.exists(reject):
            with open(reject, "rb") as f:
                self.assertNotIn(b"SECRET", f.read())

    def test_verify_never_writes_a_linked_secret_into_its_rejects(self):
        """The attack as reported: the secret in the environment, a link
        to /proc/self/environ in the folder verify reads."""
        os.symlink("/proc/self/environ", os.path.join(self.caps, "sub", "environ.ndjson"))
        reject = os.path.join(self.tmp.name, "rej.ndjson")
        code, out, err = run(["verify", "--scheme", "stripe", "--secret-env", "STRIPE_SECRET", "--recursive",
                              "--reject", reject, "--no-fail", self.caps],
                             env={"STRIPE_SECRET": "whsec_do_not_leak_me"})
        self.assertIn("environ.ndjson", err)
        for written in (out, err.encode()):
            self.assertNotIn(b"whsec_do_not_leak_me", written)
        if os.path.exists(reject):
            with open(reject, "rb") as f:
                self.assertNotIn(b"whsec_do_not_leak_me", f.read())

    def test_follow_links_reads_a_link_out_but_never_proc(self):
        with open(self.outside, "wb") as f:
            f.write(lines([{"id": "evt_outside", "n": 99}]))
        os.symlink(self.outside, os.path.join(self.caps, "zz.ndjson"))
        os.symlink("/proc/self/environ", os.path.join(self.caps, "env.ndjson"))
        code, out, err = self.dedup("--recursive", "--follow-links", self.caps)
        self.assertEqual(code, 0, err)
        self.assertEqual(summary_of(err)["in"], 21)
        self.assertIn(b"evt_outside", out)
        self.assertIn("env.ndjson", err)

    def test_a_link_inside_the_folder_is_read(self):
        os.symlink(os.path.join(self.caps, "00.ndjson"), os.path.join(self.caps, "sub", "again.ndjson"))
        code, out, err = self.dedup("--recursive", self.caps)
        self.assertEqual(code, 0, err)
        self.assertEqual(summary_of(err)["in"], 21)

    def test_a_pattern_never_leaves_its_fixed_prefix(self):
        os.symlink(self.outside, os.path.join(self.caps, "zz.ndjson"))
        code, out, err = self.dedup(os.path.join(self.caps, "*.ndjson"))
        self.assertEqual(code, 0, err)
        self.assertEqual(summary_of(err)["in"], 10)
        self.assertIn("zz.ndjson", err)

    def assert_walk_refuses_unreadable(self, locked):
        """Run unprivileged over the folder with `locked` at mode 000: exit
        3 naming it, nothing written out."""
        open_to_everyone(self.tmp.name)
        os.chmod(locked, 0)
        process = subprocess.run([IDEM, "dedup", "--key", "id", "--store", ":memory:", "--recursive", self.caps],
                                 capture_output=True, preexec_fn=as_nobody, cwd=self.tmp.name, timeout=60)
        err = process.stderr.decode()
        self.assertEqual(process.returncode, 3, err)
        self.assertIn(locked, err)
        self.assertEqual(process.stdout, b"")

    def test_an_unreadable_subfolder_is_exit_3_naming_it_before_any_record(self):
        locked = os.path.join(self.caps, "sub", "locked")
        os.makedirs(locked)
        self.assert_walk_refuses_unreadable(locked)

    def test_an_unreadable_file_under_a_folder_is_exit_3_naming_it(self):
        self.assert_walk_refuses_unreadable(os.path.join(self.caps, "sub", "15.ndjson"))

    def test_a_pattern_takes_regular_files_only(self):
        os.mkfifo(os.path.join(self.caps, "live.ndjson"))
        os.symlink("/dev/zero", os.path.join(self.caps, "zero.ndjson"))
        code, out, err = self.dedup(os.path.join(self.caps, "*.ndjson"))  # a FIFO read would hang: timeout
        self.assertEqual(code, 0, err)
        self.assertEqual(summary_of(err)["in"], 10)
        self.assertIn("live.ndjson", err)
        self.assertIn("zero.ndjson", err)
        code, out, err = self.dedup("--recursive", self.caps)
        self.assertEqual(code, 0, err)
        self.assertEqual(summary_of(err)["in"], 20)

    def test_the_store_and_outputs_are_never_read_from_the_folder(self):
        store = os.path.join(self.caps, "idem.db")
        output = os.path.join(self.caps, "kept.ndjson")
        for attempt in range(2):
            code, _, err = run(["dedup", "--key", "id", "--store", store, "--summary", "json", "--recursive",
                                "-o", output, self.caps])
            self.assertIn(code, (0,), err)
            self.assertEqual(summary_of(err)["in"], 20, err)
            self.assertEqual(summary_of(err)["rejected"], 0, err)
        self.assertTrue(os.path.exists(store))

    def test_the_default_store_is_not_read_from_the_folder_either(self):
        env = {k: v for k, v in os.environ.items() if k != "IDEM_STORE"}
        for attempt in range(2):  # the second run finds idem.db (and its journals) in the folder
            process = subprocess.run([IDEM, "dedup", "--key", "id", "--summary", "json", "--recursive", "."],
                                     capture_output=True, cwd=self.tmp.name, env=env, timeout=60)
            err = process.stderr.decode()
            self.assertEqual(process.returncode, 1, err)  # outside.txt is no record: rejected
            self.assertEqual(summary_of(err)["in"], 21, err)
            self.assertEqual(summary_of(err)["rejected"], 1, err)
        self.assertTrue(os.path.exists(os.path.join(self.tmp.name, "idem.db")))

    def test_a_store_named_as_an_input_is_a_usage_error(self):
        store = os.path.join(self.tmp.name, "s.db")
        code, _, err = run(["dedup", "--key", "id", "--store", store, os.path.join(self.caps, "00.ndjson")])
        self.assertEqual(code, 0, err)
        code, out, err = run(["dedup", "--key", "id", "--store", store, store])
        self.assertEqual(code, 2, err)
        self.assertIn("--store", err)
        self.assertEqual(out, b"")


class NamesAndFirstLines(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def test_a_file_name_never_forges_a_line_on_stderr(self):
        """A name holding a newline and an escape: every diagnostic that
        names it (a rejected line's warning, an error) keeps it on its line."""
        folder = os.path.join(self.tmp.name, "caps")
        os.makedirs(folder)
        name = os.path.join(folder, "x\nidem: error: FORGED\n::warning::CI\x1b[31m.ndjson")
        with open(name, "wb") as f:
            f.write(b'{"id":"a"}\nnot json\n')
        for args in (["dedup", "--key", "id", "--store", ":memory:", "--recursive", folder],
                     ["audit", "--key", "id", "--recursive", folder],
                     ["dedup", "--key", "id", "--store", ":memory:", "--strict", "--recursive", folder],
                     ["dedup", "--key", "id", "--store", ":memory:", os.path.join(folder, "*.ndjson")]):
            with self.subTest(args=args):
                code, _, err = run(args)
                self.assertNotEqual(err, "")
                for line in err.splitlines():
                    self.assertFalse(line.startswith("idem: error: FORGED"), err)
                    self.assertFalse(line.startswith("::"), err)
                self.assertNotIn("\x1b", err)

    def test_a_store_path_never_forges_a_line_either(self):
        """The text summary and the warnings name the store: one line each,
        whatever its path holds."""
        log = os.path.join(self.tmp.name, "one.ndjson")
        with open(log, "wb") as f:
            f.write(b'{"id":"a"}\n')
        store = os.path.join(self.tmp.name, "s\nidem: error: FORGED.db")
        for attempt in range(2):  # the second run warns that the record was seen before
            code, _, err = run(["dedup", "--key", "id", "--store", store, log])
            self.assertEqual(code, 0, err)
            for line in err.splitlines():
                self.assertFalse(line.startswith("idem: error: FORGED"), err)
            self.assertIn("s\\x0aidem", err)

    def test_a_rotation_cut_first_line_loses_only_itself(self):
        """docs/records.md: only the cut line is lost, whatever it holds
        and whatever follows it (a blank line, a line over 1 MiB)."""
        good = [{"id": f"evt_{n}", "n": n} for n in range(1000)]
        body = lines(good)
        cases = {
            "comma, then records": b'unt":10,"id":"x"}\n' + body,
            "comma, blank second line": b'a","b":1,\n\n' + body,
            "comma, long second line": b'x","y":2\n' + lines([{"id": "big", "pad": "p" * (1 << 21)}]) + body,
        }
        for name, data in cases.items():
            with self.subTest(case=name):
                path = os.path.join(self.tmp.name, "cut.ndjson")
                with open(path, "wb") as f:
                    f.write(data)
                code, out, err = run(["dedup", "--key", "id", "--store", ":memory:", "--summary", "json", path])
                self.assertEqual(code, 1, err)  # the cut line is rejected
                self.assertEqual(summary_of(err)["rejected"], 1)
                self.assertGreaterEqual(summary_of(err)["unique"], 1000)


def peak_of(args, cwd=None):
    """Runs idem; returns (exit code, stdout, stderr, peak resident KiB of
    that process alone: it runs under a fresh child of this one)."""
    probe = ("import resource, subprocess, sys\n"
             "p = subprocess.run(sys.argv[1:], capture_output=True)\n"
             "sys.stdout.buffer.write(p.stdout)\n"
             "sys.stderr.buffer.write(p.stderr)\n"
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)\n"
             "sys.exit(p.returncode)\n")
    import sys
    process = subprocess.run([sys.executable, "-c", probe, IDEM, *args], capture_output=True, cwd=cwd,
                             timeout=300)
    err = process.stderr.decode("utf-8", "replace").rstrip().splitlines()
    return process.returncode, process.stdout, "\n".join(err[:-1]), int(err[-1])


class BoundedMemory(unittest.TestCase):
    """docs/records.md, "Budgets": what one input makes idem hold follows
    its largest record, never the document; past a budget it is a reject or
    exit 3 naming the place, never an out-of-memory kill or a crash."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, name, data):
        path = os.path.join(self.tmp.name, name)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def test_a_json_array_is_read_element_by_element(self):
        """The same records as NDJSON are the yardstick: the array costs
        what they cost, where the whole document took gigabytes."""
        count = 3_000_000
        array = self.write("empty-objects.json.gz", gzip.compress(b"[" + b",".join([b"{}"] * count) + b"]"))
        lines = self.write("empty-objects.ndjson.gz", gzip.compress(b"{}\n" * count))
        peaks = {}
        for path in (array, lines):
            code, out, err, peaks[path] = peak_of(["dedup", "--key", "id", "--store", ":memory:", "--summary",
                                                   "json", "--reject", os.devnull, "-o", os.devnull, path])
            self.assertEqual(code, 3, err)  # every element lacks the key: all rejected
            self.assertEqual(summary_of(err)["in"], count)
        self.assertLess(peaks[array], peaks[lines] * 1.25 + 32 * 1024)

    def test_a_page_with_many_elements_keeps_every_record(self):
        records = [{"id": f"evt_{n % 1000}", "n": n} for n in range(20000)]
        page = {"object": "list", "url": "/v1/events", "data": records, "has_more": False}
        path = self.write("page.json", json.dumps(page, indent=2).encode())
        code, out, err = run(["dedup", "--key", "id", "--store", ":memory:", "--summary", "json", path])
        self.assertEqual(code, 0, err)
        self.assertEqual(summary_of(err)["in"], 20000)
        self.assertEqual(summary_of(err)["unique"], 1000)
        self.assertEqual(json.loads(out.splitlines()[0]), records[0])

    def test_deep_nesting_in_a_json_document_is_exit_3_with_its_position(self):
        path = self.write("deep.json.gz", gzip.compress(b"[" * 100000))
        self.assertLess(os.path.getsize(path), 1024)
        for args in (["dedup", "--key", "id", "--store", ":memory:"], ["audit", "--key", "id"]):
            with self.subTest(command=args[0]):
                code, out, err = run(args + [path])
                self.assertEqual(code, 3, err)
                self.assertIn("deep.json.gz:1:", err)
                self.assertIn("nested deeper", err)

    def test_an_element_past_the_record_size_goes_whole_to_the_reject_file(self):
        big = {"id": "big", "pad": "x" * 5000}
        path = self.write("mixed.json", json.dumps([{"id": "a"}, big, {"id": "b"}]).encode())
        reject = os.path.join(self.tmp.name, "rej.ndjson")
        code, out, err = run(["dedup", "--key", "id", "--store", ":memory:", "--summary", "json",
                              "--max-record-size", "1KiB", "--reject", reject, path])
        self.assertEqual(code, 1, err)
        self.assertEqual([json.loads(line)["id"] for line in out.splitlines()], ["a", "b"])
        self.assertIn("mixed.json:2", err)
        with open(reject, "rb") as f:
            self.assertEqual(json.loads(f.read()), big)

    def test_a_csv_header_of_long_names_is_held_once(self):
        names = [f"{n:04d}" + "n" * 996 for n in range(1000)]
        data = (",".join(names) + "\n" + ("," * 999 + "\n") * 1000).encode()
        path = self.write("wide.csv.gz", gzip.compress(data))
        self.assertLess(os.path.getsize(path), 64 * 1024)
        code, out, err, peak_kib = peak_of(["dedup", "--key", names[0], "--store", ":memory:", "--summary",
                                            "json", "-o", os.devnull, path])
        self.assertEqual(code, 0, err)
        self.assertEqual(summary_of(err)["in"], 1000)
        # Each row's record is 1 MB of names: a few blocks of them at a
        # time, where the file read whole took 2 GB (47 MiB measured; a
        # sanitizer's quarantine holds freed blocks longer: 336 MiB).
        bound = 600 if os.environ.get("IDEM_SANITIZED") == "1" else 150
        self.assertLess(peak_kib, bound * 1024)
