#!/usr/bin/env python3
"""Writes a corpus of ~1 KB Stripe-like events (NDJSON) in which about 15%
are semantic duplicates arriving up to 5,000 records after their original:
byte-identical redeliveries, re-sends with a new request id and delivery
counter, and the same event with its keys reordered.

usage: gen_events.py [--count N] [--dup-fraction F] [--max-delay D] [--seed S]
                     [--shape plain|incidents] OUT
Writes OUT and OUT.truth: the id of each first copy, in output order, which
is what deduplicating by data.object.id,type must keep.

--shape incidents: the log incidents are made of (audit's duplicate-heavy
benchmark). Every delivery carries fields of its own (an attempt id, a
worker, a receive time: "delivery") and an idempotency_key; about 12% of
records are in duplicate groups: most are retries that differ only in
those fields, some reuse a key with another amount (another intent), some
regenerate the key for one intent (the same data.object.id under a new
idempotency_key). OUT.truth then holds the first copy's id as before.
"""
import argparse
import json
import random


def make_event(rng, index):
    amount = rng.randint(100, 500000)
    return {
        "id": f"evt_{index:09d}",
        "object": "event",
        "api_version": "2024-06-20",
        "created": 1796025600 + index // 10,
        "type": rng.choice(["payment_intent.succeeded", "charge.succeeded", "invoice.paid", "charge.refunded"]),
        "livemode": False,
        "pending_webhooks": 1,
        "request": {"id": f"req_{rng.getrandbits(56):014x}", "idempotency_key": f"{rng.getrandbits(64):016x}"},
        "delivery_attempt": 1,
        "data": {"object": {
            "id": f"pi_{index:09d}{rng.getrandbits(40):010x}",
            "object": "payment_intent",
            "amount": amount,
            "amount_received": amount,
            "currency": rng.choice(["usd", "eur", "gbp"]),
            "customer": f"cus_{rng.getrandbits(56):014x}",
            "description": "Order #%d" % rng.randint(1000, 99999),
            "metadata": {"order_id": str(rng.randint(10**6, 10**7)), "channel": "web", "note": "x" * 300},
            "payment_method_types": ["card"],
            "status": "succeeded",
        }},
    }


def duplicate_of(rng, event, line):
    kind = rng.random()
    if kind < 0.4:
        return line  # byte-identical redelivery
    copy = json.loads(line)
    if kind < 0.8:
        copy["request"]["id"] = f"req_{rng.getrandbits(56):014x}"
        copy["delivery_attempt"] = copy["delivery_attempt"] + rng.randint(1, 4)
        return json.dumps(copy, separators=(",", ":"))
    reordered = dict(reversed(list(copy.items())))  # same event, keys in another order
    return json.dumps(reordered, separators=(",", ":"))


def delivered(rng, event, key, at):
    """One delivery of `event` under `key`: its own attempt id, worker and
    receive time, as queue consumers and webhook receivers log them."""
    copy = dict(event)
    copy["idempotency_key"] = key
    copy["delivery"] = {"attempt_id": f"{rng.getrandbits(128):032x}", "worker": f"worker-{rng.randrange(8)}",
                        "received_at": at}
    return json.dumps(copy, separators=(",", ":"))


def incident_copy(rng, event, key, at):
    """A later copy of a delivery: a retry (most), a key reused for another
    intent (another amount), or the intent under a regenerated key."""
    kind = rng.random()
    if kind < 0.85:
        return delivered(rng, event, key, at)
    if kind < 0.93:
        other = json.loads(json.dumps(event))
        other["data"]["object"]["amount"] += rng.randint(1, 1000)
        return delivered(rng, other, key, at)
    return delivered(rng, event, f"{rng.getrandbits(64):016x}", at)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--count", type=int, default=1_000_000)
    parser.add_argument("--dup-fraction", type=float, default=0.15)
    parser.add_argument("--max-delay", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--shape", choices=["plain", "incidents"], default="plain")
    args = parser.parse_args()
    if args.shape == "incidents" and args.dup_fraction == 0.15:
        args.dup_fraction = 0.12
    rng = random.Random(args.seed)
    pending = {}  # output position -> list of duplicate lines due there
    written = 0
    index = 0
    with open(args.out, "w") as out, open(args.out + ".truth", "w") as truth:
        while written < args.count:
            for line in pending.pop(written, []):
                if written < args.count:
                    out.write(line + "\n")
                    written += 1
            if written >= args.count:
                break
            event = make_event(rng, index)
            index += 1
            key = f"{rng.getrandbits(64):016x}"
            at = event["created"]
            if args.shape == "incidents":
                line = delivered(rng, event, key, at)
            else:
                line = json.dumps(event, separators=(",", ":"))
            out.write(line + "\n")
            truth.write(event["id"] + "\n")
            written += 1
            if rng.random() < args.dup_fraction / (1 - args.dup_fraction):
                due = written + rng.randint(1, args.max_delay)
                copy = (incident_copy(rng, event, key, at + rng.randint(1, 3600))
                        if args.shape == "incidents" else duplicate_of(rng, event, line))
                pending.setdefault(due, []).append(copy)
    print(json.dumps({"records": written, "unique": index}))


if __name__ == "__main__":
    main()
