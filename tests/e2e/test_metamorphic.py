"""Metamorphic tests of audit and reconcile over the incident corpora in
samples/ (docs/audit.md, "The incidents"; docs/reconcile.md): a log changed
in a way that says nothing new about its intents — a per-delivery field
added to every record, the log split into a folder, compressed, its
independent groups reordered, the whole incident happening again a day
later under new keys — gets the same verdicts. Only file names and
positions move, and each group's evidence names only its own records.
(Issue 60, item 13.)"""
import json
import os
import random
import shutil
import tempfile
import unittest
import uuid
from datetime import datetime, timedelta

from harness import INCIDENTS, ROOT, compressed, run
FLOW = os.path.join(ROOT, "samples", "flow")

# Each incident as docs/audit.md audits it, and the path of its key.
AUDITED = {
    "agent-retries.ndjson": (["--key", "idempotency_key", "--fingerprint", "user_id,fault_type",
                              "--time-field", "ts", "--source-field", "agent"], "idempotency_key"),
    "ttl-expired.ndjson": (["--key", "key", "--time-field", "ts", "--source-field", "worker", "--ttl", "5m"],
                           "key"),
    "overnight-resume.ndjson": (["--key", "idempotency_key", "--fingerprint", "order_id,step", "--time-field",
                                 "ts", "--source-field", "workflow"], "idempotency_key"),
    "race.ndjson": (["--key", "key", "--time-field", "ts", "--source-field", "worker"], "key"),
    "key-reuse.ndjson": (["--key", "idempotency_key", "--time-field", "ts", "--source-field", "client"],
                         "idempotency_key"),
    "clean.ndjson": (["--key", "key", "--time-field", "ts", "--source-field", "worker"], "key"),
    "webhook-deliveries.ndjson": (["--key", "body.id"], None),
    "layered-retries.ndjson": (["--key", "idempotency_key", "--time-field", "ts", "--attempt-field",
                                "attempt.agent", "--attempt-field", "attempt.tool", "--attempt-field",
                                "attempt.http"], "idempotency_key"),
}


def lines_of(name):
    with open(os.path.join(INCIDENTS, name)) as f:
        return [line for line in f.read().splitlines() if line.strip()]


def audited(args, paths):
    code, out, err = run(["audit", "--format", "json"] + args + paths)
    assert code in (0, 1), err
    return code, json.loads(out)


def verdicts(report, original_line):
    """What must not move: the summary's counts and each group's kind,
    causes, size and records (as lines of the original log, via
    `original_line(position)`), in a canonical order. Also checks that a
    group's evidence names only its own records."""
    summary = report["summary"]
    groups = []
    for group in report["groups"]:
        ats = [record["at"] for record in group["records"]]
        for evidence in group["evidence"].values():
            assert all(0 <= i < group["count"] for i in evidence["records"]), group
        for comparison in group.get("differences", []):
            assert comparison["at"] in ats and comparison["against"] in ats, (comparison, ats)
        groups.append((group["kind"], tuple(sorted(group["causes"])), group["count"],
                       tuple(sorted(original_line(at) for at in ats))))
    return ({"records": summary["records"], "groups": summary["groups"], "duplicates": summary["duplicates"],
             "causes": summary["causes"]}, sorted(groups))


def line_number(at):
    return int(at.rsplit(":", 1)[1])


