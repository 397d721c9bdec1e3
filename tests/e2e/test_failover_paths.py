"""End-to-end tests of every path but dedup that claims or checkpoints in
a Redis Cluster, through a failover (docs/stores.md, "Exactly once
through a failover"): verify --nonce, replay's ledger, listen --dedup,
merge's and states' checkpoints, each with a master SIGKILLed mid-run.
Apart from test_failover.py (dedup's) so that ctest runs them side by
side: both mostly wait for failovers."""
import json
import os
import random
import subprocess
import tempfile
import threading
import time
import unittest
from collections import Counter

import redis_cluster
from harness import IDEM, run
from listener import listening
from test_stores import write_events


def failover_rounds(rounds):
    """(round number, cluster, directory) for `rounds` rounds (one under a
    sanitizer), each on a 3 + 3 cluster of its own and a scratch directory."""
    for round_number in range(1 if os.environ.get("IDEM_SANITIZED") == "1" else rounds):
        with redis_cluster.running(masters=3, replicas=1, node_timeout_ms=3000) as cluster, \
                tempfile.TemporaryDirectory() as tmp:
            yield round_number, cluster, tmp


def through_a_kill(test, cluster, args, victim, delay, capture_stdout=False):
    """Runs `args`, SIGKILLs the master `victim` `delay` seconds after the
    run's first write reached the cluster (so the kill lands mid-run
    however fast or loaded the machine is), and runs `args` again (up to
    three times) while it exits 4, once the replica has taken over.
    Returns the exit codes, the last run's stdout (with `capture_stdout`)
    and whether the first run was still going when the master died."""
    stdout = subprocess.PIPE if capture_stdout else subprocess.DEVNULL
    process = subprocess.Popen(args, stdout=stdout, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while process.poll() is None and time.monotonic() < deadline and \
            not any(int(redis_cluster.cli(port, "dbsize").strip() or 0) for port in cluster.masters()):
        time.sleep(0.005)
    time.sleep(delay)
    running = process.poll() is None
    cluster.kill(victim)
    out, err = process.communicate(timeout=300)
    codes = [process.returncode]
    test.assertIn(codes[0], (0, 4), err.decode()[-2000:])
    cluster.wait_failover(victim)
    for _ in range(3):
        if codes[-1] == 0:
            break
        again = subprocess.run(args, stdout=stdout, stderr=subprocess.PIPE, timeout=300)
        codes.append(again.returncode)
        out, err = again.stdout, again.stderr
    test.assertEqual(codes[-1], 0, f"{codes}: {err.decode()[-2000:]}")
    return codes, out, running



@unittest.skipUnless(redis_cluster.available(), "redis-server and redis-cli are needed")
class NonceThroughAFailover(unittest.TestCase):
    """verify --nonce on a Redis Cluster whose master is SIGKILLed mid-run:
    every delivery's first copy is valid and its redelivery half an hour
    later a replay, in the run that finishes (a rerun after exit 4 judges
    the file again: a record is never a replay of itself). On the build
    before the fixes a redelivery was judged fresh ('c1-1' valid in 2 of 6
    runs; 1,340 redeliveries in one round of a loop): the first copies'
    claims went unwaited, CLUSTER SLOTS listing no replica yet on a cluster
    made a moment before (see test_failover.py,
    ReplicasClusterSlotsLeavesOut), and were lost with the master."""

    def test_no_replay_judged_fresh_and_no_delivery_judged_a_replay(self):
        import hashlib
        import hmac
        rng = random.Random(17)
        for round_number, cluster, tmp in failover_rounds(4):
            capture = os.path.join(tmp, "capture.ndjson")
            count = 20000
            with open(capture, "w") as f:
                for copy, at in ((0, "08:00:00"), (1, "08:30:00")):
                    for n in range(count):
                        body = json.dumps({"action": "completed", "n": n, "pad": "x" * 200})
                        mac = hmac.new(b"gh-demo-secret", body.encode(), hashlib.sha256).hexdigest()
                        f.write(json.dumps({"idem": 1, "id": f"c{copy}-{n}",
                                            "received_at": f"2026-11-30T{at}Z", "method": "POST",
                                            "path": "/h", "headers": [["X-GitHub-Delivery", f"d-{n}"],
                                                                      ["X-Hub-Signature-256", "sha256=" + mac]],
                                            "body": body}) + "\n")
            args = [IDEM, "verify", "--scheme", "github", "--secret", "gh-demo-secret", "--nonce",
                    "--no-fail", "-q", "--store", cluster.uri(3), capture]
            delay = rng.uniform(0.0, 0.15)
            victim = cluster.masters()[rng.randrange(3)]
            _, out, running = through_a_kill(self, cluster, args, victim, delay, capture_stdout=True)
            self.assertTrue(running, f"round {round_number}: the run ended before the kill")
            verdicts = [json.loads(line) for line in out.splitlines()]
            self.assertEqual(len(verdicts), 2 * count)
            for record in verdicts:
                verdict = record["_idem"]["verify"]
                first = record["id"].startswith("c0-")
                self.assertEqual(verdict["valid"], first, f"round {round_number}: {record['id']}: {verdict}")


@unittest.skipUnless(redis_cluster.available(), "redis-server and redis-cli are needed")
class ReplayThroughAFailover(unittest.TestCase):
    """replay with its ledger on a Redis Cluster whose master is SIGKILLed
    mid-run, reruns after exit 4: every key reaches the target, none twice
    (a key is claimed, committed on a replica, before it is sent)."""

    def test_no_key_is_sent_twice_and_none_is_lost(self):
        rng = random.Random(23)
        for round_number, cluster, tmp in failover_rounds(2):
            events = os.path.join(tmp, "events.ndjson")
            write_events(events, 1500, 1500, seed=round_number)
            with open(events) as f:
                expected = {json.loads(line)["id"] for line in f}
            with listening(tmp) as target:
                args = [IDEM, "replay", "--to", target.url, "--key", "id", "--store", cluster.uri(3),
                        "--scope", "failover", "--rate", "1000/s", "--lease", "2s", "--backoff", "10ms..50ms",
                        "--store-timeout", "20s", events]
                delay = rng.uniform(0.1, 0.6)
                # The master of the ledger's slot (a scope's ledger is one hash).
                victim = cluster.owner_of("idem:ledger:{failover}")
                self.assertIsNotNone(victim)
                codes, _, _ = through_a_kill(self, cluster, args, victim, delay)
                target.stop()
            received = Counter(json.loads(e["body"])["id"] for e in target.envelopes())
            twice = {k: n for k, n in received.items() if n > 1}
            self.assertEqual(twice, {}, f"round {round_number}: codes {codes}")
            self.assertEqual(set(received), expected, f"round {round_number}: codes {codes}")


@unittest.skipUnless(redis_cluster.available(), "redis-server and redis-cli are needed")
class ListenDedupThroughAFailover(unittest.TestCase):
    """listen --dedup --forward-to on a Redis Cluster whose master is
    SIGKILLed while a sender posts each event twice (a delivery and its
    retry), retrying whatever is not answered 2xx (the 503 a failing store
    gets): the upstream receives every event, none twice."""

    def test_no_delivery_is_answered_as_a_first_copy_twice(self):
        import http.client
        rng = random.Random(29)
        for round_number, cluster, tmp in failover_rounds(2):
            with tempfile.TemporaryDirectory() as front_dir, \
                    listening(tmp, name="upstream.ndjson") as upstream, \
                    listening(front_dir, ["--dedup", "--key", "body.id", "--store", cluster.uri(3),
                                          "--store-timeout", "20s", "--forward-to", upstream.url]) as front:
                ids = [f"evt_{round_number}_{n}" for n in range(1000)]
                posts = [i for i in ids for _ in range(2)]
                statuses = Counter()
                killed_at = []

                def kill():
                    cluster.kill(cluster.masters()[rng.randrange(3)])
                    killed_at.append(time.monotonic())
                killer = threading.Timer(rng.uniform(0.3, 1.0), kill)
                killer.start()
                connection = http.client.HTTPConnection("127.0.0.1", front.port, timeout=30)
                try:
                    for event_id in posts:
                        body = json.dumps({"id": event_id})
                        for _ in range(200):  # a sender retries until it is taken
                            try:
                                connection.request("POST", "/hooks", body=body,
                                                   headers={"Content-Type": "application/json"})
                                response = connection.getresponse()
                                response.read()
                            except (OSError, http.client.HTTPException):
                                connection.close()
                                connection = http.client.HTTPConnection("127.0.0.1", front.port, timeout=30)
                                time.sleep(0.05)
                                continue
                            statuses[response.status] += 1
                            if 200 <= response.status < 300:
                                break
                            time.sleep(0.05)
                        else:
                            self.fail(f"round {round_number}: {event_id} never taken: {statuses}")
                finally:
                    posted_at = time.monotonic()
                    killer.join()
                    connection.close()
                # The master died while the sender was posting.
                self.assertLess(killed_at[0], posted_at, f"round {round_number}")
                upstream.stop()
                received = Counter(json.loads(e["body"])["id"] for e in upstream.envelopes())
                twice = {k: n for k, n in received.items() if n > 1}
                self.assertEqual(twice, {}, f"round {round_number}: answers {statuses}")
                self.assertEqual(set(received), set(ids), f"round {round_number}: answers {statuses}")


@unittest.skipUnless(redis_cluster.available(), "redis-server and redis-cli are needed")
class CheckpointsThroughAFailover(unittest.TestCase):
    """merge and states keep their open windows and entities in a Redis
    Cluster store and checkpoint with each batch; a master SIGKILLed
    mid-run, the run rerun until it finishes: the outputs are those of one
    run that met no failover (nothing twice, nothing lost)."""

    def through_failover(self, args, outputs, source, seed):
        rng = random.Random(seed)
        with tempfile.TemporaryDirectory() as tmp:
            events = os.path.join(tmp, "events.ndjson")
            with open(events, "w") as f:
                f.write(source)

            def flags(prefix):
                return [a for flag, name in outputs.items() for a in (flag, os.path.join(tmp, f"{prefix}.{name}"))]

            code, _, err = run(args + ["--store", ":memory:"] + flags("clean") + [events])
            self.assertEqual(code, 0, err)
            with redis_cluster.running(masters=3, replicas=1, node_timeout_ms=3000) as cluster:
                command = [IDEM] + args + ["--store", cluster.uri(3), "--store-timeout", "20s"] + \
                    flags("failover") + [events]
                victim = cluster.masters()[rng.randrange(3)]
                codes, _, running = through_a_kill(self, cluster, command, victim, rng.uniform(0.0, 0.15))
            self.assertTrue(running, "the run ended before the master was killed: a longer input is needed")
            for name in outputs.values():
                with open(os.path.join(tmp, f"clean.{name}"), "rb") as clean, \
                        open(os.path.join(tmp, f"failover.{name}"), "rb") as failover:
                    self.assertEqual(failover.read(), clean.read(), f"{name} after {codes}")

    def test_merge(self):
        from test_merge import SEED_RULES, seed_stream
        with tempfile.TemporaryDirectory() as rules_dir:
            rules = os.path.join(rules_dir, "merge.yaml")
            with open(rules, "w") as f:
                f.write(SEED_RULES)
            count = 20000 if os.environ.get("IDEM_SANITIZED") == "1" else 150000
            self.through_failover(
                ["merge", "--rules", rules, "--time-field", "ts", "--max-lateness", "15s", "-q", "--threads", "1",
                 "--batch", "500", "--bypass", "priority=critical"],
                {"-o": "out.ndjson", "--members": "members.ndjson", "--late": "late.ndjson"},
                "".join(json.dumps(e) + "\n" for e in seed_stream(count=count, seed=9, disorder=25)), seed=31)

    def test_states(self):
        from test_states import MACHINE, order_streams
        with tempfile.TemporaryDirectory() as machine_dir:
            machine = os.path.join(machine_dir, "orders.yaml")
            with open(machine, "w") as f:
                f.write(MACHINE)
            entities = 20000 if os.environ.get("IDEM_SANITIZED") == "1" else 100000
            self.through_failover(
                ["states", "--entity", "order_id", "--state", "status", "--event", "op", "--version-field",
                 "version", "--max-lateness", "30s", "--time-field", "ts", "--stuck-after", "1h", "--machine",
                 machine, "-q", "--threads", "1", "--batch", "300", "--fail-on", "none"],
                {"-o": "out.ndjson", "--invalid": "invalid.ndjson"},
                "".join(json.dumps(e) + "\n" for e in order_streams(entities=entities, seed=21)), seed=37)
