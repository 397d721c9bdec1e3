"""End-to-end tests of `idem reconcile`: a generated three-stage flow with
planted losses at each hop, duplicates, late and orphan events and changed
payloads, checked against an independent Python reconciliation; a
Stripe-export page and a GitHub-deliveries list as the first stage; and the
--missing file replayed into `idem listen` completes exactly the lost set."""
import json
import os
import random
import re
import sqlite3
import tempfile
import unittest
from collections import Counter, defaultdict
from datetime import datetime, timedelta, timezone

import redis_server
from harness import CHROMIUM, ndjson, rendered_offline, run, summary_of
from listener import listening

T0 = datetime(2026, 11, 30, 8, 0, 0, tzinfo=timezone.utc)


def stamp(seconds):
    return (T0 + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def flow(count=3000, seed=6):
    """sent (a Stripe events page), received (listen's envelopes), processed
    (an app log), with faults planted at random."""
    rng = random.Random(seed)
    sent, received, processed = [], [], []
    for i in range(count):
        event = {"id": f"evt_{i:05d}", "type": "invoice.paid", "created": stamp(i),
                 "data": {"object": {"amount": rng.randint(1, 9999)}}}
        sent.append(event)
        fault = rng.random()
        if fault < 0.02:
            continue  # lost between sent and received
        copies = 3 if fault < 0.04 else 1  # duplicated at received
        delay = 900 if fault < 0.05 else rng.uniform(0.1, 3)  # late past the SLA
        body = dict(event)
        if 0.05 <= fault < 0.06:
            body = json.loads(json.dumps(event))
            body["data"]["object"]["amount"] += 1  # changed on the way
        for copy in range(copies):
            received.append({"idem": 1, "id": f"cap_{i}_{copy}", "received_at": stamp(i + delay + copy),
                             "method": "POST", "path": "/hooks", "headers": [["Content-Type", "application/json"]],
                             "body": json.dumps(body)})
        if 0.06 <= fault < 0.09:
            continue  # lost between received and processed
        processed.append({"event_id": event["id"], "ts": stamp(i + delay + 5), "amount": body["data"]["object"]["amount"]})
    processed.append({"event_id": "evt_forged", "ts": stamp(count), "amount": 1})  # an orphan
    rng.shuffle(processed)
    return sent, received, processed


def python_reconcile(sent, received, processed, grace=60, sla=600):
    """The same reconciliation, written again."""
    def seconds(ts):
        return (datetime.fromisoformat(ts.replace("Z", "+00:00")) - T0).total_seconds()
    stages = [defaultdict(list), defaultdict(list), defaultdict(list)]
    for e in sent:
        stages[0][e["id"]].append((seconds(e["created"]), e["data"]["object"]["amount"]))
    for r in received:
        body = json.loads(r["body"])
        stages[1][body["id"]].append((seconds(r["received_at"]), body["data"]["object"]["amount"]))
    for p in processed:
        stages[2][p["event_id"]].append((seconds(p["ts"]), p["amount"]))
    latest = max(t for stage in stages for seen in stage.values() for t, _ in seen)
    found = Counter()
    lost = set()
    for n in range(2):
        for key, seen in stages[n].items():
            if key not in stages[n + 1]:
                if latest - max(t for t, _ in seen) >= grace:
                    found["lost"] += 1
                    lost.add(key)
                continue
            first_here, first_next = min(t for t, _ in seen), min(t for t, _ in stages[n + 1][key])
            if first_next - first_here > sla:
                found["late"] += 1
            if seen[0][1] != stages[n + 1][key][0][1]:
                found["changed"] += 1
    for n in range(3):
        found["duplicated"] += sum(1 for seen in stages[n].values() if len(seen) > 1)
    keys = set(stages[0]) | set(stages[1]) | set(stages[2])
    found["orphan"] = sum(1 for key in keys if key not in stages[0])
    return found, lost


class Flow(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.sent, self.received, self.processed = flow()
        self.paths = {}
        for name, records in (("received", self.received), ("processed", self.processed)):
            self.paths[name] = os.path.join(self.tmp.name, name + ".ndjson")
            with open(self.paths[name], "wb") as f:
                f.write(ndjson(records))
        # The first stage as Stripe's `events list` gives it: a page.
        self.paths["sent"] = os.path.join(self.tmp.name, "sent.json")
        with open(self.paths["sent"], "w") as f:
            json.dump({"object": "list", "data": self.sent, "has_more": False}, f)

    def tearDown(self):
        self.tmp.cleanup()

    def args(self, *extra):
        return ["reconcile", "--stage", "sent=" + self.paths["sent"], "--stage", "received=" + self.paths["received"],
                "--stage", "processed=" + self.paths["processed"], "--key", "sent=id", "--key", "received=body.id",
                "--key", "processed=event_id", "--time", "sent=created", "--time", "processed=ts",
                "--payload", "sent=data.object.amount", "--payload", "received=body.data.object.amount",
                "--payload", "processed=amount", "--grace", "60s", "--sla", "10m", *extra]

    def test_every_finding_matches_an_independent_reconciliation(self):
        code, out, err = run(self.args("--report", "json", "--summary", "json"))
        self.assertEqual(code, 1, err)  # findings: exit 1
        report = json.loads(out)
        expected, _ = python_reconcile(self.sent, self.received, self.processed)
        found = {name: item["count"] for name, item in report["findings"].items() if item["count"]}
        self.assertEqual(found, dict(expected))
        self.assertEqual(set(found), {"lost", "duplicated", "late", "changed", "orphan"})
        hops = {(h["from"], h["to"]): h for h in report["hops"]}
        first = hops[("sent", "received")]
        self.assertEqual(first["keys"], len(self.sent))
        self.assertAlmostEqual(first["loss_rate"], first["lost"] / (first["lost"] + first["reached"]))
        self.assertIsNotNone(first["latency_ms"]["p99"])
        # When did the loss happen: per hour, the keys that started the hop and the share lost.
        by_hour = first["loss_by_hour"]
        self.assertEqual(sum(h["lost"] for h in by_hour), first["lost"])
        for hour in by_hour:
            self.assertEqual(hour["lost"], first["lost_by_hour"][hour["hour"][:-3]])
            self.assertAlmostEqual(hour["loss_rate"], hour["lost"] / hour["keys"])
        stages = {s["stage"]: s for s in report["stages"]}
        self.assertEqual(stages["received"]["records"], len(self.received))
        self.assertEqual(stages["processed"]["orphans"], 1)
        summary = summary_of(err)
        self.assertEqual(summary["in"], len(self.sent) + len(self.received) + len(self.processed))

    def test_grouped_on_disk_the_report_is_the_same_byte_for_byte(self):
        """Past --spill-after keys, partitions on disk give the in-memory
        report exactly: counts, examples, groups, exact percentiles, and the
        same missing file."""
        extra = ("--report", "json", "--by", "sent=type", "--examples", "7", "--summary", "json")
        outputs = []
        for spill in ("0", "97"):
            missing = os.path.join(self.tmp.name, f"missing-{spill}.ndjson")
            spill_dir = os.path.join(self.tmp.name, "spill")
            os.makedirs(spill_dir, exist_ok=True)
            code, out, err = run(self.args(*extra, "--spill-after", spill, "--spill-dir", spill_dir,
                                           "--missing", missing))
            self.assertEqual(code, 1, err)  # findings: exit 1
            self.assertEqual(os.listdir(spill_dir), [])  # removed at the end
            with open(missing, "rb") as f:
                outputs.append((out, sorted(f.read().splitlines()), summary_of(err)))
        (memory, memory_missing, memory_summary), (disk, disk_missing, disk_summary) = outputs
        self.assertEqual(memory, disk)
        self.assertEqual(memory_missing, disk_missing)
        self.assertNotIn("grouped", memory_summary)
        self.assertIn("on disk", disk_summary["grouped"])
        self.assertGreater(json.loads(disk)["hops"][0]["latency_ms"]["p99"], 0)

    def test_thresholds_and_fail_on_make_the_exit_1(self):
        code, _, err = run(self.args("--max-loss", "0.5%", "-q"))
        self.assertEqual(code, 1)
        code, _, err = run(self.args("--max-loss", "50%", "--max-duplicate-ratio", "50%", "-q"))
        self.assertEqual(code, 0, err)
        code, _, err = run(self.args("--fail-on", "orphan", "-q"))
        self.assertEqual(code, 1)

    def test_the_missing_file_replayed_completes_exactly_the_lost_set(self):
        missing = os.path.join(self.tmp.name, "missing.ndjson")
        code, out, err = run(self.args("--missing", missing, "--summary", "json"))
        self.assertEqual(code, 1, err)  # findings: exit 1
        _, lost = python_reconcile(self.sent, self.received, self.processed)
        with open(missing) as f:
            records = [json.loads(line) for line in f]
        # Each lost event once, from the first stage that holds it: an
        # envelope keeps its headers, a sent event is the event.
        keys = [r["id"] if "idem" not in r else json.loads(r["body"])["id"] for r in records]
        self.assertEqual(sorted(keys), sorted(lost))
        self.assertEqual(summary_of(err)["missing_file"], len(lost))
        with listening(self.tmp.name) as target:
            store = os.path.join(self.tmp.name, "ledger.db")
            code, _, err = run(["replay", "--to", target.url + "/hooks", "--key", "id", "--store", store, "-q",
                                missing])
            self.assertEqual(code, 0, err)
            target.stop()
            captured = [json.loads(e["body"]) for e in target.envelopes()]
        resent = [body["id"] if "body" not in body else json.loads(body["body"])["id"] for body in captured]
        self.assertEqual(sorted(resent), sorted(lost))


class Shapes(unittest.TestCase):
    def test_a_github_deliveries_list_and_a_csv_log(self):
        deliveries = [{"id": n, "guid": f"g{n}", "delivered_at": stamp(n), "redelivery": False,
                       "status_code": 200} for n in range(10)]
        with tempfile.TemporaryDirectory() as tmp:
            sent = os.path.join(tmp, "deliveries.json")
            with open(sent, "w") as f:
                json.dump(deliveries, f, indent=2)
            processed = os.path.join(tmp, "app.csv")
            with open(processed, "w") as f:
                f.write("delivery,at\n" + "".join(f"g{n},{stamp(n + 1)}\n" for n in range(10) if n != 4))
            code, out, err = run(["reconcile", "--stage", f"github={sent}", "--stage", f"app={processed}",
                                  "--key", "github=guid", "--key", "app=delivery", "--time", "github=delivered_at",
                                  "--time", "app=at", "--grace", "1s", "--report", "json"])
            self.assertEqual(code, 1, err)  # findings: exit 1
            report = json.loads(out)
            self.assertEqual(report["findings"]["lost"]["count"], 1)
            self.assertEqual(report["findings"]["lost"]["examples"][0]["key"], "g4")

    def test_a_svix_attempts_page(self):
        """Svix's "list attempts" answer ({"data": [...], "iterator", "done"}),
        one attempt per try: a message tried twice is duplicated at Svix."""
        attempts = [{"id": f"atmpt_{n}", "msgId": f"msg_{n % 8}", "endpointId": "ep_1",
                     "responseStatusCode": 500 if n >= 8 else 200, "timestamp": stamp(n), "status": 0,
                     "triggerType": 0} for n in range(10)]
        with tempfile.TemporaryDirectory() as tmp:
            sent = os.path.join(tmp, "attempts.json")
            with open(sent, "w") as f:
                json.dump({"data": attempts, "iterator": "iter_1", "prevIterator": None, "done": True}, f)
            app = os.path.join(tmp, "app.ndjson")
            with open(app, "wb") as f:
                f.write(ndjson([{"svix_id": f"msg_{n}", "ts": stamp(n + 1)} for n in range(8) if n != 3]))
            code, out, err = run(["reconcile", "--stage", f"svix={sent}", "--stage", f"app={app}",
                                  "--key", "svix=msgId", "--key", "app=svix_id", "--time", "svix=timestamp",
                                  "--time", "app=ts", "--grace", "1s", "--report", "json"])
            self.assertEqual(code, 1, err)  # findings: exit 1
            report = json.loads(out)
            self.assertEqual([e["key"] for e in report["findings"]["lost"]["examples"]], ["msg_3"])
            self.assertEqual(report["findings"]["duplicated"]["count"], 2)  # msg_0 and msg_1, tried twice

    def test_keys_still_within_the_grace_are_pending_not_lost(self):
        a = [{"id": "x", "ts": stamp(0)}, {"id": "y", "ts": stamp(100)}]
        with tempfile.TemporaryDirectory() as tmp:
            paths = []
            for name, records in (("a", a), ("b", [])):
                paths.append(os.path.join(tmp, name + ".ndjson"))
                with open(paths[-1], "wb") as f:
                    f.write(ndjson(records) if records else b"")
            code, out, err = run(["reconcile", "--stage", f"a={paths[0]}", "--stage", f"b={paths[1]}", "--key", "id",
                                  "--time", "ts", "--grace", "60s", "--report", "json"])
            hop = json.loads(out)["hops"][0]
            self.assertEqual((hop["lost"], hop["pending"]), (1, 1))  # x is past the grace, y is not


class WhereDuplicationBegan(unittest.TestCase):
    """Issue 60, item 6 (docs/reconcile.md, "Findings"): a key is
    duplicated where its copies began; the copies a stage got from the one
    before are carried, counted apart."""

    def test_a_key_duplicated_at_intake_is_duplicated_once_and_carried_downstream(self):
        counts = {  # key -> copies at stages a, b, c, d
            **{f"k{i}": (2, 2, 2, 2) for i in (1, 2, 3)},  # duplicated at intake
            "k4": (1, 1, 2, 2),                            # duplicated at c
            "k5": (2, 1, 1, 1),                            # deduplicated at b
            **{f"once{i}": (1, 1, 1, 1) for i in range(5)},
        }
        with tempfile.TemporaryDirectory() as tmp:
            args = ["reconcile", "--key", "id", "--time", "ts", "--report", "json"]
            for s, name in enumerate("abcd"):
                records = [{"id": key, "ts": stamp(s * 10 + n)}
                           for key, copies in counts.items() for n in range(copies[s])]
                path = os.path.join(tmp, name + ".ndjson")
                with open(path, "wb") as f:
                    f.write(ndjson(records))
                args += ["--stage", f"{name}={path}"]
            code, out, err = run(args)
            report = json.loads(out)
            self.assertEqual(report["findings"]["duplicated"]["count"], 5, err)  # k1-k3, k5 at a; k4 at c
            stages = report["stages"]
            self.assertEqual([s["duplicated_keys"] for s in stages], [4, 0, 1, 0])
            self.assertEqual([s["extra_copies"] for s in stages], [4, 0, 1, 0])
            self.assertEqual([s["carried_copies"] for s in stages], [0, 3, 3, 4])
            code, table, _ = run([a if a != "json" else "table" for a in args])
            self.assertRegex(table.decode(), r"\n  d +\d+ records +\d+ keys +0 duplicated \(0\.000%\) +4 carried")


class MissingFilter(unittest.TestCase):
    def test_only_the_relevant_lost_events_go_to_the_missing_file(self):
        sent = [{"id": f"e{i}", "type": "invoice.paid" if i % 3 else "customer.updated", "ts": stamp(i)}
                for i in range(30)]
        received = [e for e in sent if e["id"] not in ("e0", "e1", "e2", "e4")]
        with tempfile.TemporaryDirectory() as tmp:
            paths = {}
            for name, records in (("sent", sent), ("received", received)):
                paths[name] = os.path.join(tmp, name + ".ndjson")
                with open(paths[name], "wb") as f:
                    f.write(ndjson(records))
            missing = os.path.join(tmp, "missing.ndjson")
            code, out, err = run(["reconcile", "--stage", f"sent={paths['sent']}", "--stage",
                                  f"received={paths['received']}", "--key", "id", "--time", "ts", "--grace", "0s",
                                  "--missing", missing, "--filter", "type=invoice.paid", "--summary", "json",
                                  "--report", "json"])
            self.assertEqual(code, 1, err)  # findings: exit 1
            written = [json.loads(line)["id"] for line in open(missing)]
            self.assertEqual(sorted(written), ["e1", "e2", "e4"])  # e0 is a customer.updated
            summary = summary_of(err)
            self.assertEqual((summary["lost"], summary["missing_file"], summary["missing_filtered_out"]), (4, 3, 1))
            code, _, err = run(["reconcile", "--stage", f"a={paths['sent']}", "--stage", f"b={paths['received']}",
                                "--key", "id", "--filter", "type=x"])
            self.assertEqual(code, 2)
            self.assertIn("--missing", err)


class MetricsFile(unittest.TestCase):
    """--metrics FILE (every batch command): the run's figures as gauges for
    node_exporter's textfile collector, read back by both of
    python3-prometheus-client's parsers; a failed run says so too."""

    def read(self, path):
        from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics
        from prometheus_client.parser import text_string_to_metric_families as prometheus
        with open(path) as f:
            text = f.read()
        classic = {(s.name, frozenset(s.labels.items())): s.value for f in prometheus(text) for s in f.samples}
        strict = {(s.name, frozenset(s.labels.items())): s.value for f in openmetrics(text) for s in f.samples}
        self.assertEqual(classic, strict)
        return classic

    def test_a_reconcile_and_a_dedup_run_and_a_failed_one(self):
        with tempfile.TemporaryDirectory() as tmp:
            a, b = os.path.join(tmp, "a.ndjson"), os.path.join(tmp, "b.ndjson")
            with open(a, "wb") as f:
                f.write(ndjson([{"id": i, "ts": stamp(i)} for i in range(10)]))
            with open(b, "wb") as f:
                f.write(ndjson([{"id": i, "ts": stamp(i + 1)} for i in range(8)]))
            metrics = os.path.join(tmp, "idem.prom")
            code, _, err = run(["reconcile", "--stage", f"a={a}", "--stage", f"b={b}", "--key", "id", "--time", "ts",
                                "--grace", "0s", "--fail-on", "lost", "--metrics", metrics, "-q"])
            self.assertEqual(code, 1, err)
            figures = self.read(metrics)
            command = ("command", "reconcile")
            self.assertEqual(figures[("idem_run_exit_code", frozenset({command}))], 1)
            self.assertEqual(figures[("idem_run_records", frozenset({command, ("count", "lost")}))], 2)
            self.assertEqual(figures[("idem_run_part_records", frozenset({command, ("hop", "a>b"), ("count", "reached")}))], 8)
            self.assertAlmostEqual(figures[("idem_run_part_ratio", frozenset({command, ("hop", "a>b"), ("ratio", "loss_rate")}))], 0.2)
            self.assertGreater(figures[("idem_run_finished_seconds", frozenset({command}))], 1.7e9)
            self.assertEqual([f for f in os.listdir(tmp) if f.endswith(".tmp")], [])  # renamed into place

            code, _, _ = run(["dedup", "--key", "id", "--store", ":memory:", "--metrics", metrics, "-q", a, a])
            self.assertEqual(code, 0)
            figures = self.read(metrics)
            self.assertEqual(figures[("idem_run_records", frozenset({("command", "dedup"), ("count", "duplicates")}))], 10)

            code, _, _ = run(["dedup", "--key", "id", "--store", "redis://127.0.0.1:1", "--store-timeout", "0s",
                              "--metrics", metrics, "-q", a])
            self.assertEqual(code, 4)
            figures = self.read(metrics)
            self.assertEqual(figures[("idem_run_exit_code", frozenset({("command", "dedup")}))], 4)


class NextDay(unittest.TestCase):
    """T+1: a daily job with a store reports each loss once, and matches
    yesterday's late keys with today's logs."""

    DAY = 86400

    def days(self):
        """Two days of sent/processed. Day 1: s1_010 lost; s1_095..s1_099
        sent in the last minutes (pending at the day's end), processed just
        after midnight; s1_099 duplicated at sent. Day 2: s1_100 (sent on day
        1 at the last second) never processed; s2_050 lost."""
        def at(day, seconds):
            return stamp((day - 1) * self.DAY + seconds)
        def sent_at(i):  # from 22:13 every minute, the last six in the day's last five minutes
            return 80_000 + i * 60 if i < 95 else 86_100 + (i - 95) * 50
        sent1 = [{"id": f"s1_{i:03d}", "ts": at(1, sent_at(i))} for i in range(101)]
        sent1.append({"id": "s1_099", "ts": at(1, sent_at(99) + 1)})
        processed1 = [{"id": f"s1_{i:03d}", "ts": at(1, sent_at(i) + 2)} for i in range(95) if i != 10]
        sent2 = [{"id": f"s2_{i:03d}", "ts": at(2, 3600 + i * 60)} for i in range(100)]
        processed2 = [{"id": f"s1_{i:03d}", "ts": at(2, 60 + i)} for i in range(95, 100)]
        processed2 += [{"id": f"s2_{i:03d}", "ts": at(2, 3602 + i * 60)} for i in range(100) if i != 50]
        return (sent1, processed1), (sent2, processed2)

    def reconcile(self, tmp, day, records, store, extra=()):
        paths = []
        for name, items in zip(("sent", "processed"), records):
            paths.append(os.path.join(tmp, f"{name}-{day}.ndjson"))
            if not os.path.exists(paths[-1]):
                with open(paths[-1], "wb") as f:
                    f.write(ndjson(items))
        code, out, err = run(["reconcile", "--stage", f"sent={paths[0]}", "--stage", f"processed={paths[1]}",
                              "--key", "id", "--time", "ts", "--grace", "15m", "--report", "json",
                              "--store", store, "--summary", "json", *extra])
        self.assertIn(code, (0, 1), err)
        report = json.loads(out)
        return report, summary_of(err), err

    def check_two_days(self, store, extra=()):
        day1, day2 = self.days()
        with tempfile.TemporaryDirectory() as tmp:
            store = store(tmp)
            first, summary, _ = self.reconcile(tmp, 1, day1, store, extra)
            hop = first["hops"][0]
            self.assertEqual((hop["lost"], hop["pending"]), (1, 6))  # s1_010; s1_095..s1_100
            self.assertEqual(first["findings"]["duplicated"]["count"], 1)  # s1_099
            self.assertEqual((summary["carried_in"], summary["carried_out"]), (0, 6))

            second, summary, _ = self.reconcile(tmp, 2, day2, store, extra)
            hop = second["hops"][0]
            # s1_095..s1_099 reached today; s1_100 and s2_050 are lost; s1_010
            # was reported yesterday and is not again; the duplicate neither.
            self.assertEqual((hop["lost"], hop["pending"], hop["reached"]), (2, 0, 104))
            lost = sorted(e["key"] for e in second["findings"]["lost"]["examples"])
            self.assertEqual(lost, ["s1_100", "s2_050"])
            self.assertEqual(second["findings"]["orphan"]["count"], 0)
            self.assertEqual(second["findings"]["duplicated"]["count"], 0)
            self.assertEqual(second["carried"], {"in": 6, "out": 0})

            # The day-2 job run again over the same files: the same report,
            # not yesterday's keys twice.
            again, _, err = self.reconcile(tmp, 2, day2, store, extra)
            self.assertIn("reconciled before", err)
            self.assertEqual(again["hops"], second["hops"])
            self.assertEqual(again["findings"], second["findings"])

            # Without the store, day 2 alone misreads yesterday's late keys.
            alone = os.path.join(tmp, "alone")
            os.mkdir(alone)
            code, out, _ = run(["reconcile", "--stage", f"sent={tmp}/sent-2.ndjson", "--stage",
                                f"processed={tmp}/processed-2.ndjson", "--key", "id", "--time", "ts",
                                "--report", "json"])
            self.assertEqual(json.loads(out)["findings"]["orphan"]["count"], 5)

    def test_two_days_with_a_sqlite_store(self):
        self.check_two_days(lambda tmp: os.path.join(tmp, "reconcile.db"))

    def test_two_days_grouped_on_disk(self):
        self.check_two_days(lambda tmp: os.path.join(tmp, "reconcile.db"), ("--spill-after", "7"))

    @unittest.skipUnless(redis_server.available(), "redis-server is not installed")
    def test_two_days_with_redis(self):
        with redis_server.running() as uri:
            self.check_two_days(lambda tmp: uri)

    def test_a_store_kept_for_other_stages_is_refused(self):
        day1, _ = self.days()
        with tempfile.TemporaryDirectory() as tmp:
            store = os.path.join(tmp, "r.db")
            self.reconcile(tmp, 1, day1, store, extra=("--scope", "flow"))
            third = os.path.join(tmp, "third.ndjson")
            with open(third, "wb") as f:
                f.write(ndjson([{"id": "s1_000", "ts": stamp(80_010)}]))
            code, out, err = run(["reconcile", "--stage", f"sent={tmp}/sent-1.ndjson", "--stage",
                                  f"processed={tmp}/processed-1.ndjson", "--stage", f"third={third}",
                                  "--key", "id", "--time", "ts", "--store", store, "--scope", "flow"])
            self.assertEqual(code, 4, err)
            self.assertIn("another set of stages", err)
            code, _, err = run(["reconcile", "--stage", f"a={third}", "--stage", f"b={third}", "--key", "id",
                                "--store", ":memory:"])
            self.assertEqual(code, 2)
            self.assertIn("not :memory:", err)
            code, _, err = run(["reconcile", "--stage", f"a={third}", "--stage", f"b={third}", "--key", "id",
                                "--scope", "x"])
            self.assertEqual(code, 2)
            self.assertIn("--store", err)


class Groups(unittest.TestCase):
    def test_losses_per_source(self):
        rng = random.Random(4)
        sent, received, lost = [], [], Counter()
        for n in range(600):
            account = f"acct_{n % 7}"
            sent.append({"id": f"e{n}", "account": account})
            if rng.random() < (0.3 if account == "acct_3" else 0.02):
                lost[account] += 1
                continue
            received.append({"id": f"e{n}"})
        with tempfile.TemporaryDirectory() as tmp:
            paths = []
            for name, records in (("sent", sent), ("received", received)):
                paths.append(os.path.join(tmp, name + ".ndjson"))
                with open(paths[-1], "wb") as f:
                    f.write(ndjson(records))
            code, out, err = run(["reconcile", "--stage", f"sent={paths[0]}", "--stage", f"received={paths[1]}",
                                  "--key", "id", "--by", "sent=account", "--report", "json"])
            self.assertEqual(code, 1, err)  # findings: exit 1
            groups = json.loads(out)["hops"][0]["by_group"]
            self.assertEqual(groups[0]["group"], "acct_3")  # the worst source first
            self.assertEqual({g["group"]: g["lost"] for g in groups if g["lost"]}, dict(lost))
            self.assertEqual(sum(g["keys"] for g in groups), 600)


class Sources(unittest.TestCase):
    def test_the_apps_own_table_as_a_stage(self):
        with tempfile.TemporaryDirectory() as tmp:
            sent = os.path.join(tmp, "sent.ndjson")
            with open(sent, "wb") as f:
                f.write(ndjson([{"id": f"e{n}"} for n in range(6)]))
            database = os.path.join(tmp, "app.db")
            with sqlite3.connect(database) as db:
                db.execute("create table orders (pk integer primary key, event text, state text)")
                db.executemany("insert into orders (event, state) values (?, ?)",
                               [(f"e{n}", "paid") for n in range(6) if n != 2])
            code, out, err = run(["reconcile", "--stage", f"sent={sent}", "--stage", f"app={database}",
                                  "--query", "app=select event, state from orders", "--key", "sent=id",
                                  "--key", "app=event", "--report", "json"])
            self.assertEqual(code, 1, err)  # findings: exit 1
            report = json.loads(out)
            self.assertEqual([e["key"] for e in report["findings"]["lost"]["examples"]], ["e2"])
            self.assertEqual(report["stages"][1]["records"], 5)

    @unittest.skipUnless(CHROMIUM, "chromium is needed")
    def test_the_html_report_draws_the_funnel_and_latency_and_loads_nothing(self):
        sent, received, processed = flow(count=400)
        with tempfile.TemporaryDirectory() as tmp:
            paths = []
            for name, records in (("sent", sent), ("received", received), ("processed", processed)):
                paths.append(os.path.join(tmp, name + ".ndjson"))
                with open(paths[-1], "wb") as f:
                    f.write(ndjson(records))
            page = os.path.join(tmp, "report.html")
            code, _, err = run(["reconcile", "--stage", f"sent={paths[0]}", "--stage", f"received={paths[1]}",
                                "--stage", f"processed={paths[2]}", "--key", "sent=id", "--key", "received=body.id",
                                "--key", "processed=event_id", "--time", "sent=created", "--time", "processed=ts",
                                "--report", "html", "-o", page])
            self.assertEqual(code, 1, err)  # findings: exit 1
            dom = rendered_offline(self, page, tmp)
            self.assertEqual(len(re.findall(r'<rect class="stage"', dom)), 3)
            self.assertEqual(len(re.findall(r'<svg class="histogram"', dom)), 2)
            self.assertEqual(len(re.findall(r'<rect class="bucket"', dom)), 16)


def otlp_traces(count=200, seed=9):
    """The seeds' spans, webhook.receive -> trigger.parse -> trigger.dispatch,
    as the collector's file exporter writes them (one OTLP JSON export
    request per line), with spans missing at each stage."""
    rng = random.Random(seed)
    lines, missing = [], {"trigger.parse": 0, "trigger.dispatch": 0}
    for n in range(count):
        trace = f"{n:032x}"
        start = 1764489600_000_000_000 + n * 1_000_000_000
        chain = [("gateway", "webhook.receive")]
        if rng.random() < 0.9:
            chain.append(("parser", "trigger.parse"))
            if rng.random() < 0.85:
                chain.append(("dispatcher", "trigger.dispatch"))
            else:
                missing["trigger.dispatch"] += 1
        else:
            missing["trigger.parse"] += 1
        for step, (service, name) in enumerate(chain):
            lines.append(json.dumps({"resourceSpans": [{
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]},
                "scopeSpans": [{"scope": {"name": "idem-test"}, "spans": [{
                    "traceId": trace, "spanId": f"{n:08x}{step:08x}", "name": name, "kind": 2,
                    "startTimeUnixNano": str(start + step * 5_000_000),
                    "endTimeUnixNano": str(start + step * 5_000_000 + 1_000_000)}]}]}]}))
    return "\n".join(lines) + "\n", missing


