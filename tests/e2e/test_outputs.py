"""The output layer (docs/architecture.md, "The output layer"): no output
empties an input, every side output survives a kill and a rerun, a rerun
reports the whole input, one run at a time owns -o FILE, temporary files
are never followed as symlinks, config files are bounded and refuse keys
given twice, and untrusted numbers never wrap or abort."""
import json
import os
import sqlite3
import stat
import subprocess
import tempfile
import time
import unittest

from harness import IDEM, KillAndRerun, ndjson, run, summary_of

EVENTS = [{"id": "a", "status": "pending", "v": 1}, {"id": "a", "status": "paid", "v": 2},
          {"id": "b", "status": "pending", "v": 1}]
RULES = "rules:\n  - type: note\n    window: 5m\n    fields: [user]\n    action: merge_content\n"


def write(path, data):
    with open(path, "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)


def read(path):
    with open(path, "rb") as f:
        return f.read()


class OutputNamesAnInput(unittest.TestCase):
    """Each case names an input (or another output) as an output: refused
    before anything is read, exit 2, every file as it was."""

    def cases(self, tmp):
        log = os.path.join(tmp, "in.ndjson")
        rules = os.path.join(tmp, "rules.yaml")
        write(rules, RULES)
        states = ["states", "--entity", "id", "--state", "status", "--allow", "pending>paid"]
        merge = ["merge", "--group", "id", "--window", "5m"]
        return log, [
            states + ["-o", log, log],
            states + ["--reject", log, log],
            states + ["--invalid", os.path.join(tmp, ".", "in.ndjson"), log],
            merge + ["-o", log, log],
            merge + ["--late", log, log],
            merge + ["--members", log, log],
            ["merge", "--rules", rules, "-o", rules, log],
            ["dedup", "--key", "id", "--store", ":memory:", "-o", log, log],
            ["dedup", "--key", "id", "--store", ":memory:", "--dups", log, log],
            ["reorder", "--seq", "v", "--store", ":memory:", "--gaps", log, log],
            ["audit", "--key", "id", "-o", log, log],
            ["verify", "--secret", "s", "--invalid", log, log],
            ["reconcile", "--stage", f"a={log}", "--stage", f"b={log}", "--key", "id", "--missing", log],
            ["reconcile", "--stage", f"a={log}", "--stage", f"b={log}", "--key", "id", "-o", log],
            ["states", "--entity", "id", "--state", "status", "--allow", "pending>paid", "--metrics", log, log],
            ["reorder", "--seq", "v", "--store", ":memory:", "--late", log, log],
            ["probe", "--to", "http://127.0.0.1:9/", "--template", log, "-o", log],
            ["probe", "--to", "http://127.0.0.1:9/", "--template", log, "--ledger", log],
            ["probe", "--to", "http://127.0.0.1:9/", "--effects-sqlite", log,
             "--effects-query", "SELECT count(*) FROM effects WHERE key = :key", "--ledger", log],
        ]

    def test_an_output_that_names_an_input_is_refused_and_the_input_kept(self):
        with tempfile.TemporaryDirectory() as tmp:
            log, cases = self.cases(tmp)
            for args in cases:
                write(log, ndjson(EVENTS))
                with self.subTest(args=args):
                    code, out, err = run(args)
                    self.assertEqual(code, 2, err)
                    self.assertIn("idem never writes over what it reads", err)
                    self.assertEqual(read(log), ndjson(EVENTS))

    def test_a_symlink_or_hard_link_to_the_input_is_the_input(self):
        with tempfile.TemporaryDirectory() as tmp:
            log = os.path.join(tmp, "in.ndjson")
            write(log, ndjson(EVENTS))
            os.symlink(log, os.path.join(tmp, "soft"))
            os.link(log, os.path.join(tmp, "hard"))
            for name in ("soft", "hard"):
                code, _, err = run(["dedup", "--key", "id", "--store", ":memory:", "-o",
                                    os.path.join(tmp, name), log])
                self.assertEqual(code, 2, err)
                self.assertEqual(read(log), ndjson(EVENTS))

    def test_two_outputs_naming_one_file_are_refused_before_it_exists(self):
        with tempfile.TemporaryDirectory() as tmp:
            log = os.path.join(tmp, "in.ndjson")
            write(log, ndjson(EVENTS))
            out = os.path.join(tmp, "x.ndjson")
            code, _, err = run(["merge", "--group", "id", "--window", "5m", "-o", out, "--members",
                                os.path.join(tmp, ".", "x.ndjson"), log])
            self.assertEqual(code, 2, err)
            self.assertIn("each output needs a file of its own", err)
            self.assertFalse(os.path.exists(out))

    def test_devices_and_stdin_are_no_clash(self):
        with tempfile.TemporaryDirectory() as tmp:
            log = os.path.join(tmp, "in.ndjson")
            write(log, ndjson(EVENTS))
            code, _, err = run(["dedup", "--key", "id", "--store", ":memory:", "-o", "/dev/null",
                                "--dups", "/dev/null", log])
            self.assertEqual(code, 0, err)


class RejectAcrossStages(unittest.TestCase):
    def test_reconcile_reject_keeps_every_stage_s_bad_lines_in_one_file(self):
        # Two NDJSON stages, the second with a bad line: no crash, the bad
        # line in the reject file, the report written.
        with tempfile.TemporaryDirectory() as tmp:
            sent, app = os.path.join(tmp, "sent.ndjson"), os.path.join(tmp, "app.ndjson")
            write(sent, ndjson([{"id": "1"}, {"id": "2"}]) + b"{bad one\n")
            write(app, ndjson([{"id": "1"}]) + b"{bad two\n")
            reject, report = os.path.join(tmp, "rejects"), os.path.join(tmp, "report.json")
            code, _, err = run(["reconcile", "--stage", f"sent={sent}", "--stage", f"app={app}", "--key", "id",
                                "--reject", reject, "--report", "json", "-o", report, "--summary", "json"])
            self.assertEqual(code, 1, err)  # rejected records make it 1; never a signal
            self.assertEqual(read(reject), b"{bad one\n{bad two\n")
            self.assertTrue(os.path.exists(report))
            self.assertEqual(summary_of(err)["rejected"], 2)
            self.assertEqual([n for n in os.listdir(tmp) if "partial" in n], [])


def with_bad_lines(records, every):
    lines = []
    for i, record in enumerate(records):
        lines.append(json.dumps(record).encode())
        if i % every == 0:
            lines.append(b'{"broken": ' + str(i).encode())
    return b"\n".join(lines) + b"\n"


class SideOutputsSurviveKills(unittest.TestCase):
    """Every side output, the reject file included, is byte-identical after
    kills and reruns to one clean run's, and a rerun of a finished run
    leaves it whole."""

    def check(self, args, outputs, source, seed):
        with tempfile.TemporaryDirectory() as tmp:
            harness = KillAndRerun(self, tmp, args, outputs, source, seed=seed, clean_code=1)
            harness.run_through()
            rejects = harness.read("clean", "--reject")
            self.assertGreater(rejects.count(b"\n"), 10)
            code, _, err = run(harness.command("killed"))
            self.assertEqual(code, 1, err)  # the rejects of the finished run still count
            harness.assert_same_outputs()

    def test_merge_keeps_its_rejects_through_kills_and_reruns(self):
        from test_merge import SEED_RULES, seed_stream
        with tempfile.TemporaryDirectory() as rules_dir:
            rules = os.path.join(rules_dir, "merge.yaml")
            write(rules, SEED_RULES)
            self.check(["merge", "--rules", rules, "--time-field", "ts", "--max-lateness", "15s", "-q",
                        "--threads", "1", "--batch", "500"],
                       {"-o": "out.ndjson", "--members": "members.ndjson", "--reject": "rejects.ndjson"},
                       with_bad_lines(seed_stream(count=20000, seed=9, disorder=25), 97), seed=23)

    def test_states_keeps_its_rejects_through_kills_and_reruns(self):
        from test_states import MACHINE, order_streams
        with tempfile.TemporaryDirectory() as machine_dir:
            machine = os.path.join(machine_dir, "orders.yaml")
            write(machine, MACHINE)
            self.check(["states", "--entity", "order_id", "--state", "status", "--machine", machine, "-q",
                        "--threads", "1", "--batch", "300", "--fail-on", "none"],
                       {"-o": "out.ndjson", "--reject": "rejects.ndjson"},
                       with_bad_lines(order_streams(entities=3000, seed=21), 53), seed=29)

    def test_dedup_keeps_its_rejects_through_kills_and_reruns(self):
        records = [{"id": f"e{i % 7000}", "n": i, "pad": "x" * 100} for i in range(20000)]
        self.check(["dedup", "--key", "id", "-q", "--threads", "1", "--batch", "300"],
                   {"-o": "out.ndjson", "--reject": "rejects.ndjson"}, with_bad_lines(records, 61), seed=31)


def kill_after_a_checkpoint(test, args, store):
    """Starts idem with `args` and SIGKILLs it once its store holds a
    checkpoint with records done that is not marked finished."""
    for _ in range(20):
        process = subprocess.Popen([IDEM] + args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            while process.poll() is None:
                try:
                    with sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=0.05) as db:
                        rows = db.execute("SELECT records_done, file_bytes FROM checkpoints").fetchall()
                except sqlite3.Error:
                    rows = []
                if any(done > 0 and "~finished_input" not in files for done, files in rows):
                    process.kill()
                    process.wait()
                    return
                time.sleep(0.002)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        os.unlink(store)
    test.fail("no run was caught between two checkpoints")


class RerunsReportTheWholeInput(unittest.TestCase):
    """A log whose only finding is on its first line exits 1 however the
    run is repeated: clean, rerun when finished, rerun after a kill."""

    def log(self, tmp):
        records = [{"id": "x", "status": "paid", "v": 1}]  # paid without pending: illegal
        records += [{"id": f"o{i}", "status": "pending", "v": 1, "pad": "p" * 200} for i in range(60000)]
        path = os.path.join(tmp, "in.ndjson")
        write(path, ndjson(records))
        return path

    def test_states_exits_on_a_finding_of_the_part_already_done(self):
        with tempfile.TemporaryDirectory() as tmp:
            log = self.log(tmp)
            store = os.path.join(tmp, "s.db")
            args = ["states", "--entity", "id", "--state", "status", "--allow", "pending>paid",
                    "--initial", "pending", "--threads", "1", "--batch", "200", "--store", store,
                    "-o", os.path.join(tmp, "out.ndjson"), "--summary", "json", log]
            code, _, err = run(args)
            self.assertEqual(code, 1, err)
            clean = summary_of(err)
            code, _, err = run(args)  # the finished run again
            self.assertEqual(code, 1, err)
            self.assertEqual(summary_of(err)["illegal"], clean["illegal"])
            os.unlink(store)
            os.unlink(os.path.join(tmp, "out.ndjson"))
            kill_after_a_checkpoint(self, args, store)
            code, _, err = run(args)  # resumed past the finding
            self.assertEqual(code, 1, err)
            resumed = summary_of(err)
            for name in ("illegal", "ok", "events", "out"):
                self.assertEqual(resumed[name], clean[name], name)

    def test_a_resumed_run_counts_the_rejects_of_the_part_already_done(self):
        with tempfile.TemporaryDirectory() as tmp:
            records = [{"id": f"e{i}", "pad": "p" * 200} for i in range(60000)]
            log = os.path.join(tmp, "in.ndjson")
            write(log, b"{not json\n" + ndjson(records))
            store = os.path.join(tmp, "s.db")
            args = ["dedup", "--key", "id", "--threads", "1", "--batch", "200", "--store", store,
                    "-o", os.path.join(tmp, "out.ndjson"), "--reject", os.path.join(tmp, "rej"),
                    "--summary", "json", log]
            kill_after_a_checkpoint(self, args, store)
            code, _, err = run(args)
            self.assertEqual(code, 1, err)  # a rejected record, though this run rejected none
            summary = summary_of(err)
            self.assertEqual(summary["rejected"], 1)
            self.assertEqual(summary["unique"], 60000)
            self.assertEqual(read(os.path.join(tmp, "rej")), b"{not json\n")


class OneRunOwnsAnOutput(unittest.TestCase):
    def test_two_states_runs_on_one_output_take_turns(self):
        from test_states import MACHINE, order_streams
        with tempfile.TemporaryDirectory() as tmp:
            machine = os.path.join(tmp, "orders.yaml")
            write(machine, MACHINE)
            log = os.path.join(tmp, "in.ndjson")
            write(log, ndjson(order_streams(entities=6000, seed=5)))

            def args(prefix):
                return ["states", "--entity", "order_id", "--state", "status", "--machine", machine,
                        "--threads", "1", "--batch", "300", "--fail-on", "none", "--summary", "json",
                        "--store", os.path.join(tmp, prefix + ".db"), "-o", os.path.join(tmp, prefix + ".out"), log]

            code, _, err = run(args("clean"))
            self.assertEqual(code, 0, err)
            clean = summary_of(err)
            both = [subprocess.Popen([IDEM] + args("twice"), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                    for _ in range(2)]
            results = [(p.wait(timeout=120), p.stderr.read().decode()) for p in both]
            for code, err in results:
                self.assertEqual(code, 0, err)
            self.assertEqual(read(os.path.join(tmp, "twice.out")), read(os.path.join(tmp, "clean.out")))
            # Whichever ran second found the first one's work done, and says
            # the same as the clean run.
            for _, err in results:
                self.assertEqual(summary_of(err)["illegal"], clean["illegal"])

    def test_a_run_still_holding_the_output_past_the_lock_timeout_is_refused(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "out.ndjson")
            log = os.path.join(tmp, "in.ndjson")
            write(log, ndjson(EVENTS))
            holder = subprocess.Popen(["python3", "-c",
                                       "import fcntl,sys,time; f=open(sys.argv[1],'a'); fcntl.flock(f, fcntl.LOCK_EX);"
                                       " print('held', flush=True); time.sleep(30)", out], stdout=subprocess.PIPE)
            try:
                holder.stdout.readline()
                code, _, err = run(["states", "--entity", "id", "--state", "status", "--allow", "pending>paid",
                                    "--store", os.path.join(tmp, "s.db"), "--lock-timeout", "200ms",
                                    "-o", out, log])
                self.assertEqual(code, 4, err)
                self.assertIn("the output of another idem run", err)
            finally:
                holder.kill()
                holder.wait()


class ReplacedFiles(unittest.TestCase):
    def test_a_symlink_planted_where_a_report_is_written_is_never_followed(self):
        # The old name was .FILE.partial-<PID>: plant a symlink for every
        # PID the next processes could get; the victim must stay as it was.
        with tempfile.TemporaryDirectory() as tmp:
            log = os.path.join(tmp, "in.ndjson")
            write(log, ndjson(EVENTS))
            victim = os.path.join(tmp, "victim")
            write(victim, "precious\n")
            start = os.getpid()
            for pid in range(start, start + 400):
                os.symlink(victim, os.path.join(tmp, f".report.json.partial-{pid}"))
            code, _, err = run(["audit", "--key", "id", "--format", "json", "-o",
                                os.path.join(tmp, "report.json"), log])
            self.assertIn(code, (0, 1), err)
            self.assertEqual(read(victim), b"precious\n")
            self.assertIn(b'"groups"', read(os.path.join(tmp, "report.json")))

    def test_metrics_never_replaces_a_fifo_or_a_device(self):
        with tempfile.TemporaryDirectory() as tmp:
            log = os.path.join(tmp, "in.ndjson")
            write(log, ndjson(EVENTS))
            fifo = os.path.join(tmp, "fifo")
            os.mkfifo(fifo)
            for target in (fifo, "/dev/full"):
                code, _, err = run(["dedup", "--key", "id", "--store", ":memory:", "--metrics", target, log])
                self.assertEqual(code, 2, err)
                self.assertIn("is not a regular file", err)
            self.assertTrue(stat.S_ISFIFO(os.stat(fifo).st_mode))
            self.assertTrue(stat.S_ISCHR(os.stat("/dev/full").st_mode))


class ConfigFiles(unittest.TestCase):
    def test_config_and_secret_files_are_bounded_and_directories_refused(self):
        with tempfile.TemporaryDirectory() as tmp:
            log = os.path.join(tmp, "in.ndjson")
            write(log, ndjson(EVENTS))
            cases = {
                "rules file": ["merge", "--rules", "{}", log],
                "machine file": ["states", "--entity", "id", "--state", "status", "--machine", "{}", log],
                "provider file": ["verify", "--provider-file", "{}", "--secret", "s", log],
                "--secret-file": ["verify", "--secret-file", "{}", log],
            }
            for what, args in cases.items():
                for path, expected in (("/dev/zero", "is larger than"), (tmp, "is a directory")):
                    if what == "provider file" and path == tmp:
                        continue  # a directory of provider files is read as such
                    with self.subTest(what=what, path=path):
                        code, _, err = run([a.replace("{}", path) for a in args])
                        self.assertEqual(code, 2, err)
                        self.assertIn(expected, err)
                        self.assertIn(what, err)

    def test_a_key_given_twice_is_refused_at_its_second_place(self):
        with tempfile.TemporaryDirectory() as tmp:
            log = os.path.join(tmp, "in.ndjson")
            write(log, ndjson(EVENTS))
            rules, machine, provider = (os.path.join(tmp, n) for n in ("r.yaml", "m.yaml", "p.yaml"))
            write(rules, "rules:\n  - type: note\n    window: 5m\n    window: 1h\n    fields: [user]\n"
                         "    action: merge_content\n")
            write(machine, "states: [pending, paid]\ninitial: [pending]\ninitial: [paid]\n"
                           "transitions:\n  - pending > paid\n")
            write(provider, "name: acme\nsignature_header: X-Sig\nsecret: text\nalgorithm: sha1\n"
                            "algorithm: sha512\nencoding: hex\nmessage: \"{body}\"\n")
            for args, where in ((["merge", "--rules", rules, log], "r.yaml:4:5"),
                                (["states", "--entity", "id", "--state", "status", "--machine", machine, log],
                                 "m.yaml:3:1"),
                                (["verify", "--provider-file", provider, "--secret", "s", log], "p.yaml:5:1")):
                with self.subTest(args=args):
                    code, _, err = run(args)
                    self.assertEqual(code, 2, err)
                    self.assertIn(where, err)
                    self.assertIn("given twice", err)


class UntrustedNumbers(unittest.TestCase):
    def test_reconcile_traces_with_bad_numbers_are_rejects_and_counts_add_up(self):
        def span(trace, start, name="charge"):
            item = {"name": name, "startTimeUnixNano": start}
            if trace:
                item["traceId"] = trace
            return item

        def request(spans):
            return {"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}

        lines = [
            request([span("t1", "1764489600000000000")]),
            request([span("t2", "99999999999999999999999")]),
            request([span("t3", "NaN")]),
            request([span("t4", "12abc")]),
            request([span("", "1764489600000000000")]),
            {"resourceSpans": "notalist"},
            request([span("t5", 1764489601000000000)]),
        ]
        with tempfile.TemporaryDirectory() as tmp:
            traces = os.path.join(tmp, "traces.ndjson")
            write(traces, ndjson(lines))
            app = os.path.join(tmp, "app.ndjson")
            write(app, ndjson([{"trace": "t1"}, {"trace": "t5"}]))
            reject = os.path.join(tmp, "rej")
            code, _, err = run(["reconcile", "--traces", traces, "--stage", "charge=span:charge", "--stage",
                                f"app={app}", "--key", "app=trace", "--reject", reject, "--summary", "json"])
            self.assertEqual(code, 1, err)  # rejects, never an internal error
            self.assertNotIn("internal error", err)
            summary = summary_of(err)
            self.assertEqual(summary["rejected"], 5)
            self.assertEqual(summary["in"], 2 + 2 + 5)
            self.assertIn("is not a count of nanoseconds", err)
            self.assertIn("span without a traceId", err)
            self.assertIn("resourceSpans is not a list", err)
            self.assertEqual(read(reject).count(b"\n"), 5)

    def test_versions_and_sequences_never_wrap_at_2_to_the_63(self):
        top = 2 ** 63 - 1
        with tempfile.TemporaryDirectory() as tmp:
            log = os.path.join(tmp, "in.ndjson")
            write(log, ndjson([{"id": "a", "status": "pending", "v": top - 1},
                               {"id": "a", "status": "paid", "v": top}, {"id": "a", "status": "paid", "v": 1}]))
            code, out, err = run(["states", "--entity", "id", "--state", "status", "--allow", "pending>paid",
                                  "--version-field", "v", "--first-version", str(top - 1), "--store", ":memory:",
                                  "--summary", "json", log])
            self.assertNotIn("-9223372036854775808", err + out.decode())
            summary = summary_of(err)
            self.assertEqual(summary["rejected"], 1, err)  # 2^63-1 is past the end
            self.assertEqual(summary["ok"], 1, err)  # v=1 is stale, never "ok"
            write(log, ndjson([{"p": 1, "seq": top - 1}, {"p": 1, "seq": top}, {"p": 1, "seq": 5}]))
            code, out, err = run(["reorder", "--seq", "seq", "--partition", "p", "--store", ":memory:",
                                  "--summary", "json", log])
            self.assertNotIn("9223372036854775809", err + out.decode())
            self.assertEqual(summary_of(err)["rejected"], 1, err)

    def test_a_negative_first_version_is_a_usage_error(self):
        code, _, err = run(["states", "--entity", "id", "--state", "status", "--allow", "a>b",
                            "--version-field", "v", "--first-version", "-5"], stdin=b"")
        self.assertEqual(code, 2, err)
        self.assertIn("--first-version", err)


if __name__ == "__main__":
    unittest.main()



class MergeMemoryIsBounded(unittest.TestCase):
    """Sliding windows share one copy of a member; --max-open-bytes stops a
    run with a clear message (exit 3) before memory runs out."""

    def log(self, tmp, count=300, size=100000):
        path = os.path.join(tmp, "big.ndjson")
        write(path, ndjson([{"g": 1, "ts": f"2026-11-30T08:{i // 60:02d}:{i % 60:02d}Z", "text": "x" * size}
                            for i in range(count)]))
        return path

    def test_records_of_many_sliding_windows_are_held_once(self):
        with tempfile.TemporaryDirectory() as tmp:
            # 300 records of 20 kB: held 60 times over they would pass 350 MB,
            # five times the bound below; held once, 6 MB. (Each window's merged
            # record holds every event, so the output is 60 of those.)
            size = 20000
            log = self.log(tmp, size=size)
            args = ["merge", "--group", "g", "--window", "1h", "--every", "1m", "--time-field", "ts",
                    "--agg", "events=append(.)", "--summary", "json", log]
            timed = subprocess.run(["/usr/bin/time", "-f", "%M", IDEM] + args, capture_output=True, timeout=300)
            self.assertEqual(timed.returncode, 0, timed.stderr.decode())
            lines = timed.stderr.decode().strip().splitlines()
            rss = int(lines[-1]) * 1024
            summary = json.loads(lines[-2])
            self.assertLess(summary["peak_open_bytes"], 2 * 300 * size)  # ~once each, not 60 times
            # The bound docs/merge.md states: the open windows twice, 50 MB,
            # and the merged record being written (here each holds every event).
            largest = max(len(line) for line in timed.stdout.splitlines())
            if os.environ.get("IDEM_SANITIZED") != "1":  # a sanitizer's shadow memory is not merge's
                self.assertLess(rss, 2 * summary["peak_open_bytes"] + 50 * 2 ** 20 + 2 * largest)
            self.assertGreaterEqual(summary["out"], 60)  # every window of the hour and the five minutes

    def test_past_max_open_bytes_the_run_stops_with_exit_3_and_says_why(self):
        with tempfile.TemporaryDirectory() as tmp:
            log = self.log(tmp, count=100)
            code, _, err = run(["merge", "--group", "g", "--window", "1h", "--every", "1m", "--time-field", "ts",
                                "--agg", "events=append(.)", "--max-open-bytes", "4MiB", log])
            self.assertEqual(code, 3, err)
            self.assertIn("more than --max-open-bytes 4 MiB allows", err)
            self.assertIn("big.ndjson:", err)
