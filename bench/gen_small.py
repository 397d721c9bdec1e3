#!/usr/bin/env python3
"""Small records (about 200 bytes) for measuring how idem's cost grows with
the input (bench/run_scale.sh): many accounts, each numbering its events
1, 2, 3... (`p`, `seq`), displaced by a few places from their order, and
about 10% sent again later with the same `key` (a redelivery).

usage: gen_small.py --count N [--partitions P] [--seed S] OUT    (OUT may be -)

Written in chunks so that 50M records take minutes, not an hour."""
import argparse
import random
import sys


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--dup-fraction", type=float, default=0.10)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("out")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    out = sys.stdout if args.out == "-" else open(args.out, "w")
    types = ["payment.succeeded", "charge.refunded", "invoice.paid", "order.shipped"]
    next_seq = [1] * args.partitions
    recent = []  # (key line) of records that may be sent again
    written = 0
    chunk = []
    window = []  # a few records held back, so that order is a little broken
    base = 1796025600
    while written < args.count:
        if recent and rng.random() < args.dup_fraction:
            line = recent[rng.randrange(len(recent))]
        else:
            p = rng.randrange(args.partitions)
            seq = next_seq[p]
            next_seq[p] = seq + 1
            n = written
            second = base + n // 1000
            line = (f'{{"id":"evt_{n:010d}","key":"k_{n:010d}_{rng.getrandbits(32):08x}","p":"acct_{p:06d}",'
                    f'"seq":{seq},"type":"{types[n & 3]}","amount":{rng.randrange(100, 500000)},'
                    f'"ts":"2026-12-01T{(second // 3600) % 24:02d}:{(second // 60) % 60:02d}:{second % 60:02d}Z",'
                    f'"note":"small record for the growth benchmark"}}\n')
            if len(recent) < 4096:
                recent.append(line)
            else:
                recent[rng.randrange(4096)] = line
        window.append(line)
        if len(window) >= 8:
            chunk.append(window.pop(rng.randrange(len(window))))
        written += 1
        if len(chunk) >= 65536:
            out.write("".join(chunk))
            chunk.clear()
    rng.shuffle(window)
    chunk.extend(window)
    out.write("".join(chunk))
    if out is not sys.stdout:
        out.close()


if __name__ == "__main__":
    main()
