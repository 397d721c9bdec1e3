"""No silent wrong answers (docs/exit-codes.md, "Paths and values that
match nothing"): a field path no record holds is a warning naming the flag,
the path and the closest path records held, and exit 3 unless
--allow-absent names it; a value no record holds at a path they hold is a
warning with the closest values and a count, exit 1 under --fail-on
unmatched. Each case is one a new user hit."""
import json
import os
import tempfile
import unittest

from harness import ROOT, ndjson, run

STRIPE = [{"id": "evt_1", "type": "charge.succeeded", "request": {"id": "req_1"}, "delivery_attempt": 1},
          {"id": "evt_1", "type": "charge.succeeded", "request": {"id": "req_2"}, "delivery_attempt": 2},
          {"id": "evt_2", "type": "charge.succeeded", "request": {"id": "req_3"}, "delivery_attempt": 1},
          {"id": "evt_3", "type": "invoice.paid", "request": {"id": "req_4"}, "delivery_attempt": 1},
          {"id": "evt_4", "type": "invoice.paid", "request": {"id": "req_5"}, "delivery_attempt": 1}]
ALERTS = [{"type": "notification", "priority": "critical", "user": "u1", "msg": "disk full",
           "ts": "2026-11-30T08:00:00Z"},
          {"type": "notification", "priority": "low", "user": "u1", "msg": "disk 80%", "ts": "2026-11-30T08:01:00Z"},
          {"type": "notification", "priority": "low", "user": "u1", "msg": "disk 81%", "ts": "2026-11-30T08:02:00Z"}]


def summary_of(err):
    return json.loads(err.strip().splitlines()[-1])


def write_text(directory, name, text):
    path = os.path.join(directory, name)
    with open(path, "w") as f:
        f.write(text)
    return path


