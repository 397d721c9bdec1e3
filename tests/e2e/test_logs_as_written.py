"""End-to-end tests of audit on logs shaped as real systems write them
(docs/audit.md, "Per-delivery fields"): each delivery carries its own
attempt id, a worker's or a host's name, the id of the ticket it made;
piped in, compressed, split into a folder. The headline counts hold
whatever the log carries besides its intents, and whatever form it comes
in. The logs are made here, their truth known by construction."""
import json
import os
import random
import re
import shutil
import tempfile
import unittest
import uuid

from harness import INCIDENTS, compressed, run
from harness import audit_json as audit




def queue_log(per_delivery):
    """Eleven keys each delivered twice (the second copy 6 minutes later:
    ttl-expired under --ttl 5m for the first four, as the queue's dedup key
    lived 5 minutes), one key (k3) carrying amount 50 then 5000 (the one
    true key-reuse), and twenty keys delivered once. `per_delivery(n)` gives
    the fields the n-th delivery carries of its own."""
    rng = random.Random(60)
    lines, n = [], 0
    at = 1_764_493_200  # 2025-11-30T09:00:00Z
    for k in range(11):
        for copy in range(2):
            record = {"key": f"k{k}", "user": f"u{k}", "amount": 5000 if (k == 3 and copy == 1) else 50,
                      "ts": at + k * 900 + copy * (360 if k < 4 else 30)}
            record.update(per_delivery(n, rng))
            n += 1
            lines.append(record)
    for k in range(20):
        record = {"key": f"once{k}", "user": f"v{k}", "amount": 7, "ts": at + 20_000 + k}
        record.update(per_delivery(n, rng))
        n += 1
        lines.append(record)
    lines.sort(key=lambda r: r["ts"])
    return ("\n".join(json.dumps(r) for r in lines) + "\n").encode()


def attempt_ids(n, rng):
    return {"attempt_id": str(uuid.UUID(int=rng.getrandbits(128)))}


def workers(n, rng):
    return {"handled_by": f"worker-{n % 3}"}


def tickets_and_hosts(n, rng):
    return {"ticket": 40_000 + n, "meta": {"host": f"ip-10-0-0-{n % 2}"}}


