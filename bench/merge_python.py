#!/usr/bin/env python3
"""What a user would write instead of `idem merge` for the seed's two rules:
a dict of open windows, closed by an event-time watermark, one merged
record per window (the same fields idem writes, without _idem evidence).

  bench/merge_python.py --max-lateness 30 events.ndjson > merged.ndjson
"""
import argparse
import json
import sys
from datetime import datetime


def seconds_of(ts):
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-lateness", type=float, default=30)
    parser.add_argument("path")
    args = parser.parse_args()
    rules = {"notification": (300, ("user_id", "alert_type")), "metrics": (60, ("device_id", "metric_name"))}
    windows = {}  # (rule, group, start) -> [end, base, count, merged or sum]
    closing = []
    latest = None
    out = sys.stdout
    write = out.write

    def flush(watermark):
        nonlocal closing
        if not closing:
            return
        keep = []
        for key in closing:
            window = windows.get(key)
            if window is None:
                continue
            if watermark is None or window[0] <= watermark:
                end, base, count, acc = windows.pop(key)
                if key[0] == "notification":
                    base["merged"] = acc
                else:
                    base["value"] = acc / count
                base["count"] = count
                write(json.dumps(base) + "\n")
            else:
                keep.append(key)
        closing = keep

    with open(args.path) as f:
        for line in f:
            record = json.loads(line)
            if record.get("priority") == "critical":
                write(line)
                continue
            rule = rules.get(record.get("type"))
            if rule is None:
                write(line)
                continue
            size, fields = rule
            at = seconds_of(record["ts"])
            start = at - at % size
            key = (record["type"], tuple(record[f] for f in fields), start)
            window = windows.get(key)
            if window is None:
                if latest is not None and start + size <= latest - args.max_lateness:
                    continue  # late
                window = windows[key] = [start + size, dict(record), 0, [] if key[0] == "notification" else 0.0]
                closing.append(key)
            window[2] += 1
            if key[0] == "notification":
                window[3].append(record)
            else:
                window[3] += record["value"]
                window[1] = dict(record)
            if latest is None or at > latest:
                latest = at
                if len(closing) > 256:
                    flush(latest - args.max_lateness)
    flush(None)


if __name__ == "__main__":
    main()