class PathsNoRecordHolds(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def file(self, name, records):
        path = os.path.join(self.tmp.name, name)
        with open(path, "wb") as f:
            f.write(ndjson(records) if not isinstance(records, (bytes, str)) else
                    (records.encode() if isinstance(records, str) else records))
        return path

    def test_merge_bypass_with_a_misspelt_path(self):
        # Case 1: the critical alert was merged into a 5-minute window, "0 bypassed", exit 0.
        code, out, err = run(["merge", "--group", "user", "--window", "5m", "--time-field", "ts",
                              "--bypass", "priorty=critical", "--summary", "json", self.file("a.ndjson", ALERTS)])
        self.assertEqual(code, 3, err)
        self.assertIn("--bypass: 'priorty' is in none of 3 records; did you mean 'priority'?", err)
        self.assertEqual(summary_of(err)["absent_paths"], 1)
        code, _, err = run(["merge", "--group", "user", "--window", "5m", "--time-field", "ts",
                            "--bypass", "priorty=critical", "--allow-absent", "priorty",
                            self.file("a.ndjson", ALERTS)])
        self.assertEqual(code, 0, err)

    def test_merge_bypass_with_a_value_no_record_holds(self):
        args = ["merge", "--group", "user", "--window", "5m", "--time-field", "ts", "--bypass",
                "priority=critcal", "--summary", "json", self.file("a.ndjson", ALERTS)]
        code, _, err = run(args)
        self.assertEqual(code, 0, err)
        self.assertIn("did you mean 'critical'?", err)
        self.assertEqual(summary_of(err)["unmatched_values"], 1)
        code, _, err = run(args + ["--fail-on", "unmatched"])
        self.assertEqual(code, 1, err)

    def test_a_merge_rule_whose_type_no_record_has(self):
        # Case 2: "0 in ... 2 unmatched", exit 0.
        rules = self.file("rules.yaml", "message_merger:\n  rules:\n    - type: notificaton\n      window: 5m\n"
                                        "      fields: [user]\n      action: merge_content\n")
        code, _, err = run(["merge", "--rules", rules, "--time-field", "ts", "--summary", "json", "--fail-on",
                            "unmatched", self.file("a.ndjson", ALERTS)])
        self.assertEqual(code, 1, err)
        self.assertIn("'notificaton'", err)
        self.assertIn("did you mean 'notification'?", err)
        self.assertEqual(summary_of(err)["unmatched_values"], 1)

    def test_dedup_ignore_with_a_misspelt_path(self):
        # Case 3: 5 unique instead of 4, silently.
        log = self.file("s.ndjson", STRIPE)
        code, _, err = run(["dedup", "--ignore", "request.idd,delivery_attempt", "--store", ":memory:", log])
        self.assertEqual(code, 3, err)
        self.assertIn("--ignore: 'request.idd' is in none of 5 records; did you mean 'request.id'?", err)
        code, out, err = run(["dedup", "--ignore", "request.id,delivery_attempt", "--store", ":memory:", log])
        self.assertEqual(code, 0, err)
        self.assertEqual(len(out.splitlines()), 4)

    def test_reconcile_and_replay_filters_with_a_misspelt_path(self):
        # Case 4: an empty --missing file and exit 0; replay's "0 selected".
        sent = self.file("sent.ndjson", STRIPE)
        app = self.file("app.ndjson", STRIPE[:2])
        missing = os.path.join(self.tmp.name, "m.ndjson")
        with open(missing, "w") as f:
            f.write("kept\n")
        code, _, err = run(["reconcile", "--stage", f"sent={sent}", "--stage", f"app={app}", "--key", "id",
                            "--filter", "tpye=invoice.paid", "--missing", missing, "--grace", "0s"])
        self.assertEqual(code, 3, err)
        self.assertIn("--filter: 'tpye' is in none of", err)
        self.assertIn("did you mean 'type'?", err)
        with open(missing) as f:
            self.assertEqual(f.read(), "kept\n")  # no empty list to resend
        code, _, err = run(["replay", "--to", "http://127.0.0.1:9/h", "--dry-run", "--key", "id",
                            "--filter", "tpye=invoice.paid", sent])
        self.assertEqual(code, 3, err)
        self.assertIn("--filter: 'tpye' is in none of 5 records; did you mean 'type'?", err)

    def test_payload_and_ignore_typos_in_reconcile_and_audit(self):
        # Case 5: no warning.
        sent = self.file("sent.ndjson", STRIPE)
        code, _, err = run(["reconcile", "--stage", f"a={sent}", "--stage", f"b={sent}", "--key", "id",
                            "--payload", "amout"])
        self.assertEqual(code, 3, err)
        self.assertIn("--payload (stage 'a'): 'amout' is in none of 5 records", err)
        for flag in ("--ignore", "--payload"):
            with self.subTest(flag=flag):
                code, out, err = run(["audit", "--key", "id", flag, "request.idd", sent])
                self.assertEqual(code, 3, err)
                self.assertIn(f"{flag}: 'request.idd' is in none of 5 records; did you mean 'request.id'?", err)

    def test_states_event_no_record_holds(self):
        # Case 6: allowed transitions called illegal, no word that 'opp' is absent.
        orders = self.file("o.ndjson", [{"id": "o1", "status": "pending", "op": "create"},
                                        {"id": "o1", "status": "paid", "op": "confirm"}])
        code, _, err = run(["states", "--entity", "id", "--state", "status", "--event", "opp",
                            "--allow", "pending>paid:confirm", "--store", ":memory:", orders])
        self.assertEqual(code, 3, err)
        self.assertIn("--event: 'opp' is in none of 2 records; did you mean 'op'?", err)

    def test_a_key_typo_on_many_records_still_says_the_remedy(self):
        # Issue 60 item 9: past 20 records the warnings about each one hid
        # the run's own "did you mean", which came after them.
        records = [{"key": f"k{n % 7}", "n": n} for n in range(30)]
        code, _, err = run(["dedup", "--key", "kye", "--store", ":memory:"], stdin=ndjson(records))
        self.assertEqual(code, 3, err)
        self.assertIn("--key: 'kye' is in none of 30 records; did you mean 'key'?", err)
        self.assertIn("10 more warnings not shown", err)

    def test_a_semicolon_csv_says_which_flag_reads_it(self):
        # Issue 60 item 9: JSON syntax warnings and a jq hint, never the flag.
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "export.csv")
            with open(path, "w") as f:
                f.write("id;amount;name\n1;10;a\n2;20;b\n1;10;a\n")
            code, _, err = run(["dedup", "--key", "id", "--store", ":memory:", path])
            self.assertEqual(code, 3, err)
            self.assertIn("looks like CSV separated by ';': pass --csv-delimiter ';'", err)
            code, out, err = run(["dedup", "--key", "id", "--store", ":memory:", "--csv-delimiter", ";", path])
            self.assertEqual((code, len(out.splitlines())), (0, 2), err)

    def test_empty_input_stays_clean(self):
        code, _, err = run(["dedup", "--ignore", "request.idd", "--store", ":memory:", self.file("e.ndjson", b"")])
        self.assertEqual(code, 0, err)

    def test_a_stage_with_no_usable_record_writes_no_missing_file(self):
        # Case 7: "0 reached, 2 lost (100%)", and resend.ndjson listed processed events.
        sent = self.file("sent.ndjson", [{"event_id": "e1"}, {"event_id": "e2"}])
        app = self.file("app.ndjson", [{"event_id": "e1"}, {"event_id": "e2"}])
        resend = os.path.join(self.tmp.name, "resend.ndjson")
        code, _, err = run(["reconcile", "--stage", f"sent={sent}", "--stage", f"app={app}", "--key",
                            "event_id", "--key", "app=eventid", "--missing", resend])
        self.assertEqual(code, 3, err)
        self.assertIn("stage 'app': none of its 2 records is usable", err)
        self.assertFalse(os.path.exists(resend))

    def test_max_loss_without_a_percent_sign(self):
        # Case 8: --max-loss 5 (meant 5%) passed an 8.3% loss.
        sent = self.file("sent.ndjson", STRIPE)
        code, _, err = run(["reconcile", "--stage", f"a={sent}", "--stage", f"b={sent}", "--key", "id",
                            "--max-loss", "5"])
        self.assertEqual(code, 2, err)
        self.assertIn("5 would be 500%: write 5% or 0.05", err)
        code, _, err = run(["reconcile", "--stage", f"a={sent}", "--stage", f"b={sent}", "--key", "id",
                            "--max-loss", "5%"])
        self.assertEqual(code, 0, err)


