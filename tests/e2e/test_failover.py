"""End-to-end tests of exactly once through a Redis Cluster failover
(docs/stores.md, "Exactly once through a failover"): a master SIGKILLed
mid-run under dedup, its claims on a replica before they count, the
held-out check's rounds of kills (bench/failover_soak.py), and verify
--nonce through a failover. Apart from test_stores.py so that ctest runs
the two side by side: these mostly wait for failovers."""
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from collections import Counter

import redis_cluster
import redis_server
from harness import IDEM, run
from listener import listening
from test_stores import github_delivery, ids, write_events

@unittest.skipUnless(redis_cluster.available(), "redis-server and redis-cli are needed")
class Failover(unittest.TestCase):
    def test_a_master_killed_mid_run_then_a_rerun_emit_every_key_exactly_once(self):
        with redis_cluster.running(masters=3, replicas=1) as cluster, tempfile.TemporaryDirectory() as tmp:
            events = os.path.join(tmp, "events.ndjson")
            write_events(events, 60000, 20000)
            output = os.path.join(tmp, "out.ndjson")
            args = [IDEM, "dedup", "--key", "id", "--store", cluster.uri(3), "--batch", "500", "-o", output,
                    events]
            process = subprocess.Popen(args, stderr=subprocess.PIPE)
            time.sleep(0.3)
            victim = cluster.masters()[0]
            cluster.kill(victim)
            _, err = process.communicate(timeout=180)
            # Either the run rode out the failover, or it stopped with 4 and
            # nothing emitted that was not claimed.
            self.assertIn(process.returncode, (0, 4), err.decode())
            cluster.wait_failover(victim)
            for _ in range(3):
                if process.returncode == 0:
                    break
                process = subprocess.Popen(args, stderr=subprocess.PIPE)
                _, err = process.communicate(timeout=180)
            self.assertEqual(process.returncode, 0, err.decode())
            with open(output) as f:
                emitted = ids(f.read())
            with open(events) as f:
                expected = {json.loads(line)["id"] for line in f}
            self.assertEqual(Counter(emitted).most_common(1)[0][1], 1)
            self.assertEqual(set(emitted), expected)


    def test_four_dedups_through_a_failover_at_random_points_emit_no_key_twice(self):
        # The incident: four processes on a 3 + 3 cluster, a master SIGKILLed
        # mid-run. A process rides the failover out (exit 0) or stops with
        # 4 before writing out what no replica held; a rerun of those that
        # stopped finishes. No key is written out twice, none never.
        rng = random.Random(5)
        rounds = 1 if os.environ.get("IDEM_SANITIZED") == "1" else 3
        for round_number in range(rounds):
            with redis_cluster.running(masters=3, replicas=1) as cluster, tempfile.TemporaryDirectory() as tmp:
                parts = []
                for p in range(4):
                    path = os.path.join(tmp, f"part{p}.ndjson")
                    with open(path, "w") as out:
                        for n in range(30000):
                            out.write(json.dumps({"id": f"evt_{(n * 4 + p) % 60000}", "n": n}) + "\n")
                    parts.append(path)
                scope = f"failover{round_number}"

                # Each writes -o FILE: a run that stopped is resumed exactly
                # (stdout would be at-least-once for its last batch).
                def start(path):
                    return subprocess.Popen([IDEM, "dedup", "--key", "id", "--store", cluster.uri(3), "--scope",
                                             scope, "--batch", "500", "-o", path + ".out", path],
                                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

                processes = [start(path) for path in parts]
                time.sleep(rng.uniform(0.05, 0.6))
                victim = cluster.masters()[rng.randrange(3)]
                cluster.kill(victim)
                errors = [p.communicate(timeout=180)[1] for p in processes]
                codes = [p.returncode for p in processes]
                for code, err in zip(codes, errors):
                    self.assertIn(code, (0, 4), err.decode())
                cluster.wait_failover(victim)
                emitted = []
                for path, code, err in zip(parts, codes, errors):
                    for _ in range(3):
                        if code == 0:
                            break
                        again = start(path)
                        err = again.communicate(timeout=180)[1]
                        code = again.returncode
                    self.assertEqual(code, 0, err.decode())
                    with open(path + ".out") as f:
                        emitted += ids(f.read())
                counts = Counter(emitted)
                self.assertEqual(set(counts), {f"evt_{n}" for n in range(60000)})
                self.assertEqual(counts.most_common(1)[0][1], 1, f"round {round_number}: codes {codes}")


@unittest.skipUnless(redis_cluster.available(), "redis-server and redis-cli are needed")
class HeldOutFailoverCheck(unittest.TestCase):
    """docs/stores.md, "Exactly once through a failover": the held-out
    check, as bench/failover_soak.py runs it. Four dedups over random halves
    of one log (keys repeat within a run and across runs), stdout or -o, a
    random --batch, a master SIGKILLed at a random moment, a failover that
    outlasts the heartbeat's life (a 5 s node timeout), the runs that
    stopped run again: every key comes out exactly once. Twenty rounds (two
    at a time, each on its own cluster: a round mostly waits for its
    failover), four under a sanitizer. On the build before the fixes
    (1a6295d) ten such rounds failed six times (155 to 3,922 keys twice,
    four of them with every run exiting 0): a run whose heartbeat's master
    failed over was taken for dead and its written-out batch emitted again,
    and a retried pipeline read another node's stale replies as its own."""

    def test_rounds_of_kills_emit_every_key_exactly_once(self):
        rounds = 4 if os.environ.get("IDEM_SANITIZED") == "1" else 20
        soak = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "failover_soak.py")
        result = subprocess.run([sys.executable, soak, IDEM, "--rounds", str(rounds), "--parallel", "2",
                                 "--events", "60000", "--pad", "300", "--kill-after", "0.1,0.6",
                                 "--node-timeout", "5000", "--seed", "2026"],
                                capture_output=True, text=True, timeout=1800)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn(f"{rounds} passed, 0 failed", result.stdout)


