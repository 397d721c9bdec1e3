#!/usr/bin/env python3
"""The reconcile benchmark's flow: COUNT events sent (a provider's log),
received (idem listen's envelopes, the event in the body) and processed
(an app log), with 1% lost at each hop, 2% received twice, 0.5% late.

  bench/gen_reconcile.py --count 1000000 OUTDIR
"""
import argparse
import json
import os
import random
from datetime import datetime, timedelta, timezone

T0 = datetime(2026, 11, 30, tzinfo=timezone.utc)


def stamp(seconds):
    return (T0 + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("out")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "sent.ndjson"), "w") as sent, \
            open(os.path.join(args.out, "received.ndjson"), "w") as received, \
            open(os.path.join(args.out, "processed.ndjson"), "w") as processed:
        for i in range(args.count):
            at = i * 86400 / args.count
            event = {"id": f"evt_{i:08d}", "type": "invoice.paid", "created": stamp(at),
                     "data": {"amount": rng.randrange(100000)}}
            sent.write(json.dumps(event, separators=(",", ":")) + "\n")
            if rng.random() < 0.01:
                continue
            delay = 900 if rng.random() < 0.005 else rng.uniform(0.05, 2)
            body = json.dumps(event, separators=(",", ":"))
            for copy in range(2 if rng.random() < 0.02 else 1):
                received.write(json.dumps({"idem": 1, "id": f"c{i}_{copy}", "received_at": stamp(at + delay + copy),
                                           "method": "POST", "path": "/hooks",
                                           "headers": [["Content-Type", "application/json"]], "body": body},
                                          separators=(",", ":")) + "\n")
            if rng.random() < 0.01:
                continue
            processed.write(json.dumps({"event_id": event["id"], "ts": stamp(at + delay + 1)},
                                       separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()
