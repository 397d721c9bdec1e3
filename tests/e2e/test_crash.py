"""The crash guarantee (docs/architecture.md): for every subcommand that
writes -o FILE (dedup, reorder, merge, states, and audit's report), a SIGKILL at any of dozens of points followed by a rerun
over the same input leaves exactly the outputs of one clean run. One
harness (harness.KillAndRerun) runs them all."""
import gzip
import json
import os
import random
import subprocess
import tempfile
import unittest

from harness import KillAndRerun, ndjson, run, summary_of

# Each killed run reads the input up to its crash point, so a suite's
# length follows the binary's speed: under AddressSanitizer (~15x slower)
# each input is a quarter the size: the same kill-and-resume paths, still
# dozens of checkpoints (--batch) apart and killed at as many points. The
# release run keeps the full sizes.
SHRINK = 4 if os.environ.get("IDEM_SANITIZED") == "1" else 1


def sized(count):
    return count // SHRINK


def dedup_events(count, seed, with_times=False):
    rng = random.Random(seed)
    events = []
    for i in range(count):
        event = {"id": f"evt_{i}", "n": i, "pad": "x" * 200}
        if with_times:
            event["at"] = f"2026-11-30T{i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d}Z"
        events.append(event)
        if rng.random() < 0.15:
            repeat = dict(event, id=f"evt_{rng.randint(max(0, i - 500), i)}", n=-1, pad="y")
            events.append(repeat)
    return events


def zstd_decompress(data):
    return subprocess.run(["zstd", "-d", "-q", "-c"], input=data, capture_output=True, check=True).stdout


def without_first_seen(flag, data):
    """A duplicate carries its first copy's time: without --time-field, the
    time it was read, which differs between runs."""
    if flag != "--dups":
        return data
    marks = [json.loads(line) for line in data.splitlines()]
    for mark in marks:
        del mark["_idem"]["dedup"]["first_seen"]
    return marks


class Dedup(unittest.TestCase):
    ARGS = ["dedup", "--key", "id", "-q", "--threads", "1", "--batch", "300"]
    OUTPUTS = {"-o": "out.ndjson", "--dups": "dups.ndjson"}

    def test_killed_at_many_points_the_rerun_output_equals_one_clean_run(self):
        with tempfile.TemporaryDirectory() as tmp:
            harness = KillAndRerun(self, tmp, self.ARGS, self.OUTPUTS, ndjson(dedup_events(sized(40000), 7)))
            harness.run_through(without_first_seen)
            # Finished, perhaps killed before it could exit: a rerun over the
            # same input leaves the outputs as they are.
            loud = [arg for arg in harness.command("killed") if arg != "-q"]
            code, _, err = run(loud)
            self.assertEqual(code, 0, err)
            self.assertIn("already finished", err)
            harness.assert_same_outputs(without_first_seen)
            # Another input (here the same file, grown) starts them anew.
            with open(harness.source, "ab") as f:
                f.write(ndjson([{"id": "evt_new", "n": 0}]))
            code, _, err = run(loud + ["--summary", "json"])
            self.assertEqual(code, 0, err)
            self.assertEqual(summary_of(err)["out"], 1)  # only the new event: the rest are duplicates now

    def test_key_counts_killed_at_many_points_count_every_record_once(self):
        # --counts is written at the end: a resumed run counts again the
        # records the killed ones did, and a rerun of a finished run writes
        # nothing more.
        with tempfile.TemporaryDirectory() as tmp:
            harness = KillAndRerun(
                self, tmp, self.ARGS + ["--time-field", "at"],
                dict(self.OUTPUTS, **{"--counts": "keys.ndjson"}),
                ndjson(dedup_events(sized(30000), 9, with_times=True)), seed=13)
            harness.run_through()
            counts = harness.read("clean", "--counts").splitlines()
            self.assertEqual(sum(json.loads(line)["count"] for line in counts),
                             len(harness.read("clean", "-o").splitlines()) +
                             len(harness.read("clean", "--dups").splitlines()))
            code, _, err = run(harness.command("killed"))
            self.assertEqual(code, 0, err)
            harness.assert_same_outputs()

    def test_compressed_outputs_killed_at_many_points_equal_one_clean_run(self):
        # -o and --dups named .gz or .zst are written compressed, one gzip
        # member or zstd frame per flush: cut back to a commit, a file is a
        # whole stream, and the resumed run's file is the clean run's, byte
        # for byte, and reads back as the plain run's records.
        events = ndjson(dedup_events(sized(30000), 10))
        for suffix, decompress in ((".gz", gzip.decompress), (".zst", zstd_decompress)):
            with self.subTest(suffix=suffix), tempfile.TemporaryDirectory() as tmp:
                outputs = {"-o": "out.ndjson" + suffix, "--dups": "dups.ndjson" + suffix}
                harness = KillAndRerun(self, tmp, self.ARGS, outputs, events, seed=14)
                # -o byte for byte; --dups read back, without the read times
                # its marks carry.
                harness.run_through(lambda flag, data: data if flag == "-o" else
                                    without_first_seen("--dups", decompress(data)))
                plain = os.path.join(tmp, "plain.ndjson")
                code, _, err = run(self.ARGS + ["--store", ":memory:", "-o", plain, harness.source])
                self.assertEqual(code, 0, err)
                with open(plain, "rb") as f:
                    self.assertEqual(decompress(harness.read("killed", "-o")), f.read())
                self.assertNotEqual(harness.read("killed", "-o")[:2], b'{"')

    def test_keep_last_killed_at_many_points_holds_again_what_it_held(self):
        # The copies --keep last holds are committed with the checkpoint: a
        # rerun holds them again instead of losing or repeating them.
        with tempfile.TemporaryDirectory() as tmp:
            harness = KillAndRerun(
                self, tmp, self.ARGS + ["--keep", "last", "--time-field", "at", "--window", "10m"],
                self.OUTPUTS, ndjson(dedup_events(sized(30000), 8, with_times=True)), seed=12)
            harness.run_through()


