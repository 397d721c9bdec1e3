"""--input-format csv (docs/records.md, "CSV"): every command that reads
records reads a CSV file with a header row as the same records in NDJSON --
each row an object of its header's names and its values as strings -- and
gives the same answer; positions are the CSV file's own lines, quoted
fields spanning lines included."""
import csv
import gzip
import io
import json
import os
import re
import tempfile
import unittest

from harness import run, summary_of
from test_time_window import MACHINE, RULES, STATUSES

POSITION = re.compile(rb'"[^"]*\.(?:ndjson|csv):\d+"')
COLUMNS = ["id", "order_id", "status", "type", "user_id", "alert_type", "content", "ts"]


def rows(count=900):
    made = []
    for n in range(count):
        made.append({"id": f"evt_{n % 500}", "order_id": f"o{n % 30}", "status": STATUSES[(n // 30) % 5],
                     "type": "notification", "user_id": f"u{n % 7}", "alert_type": "disk",
                     # a comma, a quote, and now and then a line break inside one field
                     "content": f'c{n}, "q"' + ("\nmore" if n % 97 == 0 else ""),
                     "ts": f"2026-11-30T{n // 60 % 24:02d}:{n % 60:02d}:00Z"})
    return made


def as_csv(records, delimiter=","):
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS, delimiter=delimiter, lineterminator="\n")
    writer.writeheader()
    writer.writerows(records)
    return out.getvalue().encode()


def as_ndjson(records):
    # As idem makes each row: names in order, values as strings, compact.
    return "".join(json.dumps(r, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n"
                   for r in records).encode()


class CsvInput(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.records = rows()
        self.csv = self.path("day.csv")
        with open(self.csv, "wb") as f:
            f.write(as_csv(self.records))
        self.ndjson = self.path("day.ndjson")
        with open(self.ndjson, "wb") as f:
            f.write(as_ndjson(self.records))
        with open(self.path("machine.yaml"), "w") as f:
            f.write(MACHINE)
        with open(self.path("rules.yaml"), "w") as f:
            f.write(RULES)

    def tearDown(self):
        self.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def test_every_command_finds_in_csv_what_it_finds_in_the_same_ndjson(self):
        commands = {
            "dedup": ["dedup", "--key", "id", "--store", ":memory:"],
            "reorder": ["reorder", "--order-by", "ts", "--max-lateness", "2m", "--store", ":memory:"],
            "merge": ["merge", "--rules", self.path("rules.yaml"), "--time-field", "ts", "--max-lateness", "2m",
                      "--store", ":memory:"],
            "states": ["states", "--entity", "order_id", "--state", "status", "--machine",
                       self.path("machine.yaml"), "--store", ":memory:"],
            "audit": ["audit", "--key", "id", "--time-field", "ts", "--format", "json"],
            "verify": ["verify", "--scheme", "github", "--secret", "s", "--drop-invalid"],
        }
        for name, args in commands.items():
            with self.subTest(command=name):
                code, out, err = run(args + ["--summary", "json", "--input-format", "csv", self.csv])
                code_nd, out_nd, err_nd = run(args + ["--summary", "json", self.ndjson])
                self.assertEqual(code, code_nd, err + err_nd)
                summary, summary_nd = summary_of(err), summary_of(err_nd)
                self.assertEqual(summary["in"], len(self.records))
                for count, value in summary_nd.items():
                    if count not in ("seconds", "version"):
                        self.assertEqual(summary[count], value, count)
                if name != "audit":  # audit's evidence names lines; its counts are compared
                    self.assertEqual(POSITION.sub(b'"@"', out), POSITION.sub(b'"@"', out_nd))

    def test_positions_are_the_csv_files_own_lines(self):
        broken = [dict(r) for r in self.records[:200]]
        broken[150]["ts"] = "not a time"
        with open(self.csv, "wb") as f:
            f.write(as_csv(broken))
        code, out, err = run(["dedup", "--key", "id", "--time-field", "ts", "--store", ":memory:",
                              "--input-format", "csv", self.csv])
        self.assertEqual(code, 1, err)
        # Row 150 starts on line 154: the header, then rows 0 and 97 take
        # two lines each (a line break inside a quoted field).
        self.assertIn("day.csv:154:", err)
        self.assertIn("time field 'ts' is not a timestamp", err)

    def test_a_tab_separated_file_and_a_compressed_one(self):
        tsv = self.path("day.tsv.gz")
        with open(tsv, "wb") as f:
            f.write(gzip.compress(as_csv(self.records, delimiter="\t")))
        code, out, err = run(["dedup", "--key", "id", "--store", ":memory:", "--input-format", "csv",
                              "--csv-delimiter", "tab", tsv])
        self.assertEqual(code, 0, err)
        code_nd, out_nd, _ = run(["dedup", "--key", "id", "--store", ":memory:", self.ndjson])
        self.assertEqual(out, out_nd)

    def test_reconcile_reads_its_csv_stages_with_the_delimiter_given(self):
        # Issue 60 item 9: --csv-delimiter was not passed to the stages
        # ("2 fields where the header has 1").
        with tempfile.TemporaryDirectory() as tmp:
            intake, sent = os.path.join(tmp, "intake.csv"), os.path.join(tmp, "sent.csv")
            with open(intake, "w") as f:
                f.write("id;amount\n1;10\n2;20\n")
            with open(sent, "w") as f:
                f.write("id;amount\n1;10\n")
            code, out, err = run(["reconcile", "--key", "id", "--csv-delimiter", ";", "--stage", f"intake={intake}",
                                  "--stage", f"sent={sent}", "--report", "json"])
            self.assertEqual(code, 1, err)  # one lost: findings
            report = json.loads(out)
            self.assertEqual([s["records"] for s in report["stages"]], [2, 1], out)
            self.assertEqual(report["hops"][0]["lost"], 1, out)

    def test_a_delimiter_without_csv_or_of_two_characters_is_a_usage_error(self):
        code, _, err = run(["dedup", "--key", "id", "--store", ":memory:", "--input-format", "ndjson",
                            "--csv-delimiter", ";", self.ndjson])
        self.assertEqual(code, 2, err)
        self.assertIn("--csv-delimiter goes with CSV input", err)
        code, _, err = run(["dedup", "--key", "id", "--store", ":memory:", "--input-format", "csv",
                            "--csv-delimiter", ";;", self.csv])
        self.assertEqual(code, 2, err)

    def test_csv_types_makes_unquoted_numbers_and_booleans_json_ones(self):
        table = self.path("typed.csv")
        with open(table, "wb") as f:
            f.write(b'id,amount,paid,code,note\na,10,true,"007",1.50\nb,-2.5e3,false,12,x\n')
        code, out, err = run(["dedup", "--key", "id", "--store", ":memory:", "--csv-types", table])
        self.assertEqual(code, 0, err)
        first, second = [json.loads(line) for line in out.splitlines()]
        self.assertEqual(first, {"amount": 10, "code": "007", "id": "a", "note": 1.5, "paid": True})
        self.assertEqual(second["amount"], -2500.0)
        self.assertEqual(second["paid"], False)
        # Without it, every value is the file's text.
        code, out, err = run(["dedup", "--key", "id", "--store", ":memory:", table])
        self.assertEqual(json.loads(out.splitlines()[0])["amount"], "10")
        code, _, err = run(["dedup", "--key", "id", "--store", ":memory:", "--csv-types",
                            "--input-format", "ndjson", self.ndjson])
        self.assertEqual(code, 2, err)

    def test_a_row_with_too_many_fields_names_its_line(self):
        with open(self.csv, "ab") as f:
            f.write(b"a,b,c,d,e,f,g,h,i\n")
        code, out, err = run(["dedup", "--key", "id", "--store", ":memory:", "--input-format", "csv", self.csv])
        self.assertEqual(code, 3, err)
        self.assertRegex(err, r"day\.csv:\d+: 9 fields where the header has 8")


if __name__ == "__main__":
    unittest.main()


class Detected(unittest.TestCase):
    """Without --input-format, each input is told by its first bytes
    (decompressed): NDJSON, a JSON array, a page with a "data" array, a HAR
    export and CSV give the same records, in one run over a folder of all
    five; a log whose first line was cut short is still NDJSON."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.records = rows(200)

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, name, data):
        path = os.path.join(self.tmp.name, name)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def test_each_format_is_told_by_its_first_bytes(self):
        plain = self.write("plain.ndjson", as_ndjson(self.records))
        forms = {
            "array.json": json.dumps(self.records, indent=2).encode(),
            "array-one-line.json": json.dumps(self.records).encode(),
            "page.json": json.dumps({"object": "list", "data": self.records, "has_more": False}, indent=1).encode(),
            "page-one-line.json": json.dumps({"object": "list", "data": self.records}).encode(),
            "rows.csv.gz": gzip.compress(as_csv(self.records)),
            "rows.txt": as_csv(self.records),
        }
        _, expected, _ = run(["dedup", "--key", "order_id,status", "--store", ":memory:", plain])
        ids = [json.loads(line)["id"] for line in expected.splitlines()]
        for name, data in forms.items():
            with self.subTest(form=name):
                path = self.write(name, data)
                code, out, err = run(["dedup", "--key", "order_id,status", "--store", ":memory:", path])
                self.assertEqual(code, 0, err)
                self.assertEqual([json.loads(line)["id"] for line in out.splitlines()], ids)

    def test_a_har_export_without_the_flag(self):
        from harness import CAPTURES
        code, out, err = run(["dedup", "--key", "method", "--store", ":memory:", "--summary", "json",
                              os.path.join(CAPTURES, "deliveries.har")])
        self.assertEqual(code, 0, err)
        code_flag, out_flag, _ = run(["dedup", "--key", "method", "--store", ":memory:", "--input-format", "har",
                                      os.path.join(CAPTURES, "deliveries.har")])
        self.assertEqual(out, out_flag)
        self.assertGreater(len(out), 0)

    def test_a_log_whose_first_line_was_cut_is_ndjson_that_loses_one_line(self):
        lines = as_ndjson(self.records)
        cut = self.write("rotated.ndjson", lines[25:])  # starts mid-record, commas and all
        code, out, err = run(["dedup", "--key", "id", "--store", ":memory:", "--summary", "json", cut])
        self.assertEqual(code, 1, err)
        self.assertEqual(summary_of(err)["rejected"], 1)
        self.assertEqual(summary_of(err)["in"], len(self.records))
        self.assertIn("rotated.ndjson:1:", err)

    def test_an_explicit_format_still_wins(self):
        path = self.write("rows.csv", as_csv(self.records))
        code, out, err = run(["dedup", "--key", "id", "--store", ":memory:", "--input-format", "ndjson", path])
        self.assertEqual(code, 3, err)
        self.assertIn("looks like CSV", err)

    def test_a_json_object_that_is_no_page_is_a_clear_error(self):
        path = self.write("config.json", json.dumps({"name": "x", "items": self.records}, indent=2).encode())
        code, out, err = run(["dedup", "--key", "id", "--store", ":memory:", path])
        self.assertEqual(code, 3, err)
        self.assertIn("neither a HAR export nor a page with a \"data\" array", err)
        self.assertIn("--input-format", err)


class ExcelCsv(unittest.TestCase):
    """What Excel's "CSV UTF-8" writes: a byte order mark before the first
    name; and a header naming a column twice, whose second value would be
    dropped unseen."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, name, data):
        path = os.path.join(self.tmp.name, name)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def test_a_byte_order_mark_is_no_part_of_the_first_name(self):
        path = self.write("excel.csv", "\ufeffid,amount\r\nevt_1,10\r\nevt_1,10\r\nevt_2,5\r\n".encode())
        for args in ([], ["--input-format", "csv"]):
            code, out, err = run(["dedup", "--key", "id", "--store", ":memory:", "--summary", "json", *args, path])
            self.assertEqual(code, 0, err)
            self.assertEqual(summary_of(err)["unique"], 2)
            self.assertEqual(json.loads(out.splitlines()[0]), {"id": "evt_1", "amount": "10"})

    def test_a_name_given_twice_is_exit_3_with_both_columns(self):
        path = self.write("twice.csv", b"id,amount,id\nevt_1,10,evt_9\n")
        code, out, err = run(["dedup", "--key", "id", "--store", ":memory:", path])
        self.assertEqual(code, 3, err)
        self.assertIn("twice.csv:1", err)
        self.assertIn("'id'", err)
        self.assertIn("columns 1 and 3", err)
        self.assertEqual(out, b"")