class PerDeliveryFields(unittest.TestCase):
    """Issue 60, item 2: a field that differs between the copies of most
    retried groups, whatever its name, is the delivery's; key-reuse is
    called only where a field outside them differs."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def judged(self, log, *extra):
        path = os.path.join(self.tmp.name, "queue.ndjson")
        with open(path, "wb") as f:
            f.write(log)
        code, report, err = audit(["--key", "key", "--time-field", "ts", "--ttl", "5m", *extra, path])
        self.assertEqual(code, 1, err)
        return report, err

    def test_an_attempt_id_per_delivery_is_not_key_reuse(self):
        report, err = self.judged(queue_log(attempt_ids))
        self.assertEqual(report["summary"]["causes"], {"key-reuse": 1, "ttl-expired": 4, "unexplained": 7})
        self.assertEqual(report["summary"]["per_delivery"], {"fields": ["attempt_id"], "learned_from_groups": 11})
        reused = [g for g in report["groups"] if "key-reuse" in g["causes"]]
        self.assertEqual([g["key"] for g in reused], ["k3"])
        # The evidence names the business field, not the delivery's.
        self.assertEqual([f["path"] for f in reused[0]["differences"][0]["fields"]], ["amount"])
        self.assertIn("per-delivery attempt_id", err)

    def test_a_worker_name_or_a_created_ticket_and_host_are_learned_whatever_their_names(self):
        for fields, learned in ((workers, ["handled_by"]), (tickets_and_hosts, ["meta.host", "ticket"])):
            report, _ = self.judged(queue_log(fields))
            self.assertEqual(report["summary"]["causes"]["key-reuse"], 1, fields.__name__)
            self.assertEqual(report["summary"]["per_delivery"]["fields"], learned, fields.__name__)

    def test_the_table_and_markdown_name_what_was_learned_and_how_to_change_it(self):
        path = os.path.join(self.tmp.name, "queue.ndjson")
        with open(path, "wb") as f:
            f.write(queue_log(attempt_ids))
        for form in ("table", "markdown", "html"):
            code, out, err = run(["audit", "--key", "key", "--time-field", "ts", "--format", form, path])
            text = out.decode()
            self.assertRegex(text, r"treated as per-delivery, not payload: attempt\\?_id", form)
            self.assertIn("--no-learn-volatile", text, form)
            self.assertRegex(text, r"dedup of whole events leaves them out with --ignore attempt\\?_id", form)

    def test_the_ignore_it_suggests_makes_whole_event_dedup_see_the_retries(self):
        path = os.path.join(self.tmp.name, "queue.ndjson")
        with open(path, "wb") as f:
            f.write(queue_log(attempt_ids))
        report, _ = self.judged(queue_log(attempt_ids))
        ignore = ",".join(report["summary"]["per_delivery"]["fields"] + ["ts"])
        code, _, err = run(["dedup", "--ignore", ignore, "--store", ":memory:", "--count", "--summary", "json", path])
        # 11 retried keys, one of them (k3) a second intent: 10 duplicates.
        self.assertEqual(json.loads(err.strip().splitlines()[-1])["duplicates"], 10, err)

    def test_no_learn_volatile_compares_every_field(self):
        report, _ = self.judged(queue_log(attempt_ids), "--no-learn-volatile")
        self.assertEqual(report["summary"]["causes"]["key-reuse"], 11)
        self.assertEqual(report["summary"]["per_delivery"]["fields"], [])

    def test_a_business_field_that_differs_in_a_few_groups_is_never_learned(self):
        # Without any per-delivery field, the one reused key is the finding.
        report, _ = self.judged(queue_log(lambda n, rng: {}))
        self.assertEqual(report["summary"]["causes"]["key-reuse"], 1)
        self.assertEqual(report["summary"]["per_delivery"]["fields"], [])

    def test_the_verdicts_are_the_same_spilled_piped_and_compressed(self):
        log = queue_log(attempt_ids)
        path = os.path.join(self.tmp.name, "queue.ndjson")
        with open(path, "wb") as f:
            f.write(log)
        args = ["audit", "--key", "key", "--time-field", "ts", "--ttl", "5m", "--format", "json"]
        _, expected, _ = run(args + [path])
        _, spilled, _ = run(args + ["--spill-after", "3", path])
        self.assertEqual(spilled, expected)
        for kind in ("gzip", "zstd", "xz"):
            _, piped, err = run(args + ["-"], stdin=compressed(log, kind))
            self.assertEqual(piped.decode().replace("<stdin>", path), expected.decode(), kind + err)


class OneJudgement(unittest.TestCase):
    """Issue 60, item 3: the what-if and the causes come from one
    judgement of what one intent is."""

    def test_a_regenerated_key_is_never_another_intent_under_the_what_if_key(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "resume.ndjson")
            with open(os.path.join(INCIDENTS, "overnight-resume.ndjson")) as f, open(path, "w") as out:
                for n, line in enumerate(f):
                    record = json.loads(line)
                    record["run_id"] = f"run-{n}"  # the paused workflow's runs
                    out.write(json.dumps(record) + "\n")
            code, report, err = audit(["--key", "idempotency_key", "--fingerprint", "order_id,step",
                                       "--what-if", "key=order_id,step", "--time-field", "ts", path])
            self.assertEqual(report["summary"]["causes"], {"key-regenerated": 1})
            key = report["summary"]["what_if"]["keys"][0]
            self.assertEqual((key["groups_mixing_payloads"], key["copies_swallowed"]), (0, 0), key)
            code, table, _ = run(["audit", "--key", "idempotency_key", "--fingerprint", "order_id,step",
                                  "--what-if", "key=order_id,step", "--time-field", "ts", path])
            self.assertNotIn("another intent", table.decode())

    def test_per_delivery_fields_do_not_make_another_intent_under_the_what_if_key(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "queue.ndjson")
            with open(path, "wb") as f:
                f.write(queue_log(attempt_ids))
            code, report, err = audit(["--key", "key", "--what-if", "key=user", "--time-field", "ts", path])
            key = report["summary"]["what_if"]["keys"][0]
            # Under user, as under key, only k3's second copy is another intent.
            self.assertEqual((key["groups_mixing_payloads"], key["copies_swallowed"]), (1, 1), key)


class IntentWindow(unittest.TestCase):
    """Issue 60, item 4: one intent is one fingerprint within --window
    (default 24h) of its first record, and the report says so."""

    def test_the_same_ticket_filed_two_days_later_is_another_intent(self):
        with open(os.path.join(INCIDENTS, "agent-retries.ndjson")) as f:
            records = [json.loads(line) for line in f]
        later = dict(records[0], ts="2026-12-02T09:00:00.000Z", idempotency_key="tkt-two-days-on")
        alone = {"ts": "2026-12-01T10:00:00.000Z", "agent": "agent-2", "idempotency_key": "tkt-other",
                 "user_id": "u_7", "fault_type": "billing", "ticket": {"title": "x"}}
        first_alone = dict(alone, ts="2026-11-29T09:00:00.000Z", idempotency_key="tkt-other-before")
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "tickets.ndjson")
            with open(path, "w") as f:
                for record in records + [later, first_alone, alone]:
                    f.write(json.dumps(record) + "\n")
            args = ["--key", "idempotency_key", "--fingerprint", "user_id,fault_type", "--time-field", "ts",
                    "--source-field", "agent"]
            for extra in ([], ["--spill-after", "2"]):
                code, report, err = audit(args + extra + [path])
                self.assertEqual(code, 1, err)
                self.assertEqual(report["summary"]["duplicates"], 6, extra)
                self.assertEqual([g["count"] for g in report["groups"]], [7], extra)
                self.assertEqual(report["summary"]["causes"], {"key-regenerated": 1, "retry-storm": 1})
                self.assertEqual(report["summary"]["intent_window_seconds"], 86400)
            # u_7's two billing tickets, 49 hours apart, and nothing else:
            # no group, exit 0 under --fail-on duplicates.
            only = os.path.join(tmp, "only.ndjson")
            with open(only, "w") as f:
                f.write(json.dumps(first_alone) + "\n" + json.dumps(alone) + "\n")
            code, report, err = audit(args + ["--fail-on", "duplicates", only])
            self.assertEqual((code, report["groups"]), (0, []), err)
            code, table, _ = run(["audit"] + args + [only])
            self.assertIn("intents: one fingerprint within 1d of its first record (--window)", table.decode())
            # A wider window, given, makes them one intent.
            code, report, err = audit(args + ["--window", "72h", only])
            self.assertEqual([g["count"] for g in report["groups"]], [2])
            self.assertEqual(report["summary"]["intent_window_seconds"], 259200)


class RecordsNamedWithTheirFile(unittest.TestCase):
    """Issue 60, item 11: read from several files, every place a record
    is named says its file, in every format, even when a group's records
    share one file."""

    def test_a_group_inside_one_of_several_files_names_the_file(self):
        with tempfile.TemporaryDirectory() as tmp:
            day = os.path.join(tmp, "day")
            os.makedirs(os.path.join(day, "b"))
            shutil.copy(os.path.join(INCIDENTS, "key-reuse.ndjson"), os.path.join(day, "a.ndjson"))
            shutil.copy(os.path.join(INCIDENTS, "clean.ndjson"), os.path.join(day, "b", "a.ndjson"))
            args = ["audit", "--key", "idempotency_key", "--time-field", "ts", "--recursive", day]
            for form in ("table", "markdown", "html", "json"):
                code, out, err = run(args + ["--format", form])
                text = out.decode().replace("\\_", "_")
                self.assertEqual(code, 1, err)
                self.assertNotRegex(text, r"\bline \d", form)
                self.assertIn(os.path.join(day, "a.ndjson") + ":3", text, form)
            code, out, _ = run(args)
            self.assertIn(f"first at {day}/a.ndjson:1, {day}/a.ndjson:3", out.decode())
            self.assertIn(f"differs          {day}/a.ndjson:3 against {day}/a.ndjson:1", out.decode())
            # One file alone: lines.
            code, out, _ = run(args[:-2] + [os.path.join(day, "a.ndjson")])
            self.assertIn("first at line 1, line 3", out.decode())


class EvidenceFromStandardInput(unittest.TestCase):
    """Issue 60, item 7: the report is the same whatever the input form,
    in every format: standard input is kept in a file to be read again."""

    def test_every_format_is_the_same_from_a_file_and_from_a_pipe(self):
        source = os.path.join(INCIDENTS, "key-reuse.ndjson")
        with open(source, "rb") as f:
            log = f.read()
        args = ["audit", "--key", "idempotency_key", "--time-field", "ts", "--source-field", "client"]
        for form in ("json", "table", "markdown", "html"):
            _, expected, _ = run(args + ["--format", form, source])
            self.assertIn("differ", expected.decode(), form)
            for kind in ("plain", "gzip", "zstd", "bzip2"):
                data = log if kind == "plain" else compressed(log, kind)
                code, piped, err = run(args + ["--format", form, "-"], stdin=data)
                text = piped.decode().replace("<stdin>", source).replace("&lt;stdin&gt;", source)
                self.assertEqual(self.without_names(text), self.without_names(expected.decode()), form + kind)
                self.assertNotIn("cannot be read twice", err)

    @staticmethod
    def without_names(text):
        return re.sub(r"[^\s\"'(>|]*key-reuse\.ndjson", "LOG", text.replace("\\_", "_"))


if __name__ == "__main__":
    unittest.main()
