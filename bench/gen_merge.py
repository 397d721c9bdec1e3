#!/usr/bin/env python3
"""The merge benchmark's corpus: the seed's two kinds of events interleaved
over an hour, notifications for 1,000 users (3 alert types) and metrics
from 100 devices (2 metrics), arriving up to 20 s out of order, 2%
critical: a high-throughput stream where most records merge (about 14 per
notification window, 40 per metrics window).

  bench/gen_merge.py --count 1000000 OUT.ndjson
"""
import argparse
import json
import random
from datetime import datetime, timedelta, timezone

T0 = datetime(2026, 11, 30, tzinfo=timezone.utc)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("out")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    span = 3600.0
    pending = []
    with open(args.out, "w") as out:
        for i in range(args.count):
            at = i * span / args.count
            if rng.random() < 0.5:
                record = {"type": "notification", "user_id": f"u{rng.randrange(1000)}",
                          "alert_type": rng.choice(("disk", "cpu", "login")), "msg": f"message {i}"}
                if rng.random() < 0.02:
                    record["priority"] = "critical"
            else:
                record = {"type": "metrics", "device_id": f"d{rng.randrange(100)}",
                          "metric_name": rng.choice(("cpu", "mem")), "value": rng.randrange(10000) / 10}
            ts = T0 + timedelta(seconds=at)
            record["ts"] = ts.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
            pending.append((at + rng.uniform(0, 20), json.dumps(record, separators=(",", ":"))))
            if len(pending) >= 4096:
                pending.sort()
                cut = len(pending) // 2
                for _, line in pending[:cut]:
                    out.write(line + "\n")
                pending = pending[cut:]
        pending.sort()
        for _, line in pending:
            out.write(line + "\n")


if __name__ == "__main__":
    main()
