"""--since/--until (docs/records.md, "Time range"): every command that reads
event times keeps exactly the records whose event time lies in [since,
until), as if the log held only those; the others are counted as
outside_range, so in = out + side outputs + rejected + outside_range. A
duration counts back from the newest record, which needs files; a window
no record falls in, or one that ends before it starts, is a typo and never
passes green."""
import gzip
import json
import os
import re
import tempfile
import unittest
from datetime import datetime, timedelta, timezone

from harness import run, summary_of

T0 = datetime(2026, 11, 30, 0, 0, 0, tzinfo=timezone.utc)
STATUSES = ["pending", "paid", "shipped", "delivered", "closed"]
MACHINE = """states: [pending, paid, shipped, delivered, closed]
initial: [pending]
final: [closed]
transitions:
  - pending > paid
  - paid > shipped
  - shipped > delivered
  - delivered > closed
"""
RULES = """message_merger:
  rules:
    - type: notification
      window: 5m
      fields: [user_id, alert_type]
      action: merge_content
"""


def stamp(at):
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def events(count=1200):
    """A day's events, one a minute apart in time (some arriving up to a
    minute late): orders moving through their states, notifications that
    repeat, ids that repeat."""
    made = []
    for n in range(count):
        at = T0 + timedelta(minutes=n) - timedelta(seconds=(n % 3) * 20)
        made.append({"id": f"evt_{n % 700}", "seq": n + 1, "order_id": f"o{n % 40}",
                     "status": STATUSES[(n // 40) % len(STATUSES)], "type": "notification",
                     "user_id": f"u{n % 7}", "alert_type": "disk", "content": f"c{n}", "ts": stamp(at)})
    return made


def ndjson(records):
    return "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records).encode()


POSITION = re.compile(rb'"[^"]*\.ndjson:\d+"')
SINCE = T0 + timedelta(hours=5)
UNTIL = T0 + timedelta(hours=9, minutes=30)


def inside(record, since=SINCE, until=UNTIL):
    at = datetime.strptime(record["ts"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    return since <= at < until


class Fixture:
    """A day's log, the window's records alone, the rules and machine."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.events = events()
        self.log = self.path("day.ndjson")
        with open(self.log, "wb") as f:
            f.write(ndjson(self.events))
        self.kept = [e for e in self.events if inside(e)]
        self.window_only = self.path("window.ndjson")
        with open(self.window_only, "wb") as f:
            f.write(ndjson(self.kept))
        with open(self.path("machine.yaml"), "w") as f:
            f.write(MACHINE)
        with open(self.path("rules.yaml"), "w") as f:
            f.write(RULES)
        self.window = ["--since", stamp(SINCE), "--until", stamp(UNTIL)]

    def tearDown(self):
        self.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def commands(self):
        """Each command that reads event times, as a user runs it."""
        return {
            "dedup": ["dedup", "--key", "id", "--time-field", "ts", "--store", ":memory:"],
            "reorder": ["reorder", "--order-by", "ts", "--time-field", "ts", "--max-lateness", "2m",
                        "--store", ":memory:"],
            "merge": ["merge", "--rules", self.path("rules.yaml"), "--time-field", "ts", "--max-lateness", "2m",
                      "--store", ":memory:"],
            "states": ["states", "--entity", "order_id", "--state", "status", "--machine",
                       self.path("machine.yaml"), "--time-field", "ts", "--store", ":memory:"],
            "audit": ["audit", "--key", "id", "--time-field", "ts", "--format", "json"],
        }


class Window(Fixture, unittest.TestCase):
    def test_each_command_keeps_exactly_the_window(self):
        for name, args in self.commands().items():
            with self.subTest(command=name):
                code, out, err = run(args + self.window + ["--summary", "json", self.log])
                self.assertIn(code, (0, 1), err)
                summary = summary_of(err)
                self.assertEqual(summary["in"], len(self.events))
                self.assertEqual(summary["outside_range"], len(self.events) - len(self.kept))
                self.assertEqual(summary["rejected"], 0)
                # The same answer as over a log of only the window's records.
                code_alone, out_alone, err_alone = run(args + ["--summary", "json", self.window_only])
                self.assertEqual(code, code_alone, err_alone)
                alone = summary_of(err_alone)
                if name == "audit":
                    # Evidence names lines, which differ between the two files.
                    for count in ("records", "groups", "duplicates"):
                        self.assertEqual(summary[count], alone[count], count)
                else:
                    self.assertTrue(out.strip())
                    # Positions name each file's own lines (merge's members).
                    self.assertEqual(POSITION.sub(b'"@"', out), POSITION.sub(b'"@"', out_alone))
                    for count, value in alone.items():
                        if count not in ("in", "seconds", "version"):
                            self.assertEqual(summary[count], value, count)
                self.assertNotIn("outside_range", alone)

    def test_every_record_is_accounted_for(self):
        code, out, err = run(["dedup", "--key", "id", "--time-field", "ts", "--store", ":memory:",
                              "--summary", "json", *self.window, self.log])
        self.assertEqual(code, 0, err)
        s = summary_of(err)
        self.assertEqual(s["in"], s["unique"] + s["duplicates"] + s["rejected"] + s["outside_range"])
        self.assertEqual(s["out"], len(out.splitlines()))

    def test_a_duration_counts_back_from_the_newest_record(self):
        newest = max(datetime.strptime(e["ts"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
                     for e in self.events)
        base = ["dedup", "--key", "id", "--time-field", "ts", "--store", ":memory:", "--summary", "json"]
        code, out, err = run(base + ["--since", "2h", self.log])
        self.assertEqual(code, 0, err)
        code_at, out_at, err_at = run(base + ["--since", stamp(newest - timedelta(hours=2)), self.log])
        self.assertEqual(out, out_at)
        expected = [e for e in self.events if inside(e, newest - timedelta(hours=2), newest + timedelta(days=1))]
        self.assertEqual(summary_of(err)["outside_range"], len(self.events) - len(expected))
        # A compressed file is read twice as well.
        packed = self.path("day.ndjson.gz")
        with open(packed, "wb") as f:
            f.write(gzip.compress(ndjson(self.events)))
        code, out_packed, err = run(base + ["--since", "2h", packed])
        self.assertEqual(code, 0, err)
        self.assertEqual(out_packed, out)

    def test_a_duration_on_standard_input_is_a_usage_error(self):
        with open(self.log, "rb") as f:
            code, out, err = run(["dedup", "--key", "id", "--time-field", "ts", "--store", ":memory:",
                                  "--since", "2h", "-"], stdin=f.read())
        self.assertEqual(code, 2, err)
        self.assertIn("standard input", err)
        self.assertEqual(out, b"")

    def test_a_window_no_record_falls_in_fails(self):
        # The year mistyped: every record outside.
        code, out, err = run(["dedup", "--key", "id", "--time-field", "ts", "--store", ":memory:",
                              "--since", "2025-11-30T05:00:00Z", "--until", "2025-11-30T09:30:00Z", self.log])
        self.assertEqual(code, 3, err)
        self.assertIn("no record's event time is in --since/--until", err)

    def test_a_window_that_ends_before_it_starts_is_a_usage_error(self):
        code, _, err = run(["states", "--entity", "order_id", "--state", "status", "--machine",
                            self.path("machine.yaml"), "--time-field", "ts", "--store", ":memory:",
                            "--since", stamp(UNTIL), "--until", stamp(SINCE), self.log])
        self.assertEqual(code, 2, err)
        self.assertIn("must come after --since", err)

    def test_a_duration_that_lost_its_unit_is_a_usage_error_not_1970(self):
        code, _, err = run(["dedup", "--key", "id", "--time-field", "ts", "--store", ":memory:",
                            "--since", "30", self.log])
        self.assertEqual(code, 2, err)
        self.assertIn("--since 30: a bare number", err)
        # Epoch seconds of this century are a time.
        code, _, err = run(["dedup", "--key", "id", "--time-field", "ts", "--store", ":memory:",
                            "--since", str(int(SINCE.timestamp())), "--summary", "json", self.log])
        self.assertEqual(code, 0, err)
        self.assertEqual(summary_of(err)["outside_range"],
                         len([e for e in self.events if not inside(e, SINCE, T0 + timedelta(days=2))]))

    def test_a_value_neither_time_nor_duration_is_a_usage_error(self):
        code, _, err = run(["merge", "--rules", self.path("rules.yaml"), "--time-field", "ts",
                            "--store", ":memory:", "--since", "yesterday", self.log])
        self.assertEqual(code, 2, err)
        self.assertIn("'yesterday' is neither a time", err)

    def test_a_record_with_no_event_time_is_rejected_not_dropped(self):
        mixed = self.path("mixed.ndjson")
        with open(mixed, "wb") as f:
            f.write(ndjson(self.kept[:5] + [{"id": "no_time"}] + self.kept[5:10]))
        reject = self.path("rejects.ndjson")
        code, out, err = run(["reorder", "--order-by", "ts", "--time-field", "ts", "--store", ":memory:",
                              "--summary", "json", "--reject", reject, *self.window, mixed])
        self.assertEqual(code, 1, err)
        self.assertEqual(summary_of(err)["rejected"], 1)
        with open(reject, "rb") as f:
            self.assertIn(b"no_time", f.read())
        self.assertIn("mixed.ndjson:6", err)


class BoundsThatNameNoTime(Fixture, unittest.TestCase):
    """An empty --since (a script's unset variable) would hold every
    record; a signed number is a 1969 time or a duration without its unit:
    both are usage errors, for every command that takes them."""

    def test_empty_and_signed_bounds_are_usage_errors(self):
        commands = dict(self.commands())
        commands["replay"] = ["replay", "--to", "http://127.0.0.1:9/", "--store", ":memory:"]
        for name, args in commands.items():
            for flag in ("--since", "--until"):
                for value in ("", "-1", "+30", "-2.5"):
                    with self.subTest(command=name, flag=flag, value=value):
                        code, out, err = run(args + [flag, value, self.log])
                        self.assertEqual(code, 2, err)
                        self.assertIn(flag, err)
                        self.assertEqual(out, b"")


class Sorted(Fixture, unittest.TestCase):
    """--sorted: a plain file in time order is cut to the window by binary
    search; what the run gives is the same as reading every line."""

    def setUp(self):
        super().setUp()
        # Big enough for the search to bisect (it scans the last 256 KiB line by line),
        # with a broken line inside the window: its position must survive the cut.
        self.events = events(8000)
        # Late in the log, past the stretch the search reads line by line.
        self.since, self.until = T0 + timedelta(hours=100), T0 + timedelta(hours=110)
        self.window = ["--since", stamp(self.since), "--until", stamp(self.until)]
        lines = ndjson(self.events).splitlines(keepends=True)
        self.broken_at = next(i for i, e in enumerate(self.events) if self.inside(e)) + 50
        lines.insert(self.broken_at, b'{"id": "broken", \n')
        with open(self.log, "wb") as f:
            f.write(b"".join(lines))

    def inside(self, record):
        return inside(record, self.since, self.until)

    def test_each_command_gives_what_reading_every_line_gives(self):
        for name, args in self.commands().items():
            with self.subTest(command=name):
                base = args + self.window + ["--summary", "json"]
                rejects = self.path(f"rejects-{name}.ndjson")
                code, out, err = run(base + ["--reject", rejects, self.log])
                code_cut, out_cut, err_cut = run(base + ["--sorted", "--reject", rejects + ".cut", self.log])
                self.assertEqual(code_cut, code, err_cut)
                self.assertEqual(out_cut, out)
                whole, cut = summary_of(err), summary_of(err_cut)
                for summary in (whole, cut):
                    summary.pop("seconds", None)
                    # Memory, not a finding: windows held depend on where blocks begin.
                    summary.pop("peak_open_bytes", None)
                self.assertEqual(cut, whole)
                self.assertEqual(cut["outside_range"], len(self.events) - len([e for e in self.events if self.inside(e)]))
                # The broken line is rejected at its own line, as without the cut.
                self.assertIn(f"day.ndjson:{self.broken_at + 1}", err_cut)
                with open(rejects, "rb") as f, open(rejects + ".cut", "rb") as g:
                    self.assertEqual(g.read(), f.read())

    def test_a_duration_reads_the_newest_time_at_the_end(self):
        base = ["dedup", "--key", "id", "--time-field", "ts", "--store", ":memory:", "--summary", "json"]
        code, out, err = run(base + ["--since", "2h", self.log])
        code_cut, out_cut, err_cut = run(base + ["--since", "2h", "--sorted", self.log])
        self.assertEqual(out_cut, out, err_cut)
        # The broken line lies before the last two hours: read and rejected without
        # --sorted, skipped unread (and counted outside the window) with it.
        self.assertEqual((code, code_cut), (1, 0))
        self.assertEqual(summary_of(err_cut)["outside_range"], summary_of(err)["outside_range"] + 1)

    def test_a_compressed_file_or_a_folder_of_parts_is_read_whole_the_same(self):
        base = ["dedup", "--key", "id", "--time-field", "ts", "--store", ":memory:", *self.window]
        code, out, err = run(base + [self.log])
        packed = self.path("day.ndjson.gz")
        with open(self.log, "rb") as f, open(packed, "wb") as g:
            g.write(gzip.compress(f.read()))
        code_packed, out_packed, err_packed = run(base + ["--sorted", packed])
        self.assertEqual((code_packed, out_packed), (code, out), err_packed)
        # Hourly parts, some wholly outside the window: each cut on its own.
        parts = self.path("parts")
        os.mkdir(parts)
        with open(self.log, "rb") as f:
            lines = f.read().splitlines(keepends=True)
        for n in range(0, len(lines), 1000):
            with open(os.path.join(parts, f"part-{n // 1000:02}.ndjson"), "wb") as g:
                g.write(b"".join(lines[n:n + 1000]))
        code_parts, out_parts, err_parts = run(base + ["--sorted", "--summary", "json", "--recursive", parts])
        self.assertEqual(code_parts, code, err_parts)
        self.assertEqual(POSITION.sub(b'"@"', out_parts), POSITION.sub(b'"@"', out))
        self.assertEqual(summary_of(err_parts)["in"], len(lines))

    def test_lines_before_the_window_are_counted_unread(self):
        # A line the run would reject, far before the window: with --sorted it is not read.
        with open(self.log, "rb") as f:
            lines = f.read().splitlines(keepends=True)
        lines.insert(10, b"not json\n")
        with open(self.log, "wb") as f:
            f.write(b"".join(lines))
        base = ["dedup", "--key", "id", "--time-field", "ts", "--store", ":memory:", "--summary", "json",
                *self.window]
        _, _, err = run(base + [self.log])
        _, _, err_cut = run(base + ["--sorted", self.log])
        whole, cut = summary_of(err), summary_of(err_cut)
        self.assertEqual(whole["rejected"], 2)
        self.assertEqual(cut["rejected"], 1)
        self.assertEqual(cut["outside_range"], whole["outside_range"] + 1)
        self.assertEqual(cut["in"], whole["in"])

    def test_a_file_out_of_order_is_refused(self):
        with open(self.log, "rb") as f:
            lines = f.read().splitlines(keepends=True)
        half = len(lines) // 2
        with open(self.log, "wb") as f:
            f.write(b"".join(lines[half:] + lines[:half]))
        code, out, err = run(["dedup", "--key", "id", "--time-field", "ts", "--store", ":memory:",
                              *self.window, "--sorted", self.log])
        self.assertEqual(code, 3, err)
        self.assertIn("not in time order", err)
        self.assertIn("day.ndjson", err)
        self.assertEqual(out, b"")

    def test_sorted_without_a_window_is_a_usage_error(self):
        code, _, err = run(["dedup", "--key", "id", "--time-field", "ts", "--store", ":memory:",
                            "--sorted", self.log])
        self.assertEqual(code, 2, err)
        self.assertIn("--sorted", err)


if __name__ == "__main__":
    unittest.main()