if __name__ == "__main__":
    unittest.main()


class WrongOutputFiles(unittest.TestCase):
    def test_a_labelled_looking_secret_gets_a_hint(self):
        # Case 9: the documented rotation example rejected every genuine delivery.
        events = ndjson([{"id": "evt_1", "type": "charge.succeeded"}])
        code, signed, err = run(["sign", "--scheme", "stripe", "--secret", "whsec_new",
                                 "--timestamp", "2026-11-30T08:00:00Z"], stdin=events)
        self.assertEqual(code, 0, err)
        code, out, err = run(["verify", "--scheme", "stripe", "--secret", "new=whsec_new", "--now",
                              "2026-11-30T08:00:00Z", "-"], stdin=signed)
        self.assertEqual(code, 1, err)
        self.assertIn("secret #1 starts with 'new=': the whole value is the secret", err)
        self.assertNotIn("whsec_new", err)
        code, out, err = run(["verify", "--help"])
        self.assertNotIn("--secret old=", out.decode())
        with open(os.path.join(ROOT, "docs", "verify.md")) as f:
            self.assertNotIn("--secret old=$OLD --secret new=$NEW", f.read())

    def test_sign_with_two_secrets_signs_with_each_or_refuses(self):
        # Case 10: two --secret silently signed with one.
        events = ndjson([{"id": "evt_1", "type": "charge.succeeded"}])
        for scheme, old, new in (("stripe", "whsec_old", "whsec_new"),
                                 ("standard", "whsec_b2xkb2xkb2xkb2xk", "whsec_bmV3bmV3bmV3bmV3")):
            with self.subTest(scheme=scheme):
                code, signed, err = run(["sign", "--scheme", scheme, "--secret", old, "--secret", new,
                                         "--timestamp", "2026-11-30T08:00:00Z"], stdin=events)
                self.assertEqual(code, 0, err)
                for secret in (old, new):  # a receiver holding either secret accepts it
                    code, _, err = run(["verify", "--scheme", scheme, "--secret", secret, "--now",
                                        "2026-11-30T08:00:00Z", "-"], stdin=signed)
                    self.assertEqual(code, 0, err)
        code, _, err = run(["sign", "--scheme", "github", "--secret", "a", "--secret", "b"], stdin=events)
        self.assertEqual(code, 2, err)
        self.assertIn("a github delivery carries one signature: give one", err)


