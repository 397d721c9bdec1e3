"""End-to-end tests of `idem reorder`: the binary over pipes and files, real
SQLite files and a real redis-server, live input, kills and reruns."""
import json
import os
import random
import subprocess
import tempfile
import unittest

import redis_server
from harness import IDEM, ROOT, run


def ndjson(records):
    return "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records).encode()


def summary_of(err):
    return json.loads(err.strip().splitlines()[-1])


def lines(out):
    return [json.loads(line) for line in out.decode().splitlines()]


def seqs(out):
    """Records as (partition, seq); gap records as ("gap", partition, from, to)."""
    said = []
    for record in lines(out):
        gap = record.get("_idem", {}).get("gap")
        said.append(("gap", gap["partition"], gap["from"], gap["to"]) if gap else (record["p"], record["seq"]))
    return said


class Reorder(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.store = os.path.join(self.tmp.name, "idem.db")

    def tearDown(self):
        self.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def reorder(self, args, stdin=None):
        store = [] if "--store" in args else ["--store", self.store]
        return run(["reorder", "--summary", "json"] + store + args, stdin=stdin)

    def test_records_leave_in_order_per_partition_byte_for_byte(self):
        # "build finished" before "commit pushed": a CI pipeline's events.
        events = [
            {"p": "pipe-1", "seq": 2, "event": "build.finished", "extra": {"b": 1, "a": 2}},
            {"p": "pipe-2", "seq": 1, "event": "commit.pushed"},
            {"p": "pipe-1", "seq": 1, "event": "commit.pushed"},
            {"p": "pipe-1", "seq": 3, "event": "deploy.started"},
        ]
        raw = b'{"p": "pipe-1",  "seq": 2, "event":"build.finished"}\n' + ndjson(events[1:])
        code, out, err = self.reorder(["--seq", "seq", "--partition", "p", "--start", "1"], raw)
        self.assertEqual(code, 0, err)
        self.assertEqual(out.splitlines(), [
            ndjson([events[1]]).strip(), ndjson([events[2]]).strip(),
            b'{"p": "pipe-1",  "seq": 2, "event":"build.finished"}', ndjson([events[3]]).strip()])
        summary = summary_of(err)
        self.assertEqual((summary["in"], summary["released"], summary["gaps"], summary["held"]), (4, 4, 0, 0))

    def test_a_full_window_reports_the_gap_as_a_record_and_the_summary_counts_it(self):
        records = [{"p": "a", "seq": n} for n in (1, 2, 5, 6, 7)]
        code, out, err = self.reorder(["--seq", "seq", "--partition", "p", "--start", "1", "--window", "2"],
                                      ndjson(records))
        self.assertEqual(seqs(out), [("a", 1), ("a", 2), ("gap", "a", 3, 4), ("a", 5), ("a", 6), ("a", 7)])
        summary = summary_of(err)
        self.assertEqual((summary["gaps"], summary["missing"], summary["out"]), (1, 2, 6))

    def test_gaps_file_late_file_and_fail_on_for_ci(self):
        records = [{"p": "a", "seq": n} for n in (1, 4, 4, 2, 1)] + [{"p": "b", "seq": 7}]
        args = ["--seq", "seq", "--partition", "p", "--start", "1", "--gaps", self.path("gaps.ndjson"),
                "--late", self.path("late.ndjson")]
        code, out, err = self.reorder(args + ["--fail-on", "gap"], ndjson(records))
        self.assertEqual(code, 1, err)
        self.assertEqual(seqs(out), [("a", 1), ("a", 2), ("a", 4), ("b", 7)])
        with open(self.path("gaps.ndjson")) as f:
            gaps = [json.loads(line)["_idem"]["gap"] for line in f]
        self.assertEqual(gaps, [{"partition": "a", "from": 3, "to": 3, "missing": 1},
                                {"partition": "b", "from": 1, "to": 6, "missing": 6}])
        with open(self.path("late.ndjson")) as f:
            late = [json.loads(line) for line in f]
        self.assertEqual([r["_idem"]["late"]["reason"] for r in late], ["duplicate", "late"])
        self.assertEqual(late[1]["_idem"]["late"]["expected"], 3)
        self.assertTrue(late[1]["_idem"]["late"]["source"].endswith(":5"))
        summary = summary_of(err)
        self.assertEqual(summary["in"], summary["released"] + summary["late"] + summary["duplicates"]
                         + summary["held"] + summary["rejected"])
        self.assertEqual(self.reorder(["--seq", "seq", "--start", "1", "--fail-on", "late", "--store", ":memory:"],
                                      ndjson([{"seq": 1}, {"seq": 1}]))[0], 1)
        self.assertEqual(self.reorder(["--seq", "seq", "--start", "1", "--fail-on", "gap,late",
                                       "--store", ":memory:"], ndjson([{"seq": 1}, {"seq": 2}]))[0], 0)

    def test_without_a_late_file_a_late_record_stays_in_the_output_marked(self):
        code, out, err = self.reorder(["--seq", "seq", "--start", "1"], ndjson([{"seq": 1}, {"seq": 2}, {"seq": 1}]))
        lines = [json.loads(line) for line in out.splitlines()]
        self.assertEqual(len(lines), 3, err)
        self.assertEqual(lines[2]["_idem"]["late"]["reason"], "late")
        self.assertEqual(lines[2]["_idem"]["late"]["source"], "<stdin>:3")
        self.assertEqual(summary_of(err)["late"], 1)

    def test_drop_late_drops_each_with_a_warning_and_its_position(self):
        code, out, err = self.reorder(["--seq", "seq", "--start", "1", "--drop-late"],
                                      ndjson([{"seq": 1}, {"seq": 2}, {"seq": 1}]))
        self.assertEqual(len(out.splitlines()), 2, err)
        self.assertIn("<stdin>:3: late: sequence 1 came after the stream had moved on to 3; dropped (--drop-late)",
                      err)
        self.assertNotIn("partition null", err)
        self.assertEqual(summary_of(err)["late"], 1)

    def test_the_next_chunk_resumes_where_the_last_run_stopped_holding_what_was_held(self):
        rng = random.Random(3)
        records = []
        for n in range(1, 301):
            for p in ("a", "b", "c"):
                if rng.random() > 0.03:
                    records.append((n + rng.uniform(0, 6), {"p": p, "seq": n}))
        records = [r for _, r in sorted(records, key=lambda x: x[0])]
        args = ["--seq", "seq", "--partition", "p", "--window", "20"]
        code, whole, err = self.reorder(args + ["--store", self.path("whole.db")], ndjson(records))
        self.assertEqual(code, 0, err)
        outs = []
        for part in (records[:250], records[250:600], records[600:]):
            code, out, err = self.reorder(args + ["--hold"], ndjson(part))
            self.assertEqual(code, 0, err)
            outs.append(out)
        code, tail, err = self.reorder(args, b"")  # the last run lets what is held go
        self.assertEqual(code, 0, err)
        self.assertGreater(summary_of(err)["restored"], 0)
        self.assertEqual(b"".join(outs) + tail, whole)

    def test_after_a_run_records_already_released_are_late_in_the_next(self):
        args = ["--seq", "seq", "--start", "1", "--late", self.path("late.ndjson")]
        self.reorder(args, ndjson([{"seq": 1}, {"seq": 2}, {"seq": 3}]))
        code, out, err = self.reorder(args, ndjson([{"seq": 2}, {"seq": 4}]))
        self.assertEqual(out, b'{"seq":4}\n')
        self.assertEqual(summary_of(err)["late"], 1)
        code, _, err = run(["reorder", "--reset", "--store", self.store, "--summary", "json"])
        self.assertEqual(code, 0, err)
        code, out, err = self.reorder(["--seq", "seq", "--start", "1"], ndjson([{"seq": 2}, {"seq": 1}]))
        self.assertEqual(out, b'{"seq":1}\n{"seq":2}\n')

    def test_time_mode_orders_under_a_watermark_and_routes_late_records(self):
        times = ["2026-11-30T08:00:10Z", "2026-11-30T08:00:08Z", "2026-11-30T08:00:12Z",
                 "2026-11-30T08:00:30Z", "2026-11-30T08:00:09Z", "2026-11-30T08:00:31Z"]
        records = [{"ts": t, "i": i} for i, t in enumerate(times)]
        code, out, err = self.reorder(["--order-by", "ts", "--max-lateness", "5s", "--late",
                                       self.path("late.ndjson")], ndjson(records))
        self.assertEqual(code, 0, err)
        self.assertEqual([r["i"] for r in lines(out)], [1, 0, 2, 3, 5])
        with open(self.path("late.ndjson")) as f:
            late = [json.loads(line) for line in f]
        self.assertEqual([r["i"] for r in late], [4])
        self.assertEqual(late[0]["_idem"]["late"]["watermark"], "2026-11-30T08:00:25.000Z")

    def test_hybrid_logical_clock_stamps_are_ordered_too(self):
        records = [{"hlc": "1796025600123.2"}, {"hlc": "1796025600123.10"}, {"hlc": "1796025600122.99"}]
        code, out, err = self.reorder(["--order-by", "hlc", "--max-lateness", "1s"], ndjson(records))
        self.assertEqual([r["hlc"] for r in lines(out)], ["1796025600122.99", "1796025600123.2", "1796025600123.10"])

    def test_gap_timeout_by_event_time(self):
        records = [{"seq": 1, "t": 0}, {"seq": 3, "t": 10}, {"seq": 4, "t": 20}, {"seq": 5, "t": 41}, {"seq": 2, "t": 42}]
        code, out, err = self.reorder(["--seq", "seq", "--start", "1", "--gap-timeout", "30s", "--time-field", "t",
                                       "--late", self.path("late.ndjson")], ndjson(records))
        self.assertEqual([r.get("seq", "gap") for r in lines(out)], [1, "gap", 3, 4, 5])
        self.assertEqual(summary_of(err)["timed_out"], 1)
        self.assertEqual(summary_of(err)["late"], 1)

    def test_on_a_live_pipe_a_gap_is_skipped_by_the_wall_clock_while_input_is_quiet(self):
        process = subprocess.Popen([IDEM, "reorder", "--seq", "seq", "--start", "1", "--gap-timeout", "300ms",
                                    "--store", ":memory:"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE)
        try:
            process.stdin.write(b'{"seq":1}\n{"seq":3}\n')
            process.stdin.flush()
            got = [process.stdout.readline() for _ in range(3)]  # while stdin stays open
            self.assertEqual(got[0], b'{"seq":1}\n')
            self.assertEqual(json.loads(got[1])["_idem"]["gap"]["from"], 2)
            self.assertEqual(got[2], b'{"seq":3}\n')
        finally:
            process.stdin.close()
            process.wait(timeout=10)
            process.stdout.close()
            process.stderr.close()

    def test_bad_records_are_rejected_with_the_field_that_was_wrong(self):
        raw = b'{"seq":1}\n{"seq":"x"}\n{"other":1}\n{"seq":-4}\nnot json\n{"seq":2}\n'
        code, out, err = self.reorder(["--seq", "seq", "--start", "1", "--reject", self.path("rejects")], raw)
        self.assertEqual(code, 1, err)  # records set aside
        self.assertEqual(out, b'{"seq":1}\n{"seq":2}\n')
        self.assertIn("<stdin>:2: field 'seq' is not a sequence number", err)
        self.assertIn("<stdin>:3: missing field 'seq'", err)
        self.assertEqual(summary_of(err)["rejected"], 4)
        with open(self.path("rejects"), "rb") as f:
            self.assertEqual(f.read(), b'{"seq":"x"}\n{"other":1}\n{"seq":-4}\nnot json\n')
        code, _, err = self.reorder(["--seq", "seq", "--partition", "p", "--strict"], b'{"seq":1}\n')
        self.assertEqual(code, 3)
        self.assertIn("missing partition field 'p'", err)

    def test_partitions_forgotten_to_bound_memory_are_read_back_from_the_store(self):
        first = [{"p": f"p{i}", "seq": 1} for i in range(140_000)]
        again = [{"p": f"p{i}", "seq": 2} for i in range(100)] + [{"p": "p0", "seq": 1}]
        code, out, err = self.reorder(["--seq", "seq", "--partition", "p", "--start", "1"], ndjson(first + again))
        self.assertEqual(code, 0, err)
        summary = summary_of(err)
        self.assertEqual((summary["released"], summary["late"], summary["gaps"]), (140_100, 1, 0))
        self.assertEqual(seqs(out)[-101:-1], [(f"p{i}", 2) for i in range(100)])
        self.assertEqual(json.loads(out.splitlines()[-1])["_idem"]["late"]["partition"], "p0")  # kept, marked

    def test_flags_that_do_not_fit_are_usage_errors(self):
        for args in (["--seq", "a", "--order-by", "b"], [], ["--seq", "a", "--max-lateness", "1s"],
                     ["--order-by", "t", "--gap-timeout", "1s"], ["--seq", "a", "--window", "0"],
                     ["--seq", "a", "--fail-on", "everything"]):
            code, _, err = self.reorder(args, b"")
            self.assertEqual(code, 2, (args, err))


@unittest.skipUnless(redis_server.available(), "redis-server is not installed")
class Suggest(unittest.TestCase):
    """--suggest: the --max-lateness that would have put the late records in order."""

    def test_the_suggested_lateness_puts_every_late_record_in_order(self):
        rng = random.Random(3)
        base = 1796025600
        rows = []
        for n in range(3000):
            at = base + n
            # Most records on time; some a few seconds late, a few a minute late.
            late = rng.choice([0] * 90 + [2] * 8 + [50] * 2)
            rows.append((at + late, {"ts": at, "p": f"p{n % 3}", "n": n}))
        rows.sort(key=lambda row: (row[0], row[1]["n"]))
        stdin = "".join(json.dumps(row) + "\n" for _, row in rows).encode()
        code, out, err = run(["reorder", "--order-by", "ts", "--partition", "p", "--suggest", "--store", ":memory:",
                              "--summary", "json", "-q", "--late", os.devnull], stdin=stdin)
        self.assertEqual(code, 0, err)
        summary = json.loads(err.strip().splitlines()[-1])
        self.assertGreater(summary["late"], 0)
        self.assertIn("came behind a newer one", summary["suggest"])
        everything = summary["suggest"].rsplit("--max-lateness ", 1)[1]
        code, out, err = run(["reorder", "--order-by", "ts", "--partition", "p", "--max-lateness", everything,
                              "--store", ":memory:", "--summary", "json", "-q"], stdin=stdin)
        self.assertEqual(code, 0, err)
        self.assertEqual(json.loads(err.strip().splitlines()[-1])["late"], 0)
        self.assertEqual(len(out.splitlines()), 3000)

    def test_suggest_needs_times(self):
        code, _, err = run(["reorder", "--seq", "n", "--suggest", "--store", ":memory:"], stdin=b"")
        self.assertEqual(code, 2)
        self.assertIn("give --order-by", err)


class RedisStore(unittest.TestCase):
    def test_held_records_and_progress_live_in_redis_between_runs(self):
        with redis_server.running() as uri:
            args = ["reorder", "--seq", "seq", "--partition", "p", "--store", uri, "--summary", "json"]
            code, out, err = run(args + ["--hold"], stdin=ndjson([{"p": "x", "seq": 2}, {"p": "x", "seq": 3}]))
            self.assertEqual((code, out), (0, b""), err)
            self.assertEqual(summary_of(err)["held"], 2)
            code, out, err = run(args + ["--start", "1"], stdin=ndjson([{"p": "x", "seq": 1}, {"p": "x", "seq": 4}]))
            self.assertEqual(code, 0, err)
            self.assertEqual(seqs(out), [("x", 1), ("x", 2), ("x", 3), ("x", 4)])
            code, out, err = run(args + ["--drop-late"], stdin=ndjson([{"p": "x", "seq": 3}, {"p": "x", "seq": 5}]))
            self.assertEqual(seqs(out), [("x", 5)])
            self.assertEqual(summary_of(err)["late"], 1)


class EarlierRuns(unittest.TestCase):
    """Issue #12 item 22: state an earlier run left is said, not hidden."""

    def test_a_rerun_over_a_kept_store_says_what_it_resumed(self):
        with tempfile.TemporaryDirectory() as tmp:
            store = os.path.join(tmp, "idem.db")
            events = os.path.join(ROOT, "samples", "events", "ci-pipeline.ndjson")
            args = ["reorder", "--seq", "seq", "--partition", "pipeline", "--start", "1", "--gap-timeout", "30s",
                    "--time-field", "at", "--store", store, events]
            code, first, err = run(args)
            self.assertNotIn("earlier run", err)
            code, again, err = run(args)
            # Every record was released by the first run: each is late now, kept and marked.
            self.assertTrue(all("late" in json.loads(line)["_idem"] for line in again.splitlines()), again)
            self.assertIn("resumed 2 partitions and 0 held records that an earlier run left", err)
            self.assertIn("--store :memory: or --reset for a fresh run", err)
            code, fresh, err = run(args[:-3] + ["--store", ":memory:", events])
            self.assertEqual(fresh, first)
            self.assertNotIn("earlier run", err)