class Traces(unittest.TestCase):
    def test_spans_missing_at_each_stage_and_the_ratio_per_service(self):
        text, missing = otlp_traces()
        with tempfile.TemporaryDirectory() as tmp:
            traces = os.path.join(tmp, "traces.json")
            with open(traces, "w") as f:
                f.write(text)
            code, out, err = run(["reconcile", "--traces", traces, "--stage", "receive=span:webhook.receive",
                                  "--stage", "parse=span:trigger.parse", "--stage", "dispatch=span:trigger.dispatch",
                                  "--grace", "0s", "--report", "json"])
            self.assertEqual(code, 1, err)  # findings: exit 1
            report = json.loads(out)
            hops = [h["lost"] for h in report["hops"]]
            self.assertEqual(hops, [missing["trigger.parse"], missing["trigger.dispatch"]])
            services = {s["service"]: s for s in report["services"]}
            self.assertEqual(services["parser"]["missing"], missing["trigger.parse"])
            self.assertEqual(services["dispatcher"]["missing"], missing["trigger.dispatch"])
            self.assertAlmostEqual(services["parser"]["missing_span_ratio"], missing["trigger.parse"] / 200)
            self.assertEqual(report["hops"][0]["latency_ms"]["p50"], 5.0)


class Errors(unittest.TestCase):
    def test_usage_errors(self):
        for args, words in [([], "at least two --stage"),
                            (["--stage", "a=x", "--stage", "b=y"], "stage 'a' has no key"),
                            (["--stage", "a=x", "--stage", "a=y", "--key", "id"], "two stages are named 'a'"),
                            (["--stage", "a=x", "--stage", "b=y", "--key", "c=id"], "no stage is named 'c'"),
                            (["--stage", "a=x", "--stage", "b=y", "--key", "id", "--fail-on", "lots"],
                             "unknown finding 'lots'"),
                            (["--stage", "a=x", "--stage", "b=y", "--key", "id", "--max-loss", "lots"],
                             "is not a rate"),
                            (["--stage", "a=span:x", "--stage", "b=span:y"], "reads spans from --traces"),
                            (["--stage", "a=x", "--stage", "b=y", "--key", "id", "--traces", "t.json"],
                             "none is")]:
            code, _, err = run(["reconcile"] + args, stdin=b"")
            self.assertEqual(code, 2, (args, err))
            self.assertIn(words, err, args)

    def test_a_key_path_in_no_record_fails_the_run(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "a.ndjson")
            with open(path, "wb") as f:
                f.write(ndjson([{"id": 1}, {"id": 2}]))
            code, _, err = run(["reconcile", "--stage", f"a={path}", "--stage", f"b={path}", "--key", "idd"])
            self.assertEqual(code, 3, err)
            self.assertIn("missing key field 'idd' (stage a)", err)


if __name__ == "__main__":
    unittest.main()
