"""End-to-end tests of `idem dedup`: the binary, real SQLite files, a real
redis-server on loopback, several processes at once."""
import contextlib
import json
import os
import random
import shutil
import subprocess
import tempfile
import threading
import time
import unittest

import redis_cluster
import redis_server
from harness import IDEM, ROOT, run

EVENTS = [
    {"id": "evt_1", "type": "charge.succeeded", "data": {"object": {"id": "ch_1"}}, "request": {"id": "r1"}},
    {"type": "charge.succeeded", "id": "evt_1", "data": {"object": {"id": "ch_1"}}, "request": {"id": "r2"}},
    {"id": "evt_2", "type": "charge.succeeded", "data": {"object": {"id": "ch_2"}}},
    {"id": "evt_3", "type": "charge.refunded", "data": {"object": {"id": "ch_1"}}},
    {"id": "evt_1", "type": "charge.succeeded", "data": {"object": {"id": "ch_1"}}, "request": {"id": "r3"}},
]


def ndjson(events):
    return ("\n".join(json.dumps(e) for e in events) + "\n").encode()


def summary_of(err):
    return json.loads(err.strip().splitlines()[-1])


class Dedup(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.store = os.path.join(self.tmp.name, "idem.db")

    def tearDown(self):
        self.tmp.cleanup()

    def dedup(self, args, stdin):
        store = [] if "--store" in args else ["--store", self.store]
        return run(["dedup", "--summary", "json"] + store + args, stdin=stdin)

    def test_first_copies_pass_byte_for_byte_and_duplicates_are_dropped(self):
        code, out, err = self.dedup(["--key", "data.object.id,type"], ndjson(EVENTS))
        self.assertEqual(code, 0)
        self.assertEqual(out.splitlines(), [ndjson([e]).strip() for e in (EVENTS[0], EVENTS[2], EVENTS[3])])
        summary = summary_of(err)
        self.assertEqual((summary["in"], summary["unique"], summary["duplicates"], summary["out"]), (5, 3, 2, 3))

    def test_first_copies_come_out_whole_from_many_blocks_whatever_their_line_ends(self):
        # First copies are written from the input block as they lie (a gather
        # write) when "\n" follows them, copied otherwise: CRLF lines, a last
        # line without a newline, runs broken by duplicates, blocks of 1 MiB.
        rng = random.Random(7)
        lines, expected, seen = [], [], set()
        for n in range(12000):
            key = rng.randrange(9000)
            line = json.dumps({"id": f"evt_{key}", "pad": "x" * rng.randrange(500), "n": n})
            ending = "\r\n" if rng.random() < 0.1 else "\n"
            lines.append(line + ending)
            if key not in seen:
                seen.add(key)
                expected.append(line + ending)  # byte for byte: a CRLF line stays CRLF
        lines[-1] = lines[-1].rstrip("\r\n")
        if expected[-1].startswith(lines[-1]):
            expected[-1] = lines[-1] + "\n"  # a last line without one gets a newline
        with tempfile.TemporaryDirectory() as tmp:
            source = os.path.join(tmp, "events.ndjson")
            output = os.path.join(tmp, "out.ndjson")
            with open(source, "w") as f:
                f.write("".join(lines))
            self.assertGreater(os.path.getsize(source), 2 << 20)
            code, out, _ = self.dedup(["--key", "id", "--store", ":memory:", source], None)
            self.assertEqual(code, 0)
            self.assertEqual(out.decode(), "".join(expected))
            # The same through -o, whose size is committed with the claims.
            code, _, _ = self.dedup(["--key", "id", "-o", output, source], None)
            self.assertEqual(code, 0)
            with open(output, newline="") as f:
                self.assertEqual(f.read(), "".join(expected))

    def test_a_second_run_over_tomorrows_log_still_knows_todays_events(self):
        self.dedup(["--key", "data.object.id,type"], ndjson(EVENTS[:3]))
        tomorrow = [EVENTS[4], {"id": "evt_9", "type": "charge.succeeded", "data": {"object": {"id": "ch_9"}}}]
        code, out, _ = self.dedup(["--key", "data.object.id,type"], ndjson(tomorrow))
        self.assertEqual([json.loads(line)["id"] for line in out.splitlines()], ["evt_9"])

    def test_without_a_key_the_canonical_event_minus_ignored_fields_is_compared(self):
        code, out, _ = self.dedup(["--ignore", "request.id"], ndjson(EVENTS))
        self.assertEqual([json.loads(line)["id"] for line in out.splitlines()], ["evt_1", "evt_2", "evt_3"])

    def test_duplicates_go_to_the_dups_file_linked_to_their_first_copy(self):
        with tempfile.TemporaryDirectory() as tmp:
            source = os.path.join(tmp, "events.ndjson")
            dups = os.path.join(tmp, "dups.ndjson")
            with open(source, "wb") as f:
                f.write(ndjson(EVENTS))
            code, out, err = self.dedup(["--key", "id", "--dups", dups, source], None)
            with open(dups) as f:
                marks = [json.loads(line)["_idem"]["dedup"] for line in f]
            self.assertEqual([m["duplicate_of"] for m in marks], [source + ":1", source + ":1"])
            self.assertEqual([m["seen_count"] for m in marks], [2, 3])
            summary = summary_of(err)
            self.assertEqual(summary["in"], summary["out"] + summary["dups_file"] + summary["rejected"])

    def test_keep_last_marks_every_copy_of_an_event_with_the_same_total_count(self):
        # Issue #12 item 17: four copies came out 2, 2, 3, 1.
        events = [{"id": "a", "n": 1}, {"id": "a", "n": 2}, {"id": "b", "n": 1}, {"id": "a", "n": 3},
                  {"id": "a", "n": 4}]
        code, out, err = self.dedup(["--key", "id", "--keep", "last", "--mark", "--store", ":memory:"],
                                    ndjson(events))
        self.assertEqual(code, 0, err)
        marks = {(r["id"], r["n"]): r["_idem"]["dedup"] for r in map(json.loads, out.splitlines())}
        self.assertEqual([marks[("a", n)]["seen_count"] for n in (1, 2, 3, 4)], [4, 4, 4, 4])
        self.assertEqual([marks[("a", n)].get("duplicate_of") for n in (1, 2, 3)], ["<stdin>:5"] * 3)
        self.assertNotIn("duplicate_of", marks[("a", 4)])
        self.assertEqual(marks[("b", 1)]["seen_count"], 1)

    def test_mark_passes_everything_with_the_verdict_and_count_writes_nothing(self):
        code, out, _ = self.dedup(["--key", "id", "--mark", "--store", ":memory:"], ndjson(EVENTS))
        marks = [json.loads(line)["_idem"]["dedup"] for line in out.splitlines()]
        self.assertEqual([m["seen_count"] for m in marks], [1, 2, 1, 1, 3])
        self.assertNotIn("duplicate_of", marks[0])
        code, out, err = self.dedup(["--key", "id", "--count", "--store", ":memory:"], ndjson(EVENTS))
        self.assertEqual(out, b"")
        self.assertEqual(summary_of(err)["duplicates"], 2)

    def test_fail_on_duplicate_exits_1_for_ci(self):
        code, _, _ = self.dedup(["--key", "id", "--fail-on-duplicate", "--store", ":memory:"], ndjson(EVENTS))
        self.assertEqual(code, 1)
        code, _, _ = self.dedup(["--key", "id", "--fail-on-duplicate", "--store", ":memory:"], ndjson(EVENTS[2:4]))
        self.assertEqual(code, 0)

    def test_allow_lets_n_copies_through(self):
        code, out, _ = self.dedup(["--key", "id", "--allow", "2", "--store", ":memory:"], ndjson(EVENTS))
        self.assertEqual([json.loads(line)["id"] for line in out.splitlines()], ["evt_1", "evt_1", "evt_2", "evt_3"])

    def test_a_missing_key_field_is_rejected_with_its_path_or_passes_untouched(self):
        stream = ndjson(EVENTS[:1] + [{"type": "ping"}])
        code, out, err = self.dedup(["--key", "data.object.id", "--store", ":memory:"], stream)
        self.assertIn("<stdin>:2: missing key field 'data.object.id'", err)
        self.assertEqual(summary_of(err)["rejected"], 1)
        code, out, err = self.dedup(["--key", "data.object.id", "--missing", "pass", "--store", ":memory:"], stream)
        self.assertEqual(out.splitlines()[1], b'{"type": "ping"}')
        self.assertEqual(summary_of(err)["unkeyed"], 1)

    def test_the_window_is_measured_in_event_time(self):
        events = [{"id": "a", "at": "2026-11-30T08:00:00Z"}, {"id": "a", "at": "2026-11-30T08:04:00Z"},
                  {"id": "a", "at": "2026-11-30T08:11:00Z"}]
        code, out, _ = self.dedup(["--key", "id", "--time-field", "at", "--window", "5m", "--store", ":memory:"],
                                  ndjson(events))
        self.assertEqual([json.loads(line)["at"] for line in out.splitlines()],
                         ["2026-11-30T08:00:00Z", "2026-11-30T08:11:00Z"])

    def test_replaying_the_five_minute_key_incident_lets_the_six_minute_retry_pass(self):
        # samples/incidents/ttl-expired.ndjson: evt_1Q77 claimed at 09:00:00, its
        # retry at 09:06:04, past a 5-minute key. With --time-field the TTL runs
        # on the events' clock, so the replay passes the retry as production
        # did; audit calls the same copy ttl-expired. Without --time-field the
        # TTL is the wall clock's and the whole log is read within it.
        with open(os.path.join(ROOT, "samples", "incidents", "ttl-expired.ndjson"), "rb") as f:
            log = f.read()
        stores = [":memory:", os.path.join(self.tmp.name, "ttl.db")]
        cluster = redis_server.running() if redis_server.available() else None
        with (cluster or contextlib.nullcontext()) as uri:
            if uri:
                stores.append(uri)
            for store in stores:
                with self.subTest(store=store.split("/")[-1]):
                    code, out, err = self.dedup(["--key", "key", "--ttl", "5m", "--time-field", "ts",
                                                 "--store", store, "--scope", "event-time"], log)
                    self.assertEqual(code, 0, err)
                    kept = [json.loads(line) for line in out.splitlines()]
                    self.assertEqual([r["ts"] for r in kept if r["key"] == "evt_1Q77"],
                                     ["2026-11-30T09:00:00.000Z", "2026-11-30T09:06:04.000Z"])
                    code, out, _ = self.dedup(["--key", "key", "--ttl", "5m", "--store", store,
                                               "--scope", "wall-clock"], log)
                    self.assertEqual([json.loads(line)["key"] for line in out.splitlines()].count("evt_1Q77"), 1)
        code, out, _ = run(["audit", "--key", "key", "--ttl", "5m", "--time-field", "ts", "--format", "json",
                            "--fail-on", "ttl-expired", "-"], stdin=log)
        self.assertEqual(code, 1)
        group = next(g for g in json.loads(out)["groups"] if g["key"] == "evt_1Q77")
        self.assertIn("ttl-expired", group["causes"])

    def test_a_ttl_that_is_set_is_a_ttl_that_holds(self):
        # An hour's TTL, and the clock moved two hours on (IDEM_NOW) instead
        # of a sleep: however slow the build, the second run is within it.
        self.dedup(["--key", "id", "--ttl", "1h"], ndjson(EVENTS[:1]))
        code, out, _ = self.dedup(["--key", "id", "--ttl", "1h"], ndjson(EVENTS[:1]))
        self.assertEqual(out, b"")
        code, out, _ = run(["dedup", "--summary", "json", "--store", self.store, "--key", "id", "--ttl", "1h"],
                           stdin=ndjson(EVENTS[:1]), env={"IDEM_NOW": "+2h"})
        self.assertEqual(len(out.splitlines()), 1)
        code, _, err = run(["dedup", "--gc", "--store", self.store, "--summary", "json"])
        self.assertEqual(code, 0)
        self.assertEqual(summary_of(err)["removed"], 0)  # the last claim is still live

    def test_print_key_shows_what_was_hashed(self):
        code, out, _ = self.dedup(["--key", "data.object.id,type", "--print-key", "--store", ":memory:"],
                                  ndjson(EVENTS[:1]))
        self.assertEqual(json.loads(out)["_idem"]["dedup"]["key"], "idem-key/1 key s4:ch_1 s16:charge.succeeded")

    def test_bad_flags_are_usage_errors(self):
        code, _, err = run(["dedup", "--mark", "--count"], stdin=b"")
        self.assertEqual(code, 2)
        self.assertIn("--mark and --count are exclusive", err)
        code, _, err = run(["dedup", "--key", "a..b"], stdin=b"")
        self.assertEqual(code, 2)
        self.assertIn("invalid field path 'a..b'", err)

    def test_an_unreachable_store_is_exit_4_and_nothing_is_emitted(self):
        code, out, err = run(["dedup", "--key", "id", "--store", "redis://127.0.0.1:1", "--store-timeout", "300ms"],
                             stdin=ndjson(EVENTS))
        self.assertEqual(code, 4)
        self.assertEqual(out, b"")


class KeyCounts(unittest.TestCase):
    """--counts FILE: one line per key, in the order the keys first came,
    with how many records carried it and where and when its first and last
    copies came: what `jq -r .id | sort | uniq -c` or a GROUP BY gives,
    with positions."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        rng = random.Random(5)
        self.events = [{"id": f"k{rng.randint(0, 60)}", "ts": f"2026-11-30T08:{n // 60:02d}:{n % 60:02d}Z"}
                       for n in range(600)]
        # One record without the key: rejected, so counted nowhere.
        self.events.insert(17, {"other": 1, "ts": "2026-11-30T08:00:17Z"})
        self.log = os.path.join(self.tmp.name, "day.ndjson")
        with open(self.log, "wb") as f:
            f.write(ndjson(self.events))

    def tearDown(self):
        self.tmp.cleanup()

    def expected(self):
        table = {}
        for line, event in enumerate(self.events, start=1):
            if "id" not in event:
                continue
            seen = {"at": f"{self.log}:{line}", "time": event["ts"].replace("Z", ".000Z")}
            entry = table.setdefault(event["id"], {"count": 0, "first": seen})
            entry["count"] += 1
            entry["last"] = seen
        return table

    def test_each_key_once_with_its_count_first_and_last(self):
        counts = os.path.join(self.tmp.name, "keys.ndjson")
        code, out, err = run(["dedup", "--key", "id", "--time-field", "ts", "--store", ":memory:",
                              "--counts", counts, self.log])
        self.assertEqual(code, 1, err)  # the record without the key is rejected
        with open(counts) as f:
            lines = [json.loads(line) for line in f]
        expected = self.expected()
        # Keys in the order they first came, as the records hold them.
        self.assertEqual([line["key"] for line in lines], list(expected))
        for line, (key, entry) in zip(lines, expected.items()):
            self.assertEqual({name: line[name] for name in ("count", "first", "last")}, entry, key)
        self.assertEqual(sum(line["count"] for line in lines), len(self.events) - 1)
        # The records are dedup's as ever: one per key.
        self.assertEqual(len(out.splitlines()), len(expected))

    def test_a_counts_file_named_for_another_format_is_a_usage_error(self):
        # Issue 60 item 10: keys.csv got NDJSON.
        for name in ("keys.csv", "keys.tsv", "keys.csv.gz"):
            code, _, err = run(["dedup", "--key", "id", "--store", ":memory:", "--counts",
                                os.path.join(self.tmp.name, name), self.log])
            self.assertEqual(code, 2, (name, err))
            self.assertIn("--counts writes NDJSON", err)

    def test_the_counts_file_may_not_be_an_input(self):
        code, _, err = run(["dedup", "--key", "id", "--store", ":memory:", "--counts", self.log, self.log])
        self.assertEqual(code, 2, err)
        with open(self.log, "rb") as f:
            self.assertEqual(f.read(), ndjson(self.events))


class LivePipe(unittest.TestCase):
    def test_a_single_first_line_goes_out_without_waiting_for_a_second(self):
        # Telling the input's format reads its first bytes: on a live pipe
        # (tail -f) it must not wait for more lines than have come.
        process = subprocess.Popen([IDEM, "dedup", "--key", "id", "--store", ":memory:"], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            process.stdin.write(b'{"id":1}\n')
            process.stdin.flush()
            import select
            ready, _, _ = select.select([process.stdout], [], [], 10)
            self.assertTrue(ready, "the first record waited for a second line")
            self.assertEqual(process.stdout.readline(), b'{"id":1}\n')
        finally:
            process.stdin.close()
            process.wait(timeout=10)
            process.stdout.close()
            process.stderr.close()

    def test_records_go_out_while_a_live_input_is_quiet(self):
        process = subprocess.Popen([IDEM, "dedup", "--key", "id", "--store", ":memory:"], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            process.stdin.write(b'{"id":1}\n{"id":1}\n{"id":2}\n')
            process.stdin.flush()
            # Read while stdin stays open: nothing may wait for a full batch.
            self.assertEqual(process.stdout.readline(), b'{"id":1}\n')
            self.assertEqual(process.stdout.readline(), b'{"id":2}\n')
        finally:
            process.stdin.close()
            process.wait(timeout=10)
            process.stdout.close()
            process.stderr.close()


class Concurrency(unittest.TestCase):
    """Four processes at once over overlapping inputs: every fingerprint is
    emitted by exactly one of them."""

    def run_four(self, store):
        with tempfile.TemporaryDirectory() as tmp:
            inputs = []
            for worker in range(4):
                path = os.path.join(tmp, f"part{worker}.ndjson")
                # Overlapping ranges: each id appears in two or three inputs.
                events = [{"id": f"evt_{i}", "from": worker} for i in range(worker * 1500, worker * 1500 + 4000)]
                with open(path, "wb") as f:
                    f.write(ndjson(events))
                inputs.append(path)
            # Each process writes to its own consumer, as in production: a
            # consumer that stops reading would hold its batch's lock.
            outputs = [open(path + ".out", "wb") for path in inputs]
            processes = [subprocess.Popen([IDEM, "dedup", "--key", "id", "--store", store, "--batch", "500", "-q", path],
                                          stdout=output, stderr=subprocess.PIPE)
                         for path, output in zip(inputs, outputs)]
            emitted = []
            for process, output, path in zip(processes, outputs, inputs):
                _, err = process.communicate(timeout=120)
                output.close()
                self.assertEqual(process.returncode, 0, err.decode())
                with open(path + ".out", "rb") as f:
                    emitted += [json.loads(line)["id"] for line in f.read().splitlines()]
            expected = {f"evt_{i}" for i in range(0, 3 * 1500 + 4000)}
            self.assertEqual(len(emitted), len(set(emitted)))
            self.assertEqual(set(emitted), expected)

    def test_four_processes_on_one_sqlite_file(self):
        with tempfile.TemporaryDirectory() as tmp:
            self.run_four(os.path.join(tmp, "shared.db"))

    @unittest.skipUnless(redis_server.available(), "redis-server is not installed")
    def test_four_processes_on_one_redis(self):
        with redis_server.running() as uri:
            self.run_four(uri + "/1")


class StoreFailures(unittest.TestCase):
    def test_on_store_error_pass_lets_records_through_unclaimed_with_a_warning(self):
        code, out, err = run(["dedup", "--key", "id", "--store", "redis://127.0.0.1:1", "--store-timeout", "0",
                              "--on-store-error", "pass",
                              "--summary", "json"], stdin=ndjson(EVENTS))
        self.assertEqual(code, 0)
        # Repeats within the run are still dropped (issue #13); the first
        # copies are counted unclaimed, not unique.
        unique_ids = {e["id"] for e in EVENTS}
        self.assertEqual(len(out.splitlines()), len(unique_ids))
        self.assertIn("idem: warning: cannot connect to store redis://127.0.0.1:1/0", err)
        summary = summary_of(err)
        self.assertEqual((summary["unclaimed"], summary["unique"]), (len(unique_ids), 0))
        self.assertEqual(summary["in"], summary["unclaimed"] + summary["duplicates"] + summary["rejected"])

    @unittest.skipUnless(redis_server.available(), "redis-server is not installed")
    def test_a_redis_that_goes_away_mid_run_stops_the_run_with_exit_4(self):
        with redis_server.running() as uri:
            process = subprocess.Popen([IDEM, "dedup", "--key", "id", "--store", uri, "-q", "--store-timeout", "1s"],
                                       stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            process.stdin.write(ndjson([{"id": f"before_{i}"} for i in range(200)]))
            process.stdin.flush()
            time.sleep(0.5)
            # Leaving the context stops the server; then more input arrives.
        try:
            process.stdin.write(ndjson([{"id": f"after_{i}"} for i in range(200)]))
            process.stdin.close()
        except BrokenPipeError:
            pass
        process.stdin = None
        out, err = process.communicate(timeout=60)
        self.assertEqual(process.returncode, 4, err)
        self.assertIn(b"store redis://127.0.0.1:", err)
        ids = [json.loads(line)["id"] for line in out.splitlines()]
        # Nothing was let through that was not claimed: only records read
        # while Redis was up.
        self.assertTrue(all(i.startswith("before_") for i in ids))

    @unittest.skipUnless(redis_server.available(), "redis-server is not installed")
    def test_on_store_error_local_judges_in_process_then_writes_back_when_redis_returns(self):
        port = redis_server.free_port()
        uri = f"redis://127.0.0.1:{port}"
        with tempfile.TemporaryDirectory() as tmp:
            def start_redis():
                return redis_server.start(port, tmp)


            server = start_redis()
            process = subprocess.Popen([IDEM, "dedup", "--key", "id", "--store", uri, "--on-store-error", "local",
                                        "--store-timeout", "200ms", "--mark", "--batch", "10", "--summary", "json"],
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            process.stdin.write(ndjson([{"id": f"before_{i}"} for i in range(50)]))
            process.stdin.flush()
            # Each record is out once it is claimed: waiting for the output,
            # not a fixed sleep, holds on a sanitizer's slow build too.
            seen = [process.stdout.readline() for _ in range(50)]
            server.terminate()
            server.wait()
            # Redis is gone: these are judged in the process, repeats included.
            process.stdin.write(ndjson([{"id": f"during_{i % 30}"} for i in range(60)]))
            process.stdin.flush()
            seen += [process.stdout.readline() for _ in range(60)]
            server = start_redis()  # back, empty: the write-back fills it
            try:
                process.stdin.close()
                process.stdin = None
                out, err = process.communicate(timeout=60)
                out = b"".join(seen) + out
                self.assertEqual(process.returncode, 0, err)
                records = [json.loads(line) for line in out.splitlines()]
                during = [r for r in records if r["id"].startswith("during_")]
                self.assertEqual(sum(1 for r in during if "duplicate_of" not in r["_idem"]["dedup"]), 30)
                self.assertTrue(all(r["_idem"]["dedup"].get("degraded") for r in during))
                summary = summary_of(err)
                self.assertEqual(summary["degraded"], 30)
                self.assertIn(b"wrote 30 fingerprints judged in this process back to", err)
                # A later run knows what the degraded stretch let through.
                code, again, err2 = run(["dedup", "--key", "id", "--store", uri],
                                        stdin=ndjson([{"id": f"during_{i}"} for i in range(30)]))
                self.assertEqual((code, again), (0, b""), err2)
            finally:
                server.terminate()
                server.wait()

    def test_a_store_locked_by_another_process_is_waited_for_then_a_clear_error(self):
        import sqlite3
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "locked.db")
            run(["dedup", "--key", "id", "--store", path, "-q"], stdin=ndjson(EVENTS[:1]))
            holder = sqlite3.connect(path, timeout=0)
            holder.execute("BEGIN EXCLUSIVE")
            try:
                code, out, err = run(["dedup", "--key", "id", "--store", path, "-q", "--lock-timeout", "300ms"],
                                     stdin=ndjson(EVENTS))
            finally:
                holder.rollback()
                holder.close()
            self.assertEqual(code, 4, err)
            self.assertIn("database is locked", err)
            self.assertEqual(out, b"")


class Buckets(unittest.TestCase):
    def test_the_calendar_bucket_in_the_given_zone_is_part_of_the_key(self):
        events = [{"id": 1, "at": "2026-11-30T15:59:00Z"}, {"id": 1, "at": "2026-11-30T16:01:00Z"},
                  {"id": 1, "at": "2026-11-30T17:00:00Z"}]
        code, out, _ = run(["dedup", "--store", ":memory:", "--key", "id", "--time-field", "at", "--bucket", "day",
                            "--tz", "Asia/Shanghai"], stdin=ndjson(events))
        self.assertEqual([json.loads(line)["at"] for line in out.splitlines()],
                         ["2026-11-30T15:59:00Z", "2026-11-30T16:01:00Z"])
        code, out, _ = run(["dedup", "--store", ":memory:", "--key", "id", "--time-field", "at", "--bucket", "day"],
                           stdin=ndjson(events))
        self.assertEqual(len(out.splitlines()), 1)  # one UTC day

    def test_buckets_after_2037_follow_the_zones_rules(self):
        # Issue #14: the hand-written zone reader put 00:30 EDT on 2040-07-01 in 06-30.
        event = b'{"id":"a","at":"2040-07-01T04:30:00Z"}\n'
        code, out, err = run(["dedup", "--store", ":memory:", "--key", "id", "--time-field", "at", "--bucket",
                              "day", "--tz", "America/New_York", "--print-key"], stdin=event)
        self.assertEqual(code, 0, err)
        self.assertIn("bucket 2040-07-01 ", json.loads(out)["_idem"]["dedup"]["key"])

    def test_an_unknown_zone_is_a_usage_error(self):
        code, _, err = run(["dedup", "--key", "id", "--bucket", "day", "--tz", "Mars/Olympus"], stdin=b"")
        self.assertEqual(code, 2)
        self.assertIn("unknown time zone 'Mars/Olympus'", err)


class KeepLast(unittest.TestCase):
    EVENTS = [{"id": 1, "v": "a", "at": "2026-11-30T08:00:00Z"}, {"id": 2, "v": "a", "at": "2026-11-30T08:01:00Z"},
              {"id": 1, "v": "b", "at": "2026-11-30T08:02:00Z"}, {"id": 1, "v": "c", "at": "2026-11-30T08:20:00Z"},
              {"id": 3, "v": "a", "at": "2026-11-30T08:30:00Z"}]

    def test_at_the_end_of_the_input_the_newest_copy_is_emitted(self):
        code, out, err = run(["dedup", "--store", ":memory:", "--key", "id", "--keep", "last", "--summary", "json"],
                             stdin=ndjson(self.EVENTS))
        self.assertEqual([(e["id"], e["v"]) for e in map(json.loads, out.splitlines())], [(1, "c"), (2, "a"), (3, "a")])
        summary = summary_of(err)
        self.assertEqual((summary["unique"], summary["duplicates"]), (3, 2))

    def test_with_a_window_the_newest_copy_is_emitted_when_its_window_closes(self):
        with tempfile.TemporaryDirectory() as tmp:
            dups = os.path.join(tmp, "dups.ndjson")
            code, out, _ = run(["dedup", "--store", ":memory:", "--key", "id", "--keep", "last", "--time-field", "at",
                                "--window", "10m", "--dups", dups], stdin=ndjson(self.EVENTS))
            self.assertEqual([(e["id"], e["v"]) for e in map(json.loads, out.splitlines())],
                             [(1, "b"), (2, "a"), (1, "c"), (3, "a")])
            with open(dups) as f:
                superseded = [json.loads(line) for line in f]
            self.assertEqual([(e["v"], e["_idem"]["dedup"]["duplicate_of"]) for e in superseded], [("a", "<stdin>:3")])

    def test_what_keep_last_holds_is_bounded(self):
        code, _, err = run(["dedup", "--store", ":memory:", "--key", "id", "--keep", "last", "--max-held", "100"],
                           stdin=ndjson(self.EVENTS))
        self.assertEqual(code, 3)  # the input outgrew the bound: not a usage error (issue #12 item 24)
        self.assertRegex(err, r"idem: error: <stdin>:\d+: --keep last holds .* more than --max-held 100 B: give a --window")

    def test_keep_last_does_not_combine_with_allow(self):
        code, _, err = run(["dedup", "--key", "id", "--keep", "last", "--allow", "2"], stdin=b"")
        self.assertEqual(code, 2)
        self.assertIn("--keep last emits one copy of each event", err)


@unittest.skipUnless(redis_server.available(), "redis-server is not installed")
class RedisLeases(unittest.TestCase):
    """On Redis a first copy's claim names its owner and batch, and counts as
    emitted only once that owner has confirmed the batch (after flushing its
    output), so a process killed in between does not keep the event claimed:
    the next claim finds its owner silent and takes it over."""

    @staticmethod
    def redis(port, commands):
        return redis_cluster.cli(port, "-n", "4", commands=commands, timeout=60).splitlines()

    def first_copies(self, uri):
        """(owner, batch, ttl_ms, owner's confirmed batch or 0) per fingerprint."""
        port = uri.rsplit(":", 1)[1].split("/")[0]
        keys = redis_cluster.cli(port, "-n", "4", "--scan", "--pattern", "idem:fp:*", timeout=60).split()
        values = self.redis(port, [f"GET {key}" for key in keys])
        ttls = [int(t) for t in self.redis(port, [f"PTTL {key}" for key in keys])]
        # "first_seen_us line batch expires_ms owner source"
        fields = [value.split(" ", 5) for value in values]
        owners = sorted({f[4] for f in fields})
        confirmed = dict(zip(owners, self.redis(port, [f"GET idem:confirmed:{owner}" for owner in owners])))
        return [(f[4], int(f[2]), ttl, int(confirmed[f[4]] or 0)) for f, ttl in zip(fields, ttls)]

    def test_claims_count_once_confirmed_and_a_killed_runs_claims_are_taken_over(self):
        with redis_server.running() as base:
            uri = base + "/4"
            # A consumer that reads nothing: the output cannot be flushed, so
            # the claims made for it stay unconfirmed (a quiet input alone
            # would commit what was emitted).
            process = subprocess.Popen([IDEM, "dedup", "--key", "id", "--store", uri, "-q", "--store-timeout", "1s"],
                                       stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            events = [{"id": f"evt_{i}", "pad": "x" * 100} for i in range(30000)]

            def feed():  # blocks once idem, blocked on its output, stops reading
                try:
                    process.stdin.write(ndjson(events))
                    process.stdin.flush()
                except (BrokenPipeError, ValueError):
                    pass

            writer = threading.Thread(target=feed, daemon=True)
            writer.start()
            # Until idem is blocked on its output: its claims are there and
            # stop changing (a fixed second was too short under ASan on a
            # loaded machine: nothing was claimed yet).
            # Compared without their TTLs, which count down between looks.
            pending, deadline = [], time.monotonic() + 60
            while time.monotonic() < deadline:
                time.sleep(0.5)
                seen = sorted(self.first_copies(uri))
                if seen and [claim[:2] for claim in seen] == [claim[:2] for claim in pending]:
                    break
                pending = seen
            process.kill()
            process.wait()
            writer.join(timeout=10)
            for stream in (process.stdin, process.stdout, process.stderr):
                try:
                    stream.close()
                except BrokenPipeError:
                    pass
            self.assertTrue(pending)
            self.assertEqual(len({owner for owner, _, _, _ in pending}), 1)
            # Claimed for the full TTL, but in a batch its owner never confirmed.
            self.assertTrue(all(batch > confirmed and ttl > 3_600_000 for _, batch, ttl, confirmed in pending),
                            pending[:5])
            # A rerun at once: the killed owner's heartbeat has stopped, so
            # the rerun takes its claims over and emits every event.
            started = time.monotonic()
            code, out, err = run(["dedup", "--key", "id", "--store", uri, "--summary", "json", "-q"],
                                 stdin=ndjson(events))
            self.assertEqual(code, 0, err)
            self.assertLess(time.monotonic() - started, 30)
            self.assertEqual((summary_of(err)["unique"], summary_of(err)["duplicates"]), (30000, 0))
            self.assertEqual(len(out.splitlines()), 30000)
            after = self.first_copies(uri)
            self.assertEqual(len(after), 30000)
            # Now the rerun's, each confirmed, for the 24h TTL.
            self.assertTrue(all(owner != pending[0][0] and batch <= confirmed and ttl > 3_600_000
                                for owner, batch, ttl, confirmed in after))
            # And a third run sees every event as a repeat.
            code, out, err = run(["dedup", "--key", "id", "--store", uri, "--summary", "json", "-q"],
                                 stdin=ndjson(events[:100]))
            self.assertEqual((code, summary_of(err)["duplicates"], out), (0, 100, b""))


@unittest.skipUnless(redis_server.available(), "redis-server is not installed")
class RedisEvidence(unittest.TestCase):
    def test_each_duplicate_is_kept_beside_its_fingerprint(self):
        with redis_server.running() as base:
            code, _, _ = run(["dedup", "--key", "id", "--store", base + "/5", "-q"], stdin=ndjson(EVENTS))
            self.assertEqual(code, 0)
            port = base.rsplit(":", 1)[1]
            keys = subprocess.run(["redis-cli", "-p", port, "-n", "5", "--scan", "--pattern", "idem:dups:*"],
                                  capture_output=True, text=True).stdout.split()
            self.assertEqual(len(keys), 1)  # evt_1 came three times
            self.assertTrue(keys[0].startswith("idem:dups:{default:"))
            evidence = subprocess.run(["redis-cli", "-p", port, "-n", "5", "LRANGE", keys[0], "0", "-1"],
                                      capture_output=True, text=True).stdout.splitlines()
            self.assertEqual([e.split(" ")[0] for e in evidence if e], ["<stdin>:2", "<stdin>:5"])


@unittest.skipUnless(redis_server.available(), "redis-server is not installed")
class RedisBoundedEvidence(unittest.TestCase):
    """Redis keeps an event's first 16 repeats and its latest as evidence,
    then only counts them, as the SQLite store does: a rerun of a file whose
    events are all duplicates does not grow the store by its size."""

    def test_an_all_duplicate_rerun_grows_redis_only_up_to_a_bound(self):
        with redis_server.running() as base:
            uri = base + "/6"
            port = base.rsplit(":", 1)[1]
            events = ndjson([{"id": i} for i in range(200)])
            for _ in range(20):
                code, _, err = run(["dedup", "--key", "id", "--store", uri, "-q"], stdin=events)
                self.assertEqual(code, 0, err)
            lists = redis_cluster.cli(port, "-n", "6", "--scan", "--pattern", "idem:dups:*").split()
            self.assertEqual(len(lists), 200)
            lengths = redis_cluster.cli(port, "-n", "6", commands=[f"LLEN {k}" for k in lists]).split()
            self.assertEqual(set(lengths), {"17"})  # 16 repeats and the latest, of 19
            # Every copy still counted: the 21st copy of an event says so.
            code, out, _ = run(["dedup", "--key", "id", "--store", uri, "--mark"], stdin=ndjson([{"id": 7}]))
            self.assertEqual(json.loads(out)["_idem"]["dedup"]["seen_count"], 21)
            code, out, err = run(["audit", "--store", uri, "--format", "json"])
            self.assertEqual(code, 1, err)  # findings: exit 1
            # 20 copies of each (21 of one): the first, 16 repeats and the latest kept.
            self.assertIn("401 more copies of 200 events were counted by dedup but not kept", err)
            self.assertEqual(json.loads(out)["summary"]["records"], 200 * 18)

    def test_counts_stay_exact_past_the_bound_within_a_run(self):
        with redis_server.running() as base:
            code, out, err = run(["dedup", "--key", "id", "--store", base + "/7", "--mark"],
                                 stdin=ndjson([{"id": "storm"}] * 40))
            self.assertEqual(code, 0, err)
            self.assertEqual([json.loads(line)["_idem"]["dedup"]["seen_count"] for line in out.splitlines()],
                             list(range(1, 41)))
            code, out, err = run(["audit", "--store", base + "/7", "--format", "json"])
            self.assertEqual(code, 1, err)  # findings: exit 1
            self.assertIn("22 more copies of 1 events were counted by dedup but not kept", err)
            # The latest copy kept is the 40th record.
            self.assertEqual(json.loads(out)["summary"]["records"], 18)


@unittest.skipUnless(redis_server.available(), "redis-server is not installed")
class RedisEarlierLayout(unittest.TestCase):
    """Fingerprints an earlier idem kept on Redis as hashes are judged as that
    idem judged them, and turned into the string form as claims meet them."""

    def test_a_redis_store_written_with_hashes_opens_and_judges_as_it_did(self):
        # stores/dedup-redis-hashes.rdb was saved by a Redis that idem at
        # commit 4358445 (fingerprints as hashes, a lease and a confirmation
        # script) had written: `dedup --key id --ttl 876000h` over day1.ndjson
        # (a,b,a,c,a), then the same with --scope other over (x,y,x). The
        # expected verdicts and audit figures are what that idem answered over
        # a copy of the same store.
        with redis_server.serving(os.path.join(STORES, "dedup-redis-hashes.rdb")) as port:
            uri = f"redis://127.0.0.1:{port}"
            self.assertIn("hash", redis_cluster.cli(port, "TYPE", "idem:fp:{default:5728b55cb7ae66ad64aed92f3e2cabdc}"))
            code, out, err = run(["audit", "--store", uri, "--format", "json"])
            self.assertEqual(code, 1, err)  # findings: exit 1
            summary = json.loads(out)["summary"]
            self.assertEqual((summary["records"], summary["groups"], summary["duplicates"]), (5, 1, 2))
            probe = ndjson([{"id": k} for k in ("a", "b", "c", "x", "d", "a")])
            code, out, err = run(["dedup", "--key", "id", "--store", uri, "--mark", "-q"], stdin=probe)
            self.assertEqual(code, 0, err)
            marks = [json.loads(line)["_idem"]["dedup"] for line in out.splitlines()]
            self.assertEqual([(m["seen_count"], m.get("duplicate_of")) for m in marks],
                             [(4, "day1.ndjson:1"), (2, "day1.ndjson:2"), (2, "day1.ndjson:4"), (1, None),
                              (1, None), (5, "day1.ndjson:1")])
            code, out, err = run(["dedup", "--key", "id", "--store", uri, "--scope", "other", "--mark", "-q"],
                                 stdin=ndjson([{"id": "x"}, {"id": "y"}]))
            self.assertEqual([(json.loads(line)["_idem"]["dedup"]["seen_count"],
                               json.loads(line)["_idem"]["dedup"]["duplicate_of"]) for line in out.splitlines()],
                             [(3, "other.ndjson:1"), (2, "other.ndjson:2")])
            # Met by a claim: now a string, its place and evidence kept.
            value = redis_cluster.cli(port, "GET", "idem:fp:{default:5728b55cb7ae66ad64aed92f3e2cabdc}").split(" ")
            self.assertEqual(value[1:3] + value[4:], ["1", "0", "-", "day1.ndjson\n"])
            self.assertGreater(int(value[3]), time.time() * 1000 + 3e12)  # still expiring in ~100 years
            code, out, err = run(["audit", "--store", uri, "--format", "json"])
            summary = json.loads(out)["summary"]
            self.assertEqual((summary["records"], summary["groups"], summary["duplicates"]), (11, 3, 6))

            # A lease as that idem's claim script left it for a process
            # killed before it confirmed: taken over, so the event is emitted.
            run(["dedup", "--key", "id", "--store", uri, "--scope", "leased", "-q"], stdin=ndjson([{"id": "e"}]))
            key = redis_cluster.cli(port, "--scan", "--pattern", "idem:fp:{leased:*").split()[0]
            redis_cluster.cli(port, "DEL", key)
            redis_cluster.cli(port, "HSET", key, "first_seen", "1700000000000000", "count", "1", "source", "old.ndjson",
                     "line", "3", "owner", "oldhost:4242:1700000000000000")
            redis_cluster.cli(port, "PEXPIRE", key, "60000")
            code, out, err = run(["dedup", "--key", "id", "--store", uri, "--scope", "leased", "--mark", "-q"],
                                 stdin=ndjson([{"id": "e"}, {"id": "e"}]))
            self.assertEqual(code, 0, err)
            marks = [json.loads(line)["_idem"]["dedup"] for line in out.splitlines()]
            self.assertEqual([(m["seen_count"], m.get("duplicate_of")) for m in marks], [(1, None), (2, "<stdin>:1")])


class Reclaiming(unittest.TestCase):
    def test_expired_fingerprints_are_reclaimed_without_asking_when_they_are_many(self):
        import sqlite3
        with tempfile.TemporaryDirectory() as tmp:
            store = os.path.join(tmp, "idem.db")
            many = ndjson([{"id": i} for i in range(12000)])
            run(["dedup", "--key", "id", "--store", store, "--ttl", "1s", "-q"], stdin=many)

            def rows():
                with sqlite3.connect(store) as db:
                    return db.execute("SELECT count(*) FROM fingerprint_log").fetchone()[0]

            self.assertEqual(rows(), 12000)
            run(["dedup", "--key", "id", "--store", store, "-q"], stdin=ndjson([{"id": "new"}]),
                env={"IDEM_NOW": "+2s"})
            self.assertEqual(rows(), 1)


class FullDisk(unittest.TestCase):
    def test_a_full_disk_is_exit_4_with_the_reason(self):
        with open("/dev/full", "wb") as full:
            result = subprocess.run([IDEM, "dedup", "--key", "id", "--store", ":memory:"], input=ndjson(EVENTS),
                                    stdout=full, stderr=subprocess.PIPE)
        self.assertEqual(result.returncode, 4)
        self.assertIn(b"cannot write to '<stdout>': No space left on device", result.stderr)
        code, _, err = run(["dedup", "--key", "id", "--store", ":memory:", "-o", "/dev/full"], stdin=ndjson(EVENTS))
        self.assertEqual(code, 4)
        self.assertIn("No space left on device", err)


class EarlierRuns(unittest.TestCase):
    def test_a_rerun_says_its_duplicates_were_first_seen_by_an_earlier_run(self):
        with tempfile.TemporaryDirectory() as tmp:
            store = os.path.join(tmp, "idem.db")
            source = os.path.join(tmp, "events.ndjson")
            with open(source, "wb") as f:
                f.write(b'{"id":"a"}\n{"id":"b"}\n{"id":"a"}\n')
            code, out, err = run(["dedup", "--key", "id", "--store", store, source])
            self.assertNotIn("earlier run", err)
            code, out, err = run(["dedup", "--key", "id", "--store", store, source])
            self.assertEqual(out, b"")
            self.assertIn("2 records were first seen by an earlier run in sqlite:" + store, err)
            self.assertIn("--store :memory: for a fresh run", err)


if __name__ == "__main__":
    unittest.main()


STORES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "stores")


class StoreOnDisk(unittest.TestCase):
    """The SQLite store's fingerprint log as schemas v10 and v11 keep it: opened
    without reading it whole, repeats kept up to a bound, older stores migrated."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.store = os.path.join(self.tmp.name, "idem.db")

    def tearDown(self):
        self.tmp.cleanup()

    def rows(self, sql):
        import sqlite3
        with sqlite3.connect(self.store) as db:
            return db.execute(sql).fetchone()[0]

    def test_a_store_written_at_schema_v11_opens_and_saves_its_index_beside_it(self):
        # stores/dedup-v11.db was written by idem at schema v11 (commit cb190e1):
        # `dedup --key id --ttl 876000h -q` over ids 0..4999 (its index then
        # saved whole inside the store), then over 4990..5009 (a delta of the
        # ten new ones). Schema v12 drops both; the first run reads the log
        # and saves the index in a file beside the store.
        shutil.copy(os.path.join(STORES, "dedup-v11.db"), self.store)
        probe = ndjson([{"id": i} for i in (0, 4999, 5005, 5009, 5010, 6000)])
        # What the v11 build answered over the same store, twice in a row.
        expected = [[(2, "a.ndjson:1"), (3, "a.ndjson:5000"), (2, "b.ndjson:16"), (2, "b.ndjson:20"),
                     (1, None), (1, None)],
                    [(3, "a.ndjson:1"), (4, "a.ndjson:5000"), (3, "b.ndjson:16"), (3, "b.ndjson:20"),
                     (2, "<stdin>:5"), (2, "<stdin>:6")]]
        for answers in expected:  # the second run maps the file the first one saved
            code, out, err = run(["dedup", "--key", "id", "--store", self.store, "--mark"], stdin=probe)
            self.assertEqual(code, 0, err)
            marks = [json.loads(line)["_idem"]["dedup"] for line in out.splitlines()]
            self.assertEqual([(m["seen_count"], m.get("duplicate_of")) for m in marks], answers)
            self.assertEqual(self.rows("PRAGMA user_version"), 12)
            token = self.rows("SELECT token FROM fingerprint_index") & (2**64 - 1)
            self.assertTrue(os.path.exists(self.store + "-index-%016x" % token))

    def test_a_store_written_at_schema_v9_opens_and_judges_as_it_did(self):
        # stores/dedup-v9.db was written by idem at schema v9 (commit 3b5e867):
        # `dedup --key id --ttl 876000h` over day1.ndjson (a,b,a,c,a), the same
        # with --scope other (x,y,x), `--ttl 1s` over short.ndjson (t), then,
        # t expired, day2.ndjson (t,b,t), and day1.ndjson again; one release
        # row (kind 3, as release_fingerprint writes it) was added for c. The
        # expected verdicts are what that idem answered over the same store.
        shutil.copy(os.path.join(STORES, "dedup-v9.db"), self.store)
        probe = ndjson([{"id": k} for k in ("a", "b", "c", "t", "x", "c")])
        code, out, err = run(["dedup", "--key", "id", "--store", self.store, "--mark"], stdin=probe)
        self.assertEqual(code, 0, err)
        marks = [json.loads(line)["_idem"]["dedup"] for line in out.splitlines()]
        self.assertEqual([(m["seen_count"], m.get("duplicate_of")) for m in marks],
                         [(7, "day1.ndjson:1"), (4, "day1.ndjson:2"), (1, None), (3, "day2.ndjson:1"),
                          (1, None), (2, "<stdin>:3")])
        code, out, err = run(["dedup", "--key", "id", "--store", self.store, "--scope", "other", "--mark"],
                             stdin=ndjson([{"id": "x"}, {"id": "y"}]))
        self.assertEqual([json.loads(line)["_idem"]["dedup"]["seen_count"] for line in out.splitlines()], [3, 2])
        self.assertEqual(self.rows("PRAGMA user_version"), 12)
        # audit reads the evidence the old rows kept, and the new ones.
        code, out, err = run(["audit", "--store", self.store, "--format", "json"])
        self.assertEqual(code, 1, err)  # findings: exit 1
        summary = json.loads(out)["summary"]
        self.assertEqual((summary["records"], summary["groups"]), (20, 4))

    def test_an_all_duplicate_rerun_grows_the_store_only_up_to_a_bound(self):
        events = ndjson([{"id": i} for i in range(500)])
        for _ in range(20):
            code, _, err = run(["dedup", "--key", "id", "--store", self.store, "-q"], stdin=events)
            self.assertEqual(code, 0, err)
        # One row per event and 16 repeats each, not 19.
        self.assertEqual(self.rows("SELECT count(*) FROM fingerprint_log WHERE kind = 1"), 500)
        self.assertEqual(self.rows("SELECT count(*) FROM fingerprint_log WHERE kind = 2"), 500 * 16)
        code, out, _ = run(["dedup", "--key", "id", "--store", self.store, "--mark"], stdin=ndjson([{"id": 7}]))
        self.assertEqual(json.loads(out)["_idem"]["dedup"]["seen_count"], 21)
        code, out, err = run(["audit", "--store", self.store, "--format", "json"])
        self.assertEqual(code, 1, err)  # findings: exit 1
        # 20 copies of each (21 of one): the first, 16 repeats and the latest kept.
        self.assertIn("1001 more copies of 500 events were counted by dedup but not kept", err)

    def test_a_run_saves_its_index_for_the_next_one(self):
        events = ndjson([{"id": i} for i in range(5000)])  # past 4096 first copies: worth saving
        run(["dedup", "--key", "id", "--store", self.store, "-q"], stdin=events)
        self.assertEqual(self.rows("SELECT covers_seq FROM fingerprint_index"),
                         self.rows("SELECT max(seq) FROM fingerprint_log"))
        # Saved whole in a file beside the store, which the row names.
        token = self.rows("SELECT token FROM fingerprint_index") & (2**64 - 1)
        self.assertEqual([name for name in os.listdir(self.tmp.name) if "-index-" in name],
                         ["idem.db-index-%016x" % token])
        code, out, err = run(["dedup", "--key", "id", "--store", self.store, "--summary", "json"],
                             stdin=ndjson([{"id": i} for i in range(4990, 5010)]))
        self.assertEqual((summary_of(err)["unique"], summary_of(err)["duplicates"]), (10, 10))
        # A run that adds a few saves only what it changed, and the next
        # process replays it instead of reading those rows of the log.
        self.assertEqual(self.rows("SELECT count(*) FROM fingerprint_index_delta"), 1)
        self.assertEqual(self.rows("SELECT length(changes) / 16 FROM fingerprint_index_delta"), 10)
        self.assertEqual(self.rows("SELECT covers_seq FROM fingerprint_index_delta"),
                         self.rows("SELECT max(seq) FROM fingerprint_log"))
        code, out, err = run(["dedup", "--key", "id", "--store", self.store, "--summary", "json"],
                             stdin=ndjson([{"id": i} for i in range(5005, 5015)]))
        self.assertEqual((summary_of(err)["unique"], summary_of(err)["duplicates"]), (5, 5))
