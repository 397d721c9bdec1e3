#!/usr/bin/env python3
"""A corpus for `idem reorder`'s benchmark: small records over many partitions
(CI pipelines, accounts), each partition numbered 1..n, a few numbers never
sent (gaps) and a few sent twice (duplicates), every record displaced by a
bounded amount from its place.

    gen_reorder.py --count 10000000 --partitions 100000 OUT.ndjson

A limited set of partitions is active at a time (as pipelines run for a
while, then finish), so that a bounded displacement really reorders records
within a partition. Writes OUT.truth: per partition, the numbers sent."""
import argparse
import heapq
import json
import random


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=10_000_000)
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--active", type=int, default=2_000, help="partitions sending at a time")
    parser.add_argument("--displacement", type=int, default=5_000, help="positions a record may move later")
    parser.add_argument("--gap-rate", type=float, default=0.001)
    parser.add_argument("--duplicate-rate", type=float, default=0.001)
    parser.add_argument("--seed", type=int, default=20261130)
    parser.add_argument("out")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    per_partition = max(1, args.count // args.partitions)
    next_partition = 0
    active = []  # [partition, next sequence]

    def activate():
        nonlocal next_partition
        if next_partition < args.partitions:
            active.append([next_partition, 1])
            next_partition += 1

    for _ in range(args.active):
        activate()
    sent = {}
    pending = []  # (release position, tie, line): the bounded displacement
    position = 0
    written = 0
    with open(args.out, "w") as out:
        def emit_until(limit):
            nonlocal written
            while pending and pending[0][0] <= limit:
                out.write(heapq.heappop(pending)[2])
                written += 1

        while active:
            slot = rng.randrange(len(active))
            partition, sequence = active[slot]
            if sequence >= per_partition:
                active[slot] = active[-1]
                active.pop()
                activate()
            else:
                active[slot][1] += 1
            position += 1
            if rng.random() < args.gap_rate:
                continue
            line = json.dumps({"p": f"p{partition:06}", "seq": sequence, "v": "x" * 8},
                              separators=(",", ":")) + "\n"
            copies = 2 if rng.random() < args.duplicate_rate else 1
            for _ in range(copies):
                heapq.heappush(pending, (position + rng.uniform(0, args.displacement), position, line))
            sent.setdefault(partition, []).append(sequence)
            emit_until(position)
        emit_until(float("inf"))
    with open(args.out + ".truth", "w") as truth:
        for partition in sorted(sent):
            truth.write(f"p{partition:06}\t{','.join(map(str, sorted(sent[partition])))}\n")
    print(f"{written} records over {len(sent)} partitions into {args.out}")


if __name__ == "__main__":
    main()
