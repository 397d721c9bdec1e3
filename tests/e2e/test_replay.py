"""End-to-end tests of `idem replay` against `idem listen` over loopback:
ledger, reruns, kills, retries, budgets, re-signing, Redis."""
import json
import os
import signal
import socket
import subprocess
import tempfile
import time
import unittest
from collections import Counter

import redis_server
from listener import listening, summary_of
from harness import IDEM, SECRET, run, signed_envelopes


def write_events(path, count, start=0):
    with open(path, "w") as out:
        for n in range(start, start + count):
            out.write(json.dumps({"id": f"evt_{n}", "type": "charge.succeeded", "amount": n}) + "\n")


def keys_received(listener, status=None):
    keys = []
    for envelope in listener.envelopes():
        if status is not None and envelope["_idem"]["listen"].get("status") != status:
            continue
        keys.append(dict((k.lower(), v) for k, v in envelope["headers"]).get("idempotency-key"))
    return keys


def outcomes(out):
    return [json.loads(line) for line in out.splitlines()]


class ReplayScratch(unittest.TestCase):
    """A scratch folder with a ledger and an events file for each test."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        self.store = os.path.join(self.dir, "ledger.db")
        self.events = os.path.join(self.dir, "events.ndjson")

    def tearDown(self):
        self.tmp.cleanup()

    def replay(self, url, args, inputs=None, store=None, env=None):
        backoff = [] if "--backoff" in args else ["--backoff", "20ms..200ms"]
        return run(["replay", "--to", url, "--store", store or self.store, "--summary", "json",
                    *backoff, "--seed", "1", *args, *(inputs or [self.events])], env=env)


class Replay(ReplayScratch):
    def test_libcurl_is_loaded_when_a_command_first_speaks_http_and_not_before(self):
        # LD_DEBUG=files: the dynamic loader names each library it loads,
        # dlopen's too (net/detail/libcurl.hpp).
        code, _, err = run(["--version"], env={"LD_DEBUG": "files"})
        self.assertEqual(code, 0)
        self.assertIn("file=", err)  # the loader did report its libraries
        self.assertNotIn("libcurl", err)
        write_events(self.events, 3)
        with listening(self.dir) as target:
            code, out, err = self.replay(target.url + "/hooks", ["--key", "id"],
                                         env={"LD_DEBUG": "files"})
        self.assertEqual(code, 0, err)
        self.assertIn("file=libcurl.so.4", err)
        self.assertEqual(Counter(o["outcome"] for o in outcomes(out)), {"completed": 3})

    def test_every_record_completes_once_per_key_and_a_rerun_sends_nothing(self):
        write_events(self.events, 200)
        with listening(self.dir) as target:
            code, out, err = self.replay(target.url + "/hooks", ["--key", "id", "--concurrency", "8"])
            self.assertEqual(code, 0, err)
            self.assertEqual(Counter(o["outcome"] for o in outcomes(out)), {"completed": 200})
            code, out, err = self.replay(target.url + "/hooks", ["--key", "id"])
            self.assertEqual(code, 0, err)
            self.assertEqual({o["outcome"] for o in outcomes(out)}, {"skipped"})
            self.assertEqual(summary_of(err)["attempts"], 0)
            target.stop()
        received = keys_received(target)
        self.assertEqual(sorted(received), sorted(f"evt_{n}" for n in range(200)))
        first = target.envelopes()[0]
        self.assertEqual(first["path"], "/hooks")
        self.assertEqual(json.loads(first["body"])["type"], "charge.succeeded")

    def test_a_replay_killed_mid_run_is_finished_by_a_rerun_with_the_original_keys(self):
        write_events(self.events, 300)
        with listening(self.dir, ["--delay", "5ms"]) as target:
            process = subprocess.Popen([IDEM, "replay", "--to", target.url, "--store", self.store, "--key", "id",
                                        "--concurrency", "4", "--lease", "1s", self.events],
                                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            # Killed once its first committed outcomes reach stdout (a count
            # the process reports, not a wall-clock guess): the rest are
            # in flight or not yet sent.
            first = process.stdout.readline()
            process.send_signal(signal.SIGKILL)
            killed_out = first.decode() + process.communicate()[0].decode()
            done_before = {o["key"] for o in outcomes(killed_out) if o["outcome"] == "completed"}
            self.assertTrue(done_before, killed_out)
            self.assertLess(len(done_before), 300, "the kill came too late to test anything")
            # The killed run's 1 s leases have run out on the rerun's clock
            # (IDEM_NOW two seconds on), so nothing waits for them.
            code, out, err = self.replay(target.url, ["--key", "id", "--concurrency", "4", "--lease", "1s"],
                                         env={"IDEM_NOW": "+2s"})
            self.assertEqual(code, 0, err)
            target.stop()
        after = outcomes(out)
        completed_now = {o["key"] for o in after if o["outcome"] == "completed"}
        # A key the ledger holds as completed whose line the kill cut off is
        # "completed earlier" now: stdout may lag the ledger, never lead it.
        recorded_earlier = {o["key"] for o in after
                            if o["outcome"] == "skipped" and o["reason"].startswith("completed earlier")}
        self.assertTrue(done_before <= recorded_earlier, done_before - recorded_earlier)
        self.assertEqual(done_before | completed_now | recorded_earlier, {f"evt_{n}" for n in range(300)})
        # Whatever was sent twice (in flight at the kill) carried the same key both times.
        for envelope in target.envelopes():
            headers = dict((k.lower(), v) for k, v in envelope["headers"])
            self.assertEqual(headers["idempotency-key"], json.loads(envelope["body"])["id"])
        self.assertEqual(set(keys_received(target)), {f"evt_{n}" for n in range(300)})

    def test_a_key_repeated_in_the_input_is_sent_once(self):
        write_events(self.events, 3)
        with open(self.events, "a") as out:
            out.write(json.dumps({"id": "evt_1", "type": "charge.succeeded", "amount": 1}) + "\n")
        with listening(self.dir) as target:
            code, out, err = self.replay(target.url, ["--key", "id"])
            self.assertEqual(code, 0, err)
            target.stop()
        skipped = [o for o in outcomes(out) if o["outcome"] == "skipped"]
        self.assertEqual([(o["key"], o["source"].rsplit(":", 1)[1]) for o in skipped], [("evt_1", "4")])
        self.assertIn(skipped[0]["reason"], ("same key as an earlier record in this run", "completed earlier (status 200)"))
        self.assertEqual(sorted(keys_received(target)), ["evt_0", "evt_1", "evt_2"])

    def test_a_4xx_is_failed_for_good_not_retried_and_resent_only_on_request(self):
        write_events(self.events, 5)
        with listening(self.dir, ["--respond", "422"]) as target:
            code, out, err = self.replay(target.url, ["--key", "id"])
            self.assertEqual(code, 1)
            results = outcomes(out)
            self.assertEqual({(o["outcome"], o["attempts"], o["status"]) for o in results}, {("failed", 1, 422)})
            self.assertIn("captured", results[0]["response"])
            code, out, _ = self.replay(target.url, ["--key", "id"])
            self.assertEqual(code, 0)
            self.assertTrue(all("failed for good earlier (http 422)" in o["reason"] for o in outcomes(out)))
            code, out, _ = self.replay(target.url, ["--key", "id", "--retry-failed"])
            self.assertEqual(code, 1)
            target.stop()
        self.assertEqual(len(target.envelopes()), 10)

    def test_retry_after_is_honoured_and_capped(self):
        write_events(self.events, 1)
        with listening(self.dir, ["--respond", "429", "--retry-after", "1s"]) as target:
            code, out, _ = self.replay(target.url, ["--key", "id", "--max-attempts", "3"])
            self.assertEqual(code, 1)
            self.assertEqual(outcomes(out)[0]["attempts"], 3)
            self.assertIn("http 429 after 3 attempts", outcomes(out)[0]["error"])
            target.stop()
        times = [envelope["received_at"] for envelope in target.envelopes()]
        from datetime import datetime
        stamps = [datetime.fromisoformat(t.replace("Z", "+00:00")) for t in times]
        gaps = [(b - a).total_seconds() for a, b in zip(stamps, stamps[1:])]
        self.assertTrue(all(gap >= 0.95 for gap in gaps), gaps)
        with listening(self.dir, ["--respond", "503", "--retry-after", "30s"], name="capped.ndjson") as target:
            started = time.monotonic()
            self.replay(target.url, ["--key", "id", "--max-attempts", "2", "--max-retry-after", "300ms"],
                        store=os.path.join(self.dir, "other.db"))
            self.assertLess(time.monotonic() - started, 10)

    def test_the_retry_budget_stops_a_storm_against_a_target_that_always_fails(self):
        write_events(self.events, 100)
        with listening(self.dir, ["--respond", "500"]) as target:
            code, out, err = self.replay(target.url, ["--key", "id", "--max-attempts", "10",
                                                      "--retry-budget", "10%", "--backoff", "1ms..5ms"])
            self.assertEqual(code, 1)
            target.stop()
        received = len(target.envelopes())
        # One attempt per record, plus 10% of them and the floor of 10: not 100 x 10.
        self.assertLessEqual(received, 100 + 10 + 10)
        self.assertIn("the retry budget (10% of first attempts, plus 10 retries any run may make) is spent", err)
        self.assertEqual(summary_of(err)["failed"], 100)
        self.assertEqual(summary_of(err)["retry_budget"], "spent")

    def test_a_flaky_target_gets_every_record_exactly_once_as_2xx(self):
        write_events(self.events, 100)
        with listening(self.dir, ["--fail-rate", "30%", "--drop-connection-rate", "10%", "--seed", "5"]) as target:
            code, out, err = self.replay(target.url, ["--key", "id", "--max-attempts", "20",
                                                      "--retry-budget", "200%", "--backoff", "1ms..10ms"])
            self.assertEqual(code, 0, err)
            target.stop()
        answered_ok = keys_received(target, status=200)
        self.assertEqual(sorted(answered_ok), sorted(f"evt_{n}" for n in range(100)))
        self.assertGreater(summary_of(err)["retries"], 10)

    def test_a_target_that_refuses_connections_is_retried_then_failed_for_now(self):
        write_events(self.events, 2)
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        code, out, err = self.replay(f"http://127.0.0.1:{port}", ["--key", "id", "--max-attempts", "2"])
        self.assertEqual(code, 1)
        result = outcomes(out)[0]
        self.assertEqual(result["attempts"], 2)
        self.assertIn("after 2 attempts", result["error"])
        # Not failed for good: a rerun tries again.
        code, out, _ = self.replay(f"http://127.0.0.1:{port}", ["--key", "id", "--max-attempts", "1"])
        self.assertEqual({o["outcome"] for o in outcomes(out)}, {"failed"})

    def test_envelopes_keep_method_path_query_and_headers_minus_hop_by_hop(self):
        envelope = {"idem": 1, "id": "cap_1", "received_at": "2026-11-30T08:00:00.000Z", "method": "PUT",
                    "path": "/orig/path?a=1", "headers": [["Host", "old"], ["Connection", "close, X-Hop"],
                                                          ["X-Hop", "1"], ["X-Keep", "2"],
                                                          ["Content-Type", "text/plain"], ["Transfer-Encoding", "chunked"]],
                    "body": "raw body \u00e9"}
        with open(self.events, "w") as out:
            out.write(json.dumps(envelope) + "\n")
        with listening(self.dir) as target:
            code, _, err = self.replay(target.url, [])
            self.assertEqual(code, 0, err)
            target.stop()
        received = target.envelopes()[0]
        self.assertEqual(received["method"], "PUT")
        self.assertEqual(received["path"], "/orig/path?a=1")
        names = [name for name, _ in received["headers"]]
        self.assertNotIn("X-Hop", names)
        self.assertNotIn("Transfer-Encoding", names)
        self.assertNotIn("Accept", names)
        self.assertEqual(dict(received["headers"])["X-Keep"], "2")
        self.assertTrue(dict(received["headers"])["Idempotency-Key"].startswith("idem-"))
        self.assertEqual(received["body"], "raw body \u00e9")

    def test_a_timeout_after_sending_is_retried_with_the_key_and_not_without(self):
        write_events(self.events, 1)
        with listening(self.dir, ["--delay", "1s"]) as target:
            code, out, _ = self.replay(target.url, ["--key", "id", "--timeout", "total=200ms",
                                                    "--max-attempts", "2"])
            self.assertEqual(code, 1)
            result = outcomes(out)[0]
            self.assertEqual(result["attempts"], 2)
            self.assertIn("Timeout", result["error"])
            code, out, _ = self.replay(target.url, ["--no-key", "--timeout", "total=200ms", "--max-attempts", "5"],
                                       store=os.path.join(self.dir, "other.db"))
            self.assertEqual(code, 1)
            result = outcomes(out)[0]
            self.assertEqual(result["attempts"], 1)
            self.assertIn("sent without a key: not retried", result["error"])
            target.stop()
        captured = target.envelopes()
        self.assertEqual(len(captured), 3)
        self.assertNotIn("Idempotency-Key", [name for name, _ in captured[2]["headers"]])

    def test_selection_by_time_filter_and_limit(self):
        envelopes = [{"idem": 1, "id": f"cap_{n}", "received_at": f"2026-11-30T08:0{n}:00.000Z", "method": "POST",
                      "path": "/h", "headers": [["Content-Type", "application/json"]],
                      "body": json.dumps({"id": f"evt_{n}", "kind": "a" if n % 2 else "b"})} for n in range(6)]
        with open(self.events, "w") as out:
            out.writelines(json.dumps(e) + "\n" for e in envelopes)
        code, out, err = self.replay("http://127.0.0.1:9", ["--dry-run", "--key", "body.id",
                                                            "--since", "2026-11-30T08:01:00Z",
                                                            "--until", "2026-11-30T08:05:00Z",
                                                            "--filter", "body.kind=a"])
        self.assertEqual(code, 0, err)
        self.assertEqual([o["key"] for o in outcomes(out)], ["evt_1", "evt_3"])
        code, out, _ = self.replay("http://127.0.0.1:9", ["--dry-run", "--key", "body.id", "--limit", "2"])
        self.assertEqual([o["key"] for o in outcomes(out)], ["evt_0", "evt_1"])
        # A plain event has no received_at: selecting by time needs --time-field.
        write_events(self.events, 1)
        code, out, err = self.replay("http://127.0.0.1:9", ["--dry-run", "--since", "2026-11-30T08:00:00Z"])
        self.assertEqual(out, b"")
        self.assertIn("events.ndjson:1: no received_at to select or pace by", err)
        self.assertEqual(summary_of(err)["rejected"], 1)
        self.assertEqual(code, 3)  # every record rejected

    def test_original_timing_keeps_the_capture_pacing_at_the_given_speed(self):
        envelopes = [{"idem": 1, "id": f"cap_{n}", "received_at": f"2026-11-30T08:00:0{2 * n}.000Z",
                      "method": "POST", "path": "/h", "headers": [], "body": f"{{\"n\":{n}}}"} for n in range(3)]
        with open(self.events, "w") as out:
            out.writelines(json.dumps(e) + "\n" for e in envelopes)
        with listening(self.dir) as target:
            started = time.monotonic()
            code, _, err = self.replay(target.url, ["--timing", "original", "--speed", "4x"])
            elapsed = time.monotonic() - started
            self.assertEqual(code, 0, err)
            target.stop()
        self.assertGreaterEqual(elapsed, 0.95)  # 4 s of capture at 4x
        self.assertLess(elapsed, 3.5)
        self.assertEqual([e["body"] for e in target.envelopes()], ['{"n":0}', '{"n":1}', '{"n":2}'])

    def test_rate_limits_every_request(self):
        write_events(self.events, 20)
        with listening(self.dir) as target:
            started = time.monotonic()
            code, _, _ = self.replay(target.url, ["--key", "id", "--rate", "50/s"])
            self.assertEqual(code, 0)
            self.assertGreaterEqual(time.monotonic() - started, 0.35)
            target.stop()

    def test_a_crafted_capture_cannot_smuggle_headers_or_requests(self):
        def envelope(n, **fields):
            base = {"idem": 1, "id": f"cap_{n}", "method": "POST", "path": "/h", "headers": [],
                    "body": json.dumps({"id": f"evt_{n}"})}
            base.update(fields)
            return json.dumps(base)
        with open(self.events, "w") as out:
            out.write(envelope(0) + "\n")
            out.write(envelope(1, headers=[["X-A", "1\r\nX-Injected: yes"]]) + "\n")
            out.write(envelope(2, method="POST /admin HTTP/1.1\r\nX: y") + "\n")
            out.write(envelope(3, path="/h HTTP/1.1\r\nHost: evil") + "\n")
        with listening(self.dir) as target:
            code, out, err = self.replay(target.url, ["--key", "body.id"])
            self.assertEqual(code, 1, err)  # records set aside
            target.stop()
        self.assertEqual([json.loads(e["body"])["id"] for e in target.envelopes()], ["evt_0"])
        self.assertIn("events.ndjson:2: header 'X-A' has a control byte in its value: not sent", err)
        self.assertIn("events.ndjson:3: method", err)
        self.assertIn("events.ndjson:4: request path '/h HTTP/1.1\\x0d\\x0aHost: evil' holds spaces", err)
        self.assertEqual((summary_of(err)["rejected"], summary_of(err)["selected"]), (3, 1))

    def test_dry_run_prints_requests_with_keys_and_sends_nothing(self):
        write_events(self.events, 3)
        code, out, err = self.replay("http://127.0.0.1:9/x", ["--dry-run", "--filter", "amount=1"])
        self.assertEqual(code, 0, err)
        (line,) = outcomes(out)
        self.assertEqual(line["outcome"], "dry-run")
        self.assertEqual(line["url"], "http://127.0.0.1:9/x")
        self.assertIn(["Idempotency-Key", line["key"]], line["headers"])
        self.assertEqual(summary_of(err)["filtered_out"], 2)
        self.assertFalse(os.path.exists(self.store))
        # The same key on every run: it comes from the record, not the clock.
        _, again, _ = self.replay("http://127.0.0.1:9/x", ["--dry-run", "--filter", "amount=1"])
        self.assertEqual(outcomes(again)[0]["key"], line["key"])

    def test_usage_errors_name_the_flag(self):
        for args, message in [(["--to", "ftp://x"], "--to: expected an http:// or https:// URL"),
                              (["--to", "http://x", "--backoff", "5s"], "--backoff: expected FIRST..CAP"),
                              (["--to", "http://x", "--rate", "fast"], "--rate: expected a rate"),
                              (["--to", "http://x", "--timeout", "read=1s"], "--timeout: expected connect=DUR"),
                              (["--to", "http://x", "--force", "--retry-failed"], "give one of --force")]:
            code, _, err = run(["replay", *args], stdin=b"")
            self.assertEqual(code, 2, err)
            self.assertIn(message, err)


class ResignRoundTrip(unittest.TestCase):
    def test_expired_signatures_are_refused_and_resign_makes_every_delivery_valid_again(self):
        with tempfile.TemporaryDirectory() as directory:
            from datetime import datetime, timedelta, timezone
            ten_minutes_ago = (datetime.now(timezone.utc) - timedelta(minutes=10)).strftime("%Y-%m-%dT%H:%M:%SZ")
            envelopes = signed_envelopes([{"id": f"evt_{n}", "type": "invoice.paid"} for n in range(5)],
                                         timestamp=ten_minutes_ago)
            with listening(directory, ["--verify", "stripe", "--secret", SECRET, "--tolerance", "1h"],
                           name="first.ndjson") as first:
                for envelope in envelopes:
                    status, _, _ = first.post("/hooks/stripe", envelope["body"].encode(), dict(envelope["headers"]))
                    self.assertEqual(status, 200)
                first.stop()
            store = os.path.join(directory, "ledger.db")
            with listening(directory, ["--verify", "stripe", "--secret", SECRET, "--tolerance", "5m"],
                           name="second.ndjson") as second:
                # The captured signatures are ten minutes old: refused, for good.
                code, out, err = run(["replay", "--to", second.url, "--store", store, "--key", "body.id",
                                      first.capture])
                self.assertEqual(code, 1, err)
                self.assertEqual({(o["outcome"], o["status"]) for o in outcomes(out)}, {("failed", 401)})
                code, out, err = run(["replay", "--to", second.url, "--store", store, "--key", "body.id",
                                      "--retry-failed", "--resign", "stripe", "--secret", SECRET, first.capture])
                self.assertEqual(code, 0, err)
                self.assertEqual({o["outcome"] for o in outcomes(out)}, {"completed"})
                second.stop()
            resent = [e for e in second.envelopes() if e["_idem"]["verify"]["valid"]]
            self.assertEqual(sorted(json.loads(e["body"])["id"] for e in resent), [f"evt_{n}" for n in range(5)])
            old = {dict(e["headers"])["Stripe-Signature"] for e in envelopes}
            self.assertFalse(old & {dict(e["headers"])["Stripe-Signature"] for e in resent})
            self.assertEqual({dict(e["headers"])["Idempotency-Key"] for e in resent}, {f"evt_{n}" for n in range(5)})


@unittest.skipUnless(redis_server.available(), "redis-server is not installed")
class RedisLedger(unittest.TestCase):
    def test_two_replays_sharing_a_redis_ledger_send_each_key_once(self):
        with tempfile.TemporaryDirectory() as directory, redis_server.running() as redis_url:
            events = os.path.join(directory, "events.ndjson")
            write_events(events, 200)
            with listening(directory, ["--delay", "2ms"]) as target:
                # A lease longer than the test may take: the run that meets
                # the other's keys asks again as that one finishes them, and
                # does not wait their lease out.
                processes = [subprocess.Popen([IDEM, "replay", "--to", target.url, "--store", redis_url, "--key",
                                               "id", "--concurrency", "4", "--lease", "10m", events],
                                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
                results = [p.communicate(timeout=120) for p in processes]
                target.stop()
            completed = Counter()
            for out, _ in results:
                for o in outcomes(out.decode()):
                    if o["outcome"] == "completed":
                        completed[o["key"]] += 1
            self.assertEqual(set(completed), {f"evt_{n}" for n in range(200)})
            self.assertEqual(max(completed.values()), 1)
            self.assertEqual(Counter(keys_received(target)).most_common(1)[0][1], 1)
            # A rerun against the shared ledger sends nothing.
            code, out, _ = run(["replay", "--to", target.url, "--store", redis_url, "--key", "id", events])
            self.assertEqual({o["outcome"] for o in outcomes(out)}, {"skipped"})

    def test_leases_renewed_in_redis_keep_a_slow_request_from_a_second_run(self):
        """Each request takes longer than the lease: only the renewals (the
        ledger's renew script) keep the other run from taking the keys over
        and sending them again."""
        with tempfile.TemporaryDirectory() as directory, redis_server.running() as redis_url:
            events = os.path.join(directory, "events.ndjson")
            write_events(events, 6)
            with listening(directory, ["--delay", "3s"]) as target:
                first = subprocess.Popen([IDEM, "replay", "--to", target.url, "--store", redis_url, "--key", "id",
                                          "--concurrency", "8", "--lease", "1s", "--timeout", "connect=2s,total=10s", events],
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                received_some(target, first, count=6)
                second = subprocess.Popen([IDEM, "replay", "--to", target.url, "--store", redis_url, "--key", "id",
                                           "--concurrency", "8", "--lease", "1s", "--timeout", "connect=2s,total=10s", events],
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                results = [p.communicate(timeout=120) for p in (first, second)]
                target.stop()
            for process, (_, err) in zip((first, second), results):
                self.assertEqual(process.returncode, 0, err)
            self.assertEqual(Counter(keys_received(target)), {f"evt_{n}": 1 for n in range(6)})
            self.assertEqual({o["outcome"] for o in outcomes(results[1][0].decode())}, {"skipped"})

    def test_a_batch_of_claims_is_one_script_not_one_per_key(self):
        """One claim script per key cost Redis ~20 us of CPU a record. A
        scope's entries lie in one hash: a batch of claims is one script, a
        commit's outcomes one HSET."""
        import redis_cluster
        with tempfile.TemporaryDirectory() as directory, redis_server.running() as redis_url:
            port = int(redis_url.rsplit(":", 1)[1])
            events = os.path.join(directory, "events.ndjson")
            write_events(events, 600)
            with listening(directory) as target:
                redis_cluster.cli(port, "CONFIG", "RESETSTAT")
                code, out, err = run(["replay", "--to", target.url, "--store", redis_url, "--key", "id",
                                      "--concurrency", "8", events])
                target.stop()
            self.assertEqual(code, 0, err)
            self.assertEqual(Counter(o["outcome"] for o in outcomes(out)), {"completed": 600})
            stats = redis_cluster.cli(port, "INFO", "commandstats")
            calls = {line.split(":")[0][len("cmdstat_"):]: int(line.split("calls=")[1].split(",")[0])
                     for line in stats.splitlines() if line.startswith("cmdstat_")}
            # Claims: batches of up to 256 keys, a few more as the window refills.
            self.assertLessEqual(calls.get("evalsha", 0), 30)
            self.assertEqual(redis_cluster.cli(port, "--scan", "--pattern", "idem:replay:*").split(), [])
            ledgers = redis_cluster.cli(port, "--scan", "--pattern", "idem:ledger:{*").split()
            self.assertEqual(len(ledgers), 1)
            self.assertEqual(int(redis_cluster.cli(port, "HLEN", ledgers[0])), 600)

    def test_a_ledger_the_previous_release_wrote_is_moved_and_honoured(self):
        """The previous release kept a hash per key (idem:replay:{SCOPE:KEY},
        fields state, owner, lease, attempts, status, latency, permanent,
        error, digest, head, updated). Its verdicts stand: completed and
        failed-for-good keys are skipped, a lease a dead run left is taken
        over with its attempts counted on, and the keys move to the scope's hash."""
        import redis_cluster
        with tempfile.TemporaryDirectory() as directory, redis_server.running() as redis_url:
            port = int(redis_url.rsplit(":", 1)[1])
            events = os.path.join(directory, "events.ndjson")
            write_events(events, 5)
            with listening(directory) as target:
                scope = f"replay:{target.url}"
                past = str(int((time.time() - 3600) * 1e6))

                def earlier(key, state, attempts, permanent="0", lease=past, error=""):
                    redis_cluster.cli(port, "HSET", f"idem:replay:{{{scope}:{key}}}", "state", state, "owner",
                                      "oldhost:1:1", "lease", lease, "attempts", attempts, "status", "0",
                                      "latency", "0", "permanent", permanent, "error", error, "digest", "",
                                      "head", "", "updated", past)

                earlier("evt_0", "1", "1")                                    # completed
                earlier("evt_1", "2", "1", permanent="1", error="http 422")  # failed for good
                earlier("evt_2", "0", "2")                                    # in progress, its run dead
                earlier("evt_3", "2", "1", error="timeout")                  # failed, may pass
                # evt_4: never seen
                code, out, err = run(["replay", "--to", target.url, "--store", redis_url, "--key", "id", events])
                target.stop()
            self.assertEqual(code, 0, err)
            got = {o["key"]: o for o in outcomes(out)}
            self.assertEqual({k: o["outcome"] for k, o in got.items()},
                             {"evt_0": "skipped", "evt_1": "skipped", "evt_2": "completed", "evt_3": "completed",
                              "evt_4": "completed"})
            self.assertEqual(sorted(keys_received(target)), ["evt_2", "evt_3", "evt_4"])
            # The ledger counts every send over every run: two before, one now.
            entry = redis_cluster.cli(port, "HGET", f"idem:ledger:{{{scope}}}", "evt_2").strip()
            state, _, attempts = entry.split(" ")[:3]
            self.assertEqual((state, attempts), ("1", "3"))
            self.assertEqual(redis_cluster.cli(port, "--scan", "--pattern", "idem:replay:*").split(), [])
            # A rerun: everything done; no key of the old layout is left
            # anywhere, which a marker now says, sparing later runs the scan.
            code, out, _ = run(["replay", "--to", target.url, "--store", redis_url, "--key", "id", events])
            self.assertEqual({o["outcome"] for o in outcomes(out)}, {"skipped"})
            self.assertEqual(redis_cluster.cli(port, "GET", "idem:ledger-moved:all").strip(), "1")



def received_some(target, replay, count=20, seconds=60):
    """Waits until `target` has answered `count` requests of `replay` (or it
    ended): a point mid-run on a fast build and under a sanitizer alike,
    where a fixed sleep was before the first request on a slow one."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and replay.poll() is None:
        if os.path.exists(target.capture):
            with open(target.capture, "rb") as capture:
                if capture.read().count(b"\n") >= count:
                    return
        time.sleep(0.02)


def ledger_rows(store):
    """key -> (state, attempts) from a SQLite ledger (state 0 in progress, 1 completed, 2 failed)."""
    # A busy timeout: a connection that has just gone (the test's locker, the
    # replay) may still be checkpointing the WAL, and a read then waits
    # instead of failing with "database is locked".
    result = subprocess.run(["sqlite3", "-cmd", ".timeout 5000", "-separator", " ", store,
                             "SELECT key, state, attempts FROM replay_ledger"], capture_output=True, text=True)
    assert result.returncode == 0, f"sqlite3 on {store}: {result.stderr}"
    out = result.stdout
    rows = {}
    for line in out.splitlines():
        key, state, attempts = line.rsplit(" ", 2)
        rows[key] = (int(state), int(attempts))
    return rows


class LedgerNeverLies(ReplayScratch):
    """Issue #13: a line says completed only once the ledger holds it."""


    def test_stdout_on_a_full_disk_still_leaves_the_ledger_with_what_was_sent(self):
        write_events(self.events, 400)
        with listening(self.dir) as target:
            with open("/dev/full", "w") as full:
                result = subprocess.run([IDEM, "replay", "--to", target.url, "--store", self.store, "--key", "id",
                                         "--concurrency", "4", self.events], stdout=full, stderr=subprocess.PIPE)
            self.assertEqual(result.returncode, 4, result.stderr)
            target.stop()
        rows = ledger_rows(self.store)
        answered = set(keys_received(target, status=200))
        completed = {k for k, (state, _) in rows.items() if state == 1}
        # Everything answered is recorded, but what was in flight when the write failed.
        self.assertLessEqual(len(answered - completed), 4)
        self.assertTrue(completed <= answered)

    def test_a_locked_ledger_mid_run_marks_the_lines_it_could_not_record(self):
        write_events(self.events, 3000)
        # Every attempt must keep the ledger level with stdout. Whether an
        # attempt also has lines to mark depends on where the lock falls: at
        # a claim made while nothing is in flight there is nothing pending,
        # and every printed line is rightly recorded. So the scenario runs up
        # to three times, until the lock falls with outcomes pending.
        marked = locked = False
        for attempt in range(3):
            for suffix in ("", "-wal", "-shm"):
                if os.path.exists(self.store + suffix):
                    os.remove(self.store + suffix)
            # A capture of its own per attempt: an earlier attempt's lines
            # would say "mid-run" before this replay has made its ledger, and
            # the locker would then create an empty store and lock it.
            with listening(self.dir, ["--delay", "2ms"], name=f"capture-{attempt}.ndjson") as target:
                replay = subprocess.Popen([IDEM, "replay", "--to", target.url, "--store", self.store, "--key", "id",
                                           "--concurrency", "4", "--lock-timeout", "300ms", self.events],
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                received_some(target, replay)  # mid-run, however slow the build
                locker = subprocess.Popen(["sqlite3", self.store], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL)
                # The locker waits its turn for the write lock: without a busy timeout
                # its BEGIN fails whenever the replay is mid-commit, and nothing is locked.
                locker.stdin.write(b".timeout 5000\nBEGIN IMMEDIATE;\n"
                                   b"INSERT INTO replay_ledger SELECT * FROM replay_ledger WHERE 0;\n")
                locker.stdin.flush()
                out, err = replay.communicate(timeout=120)
                locker.stdin.write(b"ROLLBACK;\n")
                locker.stdin.close()
                locker.wait()
                target.stop()
            lines = outcomes(out)
            rows = ledger_rows(self.store)
            if replay.returncode == 0:
                continue  # the run ended before the lock was taken
            locked = True
            self.assertEqual(replay.returncode, 4, err)
            for line in lines:
                if line["outcome"] != "completed":
                    continue
                self.assertEqual(rows[line["key"]][0], 1, line)
            for line in lines:
                if line.get("recorded") is False:
                    self.assertEqual(line["outcome"], "unrecorded", line)  # never "completed"
            if any(line.get("recorded") is False for line in lines):
                marked = True
                break
        if not locked:
            self.skipTest("every run ended before the lock was taken")
        self.assertTrue(marked, "in three runs the lock never fell with outcomes pending")

    def test_attempts_count_every_send_across_a_kill(self):
        write_events(self.events, 40)
        with listening(self.dir, ["--delay", "400ms"]) as target:
            process = subprocess.Popen([IDEM, "replay", "--to", target.url, "--store", self.store, "--key", "id",
                                        "--concurrency", "4", "--lease", "1s", self.events],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            # Killed once four requests are in flight, none answered yet. A
            # fixed sleep was too short under AddressSanitizer on a busy CI
            # machine: the kill came before the first send, and nothing was
            # sent twice. The listener writes each request to its capture
            # before its 400 ms delay, so four lines there mean four sent.
            deadline = time.monotonic() + 30
            while len(target.envelopes()) < 4 and process.poll() is None and time.monotonic() < deadline:
                time.sleep(0.01)
            self.assertEqual(len(target.envelopes()), 4, "four requests should be in flight")
            process.send_signal(signal.SIGKILL)
            err = process.communicate()[1].decode()
            self.assertEqual(process.returncode, -signal.SIGKILL, err)
            # Their 1 s leases run out: the rerun's clock is two seconds on
            # (IDEM_NOW), no sleep.
            code, out, err = run(["replay", "--to", target.url, "--store", self.store, "--key", "id",
                                  "--concurrency", "8", "--backoff", "10ms..50ms", self.events],
                                 env={"IDEM_NOW": "+2s"})
            self.assertEqual(code, 0, err)
            target.stop()
        sent = Counter(keys_received(target))
        rows = ledger_rows(self.store)
        twice = [key for key, count in sent.items() if count == 2]
        self.assertTrue(twice, sent)
        for key in twice:
            self.assertEqual(rows[key][1], 2, key)
        for key, count in sent.items():
            self.assertEqual(rows[key], (1, count), key)

    @unittest.skipUnless(redis_server.available(), "redis-server is not installed")
    def test_a_redis_ledger_killed_mid_run_holds_every_line_that_says_completed(self):
        port = redis_server.free_port()
        write_events(self.events, 3000)
        with tempfile.TemporaryDirectory() as data:
            # Every write on disk before it is answered, so the ledger survives the kill.
            persistent = ("--appendonly", "yes", "--appendfsync", "always")
            server = redis_server.start(port, data, *persistent)
            try:
                with listening(self.dir, ["--delay", "2ms"]) as target:
                    replay = subprocess.Popen([IDEM, "replay", "--to", target.url, "--store",
                                               f"redis://127.0.0.1:{port}", "--key", "id", "--concurrency", "4",
                                               "--store-timeout", "300ms", self.events],
                                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                    received_some(target, replay)  # mid-run, however slow the build
                    server.kill()
                    server.wait()
                    out, err = replay.communicate(timeout=120)
                    target.stop()
                server = redis_server.start(port, data, *persistent)
                if replay.returncode == 0:
                    self.skipTest("the run ended before Redis was killed")
                self.assertEqual(replay.returncode, 4, err)
                lines = outcomes(out)
                scope = f"replay:{target.url}"
                printed = [line for line in lines if line["outcome"] == "completed"]
                self.assertTrue(printed)
                for line in printed:
                    entry = subprocess.run(["redis-cli", "-p", str(port), "HGET", f"idem:ledger:{{{scope}}}",
                                            line["key"]], capture_output=True, text=True).stdout.strip()
                    self.assertEqual(entry.split(" ")[0], "1", line)  # completed in the ledger
            finally:
                redis_server.stop(server)


class LedgerThroughARedisRestart(ReplayScratch):
    """Redis killed at random points of many runs, started again while the
    run goes on or only after it gave up (--store-timeout): no key a line
    said completed is ever sent again by a rerun."""

    def test_no_key_printed_completed_is_sent_again_after_redis_restarts(self):
        import random
        rng = random.Random(7)
        persistent = ("--appendonly", "yes", "--appendfsync", "always")
        resent_total = 0
        for attempt in range(int(os.environ.get("ATTEMPTS", "4"))):
            port = redis_server.free_port()
            write_events(self.events, 1500)
            with tempfile.TemporaryDirectory() as data, tempfile.TemporaryDirectory() as capture_dir:
                server = redis_server.start(port, data, *persistent)
                try:
                    with listening(capture_dir, ["--delay", "1ms"]) as target:
                        store = f"redis://127.0.0.1:{port}"
                        gives_up = attempt % 2 == 1
                        timeout = ["--store-timeout", "300ms"] if gives_up else []
                        replay = subprocess.Popen([IDEM, "replay", "--to", target.url, "--store", store, "--key", "id",
                                                   "--concurrency", "4", *timeout, self.events],
                                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                        time.sleep(rng.uniform(0.1, 0.8))
                        server.kill()
                        server.wait()
                        if gives_up:
                            out, err = replay.communicate(timeout=120)
                        time.sleep(rng.uniform(0.05, 0.4))
                        server = redis_server.start(port, data, *persistent)
                        if not gives_up:
                            out, err = replay.communicate(timeout=120)
                        first = Counter(keys_received(target))
                        printed = {o["key"] for o in outcomes(out) if o["outcome"] == "completed"}
                        # The dead run's keys are taken over once their lease
                        # ends: the clock is moved past it, not waited for.
                        code, _, err2 = run(["replay", "--to", target.url, "--store", store, "--key", "id",
                                             self.events], env={"IDEM_NOW": "+1m"})
                        self.assertIn(code, (0, 1), err2)
                        target.stop()
                    again = Counter(keys_received(target)) - first
                    resent_total += len(printed & set(again))
                finally:
                    redis_server.stop(server)
        self.assertEqual(resent_total, 0)


if __name__ == "__main__":
    unittest.main()