class TimesAndFormats(unittest.TestCase):
    def test_sql_style_timestamps_read_as_utc(self):
        # Case 14: SQLite's CURRENT_TIMESTAMP was rejected everywhere.
        records = [{"id": "a", "created_at": "2026-11-30 09:00:00"},
                   {"id": "a", "created_at": "2026-11-30 09:00:01.250"}]
        code, out, err = run(["dedup", "--key", "id", "--time-field", "created_at", "--store", ":memory:",
                              "--summary", "json", "-"], stdin=ndjson(records))
        self.assertEqual(code, 0, err)
        self.assertEqual(summary_of(err)["rejected"], 0)
        code, out, err = run(["audit", "--key", "id", "--time-field", "created_at", "--format", "json", "-"],
                             stdin=ndjson(records))
        self.assertEqual(code, 1, err)  # findings: exit 1
        self.assertIn("2026-11-30T09:00:00", out.decode())
        code, out, err = run(["audit", "--key", "id", "--time-field", "id", "-"], stdin=ndjson(records))
        self.assertEqual(code, 3, err)
        self.assertIn("unreadable time", err)
        self.assertNotIn("is in none of", err)

    def test_a_time_without_an_offset_reads_in_the_tz_given(self):
        # Paris wall-clock times either side of its midnight: read in Paris they
        # are two Paris days, as the same instants written with their offset are.
        def windows(times):
            code, out, err = run(["merge", "--group", "g", "--window", "24h", "--time-field", "t", "--tz",
                                  "Europe/Paris", "-"], stdin=ndjson([{"g": "a", "t": t} for t in times]))
            self.assertEqual(code, 0, err)
            return [json.loads(line)["_idem"]["merge"]["window"]["start"] for line in out.splitlines()]
        local = windows(["2026-11-30 23:30:00", "2026-12-01 00:30:00"])
        self.assertEqual(local, windows(["2026-11-30T23:30:00+01:00", "2026-12-01T00:30:00+01:00"]))
        self.assertEqual(len(local), 2)

    def test_gzip_is_read_and_csv_is_named_by_their_first_bytes(self):
        # Case 15: a JSON syntax error and "check the field paths". A gzip
        # log, whatever its name, is read decompressed (test_compressed.py).
        import gzip
        with tempfile.TemporaryDirectory() as tmp:
            packed = os.path.join(tmp, "events.log")
            with gzip.open(packed, "wb") as f:
                f.write(ndjson([{"id": "a"}, {"id": "a"}]))
            code, out, err = run(["audit", "--key", "id", "--format", "json", "-q", packed])
            self.assertEqual(code, 1, err)
            self.assertEqual(json.loads(out)["summary"]["records"], 2)
            table = os.path.join(tmp, "events.txt")
            with open(table, "w") as f:
                f.write("id,type\na,x\n")
            # Told by its first bytes, whatever its name: read as CSV.
            code, out, err = run(["audit", "--key", "id", "--format", "json", "-q", table])
            self.assertEqual(code, 0, err)
            self.assertEqual(json.loads(out)["summary"]["records"], 1)
            # Read as NDJSON because the user said so: every line rejected,
            # and the hint names what it looks like.
            code, out, err = run(["audit", "--key", "id", "--input-format", "ndjson", table])
            self.assertEqual(code, 3, err)
            self.assertIn("looks like CSV, not NDJSON: drop --input-format ndjson", err)
            self.assertEqual(out, b"")  # no report of nothing


