"""End-to-end tests of `idem states`: generated order streams with planted
violations of every kind (and a clean stream that must report nothing),
checked against an independent Python checker; out-of-order arrival within
lateness; HLC ordering; persistence across two runs; reports; errors."""
import json
import os
import random
import re
import tempfile
import unittest
from collections import defaultdict
from datetime import datetime, timedelta, timezone

from harness import CHROMIUM, ndjson, rendered_offline, run, summary_of

MACHINE = """states: [pending, paid, shipped, delivered, closed, cancelled, refunded]
initial: [pending]
final: [closed, cancelled, refunded]
transitions:
  - pending > paid : confirm
  - pending > cancelled : cancel
  - paid > refunded : refund
  - paid > shipped
  - shipped > delivered
  - delivered > closed
"""
ALLOWED = {("pending", "paid"), ("pending", "cancelled"), ("paid", "refunded"), ("paid", "shipped"),
           ("shipped", "delivered"), ("delivered", "closed")}
OPERATIONS = {("pending", "paid"): "confirm", ("pending", "cancelled"): "cancel", ("paid", "refunded"): "refund"}
STATES = {"pending", "paid", "shipped", "delivered", "closed", "cancelled", "refunded"}
FINAL = {"closed", "cancelled", "refunded"}
T0 = datetime(2026, 11, 30, 8, 0, 0, tzinfo=timezone.utc)
PLANTS = ["illegal", "repeated", "unknown-state", "bad-start", "version-conflict", "version-gap", "stale",
          "after-final", "stuck"]