class Interrupted(unittest.TestCase):
    """Issue 60, item 8 (docs/dedup.md, "Interrupted"): Ctrl-C, then the
    same command again as a person types it. The interrupt is a real
    SIGINT the process raises at a record count (IDEM_CRASH_AT=interrupt:N),
    so it lands at the same point on any machine."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.log = os.path.join(self.tmp.name, "day.ndjson")
        with open(self.log, "wb") as f:
            f.write(ndjson(dedup_events(sized(20000), 8)))
        self.store = os.path.join(self.tmp.name, "idem.db")
        self.args = ["dedup", "--key", "id", "--threads", "1", "--batch", "500", "--store", self.store]
        _, self.clean, _ = run(["dedup", "--key", "id", "--store", ":memory:", self.log])

    def interrupted(self, extra=()):
        at = str(sized(20000) // 3)
        code, out, err = run(self.args + list(extra) + [self.log], env={**os.environ, "IDEM_CRASH_AT": f"interrupt:{at}"})
        self.assertEqual(code, 130, err)
        return out, err

    def test_to_stdout_the_rerun_is_refused_and_resume_to_stdout_completes_the_output(self):
        first, err = self.interrupted()
        self.assertRegex(err, r"idem dedup: interrupted after \d+ records: their verdicts are committed to "
                              r"sqlite:.*idem\.db \(scope 'default'\)")
        self.assertIn("--resume-to-stdout and append (>>)", err)
        self.assertGreater(len(first), 0)
        self.assertTrue(self.clean.startswith(first))  # what it wrote is what one clean run writes first
        # The shell truncated the output for the rerun: it must not exit 0
        # with records left out.
        code, out, err = run(self.args + [self.log])
        self.assertEqual(code, 2, err)
        self.assertEqual(out, b"")
        self.assertRegex(err, r"was interrupted after committing \d+ records")
        self.assertIn("--resume-to-stdout", err)
        code, rest, err = run(self.args + ["--resume-to-stdout", self.log])
        self.assertEqual(code, 0, err)
        self.assertEqual(first + rest, self.clean)
        # The summary speaks for the whole input.
        clean_lines = self.clean.count(b"\n")
        self.assertRegex(err, rf"\b{clean_lines} out\b")
        # Done: the note is gone, a rerun is an ordinary one (every record a
        # duplicate of an earlier run's).
        code, again, err = run(self.args + [self.log])
        self.assertEqual((code, again), (0, b""), err)

    def test_with_an_output_file_the_same_command_resumes_byte_for_byte(self):
        out_path = os.path.join(self.tmp.name, "out.ndjson")
        _, err = self.interrupted(["-o", out_path])
        self.assertIn(f"and '{out_path}' holds their output: run the same command again", err)
        code, _, err = run(self.args + ["-o", out_path, self.log])
        self.assertEqual(code, 0, err)
        with open(out_path, "rb") as f:
            self.assertEqual(f.read(), self.clean)

    def test_a_store_that_ends_with_the_run_says_a_rerun_starts_anew(self):
        code, out, err = run(["dedup", "--key", "id", "--threads", "1", "--batch", "500", "--store", ":memory:",
                              self.log], env={**os.environ, "IDEM_CRASH_AT": "interrupt:100"})
        self.assertEqual(code, 130, err)
        self.assertIn("a rerun starts from scratch", err)


class Reorder(unittest.TestCase):
    def test_killed_at_many_points_the_rerun_output_equals_one_clean_run(self):
        rng = random.Random(11)
        records = []
        for n in range(1, sized(30000) + 1):
            for p in range(4):
                if rng.random() > 0.01:
                    records.append((n + rng.uniform(0, 40), {"p": p, "seq": n, "pad": "x" * 100}))
                if rng.random() < 0.005:  # a duplicate
                    records.append((n + rng.uniform(0, 40), {"p": p, "seq": n, "pad": "dup"}))
        records = [r for _, r in sorted(records, key=lambda x: x[0])]
        with tempfile.TemporaryDirectory() as tmp:
            harness = KillAndRerun(
                self, tmp,
                ["reorder", "--seq", "seq", "--partition", "p", "--window", "30", "-q", "--threads", "1",
                 "--batch", "400"],
                {"-o": "out.ndjson", "--gaps": "gaps.ndjson", "--late": "late.ndjson"}, ndjson(records))
            harness.run_through()


class Merge(unittest.TestCase):
    def test_killed_at_many_points_open_windows_resume_and_the_output_equals_one_clean_run(self):
        from test_merge import SEED_RULES, seed_stream
        with tempfile.TemporaryDirectory() as tmp:
            rules = os.path.join(tmp, "merge.yaml")
            with open(rules, "w") as f:
                f.write(SEED_RULES)
            harness = KillAndRerun(
                self, tmp,
                ["merge", "--rules", rules, "--time-field", "ts", "--max-lateness", "15s", "-q", "--threads", "1",
                 "--batch", "500", "--bypass", "priority=critical"],
                {"-o": "out.ndjson", "--members": "members.ndjson", "--late": "late.ndjson"},
                ndjson(seed_stream(count=sized(120000), seed=9, disorder=25)), seed=13)
            harness.run_through()
            self.assertGreater(len(harness.read("clean", "--late")), 0)  # some arrived too late


class States(unittest.TestCase):
    def test_killed_at_many_points_entities_and_waiting_events_resume_exactly(self):
        from test_states import MACHINE, order_streams
        with tempfile.TemporaryDirectory() as tmp:
            machine = os.path.join(tmp, "orders.yaml")
            with open(machine, "w") as f:
                f.write(MACHINE)
            harness = KillAndRerun(
                self, tmp,
                ["states", "--entity", "order_id", "--state", "status", "--event", "op", "--version-field",
                 "version", "--max-lateness", "30s", "--time-field", "ts", "--stuck-after", "1h", "--machine",
                 machine, "-q", "--threads", "1", "--batch", "300", "--fail-on", "none"],
                {"-o": "out.ndjson", "--invalid": "invalid.ndjson"},
                ndjson(order_streams(entities=sized(12000), seed=21)), seed=17)
            harness.run_through()
            self.assertGreater(len(harness.read("clean", "--invalid")), 0)
            # A kill that lands after the last commit, while the process
            # exits: the rerun finds the input judged and adds nothing (the
            # stuck report included, which a rerun once wrote again).
            code, _, err = run(harness.command("killed"))
            self.assertEqual(code, 0, err)
            harness.assert_same_outputs()


class Audit(unittest.TestCase):
    """audit -o writes a report, not a stream: it appears whole or not at
    all, so a kill never leaves half a report where a script reads it."""

    def test_killed_at_many_points_the_report_is_whole_or_absent_and_a_rerun_equals_one_clean_run(self):
        rng = random.Random(5)
        records = []
        for i in range(sized(150000)):
            key = f"k{rng.randint(0, sized(40000))}"
            records.append({"idempotency_key": key, "user_id": f"u{i % 997}", "fault_type": "x",
                            "ts": f"2026-11-30T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}Z",
                            "agent": f"a{i % 3}"})
        with tempfile.TemporaryDirectory() as tmp:
            harness = KillAndRerun(
                self, tmp,
                ["audit", "--key", "idempotency_key", "--fingerprint", "user_id,fault_type", "--time-field", "ts",
                 "--source-field", "agent", "--format", "json", "-q", "--threads", "1"],
                {"-o": "report.json"}, ndjson(records), store=False, clean_code=1)  # duplicates: exit 1
            harness.clean_run()
            clean = harness.read("clean", "-o")
            json.loads(clean)
            # Each killed run leaves no report or a whole one: never a part.
            def whole_or_absent():
                left = harness.read("killed", "-o")
                self.assertIn(left, (None, clean), "a killed audit left part of a report")

            kills = harness.killed_runs(after_kill=whole_or_absent)
            self.assertGreater(kills, 3)
            self.assertEqual(harness.read("killed", "-o"), clean)
            leftovers = [name for name in os.listdir(tmp) if ".partial-" in name]
            # A killed run's partial file stays beside the report (it was
            # killed); it never takes the report's name.
            self.assertTrue(all(name.startswith(".killed.report.json.partial-") for name in leftovers), leftovers)


if __name__ == "__main__":
    unittest.main()
