#!/usr/bin/env python3
"""The states benchmark's corpus: 100k orders' lives (pending, paid,
shipped, in_transit as the parcel moves, delivered, closed; a few cancelled
or refunded), about 1M events interleaved, each with its version, 0.5% of
them with a planted fault.

  bench/gen_states.py --count 1000000 --entities 100000 OUT.ndjson
"""
import argparse
import json
import random
from datetime import datetime, timedelta, timezone

T0 = datetime(2026, 11, 30, tzinfo=timezone.utc)
# An order's life: paid, shipped, then tracked (in_transit repeats as the
# parcel moves) until delivered and closed; a few are cancelled or refunded.
def life(rng, length):
    if rng.random() < 0.05:
        return ["pending", "cancelled"]
    if rng.random() < 0.05:
        return ["pending", "paid", "refunded"]
    moves = max(1, length - 5)
    return ["pending", "paid", "shipped"] + ["in_transit"] * moves + ["delivered", "closed"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=1_000_000)
    parser.add_argument("--entities", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("out")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    per_entity = args.count // args.entities
    queues = [life(rng, per_entity) for _ in range(args.entities)]
    order = [n for n in range(args.entities) for _ in range(len(queues[n]))]
    rng.shuffle(order)
    # Versions must increase in arrival order within an entity: hand them out
    # in that order.
    next_version = [0] * args.entities
    with open(args.out, "w") as out:
        for i, n in enumerate(order):
            version = next_version[n]
            next_version[n] += 1
            status = queues[n][version]
            if rng.random() < 0.005:
                status = rng.choice(["paid", "shipped", "lost"])  # illegal, repeated or unknown
            ts = (T0 + timedelta(seconds=i * 86400 / len(order))).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
            out.write(json.dumps({"order_id": f"ord_{n}", "status": status, "version": version + 1, "ts": ts},
                                 separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()
