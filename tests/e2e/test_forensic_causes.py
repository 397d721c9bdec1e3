"""Causes that never mislead (docs/audit.md, "Retry, replay or tampering"):
each test is an incident the wrong cause once sent down the wrong path,
run through the binary as a postmortem would."""
import calendar
import gzip
import json
import os
import sqlite3
import tempfile
import time
import unittest

from harness import ROOT, compressed, run

SECRET = "whsec_causes_test"
EVENT = {"id": "evt_1", "type": "payment_intent.succeeded", "data": {"object": {"id": "pi_1", "amount": 2000}}}


def signed(scheme, event, at, secret=SECRET):
    """One delivery as `idem sign` makes it: the provider's headers, signed at `at`."""
    code, out, err = run(["sign", "--scheme", scheme, "--secret", secret, "--timestamp", at, "-q"],
                         stdin=(json.dumps(event) + "\n").encode())
    assert code == 0, err
    return json.loads(out)


def received(delivery, at, **changes):
    return dict(delivery, received_at=at, **changes)


class Audit(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def capture(self, deliveries):
        path = os.path.join(self.tmp.name, "capture.ndjson")
        with open(path, "w") as f:
            f.writelines(json.dumps(d) + "\n" for d in deliveries)
        return path

    def group(self, path, *args):
        code, out, err = run(["audit", "--key", "body.id", "--format", "json", "-q", *args, path])
        self.assertIn(code, (0, 1), err)
        groups = json.loads(out)["groups"]
        self.assertEqual(len(groups), 1, groups)
        return groups[0]

    def test_a_stripe_delivery_sent_again_with_its_signed_time_is_a_replay_not_a_retry(self):
        # The incident: two identical Stripe deliveries 40 minutes apart with
        # the same t= and v1=. Stripe signs every attempt afresh, so the second
        # is not Stripe's retry; verify calls it 40m old, a replay.
        first = signed("stripe", EVENT, "2026-11-30T09:00:00Z")
        path = self.capture([received(first, "2026-11-30T09:00:01Z"), received(first, "2026-11-30T09:40:02Z")])
        group = self.group(path)
        self.assertEqual(group["causes"], ["replayed-delivery"])
        summary = group["evidence"]["replayed-delivery"]["summary"]
        self.assertIn("line 2 carries line 1's signed time 40m01s later", summary)
        self.assertIn("the capture does not say", summary)
        code, out, _ = run(["verify", "--scheme", "stripe", "--secret", SECRET, "--now",
                            "2026-11-30T09:40:02Z", "-q", path])
        self.assertEqual(code, 1)
        self.assertFalse(json.loads(out.splitlines()[1])["_idem"]["verify"]["valid"])

    def test_each_provider_that_signs_every_attempt_is_told_from_a_replay(self):
        # Svix / Standard Webhooks and Slack sign each attempt at its own time:
        # fresh signatures 5 s and 5 min apart are the provider's retries; the
        # same signing 5 min later is not.
        for scheme, provider in (("svix", "svix"), ("standard", "svix"), ("slack", "slack")):
            with self.subTest(scheme=scheme):
                attempts = [received(signed(scheme, EVENT, at), at)
                            for at in ("2026-11-30T09:00:00Z", "2026-11-30T09:00:05Z", "2026-11-30T09:05:06Z")]
                for copy in attempts:
                    copy["_idem"] = {"listen": {"status": 503}}
                if scheme == "slack":  # Slack numbers its retries
                    for n, copy in enumerate(attempts[1:], 1):
                        copy["headers"] = copy["headers"] + [["X-Slack-Retry-Num", str(n)]]
                group = self.group(self.capture(attempts))
                self.assertIn("provider-retry", group["causes"])
                self.assertNotIn("replayed-delivery", group["causes"])
                self.assertEqual(group["evidence"]["provider-retry"]["provider"], provider)
                replayed = [attempts[0], received(attempts[0], "2026-11-30T09:05:06Z")]
                group = self.group(self.capture(replayed))
                self.assertEqual(group["causes"], ["replayed-delivery"])

    def test_a_signature_carried_over_other_bytes_is_tampered_or_re_serialized(self):
        first = received(signed("stripe", EVENT, "2026-11-30T09:00:00Z"), "2026-11-30T09:00:00Z")
        # The same JSON in other bytes (a proxy that re-encodes), 0 s apart.
        pretty = received(first, "2026-11-30T09:00:00Z",
                          body=json.dumps(json.loads(first["body"]), indent=1))
        group = self.group(self.capture([first, pretty]))
        self.assertEqual(group["causes"], ["re-serialized"])
        self.assertIn("line 2 carries line 1's signature", group["evidence"]["re-serialized"]["summary"])
        # Another amount under the same signature: changed after signing, and
        # not a second intent under the key (no key-reuse).
        changed = received(first, "2026-11-30T09:00:00Z", body=first["body"].replace("2000", "200000"))
        group = self.group(self.capture([first, changed]))
        self.assertEqual(group["causes"], ["tampered"])
        # A GitHub signature has no time of its own: the same signature over
        # other bytes is tampered all the same.
        hub = received(signed("github", EVENT, "2026-11-30T09:00:00Z"), "2026-11-30T09:00:00Z")
        hub["headers"] = hub["headers"] + [["X-GitHub-Delivery", "d-1"]]
        group = self.group(self.capture([hub, received(hub, "2026-11-30T09:00:02Z",
                                                        body=hub["body"].replace("2000", "1"))]))
        self.assertEqual(group["causes"], ["tampered"])

    def test_verify_s_verdicts_name_what_the_signatures_alone_do_not(self):
        # A forged copy with a signature of its own (no signing shared): only
        # verify's verdict tells it was not the provider's.
        first = received(signed("stripe", EVENT, "2026-11-30T09:00:00Z"), "2026-11-30T09:00:01Z")
        forged = received(signed("stripe", dict(EVENT, data={"object": {"id": "pi_1", "amount": 1}}),
                                 "2026-11-30T09:00:02Z", secret="whsec_not_the_providers"),
                          "2026-11-30T09:00:03Z")
        pretty = received(signed("stripe", EVENT, "2026-11-30T09:00:04Z", secret="whsec_not_the_providers"),
                          "2026-11-30T09:00:05Z")
        pretty["body"] = json.dumps(json.loads(pretty["body"]), indent=1)
        path = self.capture([first, forged, pretty])
        store = os.path.join(self.tmp.name, "verdicts.db")
        code, _, err = run(["verify", "--scheme", "stripe", "--secret", SECRET, "--now", "2026-11-30T09:00:06Z",
                            "--keep-verdicts", "--store", store, "-q", path])
        self.assertEqual(code, 1, err)
        without = self.group(path)
        self.assertNotIn("tampered", without["causes"])
        group = self.group(path, "--verdicts", store)
        self.assertEqual(group["evidence"]["tampered"]["records"], [1])
        self.assertEqual(group["evidence"]["re-serialized"]["records"], [2])
        self.assertNotIn("provider-retry", group["causes"])
        self.assertIn("verify: signature does not match", group["evidence"]["tampered"]["summary"])


class WhatDiffers(unittest.TestCase):
    """Plain retries are not key-reuse, and a group mixing payloads names the
    fields that differ, in every format."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def test_a_stripe_redelivery_with_a_new_request_id_is_no_key_reuse(self):
        # samples/events/stripe-events.ndjson: evt_3Q0 redelivered with
        # request.id req_0b for req_0a (and delivery_attempt 2).
        code, out, err = run(["audit", "--key", "id", "--format", "json", "-q", sample("events", "stripe-events.ndjson")])
        self.assertEqual(code, 1, err)
        for group in json.loads(out)["groups"]:
            self.assertNotIn("key-reuse", group["causes"])
            self.assertEqual(group["payloads"], 1)

    def test_the_fields_that_differ_are_named_in_every_format(self):
        path = sample("incidents", "key-reuse.ndjson")
        args = ["audit", "--key", "idempotency_key", "--time-field", "ts", "-q"]
        code, out, _ = run(args + ["--format", "json", path])
        group = next(g for g in json.loads(out)["groups"] if g["key"] == "checkout-42")
        self.assertIn("key-reuse", group["causes"])
        (comparison,) = group["differences"]
        self.assertEqual(comparison["against"], path + ":1")
        self.assertEqual(comparison["at"], path + ":3")
        self.assertEqual(comparison["fields"], [{"path": "order.id", "before": "ord_1", "after": "ord_2"},
                                                {"path": "order.total", "before": 25, "after": 310}])
        # Past --spill-after the groups come back from disk: the same diff.
        code, out, _ = run(args + ["--format", "json", "--spill-after", "1", path])
        spilled = next(g for g in json.loads(out)["groups"] if g["key"] == "checkout-42")
        self.assertEqual(spilled["differences"], group["differences"])
        line = 'line 3 against line 1: order.id: "ord_1" -> "ord_2"; order.total: 25 -> 310'
        code, table, _ = run(args + [path])
        self.assertIn("differs          " + line, table.decode())
        code, markdown, _ = run(args + ["--format", "markdown", path])
        self.assertIn("- **differs**: line 3 against line 1: order.id: \"ord\\_1\"", markdown.decode())
        code, html, _ = run(args + ["--format", "html", path])
        self.assertIn("order.id: &quot;ord_1&quot; -&gt; &quot;ord_2&quot;", html.decode())
        # Piped in, plain or compressed, the report is the same: standard
        # input is kept in a file and read again from it (issue 60, item 7).
        with open(path, "rb") as f:
            piped = f.read()
        for name, data in (("plain", piped), ("gzip", compressed(piped, "gzip")),
                           ("zstd", compressed(piped, "zstd"))):
            code, out, err = run(args[:-1] + ["--format", "json", "-"], stdin=data)
            self.assertEqual(code, 1, err)
            self.assertEqual(out.decode().replace("<stdin>", path),
                             run(args + ["--format", "json", path])[1].decode(), name)
            self.assertNotIn("cannot be read twice", err)

    def test_what_differs_is_read_again_from_each_of_several_files(self):
        # A group whose copies lie in two files, and one wholly in the
        # second, at lines lower than the first file's: each file's lines
        # are found by their own numbers. A file name with a colon in it
        # and a blank line are positions like any other.
        first = os.path.join(self.tmp.name, "a.ndjson")
        second = os.path.join(self.tmp.name, "b:2.ndjson")
        with open(first, "w") as f:
            f.writelines(json.dumps({"k": f"pad-{n}", "v": n}) + "\n" for n in range(5))
            f.write(json.dumps({"k": "split", "order": "ord_1"}) + "\n")
        with open(second, "w") as f:
            f.write(json.dumps({"k": "inside", "order": "ord_7"}) + "\n\n")
            f.write(json.dumps({"k": "inside", "order": "ord_8"}) + "\n")
            f.write(json.dumps({"k": "split", "order": "ord_2"}) + "\n")
        groups = self.groups_by_key([first, second])
        self.assert_order_differs(groups["split"], (first + ":6", "ord_1"), (second + ":4", "ord_2"))
        self.assert_order_differs(groups["inside"], (second + ":1", "ord_7"), (second + ":3", "ord_8"))

    def test_what_differs_is_read_again_from_a_directory_and_a_compressed_file(self):
        # Records from a directory's files are named by those files, not by
        # the directory given: each is read again, as is one compressed.
        logs = os.path.join(self.tmp.name, "logs")
        os.mkdir(logs)
        plain = os.path.join(logs, "a.ndjson")
        with open(plain, "w") as f:
            f.write(json.dumps({"k": "plain", "order": "ord_1"}) + "\n")
            f.write(json.dumps({"k": "plain", "order": "ord_2"}) + "\n")
        packed = os.path.join(logs, "b.ndjson.gz")
        with gzip.open(packed, "wt") as f:
            f.write(json.dumps({"k": "packed", "order": "ord_3"}) + "\n")
            f.write(json.dumps({"k": "packed", "order": "ord_4"}) + "\n")
        for given in (["--recursive", logs], [plain, packed]):
            groups = self.groups_by_key(given)
            self.assert_order_differs(groups["plain"], (plain + ":1", "ord_1"), (plain + ":2", "ord_2"))
            self.assert_order_differs(groups["packed"], (packed + ":1", "ord_3"), (packed + ":2", "ord_4"))

    def groups_by_key(self, inputs):
        code, out, err = run(["audit", "--key", "k", "--format", "json", "-q", *inputs])
        self.assertEqual(code, 1, err)
        return {g["key"]: g for g in json.loads(out)["groups"]}

    def assert_order_differs(self, group, against, at):
        """The group's one comparison: `at` (position, order) against `against`."""
        (comparison,) = group["differences"]
        self.assertEqual((comparison["against"], comparison["at"]), (against[0], at[0]))
        self.assertEqual(comparison["fields"], [{"path": "order", "before": against[1], "after": at[1]}])

    def test_a_volatile_field_where_a_log_keeps_it_is_named_then_left_out(self):
        # A tickets log whose retries carry their own delivery counter and
        # receive time, nested where no built-in name reaches.
        path = os.path.join(self.tmp.name, "tickets.ndjson")
        rows = [{"ticket_id": "T-1", "title": "Cannot log in", "delivery": {"try": n, "at": f"09:0{n}"}}
                for n in (1, 2, 3)]
        with open(path, "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)
        code, out, _ = run(["audit", "--key", "ticket_id", "--format", "json", "-q", path])
        (group,) = json.loads(out)["groups"]
        self.assertIn("key-reuse", group["causes"])
        self.assertEqual([f["path"] for f in group["differences"][0]["fields"]], ["delivery.at", "delivery.try"])
        code, out, _ = run(["audit", "--key", "ticket_id", "--volatile", "delivery.try", "--volatile",
                            "delivery.at", "--format", "json", "-q", path])
        (group,) = json.loads(out)["groups"]
        self.assertEqual(group["causes"], ["unexplained"])
        self.assertNotIn("differences", group)
        # A typo in it is no silent pass.
        code, _, err = run(["audit", "--key", "ticket_id", "--volatile", "delivery.tries", path])
        self.assertEqual(code, 3)
        self.assertIn("--volatile", err)


class TtlFromTheClaim(unittest.TestCase):
    """The 5-minute-key incident: a TTL runs from the key's claim (its first
    copy), in audit's cause, its --what-if and dedup alike (docs/audit.md,
    "ttl-expired"; docs/dedup.md, "TTL")."""

    COPIES = ["2026-11-30T09:00:00Z", "2026-11-30T09:04:00Z", "2026-11-30T09:08:00Z"]

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.log = os.path.join(self.tmp.name, "ttl.ndjson")
        with open(self.log, "w") as f:
            f.writelines(json.dumps({"key": "k1", "ts": ts, "worker": "a"}) + "\n" for ts in self.COPIES)
        self.audit = ["audit", "--key", "key", "--time-field", "ts", "--ttl", "5m", "-q"]

    def tearDown(self):
        self.tmp.cleanup()

    def test_a_copy_past_the_ttl_from_the_claim_is_ttl_expired_in_every_figure(self):
        code, out, err = run(self.audit + ["--what-if", "ttl=5m", "--format", "json", self.log])
        self.assertEqual(code, 1, err)
        report = json.loads(out)
        group = report["groups"][0]
        self.assertEqual(group["causes"], ["ttl-expired"])
        self.assertEqual(group["evidence"]["ttl-expired"]["gaps_seconds"], [480])
        setting = report["summary"]["what_if"]["settings"][0]
        self.assertEqual((setting["caught"], setting["missed"]), (1, 1))
        self.assertEqual(setting["missed_examples"][0]["after_claim_seconds"], 480.0)

    def test_fail_on_ttl_expired_fails_the_run(self):
        self.assertEqual(run(self.audit + ["--fail-on", "ttl-expired", self.log])[0], 1)
        self.assertEqual(run(self.audit + ["--fail-on", "key-reuse", self.log])[0], 0)

    def test_dedup_on_event_time_lets_through_the_copy_audit_names(self):
        store = os.path.join(self.tmp.name, "idem.db")
        code, out, err = run(["dedup", "--key", "key", "--time-field", "ts", "--ttl", "5m", "--store",
                              f"sqlite:{store}", "-q", self.log])
        self.assertEqual(code, 0, err)
        self.assertEqual([json.loads(line)["ts"] for line in out.splitlines()], [self.COPIES[0], self.COPIES[2]])


class SqlRows(unittest.TestCase):
    """`audit --sqlite` on the app's own table gives the causes the same rows
    give as NDJSON: its times are read, however SQLite keeps them."""

    ROWS = [  # key, created_at, worker, amount
        ("k-ttl", "2026-11-30 09:00:00", "w1", 5), ("k-ttl", "2026-11-30 09:06:00", "w1", 5),
        ("k-race", "2026-11-30 09:01:00", "w2", 7), ("k-race", "2026-11-30 09:01:00.300", "w3", 7),
        ("k-reuse", "2026-11-30 09:02:00", "w1", 1), ("k-reuse", "2026-11-30 09:03:00", "w1", 2),
        ("k-storm", "2026-11-30 10:00:00", "w4", 9), ("k-storm", "2026-11-30 10:00:01", "w4", 9),
        ("k-storm", "2026-11-30 10:00:03", "w4", 9), ("k-storm", "2026-11-30 10:00:07", "w4", 9),
    ]

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def causes(self, args):
        code, out, err = run(["audit", "--key", "key", "--time-field", "created_at", "--source-field", "worker",
                              "--ttl", "5m", "--format", "json", "-q", *args])
        self.assertEqual(code, 1, err)
        return {g["key"]: g["causes"] for g in json.loads(out)["groups"]}

    def test_sqlite_rows_give_the_causes_their_ndjson_gives(self):
        def epoch(text):  # SQLite's other habit: seconds since 1970, a number
            whole = calendar.timegm(time.strptime(text[:19], "%Y-%m-%d %H:%M:%S"))
            return whole + (0.3 if text.endswith(".300") else 0)

        for kind, spell in (("text", lambda text: text), ("epoch", epoch)):
            with self.subTest(created_at=kind):
                db = os.path.join(self.tmp.name, f"app-{kind}.db")
                with sqlite3.connect(db) as conn:
                    conn.execute("create table events(id integer primary key, key text, created_at, worker text,"
                                 " amount integer)")
                    conn.executemany("insert into events(key, created_at, worker, amount) values (?,?,?,?)",
                                     [(k, spell(t), w, a) for k, t, w, a in self.ROWS])
                conn.close()
                ndjson = os.path.join(self.tmp.name, f"app-{kind}.ndjson")
                with open(ndjson, "w") as f:
                    for n, (k, t, w, a) in enumerate(self.ROWS, 1):
                        f.write(json.dumps({"id": n, "key": k, "created_at": spell(t), "worker": w,
                                            "amount": a}) + "\n")
                from_sql = self.causes(["--sqlite", db, "--query", "select * from events"])
                from_ndjson = self.causes(["--ignore", "id", ndjson])
                self.assertEqual(from_sql, from_ndjson)
                self.assertEqual(from_sql["k-ttl"], ["ttl-expired"])
                self.assertEqual(from_sql["k-race"], ["concurrent"])
                self.assertEqual(from_sql["k-reuse"], ["key-reuse"])
                self.assertIn("retry-storm", from_sql["k-storm"])


class StatesMatrix(unittest.TestCase):
    """The matrix, the table, Mermaid and DOT count what the findings say:
    one judgement (docs/states.md, "Reports")."""

    MACHINE = "samples/orders-machine.yaml"
    # One log with every kind a transition can be judged.
    EVENTS = [
        ("o1", "pending", "", 1), ("o1", "paid", "confirm", 2),          # allowed
        ("o2", "pending", "", 1), ("o2", "paid", "hack", 2),             # illegal: the wrong operation
        ("o3", "pending", "", 1), ("o3", "refunded", "", 3),             # versions 2 never came: not judged
        ("o4", "pending", "", 1), ("o4", "shipped", "", 2),              # illegal: not in the machine
        ("o5", "pending", "", 1), ("o5", "cancelled", "cancel", 2), ("o5", "paid", "confirm", 3),  # after final
        ("o6", "pending", "", 1), ("o6", "paid", "confirm", 2), ("o6", "refunded", "refund", 2),  # version conflict
        ("o7", "pending", "", 1), ("o7", "lost", "", 2),                 # unknown state
    ]

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.log = os.path.join(self.tmp.name, "orders.ndjson")
        with open(self.log, "w") as f:
            for n, (order, status, op, version) in enumerate(self.EVENTS):
                event = {"order_id": order, "status": status, "version": version,
                         "ts": f"2026-11-30T08:{n:02}:00Z"}
                if op:
                    event["op"] = op
                f.write(json.dumps(event) + "\n")

    def tearDown(self):
        self.tmp.cleanup()

    def report(self, fmt):
        code, out, err = run(["states", "--entity", "order_id", "--state", "status", "--event", "op",
                              "--version-field", "version", "--machine", os.path.join(ROOT, self.MACHINE),
                              "--store", ":memory:", "--format", fmt, "-q", self.log])
        self.assertEqual(code, 1, err)
        return out.decode()

    def test_every_count_in_the_matrix_is_a_finding_s_count(self):
        report = json.loads(self.report("json"))
        edges = {(e["from"], e["to"]): e for e in report["transitions"]}
        totals = {}
        for edge in report["transitions"]:
            for verdict, count in edge["judged"].items():
                totals[verdict] = totals.get(verdict, 0) + count
            self.assertEqual(edge["seen"], sum(edge["judged"].values()))
        for finding in ("illegal", "after-final", "unknown-state"):
            self.assertEqual(totals.get(finding, 0), report["findings"][finding], finding)
        # o6's second version 2 waited beside the first to be put in order
        # and was never applied: a finding, and no transition.
        self.assertEqual(report["findings"]["version-conflict"], 1)
        self.assertNotIn("version-conflict", totals)
        self.assertEqual(totals["after-gap"], report["findings"]["version-gap"])
        # pending -> paid: allowed by confirm, illegal by hack; the jump over
        # the gap is not judged, whatever the machine says of the edge.
        self.assertEqual(edges[("pending", "paid")]["judged"], {"allowed": 2, "illegal": 1})
        self.assertEqual(edges[("pending", "refunded")]["judged"], {"after-gap": 1})
        mermaid = self.report("mermaid")
        self.assertRegex(mermaid, r"s0 --> s1 : 2 allowed, 1 illegal\n")
        self.assertIn("1 after-gap (not judged) NOT IN THE MACHINE", mermaid)
        dot = self.report("dot")
        self.assertIn('"pending" -> "paid" [label="2 allowed, 1 illegal", color=red]', dot)
        table = self.report("table")
        self.assertRegex(table, r"pending +-> paid +3  2 allowed, 1 illegal\n")
        self.assertRegex(table, r"pending +-> refunded +1  1 after-gap \(not judged\)  \(not in the machine\)")


class ReconcileNextDay(unittest.TestCase):
    """T+1: a key an earlier run processed is not new when it comes again."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.store = os.path.join(self.tmp.name, "reconcile.db")

    def tearDown(self):
        self.tmp.cleanup()

    def day(self, name, sent, charged, *args):
        paths = []
        for stage, events in (("sent", sent), ("charges", charged)):
            path = os.path.join(self.tmp.name, f"{name}-{stage}.ndjson")
            with open(path, "w") as f:
                f.writelines(json.dumps({"order": order, "ts": ts}) + "\n" for order, ts in events)
            paths.append(path)
        code, out, err = run(["reconcile", "--stage", f"sent={paths[0]}", "--stage", f"charges={paths[1]}",
                              "--key", "order", "--time", "ts", "--grace", "1h", "--store", self.store,
                              "--report", "json", "-q", *args])
        self.assertIn(code, (0, 1), err)
        return code, json.loads(out)

    def test_an_order_charged_again_the_next_day_is_a_duplicate_not_an_orphan(self):
        # Day 1: ord_1 and ord_2 sent and charged. Day 2: ord_3 sent and
        # charged, and ord_1 charged again with no new send (the workflow
        # resumed overnight with a regenerated idempotency key).
        self.day("d1", [("ord_1", "2026-11-30T09:00:00Z"), ("ord_2", "2026-11-30T09:05:00Z")],
                 [("ord_1", "2026-11-30T09:00:02Z"), ("ord_2", "2026-11-30T09:05:02Z")])
        code, report = self.day("d2", [("ord_3", "2026-12-01T09:00:00Z")],
                                [("ord_3", "2026-12-01T09:00:02Z"), ("ord_1", "2026-12-01T08:10:00Z")])
        self.assertEqual(code, 1)
        self.assertEqual(report["findings"]["orphan"]["count"], 0, report)
        self.assertEqual(report["findings"]["duplicated"]["count"], 1)
        (example,) = report["findings"]["duplicated"]["examples"]
        self.assertEqual((example["key"], example["stage"]), ("ord_1", "charges"))
        self.assertIn("first processed there 2026-11-30T09:00:02", example["why"])

    def test_a_redelivery_of_an_order_processed_yesterday_is_no_loss(self):
        self.day("d1", [("ord_1", "2026-11-30T09:00:00Z")], [("ord_1", "2026-11-30T09:00:02Z")])
        code, report = self.day("d2", [("ord_1", "2026-12-01T09:00:00Z"), ("ord_4", "2026-12-01T09:00:00Z")],
                                [("ord_4", "2026-12-01T12:00:02Z")])
        self.assertEqual(report["findings"]["lost"]["count"], 0, report)
        self.assertEqual(report["findings"]["duplicated"]["count"], 1)

    def test_past_remember_a_key_seen_again_is_new(self):
        self.day("d1", [("ord_1", "2026-11-30T09:00:00Z")], [("ord_1", "2026-11-30T09:00:02Z")],
                 "--remember", "1h")
        code, report = self.day("d2", [("ord_3", "2026-12-01T09:00:00Z")],
                                [("ord_3", "2026-12-01T09:00:02Z"), ("ord_1", "2026-12-01T08:10:00Z")],
                                "--remember", "1h")
        self.assertEqual(report["findings"]["orphan"]["count"], 1)
        self.assertEqual(report["findings"]["duplicated"]["count"], 0)


def sample(*parts):
    return os.path.join(ROOT, "samples", *parts)


if __name__ == "__main__":
    unittest.main()
