#!/usr/bin/env python3
"""A corpus for `idem audit`'s benchmark: an API's request log (~200-byte
records: key, time, worker, a payload), where ~10% of intents were sent
more than once: retries with growing gaps, races between workers, and a few
keys reused for another payload.

    gen_audit.py --count 1000000 OUT.ndjson

Writes OUT.truth: the keys that occur more than once, sorted."""
import argparse
import json
import random
from datetime import datetime, timedelta, timezone


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=20261130)
    parser.add_argument("out")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    t0 = datetime(2026, 11, 30, tzinfo=timezone.utc)
    repeated = set()
    written = 0
    intent = 0
    with open(args.out, "w") as out:
        while written < args.count:
            intent += 1
            at = t0 + timedelta(milliseconds=intent * 50)
            key = f"req_{intent:09}"
            record = {"key": key, "ts": "", "worker": f"w{rng.randrange(16)}",
                      "user": f"u_{rng.randrange(100_000)}", "action": "create_ticket",
                      "payload": {"title": f"ticket {intent}", "priority": rng.choice(["low", "high"]),
                                  "tags": ["api", "v2"], "amount": rng.randrange(10_000)}}
            copies = [(at, record)]
            roll = rng.random()
            if roll < 0.05:  # a retry storm: backoff 1s, 2s, 4s...
                gap = 1.0
                for _ in range(rng.randrange(2, 5)):
                    at = at + timedelta(seconds=gap)
                    copies.append((at, record))
                    gap *= 2
            elif roll < 0.08:  # a race: another worker 10-500 ms later
                copies.append((at + timedelta(milliseconds=rng.randrange(10, 500)),
                               dict(record, worker=f"w{rng.randrange(16, 32)}")))
            elif roll < 0.09:  # a reused key with another payload
                other = dict(record, payload=dict(record["payload"], amount=record["payload"]["amount"] + 1))
                copies.append((at + timedelta(minutes=3), other))
            if len(copies) > 1:
                repeated.add(key)
            for when, copy in copies:
                if written >= args.count:
                    break
                line = dict(copy, ts=when.isoformat(timespec="milliseconds").replace("+00:00", "Z"))
                out.write(json.dumps(line, separators=(",", ":")) + "\n")
                written += 1
    with open(args.out + ".truth", "w") as truth:
        truth.write("".join(f"{key}\n" for key in sorted(repeated)))
    print(f"{written} records, {len(repeated)} keys repeated, into {args.out}")


if __name__ == "__main__":
    main()
