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
        code, _, err = run(["dedup", "--key", "id", "--recursive", "--store", os.path.join(self.tmp.name, "s.db"),
                            "-o", target, self.day])
        self.assertEqual(code, 2, err)
        with open(target, "rb") as f:
            self.assertEqual(f.read(), before)

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
