"""End-to-end tests of the stores against real servers: a Redis Cluster of
local nodes (routing, four processes, slot migration), several
seeds, and credentials from the environment (issue #13)."""
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
import redis_server
from listener import listening
from harness import IDEM, run


def write_events(path, count, distinct, seed=7):
    rng = random.Random(seed)
    with open(path, "w") as out:
        for n in range(count):
            out.write(json.dumps({"id": f"evt_{rng.randrange(distinct)}", "n": n}) + "\n")


def ids(output):
    return [json.loads(line)["id"] for line in output.splitlines()]


def dbsize(port):
    return int(redis_cluster.cli(port, "dbsize").strip() or 0)


@unittest.skipUnless(redis_cluster.available(), "redis-server and redis-cli are needed")
class Cluster(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.context = redis_cluster.running(masters=3)
        cls.cluster = cls.context.__enter__()

    @classmethod
    def tearDownClass(cls):
        cls.context.__exit__(None, None, None)

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def scope(self):
        return f"t{random.randrange(1 << 30)}"

    def test_dedup_routes_every_key_to_its_slot_and_a_rerun_knows_them(self):
        events = os.path.join(self.dir, "events.ndjson")
        write_events(events, 3000, 1000)
        scope = self.scope()
        code, out, err = run(["dedup", "--key", "id", "--store", self.cluster.uri(), "--scope", scope, events])
        self.assertEqual(code, 0, err)
        self.assertEqual(sorted(ids(out)), sorted(set(ids(out))))
        self.assertEqual(len(set(ids(out))), len(ids(out)))
        with open(events) as f:
            self.assertEqual(set(ids(out)), {json.loads(line)["id"] for line in f})
        for port in self.cluster.masters():
            self.assertGreater(dbsize(port), 0, f"no key on master {port}")
        code, again, err = run(["dedup", "--key", "id", "--store", self.cluster.uri(), "--scope", scope, events])
        self.assertEqual((code, again), (0, b""), err)
        self.assertIn("first seen by an earlier run", err)
        # audit reads the evidence back from every master: each event's
        # first copy, its first 16 repeats and its latest (docs/dedup.md).
        with open(events) as f:
            copies = Counter(json.loads(line)["id"] for line in f)
        kept = sum(min(2 * n, 18) for n in copies.values())
        code, out, err = run(["audit", "--store", self.cluster.uri(), "--scope", scope, "--format", "json"])
        self.assertEqual(code, 1, err)  # findings: exit 1
        self.assertEqual(json.loads(out)["summary"]["records"], kept)
        if kept < 6000:
            self.assertIn(f"{6000 - kept} more copies of", err)

    def test_four_processes_over_one_input_split_four_ways_emit_every_key_once(self):
        scope = self.scope()
        parts = []
        for part in range(4):
            path = os.path.join(self.dir, f"part{part}.ndjson")
            write_events(path, 5000, 4000, seed=part)
            parts.append(path)
        processes = [subprocess.Popen([IDEM, "dedup", "--key", "id", "--store", self.cluster.uri(),
                                       "--scope", scope, "--batch", "500", path],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE) for path in parts]
        outputs = [p.communicate(timeout=120) for p in processes]
        for process, (_, err) in zip(processes, outputs):
            self.assertEqual(process.returncode, 0, err.decode())
        emitted = Counter(i for out, _ in outputs for i in ids(out))
        expected = set()
        for path in parts:
            with open(path) as f:
                expected |= {json.loads(line)["id"] for line in f}
        self.assertEqual(set(emitted), expected)
        self.assertEqual(max(emitted.values()), 1)

    def test_several_seeds_and_a_dead_first_seed(self):
        events = os.path.join(self.dir, "events.ndjson")
        write_events(events, 200, 50)
        dead = redis_cluster.free_port()
        uri = f"redis://127.0.0.1:{dead}," + self.cluster.uri()[len("redis://"):]
        code, out, err = run(["dedup", "--key", "id", "--store", uri, "--scope", self.scope(), events])
        self.assertEqual(code, 0, err)
        self.assertEqual(len(ids(out)), 50)
        code, _, err = run(["dedup", "--key", "id", "--store", self.cluster.uri() + "/2", events])
        self.assertEqual(code, 4)
        self.assertIn("only database 0", err)

    def test_reorder_verify_nonce_and_replay_work_on_the_cluster(self):
        uri = self.cluster.uri()
        scope = self.scope()
        first = b'{"seq":1}\n{"seq":3}\n'
        code, out, err = run(["reorder", "--seq", "seq", "--start", "1", "--hold", "--store", uri,
                              "--scope", scope], stdin=first)
        self.assertEqual((code, out), (0, b'{"seq":1}\n'), err)
        code, out, err = run(["reorder", "--seq", "seq", "--store", uri, "--scope", scope], stdin=b'{"seq":2}\n')
        self.assertEqual(out, b'{"seq":2}\n{"seq":3}\n', err)
        # verify --nonce: GitHub's Redeliver button, seen across two runs.
        from harness import github_envelope
        line = (github_envelope(b'{"n":1}') + "\n").encode()
        nonce_scope = ["--store", uri]
        code, out, err = run(["verify", "--secret", "gh-demo-secret", "--nonce", *nonce_scope], stdin=line)
        self.assertEqual(code, 0, err)
        # replay's ledger on the cluster: a rerun sends nothing.
        events = os.path.join(self.dir, "events.ndjson")
        write_events(events, 60, 60)
        with listening(self.dir) as target:
            code, out, err = run(["replay", "--to", target.url, "--key", "id", "--store", uri,
                                  "--scope", scope, "--backoff", "10ms..50ms", events])
            self.assertEqual(code, 0, err)
            code, out, err = run(["replay", "--to", target.url, "--key", "id", "--store", uri,
                                  "--scope", scope, events])
            self.assertEqual(code, 0, err)
            self.assertEqual(Counter(json.loads(l)["outcome"] for l in out.splitlines()), {"skipped": 60})
            target.stop()
        with open(events) as f:
            distinct = {json.loads(line)["id"] for line in f}
        self.assertEqual(len(target.envelopes()), len(distinct))

    def test_a_slot_migration_mid_run_loses_and_doubles_nothing(self):
        events = os.path.join(self.dir, "events.ndjson")
        write_events(events, 60000, 20000)
        scope = self.scope()
        masters = self.cluster.masters()
        # The input arrives through a pipe over a few seconds, so that the
        # run is claiming while slots move (ASK during, MOVED after).
        process = subprocess.Popen([IDEM, "dedup", "--key", "id", "--store", self.cluster.uri(), "--scope", scope,
                                    "--batch", "200"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE)
        with open(events, "rb") as f:
            lines = f.read().splitlines(keepends=True)
        collected = {}

        def feed():
            for start in range(0, len(lines), 600):
                process.stdin.write(b"".join(lines[start:start + 600]))
                process.stdin.flush()
                time.sleep(0.03)
            process.stdin.close()

        def drain():
            collected["out"] = process.stdout.read()
            collected["err"] = process.stderr.read()

        threads = [threading.Thread(target=feed), threading.Thread(target=drain)]
        for thread in threads:
            thread.start()
        reshard = subprocess.run(["redis-cli", "--cluster", "reshard", f"127.0.0.1:{masters[0]}",
                                  "--cluster-from", self.node_id(masters[0]), "--cluster-to",
                                  self.node_id(masters[1]), "--cluster-slots", "1000", "--cluster-yes"],
                                 capture_output=True, timeout=120)
        for thread in threads:
            thread.join(timeout=180)
        process.wait(timeout=60)
        out, err = collected["out"], collected["err"]
        self.assertEqual(reshard.returncode, 0, reshard.stderr)
        self.assertEqual(process.returncode, 0, err.decode())
        emitted = ids(out)
        with open(events) as f:
            expected = {json.loads(line)["id"] for line in f}
        self.assertEqual(len(emitted), len(set(emitted)))
        self.assertEqual(set(emitted), expected)

    def node_id(self, port):
        return redis_cluster.cli(port, "cluster", "myid").strip()


@unittest.skipUnless(redis_server.available(), "redis-server is needed")
class Credentials(unittest.TestCase):
    def test_a_password_comes_from_the_environment_and_is_never_printed(self):
        password = "s3cr3t-redis-pass"
        port = redis_server.free_port()
        with tempfile.TemporaryDirectory() as directory:
            server = redis_server.start(port, directory, "--requirepass", password)
            try:
                uri = f"redis://127.0.0.1:{port}"
                stdin = b'{"id":"a"}\n{"id":"a"}\n'
                code, out, err = run(["dedup", "--key", "id", "--store", uri], stdin=stdin,
                                     env={"IDEM_REDIS_PASSWORD": password})
                self.assertEqual((code, out), (0, b'{"id":"a"}\n'), err)
                code, _, err = run(["dedup", "--key", "id", "--store", uri], stdin=stdin,
                                   env={"IDEM_REDIS_PASSWORD": "wrong-" + password})
                self.assertEqual(code, 4)
                self.assertNotIn(password, err)
                # A refusal is final: said at once, not after --store-timeout.
                self.assertIn("authentication failed", err)
                self.assertNotIn("--store-timeout", err)
                code, _, err = run(["dedup", "--key", "id", "--store", f"redis://user:{password}@127.0.0.1:{port}"],
                                   stdin=stdin)
                self.assertEqual(code, 2)
                self.assertNotIn(password, err)
            finally:
                server.terminate()
                server.wait()


if __name__ == "__main__":
    unittest.main()


def github_delivery(received_at, delivery="72d3162e-cc78-11e3-81ab-4c9367dc0958", body=b'{"zen":"Keep it logically awesome."}'):
    import hashlib
    import hmac
    mac = hmac.new(b"gh-demo-secret", body, hashlib.sha256).hexdigest()
    return json.dumps({"idem": 1, "id": f"cap_{received_at}", "received_at": received_at, "method": "POST",
                       "path": "/hooks", "headers": [["X-GitHub-Delivery", delivery],
                                                     ["X-Hub-Signature-256", "sha256=" + mac]],
                       "body": body.decode()})


@unittest.skipUnless(redis_cluster.available(), "redis-server and redis-cli are needed")
class NonceAcrossStores(unittest.TestCase):
    """Issue #13: one meaning per store. The same GitHub delivery id received at
    08:00, 08:01 and 09:00 with --tolerance 3s: the same verdicts from
    :memory:, SQLite, one Redis node and a Redis Cluster, and a rerun that
    never calls a record a replay of itself."""

    def verdicts(self, store, capture):
        code, out, err = run(["verify", "--secret", "gh-demo-secret", "--nonce", "--tolerance", "3s",
                              "--store", store, "--summary", "json", capture])
        return code, [json.loads(line)["_idem"]["verify"] for line in out.splitlines()], err

    def test_the_same_verdicts_from_every_store_and_on_a_rerun(self):
        with tempfile.TemporaryDirectory() as tmp, redis_server.running() as single, \
                redis_cluster.running(masters=3) as cluster:
            capture = os.path.join(tmp, "capture.ndjson")
            with open(capture, "w") as f:
                for at in ("2026-11-30T08:00:00Z", "2026-11-30T08:01:00Z", "2026-11-30T09:00:00Z"):
                    f.write(github_delivery(at) + "\n")
            expected = [True, False, False]
            for store in (":memory:", os.path.join(tmp, "idem.db"), single, cluster.uri()):
                code, got, err = self.verdicts(store, capture)
                self.assertEqual([v["valid"] for v in got], expected, (store, err))
                self.assertIn("already delivered at 2026-11-30T08:00:00.000Z", got[2]["reason"])
                if store == ":memory:":
                    continue
                # A rerun: the original is itself, not its own replay; the others stay replays.
                code, again, err = self.verdicts(store, capture)
                self.assertEqual([v["valid"] for v in again], expected, (store, err))
                self.assertIn("already verified in an earlier run", again[0]["reason"])
                self.assertEqual(json.loads(err.strip().splitlines()[-1])["already_verified"], 1)


class SqliteSchema(unittest.TestCase):
    def test_a_store_written_before_nonces_kept_their_record_still_opens_and_judges(self):
        with tempfile.TemporaryDirectory() as tmp:
            store = os.path.join(tmp, "idem.db")
            capture = os.path.join(tmp, "capture.ndjson")
            with open(capture, "w") as f:
                f.write(github_delivery("2026-11-30T08:00:00Z") + "\n")
            code, _, err = run(["verify", "--secret", "gh-demo-secret", "--nonce", "--store", store, capture])
            self.assertEqual(code, 0, err)
            # Make it a version-5 store, as the previous release wrote it.
            subprocess.run(["sqlite3", store, "ALTER TABLE nonces DROP COLUMN source;"
                            "ALTER TABLE nonces DROP COLUMN line; DROP TABLE dedup_held; DROP TABLE merge_windows;"
                            "DROP TABLE state_entities;"
                            "DROP TABLE fingerprint_index; DROP TABLE store_meta;"
                            "DROP TABLE fingerprint_index_delta;"
                            "DROP TABLE fingerprint_repeats;"
                            "ALTER TABLE fingerprint_log DROP COLUMN first_seq;"
                            "PRAGMA user_version = 5;"], check=True)
            with open(capture, "w") as f:
                f.write(github_delivery("2026-11-30T09:00:00Z") + "\n")
            code, out, err = run(["verify", "--secret", "gh-demo-secret", "--nonce", "--store", store, capture])
            self.assertEqual(code, 1, err)
            self.assertIn("already delivered at 2026-11-30T08:00:00.000Z", out.decode())
            version = subprocess.run(["sqlite3", store, "PRAGMA user_version"], capture_output=True, text=True)
            self.assertEqual(version.stdout.strip(), "12")


@unittest.skipUnless(redis_server.available(), "redis-server is needed")
class Reconnect(unittest.TestCase):
    """Issue #13: a Redis restart mid-run is ridden out, within --store-timeout."""

    def test_a_restarted_redis_still_loading_its_data_is_waited_for(self):
        # A restarted Redis accepts connections at once but answers LOADING
        # until its data is read back; key-load-delay makes that last a
        # second here.
        port = redis_server.free_port()
        with tempfile.TemporaryDirectory() as tmp:
            persistent = ("--appendonly", "yes")
            server = redis_server.start(port, tmp, *persistent)
            try:
                for n in range(3):
                    subprocess.run(["redis-cli", "-p", str(port), "EVAL",
                                    "for i=1,1000 do redis.call('SET', 'k' .. ARGV[1] .. i, i) end", "0", str(n)],
                                   check=True, capture_output=True)
                redis_server.stop(server)
                server = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                           "--dir", tmp, *persistent, "--key-load-delay", "1000"],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                for _ in range(100):
                    reply = subprocess.run(["redis-cli", "-p", str(port), "PING"], capture_output=True, text=True)
                    if reply.stdout.strip():
                        break
                    time.sleep(0.02)
                self.assertIn("LOADING", reply.stdout)
                code, out, err = run(["dedup", "--key", "id", "--store", f"redis://127.0.0.1:{port}",
                                      "--store-timeout", "30s"], stdin=b'{"id":1}\n{"id":1}\n')
                self.assertEqual((code, out), (0, b'{"id":1}\n'), err)
                self.assertNotIn("LOADING", err)
            finally:
                redis_server.stop(server)

    def test_a_redis_restart_mid_run_is_retried_and_every_key_emitted_once(self):
        port = redis_server.free_port()
        with tempfile.TemporaryDirectory() as tmp:
            def start_redis():
                return redis_server.start(port, tmp)


            server = start_redis()
            process = subprocess.Popen([IDEM, "dedup", "--key", "id", "--store", f"redis://127.0.0.1:{port}",
                                        "--batch", "10", "--summary", "json"],
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            try:
                process.stdin.write(b"".join(b'{"id":"a%d"}\n' % i for i in range(40)))
                process.stdin.flush()
                time.sleep(0.4)
                server.kill()
                server.wait()
                process.stdin.write(b"".join(b'{"id":"b%d"}\n' % (i % 20) for i in range(40)))
                process.stdin.flush()
                time.sleep(0.8)
                server = start_redis()  # back within the 10 s default
                process.stdin.close()
                process.stdin = None
                out, err = process.communicate(timeout=60)
            finally:
                server.terminate()
                server.wait()
        self.assertEqual(process.returncode, 0, err)
        emitted = ids(out)
        self.assertEqual(len(emitted), len(set(emitted)))
        self.assertEqual(set(emitted), {f"a{i}" for i in range(40)} | {f"b{i}" for i in range(20)})