def stamp(seconds):
    return (T0 + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def order_streams(entities=400, seed=4, plant=True, jitter=20):
    """Each order's life, one event a minute, arriving up to `jitter`
    seconds out of order; every tenth order (with `plant`) carries one
    planted violation, of each kind in turn."""
    rng = random.Random(seed)
    arrivals = []
    for n in range(entities):
        entity = f"o{n}"
        path = rng.choice([["pending", "paid", "shipped", "delivered", "closed"], ["pending", "cancelled"],
                           ["pending", "paid", "refunded"]])
        kind = PLANTS[(n // 10) % len(PLANTS)] if plant and n % 10 == 0 else None
        if kind in ("illegal", "repeated", "version-conflict", "version-gap", "stale", "stuck") and len(path) < 4:
            path = ["pending", "paid", "shipped", "delivered", "closed"]
        start = n * 7
        events = [{"order_id": entity, "status": s, "version": v + 1, "at": start + v * 60}
                  for v, s in enumerate(path)]
        for i in range(1, len(events)):
            edge = (events[i - 1]["status"], events[i]["status"])
            if edge in OPERATIONS:
                events[i]["op"] = OPERATIONS[edge]
        if kind == "illegal":
            events[2]["status"] = "pending"
        elif kind == "repeated":
            events.insert(2, dict(events[1], at=events[1]["at"] + 1))
        elif kind == "version-conflict":
            events.insert(2, dict(events[1], status="cancelled", at=events[1]["at"] + 1))
        elif kind == "version-gap":
            del events[2]
        elif kind == "stale":
            events.append(dict(events[1], at=events[-1]["at"] + 600))
        elif kind == "unknown-state":
            events[1]["status"] = "lost"
        elif kind == "bad-start":
            events[0]["status"] = "paid"
        elif kind == "after-final":
            events.append({"order_id": entity, "status": "paid", "version": len(events) + 1,
                           "at": events[-1]["at"] + 60})
        elif kind == "stuck":
            events = events[:2]
        for event in events:
            event["ts"] = stamp(event["at"])
            arrivals.append((event["at"] + rng.uniform(0, jitter), event))
    arrivals.sort(key=lambda a: a[0])
    records = []
    for _, event in arrivals:
        record = dict(event)
        del record["at"]
        records.append(record)
    # Entities that end where no one is waiting: a last event far later, so
    # that "stuck" has an event time to be measured against.
    records.append({"order_id": "clock", "status": "pending", "version": 1, "ts": stamp(entities * 7 + 7200)})
    records.append({"order_id": "clock", "status": "cancelled", "op": "cancel", "version": 2,
                    "ts": stamp(entities * 7 + 7200)})
    return records


def python_findings(records, stuck_after=3600):
    """The same rules, written again: per entity, events released in version
    order, a version below the next expected one judged against what was
    applied; missing versions are gaps; after a final state, after-final."""
    per_entity = defaultdict(list)
    for record in records:
        per_entity[record["order_id"]].append(record)
    findings = defaultdict(set)
    latest = max(datetime.fromisoformat(r["ts"].replace("Z", "+00:00")) for r in records)
    for entity, events in per_entity.items():
        state, version, nxt, held, last_at, after_gap = None, None, 1, {}, None, False

        def apply(event):
            nonlocal state, version, last_at, after_gap
            to = event["status"]
            if to not in STATES:
                findings[entity].add("unknown-state")
            if state is None:
                if to in STATES and to != "pending":
                    findings[entity].add("bad-start")
            elif state in FINAL:
                findings[entity].add("after-final")
            elif after_gap:
                pass  # the missing versions' transitions are unknown
            elif to == state:
                findings[entity].add("repeated")
            elif to in STATES and ((state, to) not in ALLOWED or
                                   OPERATIONS.get((state, to), event.get("op", "")) != event.get("op", "")):
                findings[entity].add("illegal")
            if state is None or state not in FINAL:
                state = to
            after_gap = False
            version = max(version or 0, event["version"])
            last_at = datetime.fromisoformat(event["ts"].replace("Z", "+00:00"))

        for event in events:
            v = event["version"]
            if v < nxt:
                if v == version:
                    findings[entity].add("repeated" if event["status"] == state else "version-conflict")
                else:
                    findings[entity].add("stale")
            elif v in held:
                findings[entity].add("repeated" if held[v]["status"] == event["status"] else "version-conflict")
            else:
                held[v] = event
                while nxt in held:
                    apply(held.pop(nxt))
                    nxt += 1
        while held:
            lowest = min(held)
            if lowest > nxt:
                findings[entity].add("version-gap")
                after_gap = state is not None
            nxt = lowest
            while nxt in held:
                apply(held.pop(nxt))
                nxt += 1
        if state not in FINAL and (latest - last_at).total_seconds() >= stuck_after:
            findings[entity].add("stuck")
    return {entity: found for entity, found in findings.items() if found}


def idem_findings(out):
    found = defaultdict(set)
    for line in out.splitlines():
        states = json.loads(line)["_idem"]["states"]
        for finding in states.get("findings", []):
            found[states["entity"]].add(finding)
    return dict(found)


class Findings(unittest.TestCase):
    ARGS = ["states", "--entity", "order_id", "--state", "status", "--event", "op", "--version-field", "version",
            "--max-lateness", "30s", "--time-field", "ts", "--stuck-after", "1h", "--store", ":memory:"]

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.machine = os.path.join(self.tmp.name, "orders.yaml")
        with open(self.machine, "w") as f:
            f.write(MACHINE)

    def tearDown(self):
        self.tmp.cleanup()

    def test_every_planted_violation_is_found_as_an_independent_checker_finds_it(self):
        records = order_streams()
        code, out, err = run(self.ARGS + ["--machine", self.machine, "--summary", "json"], stdin=ndjson(records))
        self.assertEqual(code, 1, err)  # findings fail the run
        expected = python_findings(records)
        found = idem_findings(out)
        self.assertEqual(found, expected)
        planted = {kind for entity_findings in expected.values() for kind in entity_findings}
        self.assertEqual(planted, set(PLANTS))  # every kind was planted and found
        summary = summary_of(err)
        self.assertEqual(summary["in"], len(records))
        self.assertEqual(summary["events"], len(records))

    def test_a_clean_stream_out_of_order_within_lateness_reports_nothing(self):
        # Events a minute apart arriving up to 90 s late: within an order
        # they swap, and --max-lateness 2m puts them back.
        records = order_streams(plant=False, jitter=90)
        args = [a if a != "30s" else "2m" for a in self.ARGS]
        code, out, err = run(args + ["--machine", self.machine, "--summary", "json"], stdin=ndjson(records))
        self.assertEqual(code, 0, err)
        self.assertEqual(idem_findings(out), {})
        self.assertEqual(summary_of(err)["ok"], len(records))
        # Judged in arrival order instead, the same stream looks broken.
        code, out, err = run(["states", "--entity", "order_id", "--state", "status", "--event", "op",
                              "--machine", self.machine, "--store", ":memory:", "-q"], stdin=ndjson(records))
        self.assertEqual(code, 1)
        self.assertIn("illegal", {f for found in idem_findings(out).values() for f in found})

    def test_hlc_stamps_order_events_where_physical_clocks_disagree(self):
        # Two writers whose clocks disagree: physical times tie, the logical
        # counter orders them.
        records = [{"order_id": "o1", "status": "paid", "op": "confirm", "hlc": "1764489600000.2"},
                   {"order_id": "o1", "status": "pending", "hlc": "1764489600000.1"},
                   {"order_id": "o1", "status": "shipped", "hlc": "1764489600000.3"}]
        code, out, err = run(["states", "--entity", "order_id", "--state", "status", "--event", "op",
                              "--hlc-field", "hlc", "--max-lateness", "1s", "--machine", self.machine,
                              "--store", ":memory:", "--fail-on", "none"], stdin=ndjson(records))
        self.assertEqual(code, 0, err)
        self.assertEqual([json.loads(line)["status"] for line in out.splitlines()], ["pending", "paid", "shipped"])
        self.assertEqual(idem_findings(out), {})

    def test_a_store_committing_every_few_records_judges_as_one_run_in_memory_does(self):
        # Entities whose events come in order are judged without a partition
        # in the sequencer until one comes out of order; what was passed so
        # must be in the progress saved at every commit, or the next event
        # of that entity would wait for versions already judged.
        records = order_streams(seed=9)
        store = os.path.join(self.tmp.name, "idem.db")
        _, in_memory, _ = run(self.ARGS + ["--machine", self.machine], stdin=ndjson(records))
        args = [a if a != ":memory:" else store for a in self.ARGS]
        _, committed, err = run(args + ["--machine", self.machine, "--batch", "7"], stdin=ndjson(records))
        self.assertEqual(committed, in_memory, err)
        self.assertIn("version-gap", {f for found in idem_findings(committed).values() for f in found})
        # Across runs: a clean stream in order, cut in two, judged as one.
        records = order_streams(seed=9, plant=False, jitter=0)
        _, whole, _ = run(self.ARGS + ["--machine", self.machine], stdin=ndjson(records))
        split_store = os.path.join(self.tmp.name, "split.db")
        args = [a if a != ":memory:" else split_store for a in self.ARGS]
        halves = b""
        for half in (records[:len(records) // 2], records[len(records) // 2:]):
            code, out, err = run(args + ["--machine", self.machine], stdin=ndjson(half))
            self.assertEqual(code, 0, err)
            halves += out
        self.assertEqual(halves, whole)
        self.assertEqual(idem_findings(halves), {})

    def test_tomorrows_log_is_judged_against_todays_end_state(self):
        store = os.path.join(self.tmp.name, "idem.db")
        args = ["states", "--entity", "order_id", "--state", "status", "--version-field", "version",
                "--machine", self.machine, "--store", store, "--summary", "json"]
        today = [{"order_id": "o1", "status": "pending", "version": 1},
                 {"order_id": "o1", "status": "paid", "version": 2, "op": "x"}]
        code, out, err = run(args, stdin=ndjson(today))
        self.assertEqual(idem_findings(out), {"o1": {"illegal"}})  # pending > paid needs confirm
        tomorrow = [{"order_id": "o1", "status": "shipped", "version": 3},
                    {"order_id": "o1", "status": "delivered", "version": 3},
                    {"order_id": "o1", "status": "paid", "version": 2}]
        code, out, err = run(args, stdin=ndjson(tomorrow))
        self.assertEqual(summary_of(err)["known_before"], 1)
        verdicts = [json.loads(line)["_idem"]["states"] for line in out.splitlines()]
        self.assertEqual((verdicts[0]["from"], verdicts[0]["verdict"]), ("paid", "ok"))  # yesterday's end state
        self.assertEqual(verdicts[1]["verdict"], "version-conflict")  # version 3 was shipped: a lost update
        self.assertEqual(verdicts[2]["verdict"], "stale")  # version 2 after version 3
        # Killed-and-rerun safety for -o is in test_crash.py.


class Reports(unittest.TestCase):
    def test_reports_in_every_format(self):
        with tempfile.TemporaryDirectory() as tmp:
            machine = os.path.join(tmp, "orders.yaml")
            with open(machine, "w") as f:
                f.write(MACHINE)
            source = os.path.join(tmp, "orders.ndjson")
            with open(source, "wb") as f:
                f.write(ndjson(order_streams(entities=200)))
            base = ["states", "--entity", "order_id", "--state", "status", "--event", "op", "--version-field",
                    "version", "--max-lateness", "30s", "--time-field", "ts", "--stuck-after", "1h",
                    "--store", ":memory:", "--machine", machine, "-q", "--fail-on", "none", source]
            code, out, err = run(base + ["--report", "json"])
            self.assertEqual(code, 0, err)
            report = json.loads(out)
            self.assertGreater(report["findings"]["illegal"], 0)
            edges = {(e["from"], e["to"]): e for e in report["transitions"]}
            self.assertFalse(edges[("paid", "pending")]["allowed"])
            self.assertGreater(edges[("pending", "paid")]["seen"], 100)
            self.assertTrue(report["worst"][0]["evidence"])
            code, out, _ = run(base + ["--report", "table"])
            self.assertRegex(out, rb"paid +-> pending +3  3 illegal  \(not in the machine\)\n")
            code, out, _ = run(base + ["--report", "markdown"])
            self.assertIn(b"| paid | pending |", out)
            code, out, _ = run(base + ["--format", "dot"])
            self.assertTrue(out.startswith(b"digraph states {"))
            self.assertIn(b'"paid" -> "pending" [label="', out)
            self.assertIn(b"color=red, style=dashed", out)
            code, out, _ = run(base + ["--format", "mermaid"])
            self.assertTrue(out.startswith(b"stateDiagram-v2"))
            self.assertIn(b" : 3 illegal NOT IN THE MACHINE\n", out)

    @unittest.skipUnless(CHROMIUM, "chromium is needed")
    def test_the_html_report_draws_the_machine_and_loads_nothing(self):
        with tempfile.TemporaryDirectory() as tmp:
            machine = os.path.join(tmp, "orders.yaml")
            with open(machine, "w") as f:
                f.write(MACHINE)
            page = os.path.join(tmp, "report.html")
            code, out, err = run(["states", "--entity", "order_id", "--state", "status", "--event", "op",
                                  "--version-field", "version", "--machine", machine, "--store", ":memory:",
                                  "--report", "html", "--fail-on", "none", "-o", page],
                                 stdin=ndjson(order_streams(entities=120)))
            self.assertEqual(code, 0, err)
            dom = rendered_offline(self, page, tmp)
            self.assertIn('id="machine-drawing"', dom)
            self.assertEqual(len(re.findall(r'<circle class="state"', dom)), 8)  # 7 states and "lost"
            self.assertGreater(len(re.findall(r'class="edge forbidden"', dom)), 0)


class Learn(unittest.TestCase):
    def test_learn_prints_a_machine_that_judges_its_own_log_clean(self):
        records = order_streams(plant=False, jitter=0)
        code, out, err = run(["states", "--entity", "order_id", "--state", "status", "--learn", "-q"],
                             stdin=ndjson(records))
        self.assertEqual(code, 0, err)
        with tempfile.TemporaryDirectory() as tmp:
            learned = os.path.join(tmp, "learned.yaml")
            with open(learned, "wb") as f:
                f.write(out)
            code, out, err = run(["states", "--entity", "order_id", "--state", "status", "--machine", learned,
                                  "--store", ":memory:", "-q"], stdin=ndjson(records))
            self.assertEqual(code, 0, err)


class Errors(unittest.TestCase):
    def test_bad_records_are_rejected_with_the_field_named(self):
        records = [{"order_id": "o1", "status": "pending"}, {"status": "paid"}, {"order_id": "o2"},
                   {"order_id": "o3", "status": {"x": 1}}]
        code, out, err = run(["states", "--entity", "order_id", "--state", "status", "--allow", "pending>paid",
                              "--store", ":memory:", "--summary", "json"], stdin=ndjson(records))
        self.assertEqual(code, 1)
        self.assertIn("missing entity field 'order_id'", err)
        self.assertIn("missing state field 'status'", err)
        self.assertIn("state field 'status' is not a string or a number", err)
        self.assertEqual(summary_of(err)["rejected"], 3)

    def test_an_inconsistent_machine_is_a_usage_error_at_its_line(self):
        with tempfile.TemporaryDirectory() as tmp:
            machine = os.path.join(tmp, "m.yaml")
            with open(machine, "w") as f:
                f.write(MACHINE.replace("paid > shipped", "paid > shiped"))
            code, _, err = run(["states", "--entity", "id", "--state", "s", "--machine", machine], stdin=b"")
            self.assertEqual(code, 2)
            self.assertIn("m.yaml:8:5: a transition names state 'shiped'", err)

    def test_flags_that_do_not_fit_are_refused(self):
        for args, words in [(["--state", "s", "--allow", "a>b"], "give --entity"),
                            (["--entity", "e", "--state", "s"], "give --machine"),
                            (["--entity", "e", "--state", "s", "--allow", "a>b", "--fail-on", "ilegal"],
                             "unknown finding 'ilegal'"),
                            (["--entity", "e", "--state", "s", "--allow", "a>b", "--max-lateness", "1s"],
                             "--max-lateness puts events back in order"),
                            (["--entity", "e", "--state", "s", "--allow", "a>b", "--report", "pdf"],
                             "unknown report format 'pdf'")]:
            code, _, err = run(["states"] + args, stdin=b"")
            self.assertEqual(code, 2, (args, err))
            self.assertIn(words, err, args)


if __name__ == "__main__":
    unittest.main()