class AuditVerdictsHold(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.tmp)

    def write(self, name, lines):
        path = os.path.join(self.tmp, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write("".join(line + "\n" for line in lines))
        return path

    def baseline(self, name):
        args, _ = AUDITED[name]
        _, report = audited(args, [os.path.join(INCIDENTS, name)])
        return verdicts(report, line_number)

    def each_incident(self):
        for name in sorted(AUDITED):
            with self.subTest(incident=name):
                yield name, AUDITED[name][0], lines_of(name), self.baseline(name)

    def test_a_per_delivery_uuid_on_every_record(self):
        rng = random.Random(13)
        for name, args, lines, expected in self.each_incident():
            changed = []
            for line in lines:
                record = json.loads(line)
                record["delivery_uuid"] = str(uuid.UUID(int=rng.getrandbits(128), version=4))
                changed.append(json.dumps(record))
            _, report = audited(args, [self.write(name, changed)])
            self.assertEqual(verdicts(report, line_number), expected)

    def test_per_delivery_fields_on_a_log_of_many_retried_groups(self):
        # Worker names and attempt ids differ between the copies of every
        # retried group of a log with enough groups to tell (the key-reuse
        # incident repeated under 6 keys, the ttl-expired one beside it).
        rng = random.Random(14)
        lines = []
        for n in range(6):
            for line in lines_of("ttl-expired.ndjson") + lines_of("key-reuse.ndjson"):
                record = json.loads(line)
                for field in ("key", "idempotency_key"):
                    if field in record:
                        record["key"] = f"{record.pop(field)}-{n}"
                lines.append(json.dumps(record))
        args = ["--key", "key", "--time-field", "ts", "--ttl", "5m"]
        _, report = audited(args, [self.write("many.ndjson", lines)])
        expected = verdicts(report, line_number)
        self.assertEqual(report["summary"]["causes"].get("key-reuse"), 6)
        for fields in (lambda n: {"handled_by": f"worker-{n % 3}"},
                       lambda n: {"attempt_id": f"att_{rng.getrandbits(64):016x}", "host": f"ip-{n % 2}"}):
            changed = [json.dumps({**json.loads(line), **fields(n)}) for n, line in enumerate(lines)]
            _, report = audited(args, [self.write("many-changed.ndjson", changed)])
            self.assertEqual(verdicts(report, line_number), expected)

    def test_split_into_a_folder(self):
        for name, args, lines, expected in self.each_incident():
            folder = os.path.join(self.tmp, name + ".d")
            cuts = [0, len(lines) // 3, 2 * len(lines) // 3, len(lines)]
            offsets = {}
            for part in range(3):
                path = self.write(os.path.join(name + ".d", f"part-{part}.ndjson"), lines[cuts[part]:cuts[part + 1]])
                offsets[path] = cuts[part]

            def original(at):
                path, line = at.rsplit(":", 1)
                return offsets[path] + int(line)
            _, report = audited(args + ["--recursive"], [folder])
            self.assertEqual(verdicts(report, original), expected)

    def test_compressed(self):
        for name, args, lines, expected in self.each_incident():
            data = "".join(line + "\n" for line in lines).encode()
            for kind, suffix in (("gzip", ".gz"), ("zstd", ".zst"), ("xz", ".xz"), ("bzip2", ".bz2")):
                path = os.path.join(self.tmp, name + suffix)
                with open(path, "wb") as f:
                    f.write(compressed(data, kind))
                _, report = audited(args, [path])
                self.assertEqual(verdicts(report, line_number), expected, kind)
                _, piped = run(["audit", "--format", "json"] + args + ["-"], stdin=compressed(data, kind))[:2]
                self.assertEqual(verdicts(json.loads(piped), line_number), expected, kind + " piped")

    def test_independent_groups_reordered(self):
        # The records of each key keep their order; the keys' blocks are
        # put in another order (records without a time keep theirs).
        for name, args, lines, expected in self.each_incident():
            key_path = AUDITED[name][1]
            if key_path is None:
                continue
            by_key = {}
            for number, line in enumerate(lines, 1):
                by_key.setdefault(json.loads(line).get(key_path), []).append(number)
            blocks = list(by_key.values())
            random.Random(len(lines)).shuffle(blocks)
            order = [number for block in blocks for number in block]
            path = self.write(name, [lines[number - 1] for number in order])
            _, report = audited(args, [path])
            self.assertEqual(verdicts(report, lambda at: order[line_number(at) - 1]), expected)

    def test_the_same_incident_a_day_later_under_new_keys_counts_twice(self):
        for name, args, lines, expected in self.each_incident():
            key_path = AUDITED[name][1]
            if key_path is None:
                continue
            later = []
            for line in lines:
                record = json.loads(line)
                record[key_path] = f"{record[key_path]}-next-day"
                stamp = datetime.fromisoformat(record["ts"].replace("Z", "+00:00")) + timedelta(days=1)
                record["ts"] = stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")
                later.append(json.dumps(record))
            _, report = audited(args, [self.write(name, lines + later)])
            counts, groups = verdicts(report, line_number)
            summary, _ = expected
            self.assertEqual(counts["causes"], {cause: 2 * n for cause, n in summary["causes"].items()})
            self.assertEqual((counts["groups"], counts["duplicates"]), (2 * summary["groups"], 2 * summary["duplicates"]))


class ReconcileVerdictsHold(unittest.TestCase):
    """samples/flow's stages, as docs/reconcile.md reconciles them, split
    into folders and compressed: the same findings."""

    def findings(self, stages, keys):
        args = ["reconcile", "--report", "json"] + keys
        for name, path in stages:
            args += ["--stage", f"{name}={path}"]
        code, out, err = run(args)
        self.assertIn(code, (0, 1), err)
        report = json.loads(out)
        return ({name: item["count"] for name, item in report["findings"].items()},
                [(s["records"], s["keys"], s["duplicated_keys"], s["carried_copies"]) for s in report["stages"]])

    def test_stages_split_and_compressed(self):
        # As docs/reconcile.md reconciles them: the provider's JSON export,
        # the capture, the app's log.
        keys = ["--key", "sent=id", "--key", "received=body.id", "--key", "processed=event_id",
                "--time", "sent=created", "--time", "processed=ts", "--sla", "10m", "--grace", "5m"]
        files = {"sent": "stripe-events.json", "received": "capture.ndjson", "processed": "app.ndjson"}
        with tempfile.TemporaryDirectory() as tmp:
            expected = self.findings([(stage, os.path.join(FLOW, name)) for stage, name in files.items()], keys)
            self.assertGreater(sum(expected[0].values()), 0)
            split, packed = [], []
            for stage, name in files.items():
                path = os.path.join(FLOW, name)
                with open(path, "rb") as f:
                    data = f.read()
                zipped = os.path.join(tmp, name + ".zst")
                with open(zipped, "wb") as f:
                    f.write(compressed(data, "zstd"))
                packed.append((stage, zipped))
                if not name.endswith(".ndjson"):
                    split.append((stage, path))
                    continue
                lines = data.decode().splitlines(keepends=True)
                folder = os.path.join(tmp, stage)
                os.makedirs(folder)
                for part, chunk in (("a", lines[:len(lines) // 2]), ("b", lines[len(lines) // 2:])):
                    with open(os.path.join(folder, f"{part}.ndjson"), "w") as f:
                        f.writelines(chunk)
                split.append((stage, os.path.join(folder, "*.ndjson")))
            self.assertEqual(self.findings(split, keys), expected)
            self.assertEqual(self.findings(packed, keys), expected)


if __name__ == "__main__":
    unittest.main()