class OneVocabulary(unittest.TestCase):
    def test_report_and_format_on_every_reporting_command(self):
        # Case 16.
        log = ndjson([{"id": "a"}, {"id": "a"}])
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "a.ndjson")
            with open(path, "wb") as f:
                f.write(log)
            for args in (["audit", "--key", "id", "--report", "json", path],
                         ["reconcile", "--stage", f"a={path}", "--stage", f"b={path}", "--key", "id",
                          "--format", "json"]):
                with self.subTest(args=args[0]):
                    code, out, err = run(args)
                    self.assertEqual(code, 1, err)  # findings: exit 1
                    json.loads(out)
        code, help_out, _ = run(["help", "dedup"])
        code2, flag_out, _ = run(["dedup", "--help"])
        self.assertEqual((code, help_out), (code2, flag_out))
        self.assertIn(b"--ignore", help_out)

    def test_messages(self):
        # Case 18, in part.
        code, _, err = run(["verify", "--scheme", "stripe", "--secret-env", "EMPTYSEC", "-"], stdin=b"",
                           env={"EMPTYSEC": ""})
        self.assertEqual(code, 2, err)
        self.assertIn("'EMPTYSEC' is set but empty", err)
        with tempfile.TemporaryDirectory() as tmp:
            machine = write_text(tmp, "m.yaml", "states: [pending, paid]\ninitial: [pending]\ntransitions:\n"
                                                "  - pending -> paid\n")
            code, _, err = run(["states", "--entity", "id", "--state", "s", "--machine", machine, "--store",
                                ":memory:", "-"], stdin=ndjson([{"id": "o", "s": "pending"}, {"id": "o", "s": "paid"}]))
            self.assertEqual(code, 0, err)
        code, _, err = run(["reorder", "--seq", "n", "-"], stdin=ndjson([{"n": 1}, {"n": 3}, {"n": 2}, {"n": 1}]))
        self.assertNotIn("partition null", err)
        code, _, err = run(["merge", "--group", "g", "--window", "5min", "-"], stdin=b"")
        self.assertEqual(code, 2, err)
        self.assertIn("--window: invalid duration '5min'", err)
        with tempfile.TemporaryDirectory() as tmp:
            rules = write_text(tmp, "r.yaml", "rules:\n  - type: n\n    window: 5m\n    fields: [a]\n    action: squash\n")
            code, _, err = run(["merge", "--rules", rules, "-"], stdin=b"")
            self.assertIn("r.yaml:5:13: unknown action 'squash'", err)  # where the action is written
        code, _, err = run(["dedup", "--key", "id", "--store", ":memory:", "-"],
                           stdin=ndjson([{"id": "a"}, {"id": "a"}]))
        self.assertIn("1 duplicate,", err)
        self.assertNotIn("1 duplicates", err)