@unittest.skipUnless(redis_cluster.available(), "redis-server and redis-cli are needed")
class NonceThroughAFailover(unittest.TestCase):
    """verify --nonce on a Redis Cluster whose master is SIGKILLed mid-run:
    every delivery's first copy is valid and its redelivery half an hour
    later a replay, in the run that finishes (a rerun after exit 4 judges
    the file again: a record is never a replay of itself). Both copies of
    a delivery are claimed in one batch: on the build before the fix a
    failover's CLUSTERDOWN had the first copy's claim sent again after the
    redelivery's, which met an empty key and was judged fresh ('c1-1'
    valid in 2 of 6 runs, 'c1-0' in the second of six rounds, on this
    machine; none in six rounds after it)."""

    def test_no_replay_judged_fresh_and_no_delivery_judged_a_replay(self):
        import hashlib
        import hmac
        rng = random.Random(17)
        rounds = 1 if os.environ.get("IDEM_SANITIZED") == "1" else 4
        for round_number in range(rounds):
            with redis_cluster.running(masters=3, replicas=1, node_timeout_ms=3000) as cluster, \
                    tempfile.TemporaryDirectory() as tmp:
                capture = os.path.join(tmp, "capture.ndjson")
                count = 6000
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
                process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                time.sleep(rng.uniform(0.1, 0.5))
                victim = cluster.masters()[rng.randrange(3)]
                cluster.kill(victim)
                out, err = process.communicate(timeout=300)
                self.assertIn(process.returncode, (0, 4), err.decode())
                for _ in range(3):
                    if process.returncode == 0:
                        break
                    cluster.wait_failover(victim)
                    process = subprocess.run(args, capture_output=True, timeout=300)
                    out, err = process.stdout, process.stderr
                self.assertEqual(process.returncode, 0, err.decode())
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
        rounds = 1 if os.environ.get("IDEM_SANITIZED") == "1" else 2
        for round_number in range(rounds):
            with redis_cluster.running(masters=3, replicas=1, node_timeout_ms=3000) as cluster, \
                    tempfile.TemporaryDirectory() as tmp:
                events = os.path.join(tmp, "events.ndjson")
                write_events(events, 1500, 1500, seed=round_number)
                with open(events) as f:
                    expected = {json.loads(line)["id"] for line in f}
                with listening(tmp) as target:
                    args = [IDEM, "replay", "--to", target.url, "--key", "id", "--store", cluster.uri(3),
                            "--scope", "failover", "--rate", "1000/s", "--lease", "2s", "--backoff", "10ms..50ms",
                            "--store-timeout", "20s", events]
                    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                    time.sleep(rng.uniform(0.3, 1.0))
                    # The master of the ledger's slot (a scope's ledger is one hash).
                    victim = cluster.owner_of("idem:ledger:{failover}")
                    self.assertIsNotNone(victim)
                    cluster.kill(victim)
                    _, err = process.communicate(timeout=300)
                    codes = [process.returncode]
                    cluster.wait_failover(victim)
                    for _ in range(3):
                        if codes[-1] == 0:
                            break
                        again = subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                               timeout=300)
                        codes.append(again.returncode)
                        err = again.stderr
                    self.assertEqual(codes[-1], 0, f"round {round_number}: {codes}: {err.decode()[-2000:]}")
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
        rounds = 1 if os.environ.get("IDEM_SANITIZED") == "1" else 2
        for round_number in range(rounds):
            with redis_cluster.running(masters=3, replicas=1, node_timeout_ms=3000) as cluster, \
                    tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory() as front_dir, \
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
                process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                time.sleep(rng.uniform(0.2, 0.6))
                running = process.poll() is None
                victim = cluster.masters()[rng.randrange(3)]
                cluster.kill(victim)
                _, err = process.communicate(timeout=300)
                codes = [process.returncode]
                cluster.wait_failover(victim)
                for _ in range(3):
                    if codes[-1] == 0:
                        break
                    again = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=300)
                    codes.append(again.returncode)
                    err = again.stderr
                self.assertEqual(codes[-1], 0, f"{codes}: {err.decode()[-2000:]}")
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


