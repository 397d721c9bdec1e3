#!/usr/bin/env python3
"""Redis CPU per record on every path idem keeps state on Redis: dedup's
claims, verify --nonce, replay's ledger, reorder's, merge's and states'
checkpoints, reconcile's pending (T+1) keys. Each path runs against one
node and a 3-master cluster, and the records the run read divide two
figures summed over the masters: the commands' time (`INFO commandstats`,
reset before the run; target: at most 3 µs) and the servers' processor
time (`INFO cpu`), which adds reading requests and writing replies.

    redis_paths.py IDEM [--count N] [--replay-count N] [--only PATH,...]

Servers are local (tests/e2e/redis_server.py, redis_cluster.py), started
and stopped here; every run must exit as its command does on a clean
input, and its summary's record count must be the corpus's. Run by
bench/run_redis_cluster.sh; the machine is shared: Redis CPU per record,
not wall time, is the comparable figure."""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "e2e"))
import redis_cluster  # noqa: E402
import redis_server  # noqa: E402

BENCH = os.path.dirname(os.path.abspath(__file__))
TARGET = 3.0  # µs of Redis CPU per record



def generate(scratch, count, replay_count):
    """The corpora, one per path, written once into `scratch`."""
    def gen(script, *args):
        subprocess.run([sys.executable, os.path.join(BENCH, script), *map(str, args)], check=True,
                       stdout=subprocess.PIPE)
    corpora = {}
    corpora["events"] = os.path.join(scratch, "events.ndjson")
    gen("gen_events.py", "--count", count, corpora["events"])
    corpora["deliveries"] = os.path.join(scratch, "deliveries.ndjson")
    truth = subprocess.run([sys.executable, os.path.join(BENCH, "gen_deliveries.py"), "--count", str(count),
                            "--bad-fraction", "0", corpora["deliveries"]], check=True, capture_output=True, text=True)
    corpora["secret"] = json.loads(truth.stdout)["secret"]
    corpora["replay"] = os.path.join(scratch, "replay.ndjson")
    gen("gen_replay.py", "--count", replay_count, corpora["replay"])
    corpora["reorder"] = os.path.join(scratch, "reorder.ndjson")
    gen("gen_reorder.py", "--count", count, "--partitions", max(1, count // 100), corpora["reorder"])
    corpora["merge"] = os.path.join(scratch, "merge.ndjson")
    gen("gen_merge.py", "--count", count, corpora["merge"])
    corpora["rules"] = os.path.join(BENCH, "..", "samples", "merge.yaml")  # the seed's rules
    corpora["states"] = os.path.join(scratch, "states.ndjson")
    gen("gen_states.py", "--count", count, "--entities", max(1, count // 10), corpora["states"])
    corpora["flow"] = os.path.join(scratch, "flow")
    gen("gen_reconcile.py", "--count", count, corpora["flow"])
    return corpora


def lines_of(*paths):
    total = 0
    for path in paths:
        with open(path, "rb") as f:
            total += sum(1 for _ in f)
    return total


def paths(corpora, scratch, target_url):
    """name -> (argv after the binary given a store URI, records read)."""
    flow = corpora["flow"]
    stages = [os.path.join(flow, f"{stage}.ndjson") for stage in ("sent", "received", "processed")]
    out = os.path.join(scratch, "out.ndjson")
    return {
        "dedup (first copies and repeats)": (
            lambda uri: ["dedup", "--key", "data.object.id,type", "--store", uri, "-q", "-o", out,
                         corpora["events"]],
            lines_of(corpora["events"])),
        "verify --nonce": (
            lambda uri: ["verify", "--scheme", "stripe", "--secret", corpora["secret"], "--nonce",
                         "--store", uri, "-q", corpora["deliveries"]],
            lines_of(corpora["deliveries"])),
        "replay's ledger": (
            lambda uri: ["replay", "--to", target_url, "--key", "id", "--concurrency", "8", "--store", uri,
                         "-q", corpora["replay"]],
            lines_of(corpora["replay"])),
        "reorder -o (checkpoints)": (
            lambda uri: ["reorder", "--seq", "seq", "--partition", "p", "--start", "1", "--window", "64",
                         "--store", uri, "-q", "-o", out, "--late", os.path.join(scratch, "late.ndjson"),
                         corpora["reorder"]],
            lines_of(corpora["reorder"])),
        "merge -o (checkpoints)": (
            lambda uri: ["merge", "--rules", corpora["rules"], "--time-field", "ts", "--max-lateness", "30s",
                         "--bypass", "priority=critical", "--store", uri, "-q", "-o", out, corpora["merge"]],
            lines_of(corpora["merge"])),
        "states (entity states)": (
            lambda uri: ["states", "--entity", "order_id", "--state", "status", "--machine",
                         os.path.join(BENCH, "states-machine.yaml"), "--version-field", "version",
                         "--fail-on", "none", "--report", "json", "--store", uri, "-q", corpora["states"]],
            lines_of(corpora["states"])),
        "reconcile --store (T+1 keys)": (
            lambda uri: ["reconcile", "--fail-on", "none", "--stage", f"sent={stages[0]}",
                         "--stage", f"received={stages[1]}", "--stage", f"processed={stages[2]}",
                         "--key", "sent=id", "--key", "received=body.id", "--key", "processed=event_id",
                         "--time", "sent=created", "--time", "processed=ts", "--grace", "60s",
                         "--report", "json", "--store", uri, "-q"],
            lines_of(*stages)),
    }


def commandstats(port):
    """command -> (calls, usec) on the server at `port` since its stats were reset."""
    stats = {}
    for line in redis_cluster.cli(port, "info", "commandstats").splitlines():
        match = re.match(r"cmdstat_([^:]+):calls=(\d+),usec=(\d+)", line)
        if match:
            stats[match.group(1)] = (int(match.group(2)), int(match.group(3)))
    return stats


def server_cpu(port):
    """Seconds of processor time the server at `port` has used, its own."""
    info = dict(line.split(":", 1) for line in redis_cluster.cli(port, "info", "cpu").splitlines()
                if ":" in line)
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def measure(idem, argv, ports):
    """(the servers' processor seconds during the run, command -> (calls, usec))."""
    for port in ports:
        redis_cluster.cli(port, "flushall")
        redis_cluster.cli(port, "config", "resetstat")
    before = sum(server_cpu(port) for port in ports)
    result = subprocess.run([idem, *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    cpu = sum(server_cpu(port) for port in ports) - before
    if result.returncode not in (0, 1):  # 1: findings, as reorder's gaps or states' faults
        raise SystemExit(f"idem {argv[0]} failed ({result.returncode}): {result.stderr[-800:]}")
    totals = {}
    for port in ports:
        for command, (calls, usec) in commandstats(port).items():
            if command.split("|")[0] in ("flushall", "config", "info"):
                continue
            before = totals.get(command, (0, 0))
            totals[command] = (before[0] + calls, before[1] + usec)
    return cpu, totals


def start_target(idem, scratch):
    """`idem listen` as replay's target, answering every delivery 200."""
    process = subprocess.Popen([idem, "listen", "--port", "0", "-o", os.path.join(scratch, "capture.ndjson")],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    first = process.stderr.readline()
    if "capturing http://" not in first:
        process.kill()
        raise SystemExit(f"idem listen did not start: {first}")
    return process, "http://" + first.split("http://", 1)[1].split()[0]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("idem")
    parser.add_argument("--count", type=int, default=100000)
    parser.add_argument("--replay-count", type=int, default=20000)
    parser.add_argument("--only", default="")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=os.path.join(BENCH, "out")) as scratch:
        corpora = generate(scratch, args.count, args.replay_count)
        target, target_url = start_target(args.idem, scratch)
        rows = []
        try:
            with redis_server.running() as single_uri, redis_cluster.running(masters=3) as cluster:
                single_ports = [int(single_uri.rsplit(":", 1)[1])]
                for name, (argv_of, records) in paths(corpora, scratch, target_url).items():
                    if args.only and not any(word in name for word in args.only.split(",")):
                        continue
                    single = measure(args.idem, argv_of(single_uri), single_ports)
                    clustered = measure(args.idem, argv_of(cluster.uri()), cluster.masters())
                    rows.append((name, records, single, clustered))
        finally:
            target.terminate()
            target.wait()

    # Two figures per run. Commands: `INFO commandstats` summed, each command
    # once (EVALSHA and EXEC are left out: the commands they run are counted
    # on their own lines; the Lua interpreter's own time is then only in the
    # other figure). Server: the servers' own processor time over the run,
    # which adds reading requests and writing replies.
    def commands_us(totals, records):
        return sum(usec for command, (_, usec) in totals.items()
                   if command not in ("evalsha", "eval", "exec", "multi")) / records

    print(f"{'path':34} {'records':>8} {'commands µs':>12} {'server µs':>10} {'cluster cmds':>13} "
          f"{'cluster srv':>12}  costliest commands, one node (calls per record × µs each)")
    worst = 0.0
    for name, records, (single_cpu, single), (cluster_cpu, clustered) in rows:
        top = sorted(single.items(), key=lambda item: -item[1][1])[:3]
        said = ", ".join(f"{command} {calls / records:.2f}×{usec / max(1, calls):.1f}"
                         for command, (calls, usec) in top)
        one, many = commands_us(single, records), commands_us(clustered, records)
        worst = max(worst, one, many)
        print(f"{name:34} {records:8} {one:12.2f} {single_cpu * 1e6 / records:10.2f} {many:13.2f} "
              f"{cluster_cpu * 1e6 / records:12.2f}  {said}")
    print(f"Redis CPU per record: commands from INFO commandstats (the issue's measure), server from "
          f"INFO cpu; target <= {TARGET:.0f} µs of commands: {'met' if worst <= TARGET else 'NOT met'} "
          f"(worst {worst:.2f} µs)")


if __name__ == "__main__":
    main()