class NothingDroppedWithoutBeingAsked(unittest.TestCase):
    def test_late_records_stay_in_the_output_marked(self):
        # Case 12: the README's own reorder example dropped 3 of 14 records.
        sample = os.path.join(ROOT, "samples", "events", "ci-pipeline.ndjson")
        code, out, err = run(["reorder", "--order-by", "at", "--max-lateness", "30s", "--store", ":memory:",
                              "--summary", "json", sample])
        lines = [json.loads(line) for line in out.splitlines()]
        self.assertEqual(len(lines), 14, err)
        late = [line for line in lines if "late" in line.get("_idem", {})]
        self.assertEqual(len(late), summary_of(err)["late"] + summary_of(err).get("duplicates", 0))
        self.assertGreater(len(late), 0)
        code, out, err = run(["reorder", "--order-by", "at", "--max-lateness", "30s", "--store", ":memory:",
                              "--drop-late", "--summary", "json", sample])
        self.assertEqual(len(out.splitlines()), 14 - len(late), err)
        self.assertIn("dropped (--drop-late)", err)

    def test_merge_keeps_a_late_record_as_a_window_of_its_own(self):
        records = [{"g": "a", "ts": "2026-11-30T08:00:00Z"}, {"g": "a", "ts": "2026-11-30T08:10:00Z"},
                   {"g": "a", "ts": "2026-11-30T08:00:30Z"}]
        base = ["merge", "--group", "g", "--window", "1m", "--time-field", "ts", "--summary", "json", "-"]
        code, out, err = run(base, stdin=ndjson(records))
        lines = [json.loads(line) for line in out.splitlines()]
        self.assertEqual(len(lines), 3, err)
        marked = [line for line in lines if line.get("_idem", {}).get("merge", {}).get("late")]
        self.assertEqual(len(marked), 1)
        self.assertEqual(summary_of(err)["late"], 1)
        code, out, err = run(base + ["--drop-late"], stdin=ndjson(records))
        self.assertEqual(len(out.splitlines()), 2, err)

    def test_a_far_future_time_is_rejected_and_moves_no_watermark(self):
        # Case 13: one record dated 9999-12-31 made merge keep 1 of 41 and reorder 1 of 41.
        records = [{"g": "a", "n": i, "ts": f"2026-11-30T08:{i:02d}:00Z"} for i in range(40)]
        records.insert(3, {"g": "a", "n": 99, "ts": "9999-12-31T23:59:59Z"})
        code, out, err = run(["reorder", "--order-by", "ts", "--max-lateness", "30s", "--store", ":memory:",
                              "--summary", "json", "-"], stdin=ndjson(records))
        self.assertEqual(code, 1, err)  # a rejected record
        self.assertEqual(len(out.splitlines()), 40, err)
        self.assertIn("more than --max-future 1d ahead of the clock", err)
        self.assertEqual(summary_of(err)["rejected"], 1)
        code, out, err = run(["merge", "--group", "n", "--window", "1m", "--time-field", "ts",
                              "--summary", "json", "-"], stdin=ndjson(records))
        self.assertEqual(code, 1, err)
        self.assertEqual(len(out.splitlines()), 40, err)
        self.assertEqual(summary_of(err)["late"], 0)


class MergeKeepsTheRecordsOwnFields(unittest.TestCase):
    def test_an_actions_figures_never_overwrite_a_field_of_the_record(self):
        # Case 11: merge overwrote the user's own count and merged fields.
        records = [{"user": "u1", "count": 7, "merged": "mine", "msg": "a", "ts": "2026-11-30T08:00:00Z"},
                   {"user": "u1", "count": 9, "merged": "theirs", "msg": "b", "ts": "2026-11-30T08:00:10Z"}]
        code, out, err = run(["merge", "--group", "user", "--window", "5m", "--time-field", "ts", "--action",
                              "merge_content", "-"], stdin=ndjson(records))
        self.assertEqual(code, 0, err)
        merged = json.loads(out)
        self.assertEqual((merged["count"], merged["merged"]), (7, "mine"))  # the first member's own
        self.assertEqual(merged["_idem"]["merge"]["count"], 2)
        self.assertEqual([m["msg"] for m in merged["_idem"]["merge"]["merged"]], ["a", "b"])
        self.assertIn("records have their own 'merged', 'count' fields", err)
        code, out, err = run(["merge", "--group", "user", "--window", "5m", "--time-field", "ts", "--action",
                              "merge_content", "-"], stdin=ndjson([{k: v for k, v in r.items()
                                                                     if k not in ("count", "merged")}
                                                                    for r in records]))
        merged = json.loads(out)
        self.assertEqual(merged["count"], 2)  # no field of its own: the figures where the seed has them
        self.assertEqual(len(merged["merged"]), 2)


