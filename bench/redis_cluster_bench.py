#!/usr/bin/env python3
"""idem dedup on a 3-master Redis Cluster against one Redis node, and against
the redis-py RedisCluster SET NX loop a user would write (issue #13).

    redis_cluster_bench.py IDEM CORPUS [--python-count N] [--repeat R]

Servers are local (tests/e2e/redis_cluster.py, redis_server.py), started
and stopped here. Contenders run interleaved, R times each, and the median
is reported; every idem output is checked against CORPUS.truth, the Python
loop's against the truth of the records it read. Run by
bench/run_redis_cluster.sh; the machine is shared: read the ratios."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "e2e"))
import redis_cluster  # noqa: E402
import redis_server  # noqa: E402

PYTHON_LOOP = r"""
import json, sys
from redis.cluster import RedisCluster
host, port = sys.argv[1], int(sys.argv[2])
cluster = RedisCluster(host=host, port=port)
out = sys.stdout
for line in sys.stdin:
    event = json.loads(line)
    key = "dedup:%s:%s" % (event["data"]["object"]["id"], event["type"])
    if cluster.set(key, 1, nx=True, ex=86400):
        out.write(line)
"""


def first_ids(path):
    with open(path) as f:
        return [line.strip() for line in f]


def ids_of(path):
    with open(path, "rb") as f:
        return [json.loads(line)["id"] for line in f]


def timed(args, stdin_path, out_path):
    """Runs a contender with its output into a file, checked after the clock
    stops: read into this process as it ran, the output (856 MB for 1M
    events) cost this harness a core's worth of work that competed with the
    servers and the contender for the machine's two."""
    with open(stdin_path, "rb") as stdin, open(out_path, "wb") as out:
        start = time.monotonic()
        result = subprocess.run(args, stdin=stdin, stdout=out, stderr=subprocess.PIPE)
        seconds = time.monotonic() - start
    if result.returncode != 0:
        raise SystemExit(f"{args[:3]} failed: {result.stderr.decode()[-500:]}")
    return seconds


def redis_cpu_usec(port):
    """Every command's usec on the server at `port` since its stats were reset."""
    text = redis_cluster.cli(port, "info", "commandstats")
    total = 0
    for line in text.splitlines():
        if line.startswith("cmdstat_") and "usec=" in line:
            total += int(line.split("usec=")[1].split(",")[0])
    return total


def memory_per_key(port):
    used = int(next(line.split(":")[1] for line in redis_cluster.cli(port, "info", "memory").splitlines()
                    if line.startswith("used_memory:")))
    keys = int(redis_cluster.cli(port, "dbsize").strip() or 0)
    return used, keys


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("idem")
    parser.add_argument("corpus")
    parser.add_argument("--python-count", type=int, default=100000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    truth = first_ids(args.corpus + ".truth")
    count = sum(1 for _ in open(args.corpus, "rb"))
    subset = args.corpus + f".first{args.python_count}"
    with open(args.corpus, "rb") as f, open(subset, "wb") as out:
        for n, line in enumerate(f):
            if n >= args.python_count:
                break
            out.write(line)
    subset_truth = set()
    seen = set()
    with open(subset) as f:
        for line in f:
            event = json.loads(line)
            key = (event["data"]["object"]["id"], event["type"])
            if key not in seen:
                seen.add(key)
                subset_truth.add(event["id"])

    times = {"single": [], "cluster": [], "python": []}
    usec = {"single": [], "cluster": []}  # per run, per server: Redis CPU
    output = args.corpus + ".out"
    with redis_server.running() as single_uri, redis_cluster.running(masters=3) as cluster:
        cluster_port = cluster.ports[0]
        for round_number in range(args.repeat):
            for name in ("single", "cluster", "python"):
                if name == "python":
                    for port in cluster.masters():
                        redis_cluster.cli(port, "flushall")
                    # This interpreter has redis-py (run_redis_cluster.sh chose it).
                    seconds = timed([sys.executable, "-c", PYTHON_LOOP, "127.0.0.1", str(cluster_port)],
                                    subset, output)
                    if set(ids_of(output)) != subset_truth:
                        raise SystemExit("python loop: output differs from the truth")
                    times[name].append(seconds)
                    continue
                uri = single_uri if name == "single" else cluster.uri()
                scope = f"bench{round_number}"
                ports = [int(single_uri.rsplit(":", 1)[1])] if name == "single" else cluster.masters()
                for port in ports:
                    redis_cluster.cli(port, "config", "resetstat")
                seconds = timed([args.idem, "dedup", "--key", "data.object.id,type", "--store", uri,
                                 "--scope", scope, "-q"], args.corpus, output)
                usec[name].append([redis_cpu_usec(port) for port in ports])
                if ids_of(output) != truth:
                    raise SystemExit(f"idem on {name}: output differs from the truth")
                times[name].append(seconds)
        # Every round's fingerprints stay (a scope each): memory per key.
        single_used, single_keys = memory_per_key(int(single_uri.rsplit(":", 1)[1]))
    # Redis CPU per record, from INFO commandstats: the single node's, and
    # the busiest master's and all masters' together for the cluster.
    single_us = statistics.median(run[0] for run in usec["single"]) / count
    cluster_total_us = statistics.median(sum(run) for run in usec["cluster"]) / count
    cluster_max_share = statistics.median(max(run) / max(1, sum(run)) for run in usec["cluster"])
    rate = {
        "single": count / statistics.median(times["single"]),
        "cluster": count / statistics.median(times["cluster"]),
        "python": args.python_count / statistics.median(times["python"]),
    }
    print(f"{'contender':42} {'records':>9} {'median s':>9} {'records/s':>10}")
    print(f"{'idem dedup, one Redis node':42} {count:9} {statistics.median(times['single']):9.2f} {rate['single']:10.0f}")
    print(f"{'idem dedup, 3-master Redis Cluster':42} {count:9} {statistics.median(times['cluster']):9.2f} {rate['cluster']:10.0f}")
    print(f"{'redis-py RedisCluster SET NX loop':42} {args.python_count:9} {statistics.median(times['python']):9.2f} {rate['python']:10.0f}")
    print(f"cluster / single node: {rate['cluster'] / rate['single']:.2f} (target >= 0.7)")
    print(f"cluster / Python loop: {rate['cluster'] / rate['python']:.1f}x (target >= 10x)")
    print(f"Redis CPU per record (INFO commandstats): one node {single_us:.2f} us; "
          f"the cluster's masters together {cluster_total_us:.2f} us, the busiest master "
          f"{cluster_max_share:.0%} of it")
    print(f"Redis memory per fingerprint (one node, used_memory / keys): "
          f"{single_used / max(1, single_keys):.0f} bytes over {single_keys} keys")
    print("every output checked against the ground truth")
    os.remove(output)


if __name__ == "__main__":
    main()