@unittest.skipUnless(redis_cluster.available(), "redis-server and redis-cli are needed")
class ReplicatedClaims(unittest.TestCase):
    """A master acknowledges a write before its replica has it: dedup's claims
    wait (WAIT 1) until a replica has them before their records are written
    out, so a failover right after cannot lose a claim already acted on."""

    def test_claims_reach_the_replica_before_the_run_goes_on_and_none_counts_without_it(self):
        with tempfile.TemporaryDirectory() as tmp:
            master_port, replica_port = redis_server.free_port(), redis_server.free_port()
            master = redis_server.start(master_port, tmp)
            replica = redis_server.start(replica_port, tmp, "--dbfilename", "replica.rdb",
                                         "--replicaof", "127.0.0.1", str(master_port))
            try:
                # Online as its master sees it (ROLE lists only those), which
                # comes a moment after the replica says its link is up.
                deadline = time.time() + 20
                while str(replica_port) not in redis_cluster.cli(master_port, "role"):
                    self.assertLess(time.time(), deadline, "the replica never came online")
                    time.sleep(0.1)
                store = f"redis://127.0.0.1:{master_port}"
                events = "".join(json.dumps({"id": k}) + "\n" for k in ("a", "b", "a", "c"))
                code, out, err = run(["dedup", "--key", "id", "--store", store], stdin=events.encode())
                self.assertEqual(code, 0, err)
                self.assertEqual(ids(out.decode()), ["a", "b", "c"])
                stats = redis_cluster.cli(master_port, "info", "commandstats")
                self.assertIn("cmdstat_wait:calls=", stats)
                # The replica holds every claim the moment the run is done.
                claims = redis_cluster.cli(replica_port, "--scan", "--pattern", "idem:fp:*").split()
                self.assertEqual(len(claims), 3)
                # verify --nonce likewise: a nonce lost in a failover would let
                # the same delivery pass twice.
                redis_cluster.cli(master_port, "config", "resetstat")
                capture = os.path.join(tmp, "capture.ndjson")
                with open(capture, "w") as f:
                    f.write(github_delivery("2026-11-30T08:00:00Z") + "\n")
                code, _, err = run(["verify", "--secret", "gh-demo-secret", "--nonce", "--store", store, capture])
                self.assertEqual(code, 0, err)
                self.assertIn("cmdstat_wait:calls=", redis_cluster.cli(master_port, "info", "commandstats"))
                # A replica that stops answering (connected, acknowledging
                # nothing): a claim no replica holds does not count, so the
                # batch fails, exit 4, with nothing of it written out.
                os.kill(replica.pid, 19)  # SIGSTOP
                try:
                    started = time.time()
                    code, out, err = run(["dedup", "--key", "id", "--store", store],
                                         stdin=b'{"id":"d"}\n{"id":"a"}\n')
                    self.assertEqual(code, 4, err)
                    self.assertEqual(out, b"")
                    self.assertIn("no replica of", err)
                    self.assertLess(time.time() - started, 15)
                finally:
                    os.kill(replica.pid, 18)  # SIGCONT
            finally:
                redis_server.stop(replica)
                redis_server.stop(master)