class EveryFlagsPathIsChecked(unittest.TestCase):
    """The rule, flag by flag: a path no record holds fails the run (exit 3)
    with the flag and the path named, and the closest path records held."""

    RECORD = {"id": "e1", "type": "invoice.paid", "status": "pending", "event": "create", "version": 1,
              "ts": "2026-11-30T08:00:00Z", "seq": 1, "user": "u1", "request": {"id": "req_1"}, "attempt": 1,
              "route": "/hooks", "source": "svc-a", "code": 200, "amount": 5}
    CASES = [
        ("dedup", "--key", ["dedup", "--key", "idd", "--store", ":memory:"]),
        ("dedup", "--ignore", ["dedup", "--ignore", "request.idd", "--store", ":memory:"]),
        ("dedup", "--time-field", ["dedup", "--key", "id", "--time-field", "tss", "--store", ":memory:"]),
        ("audit", "--key", ["audit", "--key", "idd"]),
        ("audit", "--ignore", ["audit", "--key", "id", "--ignore", "request.idd"]),
        ("audit", "--payload", ["audit", "--key", "id", "--payload", "tpye"]),
        ("audit", "--fingerprint", ["audit", "--fingerprint", "usr"]),
        ("audit", "--time-field", ["audit", "--key", "id", "--time-field", "tss"]),
        ("audit", "--route-field", ["audit", "--key", "id", "--route-field", "rout"]),
        ("audit", "--attempt-field", ["audit", "--key", "id", "--attempt-field", "attemp"]),
        ("audit", "--source-field", ["audit", "--key", "id", "--source-field", "sourc"]),
        ("audit", "--status-field", ["audit", "--key", "id", "--status-field", "cod"]),
        ("reorder", "--seq", ["reorder", "--seq", "sq", "--store", ":memory:"]),
        ("reorder", "--order-by", ["reorder", "--order-by", "tss", "--store", ":memory:"]),
        ("reorder", "--partition", ["reorder", "--seq", "seq", "--partition", "usr", "--store", ":memory:"]),
        ("states", "--entity", ["states", "--entity", "idd", "--state", "status", "--allow", "pending>paid",
                                "--store", ":memory:"]),
        ("states", "--state", ["states", "--entity", "id", "--state", "stat", "--allow", "pending>paid",
                               "--store", ":memory:"]),
        ("states", "--event", ["states", "--entity", "id", "--state", "status", "--event", "evnt", "--allow",
                               "pending>paid", "--store", ":memory:"]),
        ("states", "--version-field", ["states", "--entity", "id", "--state", "status", "--version-field",
                                       "versio", "--allow", "pending>paid", "--store", ":memory:"]),
        ("states", "--time-field", ["states", "--entity", "id", "--state", "status", "--time-field", "tss",
                                    "--allow", "pending>paid", "--store", ":memory:"]),
        ("merge", "--group", ["merge", "--group", "usr", "--window", "1m", "--time-field", "ts"]),
        ("merge", "--bypass", ["merge", "--group", "user", "--window", "1m", "--time-field", "ts", "--bypass",
                               "stats=pending"]),
        ("merge", "--match", ["merge", "--group", "user", "--window", "1m", "--time-field", "ts", "--match",
                              "tpye=invoice.paid"]),
        ("merge", "--agg", ["merge", "--group", "user", "--window", "1m", "--time-field", "ts", "--agg",
                            "n=sum(amout)"]),
        ("merge", "--time-field", ["merge", "--group", "user", "--window", "1m", "--time-field", "tss"]),
        ("replay", "--filter", ["replay", "--to", "http://127.0.0.1:9/", "--dry-run", "--key", "id", "--filter",
                                "tpye=x"]),
        ("replay", "--key", ["replay", "--to", "http://127.0.0.1:9/", "--dry-run", "--key", "idd"]),
    ]

    def test_each_flag_names_its_path(self):
        with tempfile.TemporaryDirectory() as tmp:
            log = os.path.join(tmp, "in.ndjson")
            with open(log, "wb") as f:
                f.write(ndjson([self.RECORD, dict(self.RECORD, id="e2", seq=2, version=2, status="paid")]))
            for command, flag, args in self.CASES:
                with self.subTest(command=command, flag=flag):
                    code, _, err = run(args + [log])
                    self.assertEqual(code, 3, err)
                    self.assertIn(flag, err)
                    self.assertIn("did you mean", err)
            for flag, path in (("--key (stage 'b')", "idd"), ("--by (stage 'a')", "usr"),
                               ("--time (stage 'a')", "tss")):
                with self.subTest(command="reconcile", flag=flag):
                    extra = {"--key (stage 'b')": ["--key", "b=idd"], "--by (stage 'a')": ["--by", "usr"],
                             "--time (stage 'a')": ["--time", "tss"]}[flag]
                    code, _, err = run(["reconcile", "--stage", f"a={log}", "--stage", f"b={log}", "--key", "id"]
                                       + extra)
                    self.assertEqual(code, 3, err)
                    self.assertIn(f"{flag}: '{path}'", err)


