#!/usr/bin/env python3
"""Checks a reordered corpus against gen_reorder.py's truth.

    check_reorder.py OUTPUT TRUTH [--whole-file]

idem's output: per partition, strictly increasing; every number sent is
released exactly once; the gap records name exactly the numbers never sent
(below each partition's last). --whole-file (sort-style contenders, which
keep duplicates and report no gaps): per partition non-decreasing, every
number sent present. Prints "yes" or what is wrong."""
import json
import sys


def main():
    output, truth_path = sys.argv[1], sys.argv[2]
    whole_file = "--whole-file" in sys.argv
    released, gaps = {}, {}
    with open(output) as f:
        for line in f:
            record = json.loads(line)
            gap = record.get("_idem", {}).get("gap") if "_idem" in record else None
            if gap:
                gaps.setdefault(gap["partition"], set()).update(range(gap["from"], gap["to"] + 1))
                continue
            released.setdefault(record["p"], []).append(record["seq"])
    problems = []
    with open(truth_path) as f:
        for line in f:
            partition, numbers = line.rstrip("\n").split("\t")
            sent = [int(n) for n in numbers.split(",")]
            got = released.pop(partition, [])
            if whole_file:
                if sorted(got) != got or sorted(set(got)) != sorted(set(sent)):
                    problems.append(partition)
                continue
            if got != sorted(set(sent)):
                problems.append(f"{partition} released {got[:5]}...")
            missing = set(range(1, max(sent) + 1)) - set(sent)
            if gaps.get(partition, set()) != missing:
                problems.append(f"{partition} gaps {sorted(gaps.get(partition, []))} != {sorted(missing)}")
    if released:
        problems.append(f"{len(released)} partitions not in the truth")
    print("yes" if not problems else f"NO ({len(problems)} problems, first: {problems[0]})")


if __name__ == "__main__":
    main()
