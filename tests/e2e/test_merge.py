"""End-to-end tests of `idem merge`: the seed's two rules on a generated
stream, checked against an independent Python computation; every window
kind, bypass, preview, late records, members, conservation, and errors."""
import json
import os
import random
import tempfile
import unittest
from collections import defaultdict
from datetime import datetime, timedelta, timezone

from harness import ndjson, run, summary_of

SEED_RULES = """message_merger:
  rules:
    - type: notification
      window: 5m
      fields: [user_id, alert_type]
      action: merge_content
    - type: metrics
      window: 1m
      fields: [device_id, metric_name]
      action: average
"""

T0 = datetime(2026, 11, 30, 8, 0, 0, tzinfo=timezone.utc)


def stamp(seconds):
    return (T0 + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def seed_stream(count=20000, seed=3, disorder=20):
    """Notifications and metrics interleaved over an hour, each arriving up
    to `disorder` seconds out of order, some critical."""
    rng = random.Random(seed)
    records = []
    for i in range(count):
        at = i * 3600.0 / count
        if rng.random() < 0.5:
            record = {"type": "notification", "user_id": f"u{rng.randint(1, 40)}",
                      "alert_type": rng.choice(["disk", "cpu", "login"]), "msg": f"m{i}"}
            if rng.random() < 0.03:
                record["priority"] = "critical"
        else:
            record = {"type": "metrics", "device_id": f"d{rng.randint(1, 15)}",
                      "metric_name": rng.choice(["cpu", "mem"]), "value": rng.randint(0, 1000) / 10}
        records.append((at + rng.uniform(0, disorder), at, record))
    records.sort(key=lambda r: r[0])  # arrival order: event time plus a delay
    out = []
    for _, at, record in records:
        record["ts"] = stamp(at)
        out.append(record)
    if count > 10:
        out.insert(7, {"type": "other", "n": 1})
    return out


def expected_seed_merge(records):
    """The seed's rules computed independently: window -> members, in arrival order."""
    windows = defaultdict(list)
    bypassed = unmatched = 0
    for record in records:
        if record.get("priority") == "critical":
            bypassed += 1
            continue
        if record["type"] not in ("notification", "metrics"):
            unmatched += 1
            continue
        seconds = (datetime.fromisoformat(record["ts"].replace("Z", "+00:00")) - T0).total_seconds()
        if record["type"] == "notification":
            key = ("notification", (record["user_id"], record["alert_type"]), int(seconds // 300) * 300)
        else:
            key = ("metrics", (record["device_id"], record["metric_name"]), int(seconds // 60) * 60)
        windows[key].append(record)
    return windows, bypassed, unmatched


def merged_key(record):
    merge = record["_idem"]["merge"]
    start = datetime.fromisoformat(merge["window"]["start"].replace("Z", "+00:00"))
    return merge["rule"], tuple(merge["group"]), int((start - T0).total_seconds())


def conserved(test, summary):
    """Every record is accounted for, in all and per rule."""
    test.assertEqual(summary["in"], summary["merged"] + summary["bypassed"] + summary["late"]
                     + summary["unmatched"] + summary.get("unkeyed", 0) + summary["rejected"], summary)
    test.assertEqual(summary["merged_away"], max(0, summary["merged"] - summary.get("out", summary.get("would_be_out"))))
    if summary.get("unkeyed", 0) == 0:
        for rule in summary.get("rules", []):
            test.assertEqual(rule["merged"] + rule["bypassed"] + rule["late"] + rule["rejected"], rule["in"], rule)


class SeedRules(unittest.TestCase):
    def test_the_seeds_two_rules_match_an_independent_computation(self):
        records = seed_stream()
        with tempfile.TemporaryDirectory() as tmp:
            rules = os.path.join(tmp, "merge.yaml")
            with open(rules, "w") as f:
                f.write(SEED_RULES)
            source = os.path.join(tmp, "events.ndjson")
            with open(source, "wb") as f:
                f.write(ndjson(records))
            code, out, err = run(["merge", "--rules", rules, "--time-field", "ts", "--max-lateness", "30s",
                                  "--bypass", "priority=critical", "--summary", "json", source])
            self.assertEqual(code, 0, err)
            summary = summary_of(err)
            conserved(self, summary)
            expected, bypassed, unmatched = expected_seed_merge(records)
            self.assertEqual((summary["late"], summary["bypassed"], summary["unmatched"]), (0, bypassed, unmatched))
            lines = [json.loads(line) for line in out.splitlines()]
            merged = [r for r in lines if "merge" in r.get("_idem", {}) and "id" in r["_idem"]["merge"]]
            self.assertEqual(len([r for r in lines if r.get("_idem", {}).get("merge", {}).get("bypassed")]), bypassed)
            self.assertEqual(len(merged), len(expected))
            self.assertEqual(summary["out"], len(expected))
            ends = []
            for record in merged:
                key = merged_key(record)
                members = expected[key]
                meta = record["_idem"]["merge"]
                self.assertEqual(meta["count"], len(members), key)
                self.assertEqual(record["count"], len(members))
                ends.append(meta["window"]["end"])
                if key[0] == "notification":
                    self.assertEqual(record["merged"], members, key)  # every event, in arrival order
                    self.assertEqual(record["msg"], members[0]["msg"])  # the first member is the base
                else:
                    average = sum(m["value"] for m in members) / len(members)
                    self.assertAlmostEqual(record["value"], average, places=9)
                    self.assertEqual(record["ts"], members[-1]["ts"])  # average keeps the last member
            self.assertEqual(ends, sorted(ends), "merged records come out in window-close order")
            rule_counts = {r["rule"]: r for r in summary["rules"]}
            self.assertEqual(rule_counts["notification"]["out"],
                             len([k for k in expected if k[0] == "notification"]))
            self.assertGreater(summary["drop_rate"], 0.5)

    def test_members_name_the_merged_record_they_went_into(self):
        records = seed_stream(count=3000, seed=5)
        with tempfile.TemporaryDirectory() as tmp:
            rules = os.path.join(tmp, "merge.yaml")
            with open(rules, "w") as f:
                f.write(SEED_RULES)
            members = os.path.join(tmp, "members.ndjson")
            code, out, err = run(["merge", "--rules", rules, "--time-field", "ts", "--max-lateness", "30s",
                                  "--members", members, "-q"], stdin=ndjson(records))
            self.assertEqual(code, 0, err)
            ids = {}
            for line in out.splitlines():
                record = json.loads(line)
                meta = record.get("_idem", {}).get("merge", {})
                if "id" in meta:
                    ids[meta["id"]] = meta["count"]
            into = defaultdict(int)
            with open(members) as f:
                for line in f:
                    for merged_id in json.loads(line)["_idem"]["merge"]["into"]:
                        into[merged_id] += 1
            self.assertEqual(dict(into), ids)


class Windows(unittest.TestCase):
    def merge(self, args, records):
        code, out, err = run(["merge", "--summary", "json"] + args, stdin=ndjson(records))
        self.assertEqual(code, 0, err)
        conserved(self, summary_of(err))
        return [json.loads(line) for line in out.splitlines()], summary_of(err)

    def test_sliding_windows_hold_a_record_in_each_window_that_covers_it(self):
        records = [{"g": "a", "v": 1, "ts": stamp(s)} for s in (30, 90, 150)]
        out, summary = self.merge(["--group", "g", "--window", "2m", "--every", "1m", "--time-field", "ts",
                                   "--agg", "total=sum(v),n=count()"], records)
        windows = [(r["_idem"]["merge"]["window"]["start"][11:16], r["n"]) for r in out]
        self.assertEqual(windows, [("07:59", 1), ("08:00", 2), ("08:01", 2), ("08:02", 1)])
        self.assertEqual(summary["merged"], 3)

    def test_session_windows_close_after_the_gap(self):
        records = [{"g": "a", "ts": stamp(s), "text": f"t{s}"} for s in (0, 20, 45, 200, 210)]
        records.append({"g": "b", "ts": stamp(215), "text": "other"})
        out, _ = self.merge(["--group", "g", "--gap", "30s", "--time-field", "ts",
                             "--agg", "texts=concat(text,'|'),n=count()"], records)
        self.assertEqual([(r["g"], r["texts"]) for r in out], [("a", "t0|t20|t45"), ("a", "t200|t210"), ("b", "other")])

    def test_max_count_flushes_a_window_early(self):
        records = [{"g": "a", "ts": stamp(s)} for s in range(5)]
        out, _ = self.merge(["--group", "g", "--window", "1h", "--max-count", "2", "--time-field", "ts"], records)
        self.assertEqual([r["_idem"]["merge"]["count"] for r in out], [2, 2, 1])
        self.assertEqual(len({r["_idem"]["merge"]["id"] for r in out}), 3)

    def test_every_aggregate_function(self):
        records = [{"g": "a", "v": v, "s": s, "ts": stamp(i)} for i, (v, s) in
                   enumerate([(3, "x"), (1.5, "y"), (7, "x")])]
        out, _ = self.merge(["--group", "g", "--window", "1h", "--time-field", "ts", "--base", "last", "--agg",
                             "f=first(s),l=last(s),a=append(v),c=concat(s,'-'),sum=sum(v),avg=avg(v),"
                             "min=min(v),max=max(v),n=count(),d=distinct(s)"], records)
        (record,) = out
        self.assertEqual((record["f"], record["l"], record["a"], record["c"]), ("x", "x", [3, 1.5, 7], "x-y-x"))
        self.assertEqual((record["sum"], record["min"], record["max"], record["n"], record["d"]),
                         (11.5, 1.5, 7, 3, ["x", "y"]))
        self.assertAlmostEqual(record["avg"], 11.5 / 3)
        self.assertEqual(record["ts"], stamp(2))  # --base last


class Routing(unittest.TestCase):
    def test_late_records_go_to_the_late_file_with_the_reason(self):
        records = [{"g": "a", "ts": stamp(0)}, {"g": "a", "ts": stamp(130)}, {"g": "a", "ts": stamp(10)}]
        with tempfile.TemporaryDirectory() as tmp:
            late = os.path.join(tmp, "late.ndjson")
            code, out, err = run(["merge", "--group", "g", "--window", "1m", "--time-field", "ts", "--late", late,
                                  "--summary", "json", "--fail-on-late"], stdin=ndjson(records))
            self.assertEqual(code, 1, err)
            with open(late) as f:
                (record,) = [json.loads(line) for line in f]
            self.assertEqual(record["_idem"]["merge"]["late"], True)
            self.assertEqual(record["_idem"]["merge"]["source"], "<stdin>:3")
            summary = summary_of(err)
            self.assertEqual(summary["late"], 1)
            conserved(self, summary)

    def test_bypassed_records_pass_at_once_and_bad_ones_are_rejected_with_the_field_named(self):
        records = [{"g": "a", "v": 1, "ts": stamp(0)}, {"g": "a", "v": 2, "urgent": True, "ts": stamp(1)},
                   {"g": "a", "v": "high", "ts": stamp(2)}, {"v": 4, "ts": stamp(3)}, {"g": "a", "v": 5, "ts": "soon"}]
        with tempfile.TemporaryDirectory() as tmp:
            rejects = os.path.join(tmp, "rejects.ndjson")
            code, out, err = run(["merge", "--group", "g", "--window", "1m", "--time-field", "ts", "--bypass", "urgent",
                                  "--agg", "v=avg(v)", "--reject", rejects, "--summary", "json"], stdin=ndjson(records))
            self.assertEqual(code, 1, err)  # rejected records make the exit 1
            lines = [json.loads(line) for line in out.splitlines()]
            self.assertEqual(lines[0]["_idem"]["merge"], {"bypassed": True})
            self.assertEqual(lines[1]["v"], 1.0)
            self.assertIn("field 'v' is not a number (avg() of v)", err)
            self.assertIn("missing group field 'g'", err)
            self.assertIn("time field 'ts' is not a timestamp", err)
            with open(rejects) as f:
                self.assertEqual(len(f.readlines()), 3)
            conserved(self, summary_of(err))
        # A group path no record holds is a typo unless --allow-absent says so.
        code, out, err = run(["merge", "--group", "g", "--window", "1m", "--missing", "pass", "--summary", "json",
                              "--allow-absent", "g"], stdin=ndjson([{"x": 1}]))
        self.assertEqual((code, json.loads(out)), (0, {"x": 1}))
        self.assertEqual(summary_of(err)["unkeyed"], 1)

    def test_unmatched_records_pass_through_or_go_to_their_file(self):
        records = [{"type": "notification", "user_id": "u", "alert_type": "a", "ts": stamp(0)},
                   {"type": "audit", "ts": stamp(1)}]
        with tempfile.TemporaryDirectory() as tmp:
            rules = os.path.join(tmp, "merge.yaml")
            with open(rules, "w") as f:
                f.write(SEED_RULES)
            code, out, err = run(["merge", "--rules", rules, "--time-field", "ts", "-q"], stdin=ndjson(records))
            self.assertEqual(json.loads(out.splitlines()[0]), records[1])
            unmatched = os.path.join(tmp, "unmatched.ndjson")
            code, out, err = run(["merge", "--rules", rules, "--time-field", "ts", "-q", "--unmatched", unmatched],
                                 stdin=ndjson(records))
            self.assertEqual(len(out.splitlines()), 1)
            with open(unmatched) as f:
                self.assertEqual(json.loads(f.read()), records[1])

    def test_preview_shows_groups_that_would_merge_and_writes_nothing_merged(self):
        records = [{"g": "a", "n": i, "ts": stamp(i)} for i in range(3)] + [{"g": "b", "ts": stamp(5)}]
        code, out, err = run(["merge", "--group", "g", "--window", "1m", "--time-field", "ts", "--preview",
                              "--summary", "json"], stdin=ndjson(records))
        self.assertEqual(code, 0, err)
        (preview,) = [json.loads(line) for line in out.splitlines()]  # b merged nothing
        self.assertEqual([m["n"] for m in preview["members"]], [0, 1, 2])
        self.assertEqual(preview["merged"]["_idem"]["merge"]["count"], 3)
        self.assertEqual(summary_of(err)["would_be_out"], 2)


class LiveInput(unittest.TestCase):
    def test_on_a_quiet_pipe_windows_close_by_the_wall_clock(self):
        import subprocess
        import time
        from harness import IDEM
        process = subprocess.Popen([IDEM, "merge", "--group", "g", "--window", "1s", "-q"], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            process.stdin.write(ndjson([{"g": "a", "n": 1}, {"g": "a", "n": 2}]))
            process.stdin.flush()
            # The records' time is when they were read; nothing newer comes,
            # so only the wall clock can close their window.
            started = time.monotonic()
            line = process.stdout.readline()
            self.assertLess(time.monotonic() - started, 10)
            self.assertEqual(json.loads(line)["_idem"]["merge"]["count"], 2)
        finally:
            process.stdin.close()
            process.wait(timeout=10)
        self.assertEqual(process.returncode, 0)


class Errors(unittest.TestCase):
    def test_a_rules_file_typo_is_a_usage_error_at_its_line(self):
        with tempfile.TemporaryDirectory() as tmp:
            rules = os.path.join(tmp, "merge.yaml")
            with open(rules, "w") as f:
                f.write(SEED_RULES.replace("fields: [device_id", "feilds: [device_id"))
            code, out, err = run(["merge", "--rules", rules], stdin=b"")
            self.assertEqual(code, 2)
            self.assertIn("merge.yaml:9:7: unknown rule key 'feilds'", err)

    def test_flags_that_do_not_fit_are_refused(self):
        for args, words in [
            (["--window", "5m"], "give --group"),
            (["--group", "g"], "give --window"),
            (["--group", "g", "--window", "5m", "--gap", "1m"], "--gap makes session windows"),
            (["--group", "g", "--window", "5m", "--agg", "x=median(v)"], "unknown function 'median'"),
            (["--group", "g", "--window", "1m", "--every", "5m"], "--every is longer"),
            (["--group", "g", "--window", "1m", "--preview", "-o", "x"], "--preview writes no merged output"),
        ]:
            code, _, err = run(["merge"] + args, stdin=b"")
            self.assertEqual(code, 2, args)
            self.assertIn(words, err, args)

    def test_past_max_open_the_run_stops_with_exit_3(self):
        records = [{"g": f"g{i}", "ts": stamp(0)} for i in range(10)]
        code, _, err = run(["merge", "--group", "g", "--window", "1h", "--time-field", "ts", "--max-open", "5"],
                           stdin=ndjson(records))
        self.assertEqual(code, 3, err)
        self.assertIn("raise --max-open", err)


if __name__ == "__main__":
    unittest.main()