class ChoiceValues(unittest.TestCase):
    """A flag that takes one of a few words (cli/common.hpp
    add_choice_option) refuses any other before reading anything, names the
    words and the closest, and never takes the option's internal number."""

    CASES = [
        (["dedup", "--keep", "lats"], "--keep", "'last'"),
        (["dedup", "--missing", "pas"], "--missing", "'pass'"),
        (["dedup", "--bucket", "hours"], "--bucket", "'hour'"),
        (["dedup", "--on-store-error", "locla"], "--on-store-error", "'local'"),
        (["merge", "--group", "user", "--window", "1m", "--base", "frist"], "--base", "'first'"),
        (["merge", "--group", "user", "--window", "1m", "--missing", "rejct"], "--missing", "'reject'"),
        (["audit", "--key", "id", "--format", "jsn"], "--format", "'json'"),
        (["reconcile", "--stage", "a=x", "--stage", "b=y", "--key", "id", "--report", "markdwn"], "--report",
         "'markdown'"),
        (["replay", "--to", "http://127.0.0.1:9/", "--timing", "orignal"], "--timing", "'original'"),
        (["verify", "--scheme", "github", "--secret", "s", "--fail-on", "nne"], "--fail-on", "'none'"),
        (["verify", "--scheme", "github", "--secret", "s", "--on-store-error", "lcal"], "--on-store-error",
         "'local'"),
        (["listen", "--on-store-error", "unavailble"], "--on-store-error", "'unavailable'"),
        (["dedup", "--summary", "jsn"], "--summary", "'json'"),
        (["dedup", "--input-format", "hra"], "--input-format", "'har'"),
    ]

    def test_a_misspelt_word_is_refused_with_the_closest(self):
        for args, flag, closest in self.CASES:
            with self.subTest(args=args):
                code, out, err = run(args + ["/nonexistent.ndjson"])
                self.assertEqual(code, 2, err)
                self.assertIn(f"{flag}: ", err)
                self.assertIn(f"did you mean {closest}?", err)
                self.assertEqual(out, b"")

    def test_the_option_s_internal_number_is_no_word(self):
        for args in (["dedup", "--keep", "1"], ["audit", "--key", "id", "--format", "0"]):
            with self.subTest(args=args):
                code, _, err = run(args + ["/nonexistent.ndjson"])
                self.assertEqual(code, 2, err)
                self.assertIn("is not", err)

    def test_each_word_is_taken(self):
        with tempfile.TemporaryDirectory() as tmp:
            log = os.path.join(tmp, "in.ndjson")
            with open(log, "wb") as f:
                f.write(ndjson([{"id": "a"}, {"id": "a"}]))
            for keep in ("first", "last"):
                code, _, err = run(["dedup", "--key", "id", "--keep", keep, "--store", ":memory:", "--summary",
                                    "json", log])
                self.assertEqual(code, 0, err)
                self.assertEqual(summary_of(err)["duplicates"], 1)
            code, out, err = run(["audit", "--key", "id", "--format", "json", log])
            self.assertEqual(code, 1, err)
            json.loads(out)
