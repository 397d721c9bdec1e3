#!/usr/bin/env python3
"""Exactly once through a Redis Cluster failover, soaked: the held-out
check of docs/stores.md ("Exactly once through a failover"), over as many
rounds as asked. Each round starts a 3 + 3 cluster; PROCESSES `idem dedup
--key data.object.id,type` runs each read a random half of one log of
Stripe-like events (keys repeat within a process and across them), writing
to stdout or to -o FILE; after a random delay a master holding slots is
SIGKILLed; a run that exits non-zero is run again on its same input, into
a new output file, once the replica has taken over. Every key must come
out exactly once over all outputs.

usage: failover_soak.py IDEM [--rounds N] [--parallel N] [--events N] [--pad BYTES]
                        [--processes N] [--batch N] [--output stdout|file|both]
                        [--kill-after LOW,HIGH] [--node-timeout MS] [--seed S]
Prints one line per round and a last line 'N passed, N failed'; exits 1
when a round failed. Each round draws from its own generator (the seed and
its number), so a round is the same whatever runs beside it; --parallel
runs that many rounds at once, each on its own cluster (a round mostly
waits for the failover). tests/e2e/test_failover.py runs it.
"""
import argparse
import contextlib
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))
import redis_cluster  # noqa: E402

CLUSTER_START = threading.Lock()


def make_log(path, count, pad, rng):
    """`count` events over count/2 keys (each key twice, the copies apart)."""
    keys = count // 2
    with open(path, "w") as out:
        for n in range(count):
            k = n % keys
            event = {"id": f"evt_{n:09d}", "object": "event", "type": "payment_intent.succeeded",
                     "created": 1796025600 + n, "request": {"id": f"req_{rng.getrandbits(48):012x}"},
                     "data": {"object": {"id": f"pi_{k:09d}", "object": "payment_intent",
                                         "amount": 100 + k % 5000, "metadata": {"note": "x" * pad}}}}
            out.write(json.dumps(event, separators=(",", ":")) + "\n")


def keys_of(data):
    found = []
    for line in data.splitlines():
        if line.strip():
            found.append(json.loads(line)["data"]["object"]["id"])
    return found


def one_round(idem, args, rng, number):
    mode = args.output if args.output != "both" else rng.choice(["stdout", "file"])
    batch = args.batch or rng.choice([100, 500, 2000, 5000])
    node_timeout = args.node_timeout or rng.choice([1000, 3000, 5000])
    with contextlib.ExitStack() as stack:
        # Ports are picked free, then bound: clusters start one at a time.
        with CLUSTER_START:
            cluster = stack.enter_context(
                redis_cluster.running(masters=3, replicas=1, node_timeout_ms=node_timeout))
        tmp = stack.enter_context(tempfile.TemporaryDirectory())
        log = os.path.join(tmp, "log.ndjson")
        make_log(log, args.events, args.pad, rng)
        with open(log) as f:
            lines = f.readlines()
        parts = []
        read = set()  # the keys some process reads: each must come out once
        for p in range(args.processes):
            path = os.path.join(tmp, f"part{p}.ndjson")
            chosen = sorted(rng.sample(range(len(lines)), len(lines) // 2))
            with open(path, "w") as out:
                out.writelines(lines[i] for i in chosen)
            read.update(keys_of("".join(lines[i] for i in chosen)))
            parts.append(path)
        expected = read
        scope = f"soak{number}"
        outputs = []

        def start(path, attempt):
            output = f"{path}.out{attempt}"
            outputs.append(output)
            command = [idem, "dedup", "-q", "--key", "data.object.id,type", "--store", cluster.uri(3),
                       "--scope", scope, "--batch", str(batch)]
            if mode == "file":
                return subprocess.Popen(command + ["-o", output, path], stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE)
            return subprocess.Popen(command + [path], stdout=open(output, "wb"), stderr=subprocess.PIPE)

        processes = [start(path, 0) for path in parts]
        low, high = args.kill_after
        time.sleep(rng.uniform(low, high))
        victim = rng.choice(cluster.masters())
        cluster.kill(victim)
        codes = []
        why = []
        for process in processes:
            _, err = process.communicate(timeout=300)
            codes.append(process.returncode)
            if process.returncode != 0:
                why.append(err.decode("utf-8", "replace").strip().splitlines()[-1:])
        cluster.wait_failover(victim)
        final = list(codes)
        for p, path in enumerate(parts):
            attempt = 0
            while final[p] != 0 and attempt < 3:
                attempt += 1
                again = start(path, attempt)
                again.communicate(timeout=300)
                final[p] = again.returncode
        emitted = []
        for output in outputs:
            with open(output) as f:
                emitted += keys_of(f.read())
        counts = Counter(emitted)
        twice = sum(1 for c in counts.values() if c > 1)
        never = len(expected - set(counts))
        ok = twice == 0 and never == 0 and all(c == 0 for c in final)
        print(f"round {number}: {mode}, batch {batch}, node timeout {node_timeout} ms, codes {codes} then {final}: "
              f"{twice} keys twice, {never} never{'' if ok else '  FAILED'}", flush=True)
        if args.verbose:
            for line in why:
                print(f"  exit 4: {' '.join(line)}", flush=True)
        return ok


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("idem")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--parallel", type=int, default=1, help="rounds run at once")
    parser.add_argument("--events", type=int, default=400000)
    parser.add_argument("--pad", type=int, default=600)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--batch", type=int, default=0, help="0: a random one each round")
    parser.add_argument("--output", choices=["stdout", "file", "both"], default="both")
    parser.add_argument("--kill-after", default="0.2,0.8")
    parser.add_argument("--seed", type=int, default=66)
    parser.add_argument("--verbose", action="store_true", help="print why each run that stopped did")
    parser.add_argument("--node-timeout", type=int, default=0,
                        help="the cluster's node timeout in ms; 0: 1, 3 or 5 s at random each round")
    args = parser.parse_args()
    args.kill_after = [float(x) for x in args.kill_after.split(",")]
    with ThreadPoolExecutor(max_workers=max(1, args.parallel)) as rounds:
        results = list(rounds.map(
            lambda number: one_round(args.idem, args, random.Random(f"{args.seed}-{number}"), number),
            range(args.rounds)))
    passed = sum(results)
    failed = len(results) - passed
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
