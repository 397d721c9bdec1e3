#!/usr/bin/env python3
"""Writes a corpus of realistic signed webhook deliveries (idem envelopes).

Each line is a captured Stripe delivery of about 1 KB: a Stripe-like event
body (the raw bytes Stripe sends, pretty-printed), the Stripe-Signature header
over "{t}.{body}", and the usual request headers. A fraction is deliberately
bad (tampered body or wrong secret) so that both verdicts are exercised.

usage: gen_deliveries.py [--count N] [--bad-fraction F] [--seed S] OUT
The ground truth (how many are valid) is printed as JSON on stdout.
"""
import argparse
import hashlib
import hmac
import json
import random

SECRET = "whsec_bench_0123456789abcdef"
T0 = 1796025600  # 2026-11-30T08:00:00Z


def event_body(rng, index):
    amount = rng.randint(100, 500000)
    event = {
        "id": f"evt_{index:08d}{rng.getrandbits(40):010x}",
        "object": "event",
        "api_version": "2024-06-20",
        "created": T0 + index // 10,
        "type": rng.choice(["payment_intent.succeeded", "charge.succeeded", "invoice.paid", "charge.refunded"]),
        "livemode": False,
        "pending_webhooks": 1,
        "request": {"id": f"req_{rng.getrandbits(56):014x}", "idempotency_key": f"{rng.getrandbits(64):016x}"},
        "data": {"object": {
            "id": f"pi_{rng.getrandbits(80):020x}",
            "object": "payment_intent",
            "amount": amount,
            "amount_received": amount,
            "currency": rng.choice(["usd", "eur", "gbp"]),
            "customer": f"cus_{rng.getrandbits(56):014x}",
            "description": "Order #%d" % rng.randint(1000, 99999),
            "metadata": {"order_id": str(rng.randint(10**6, 10**7)), "channel": "web"},
            "payment_method_types": ["card"],
            "status": "succeeded",
        }},
    }
    return json.dumps(event, indent=2)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--count", type=int, default=1_000_000)
    parser.add_argument("--bad-fraction", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    key = SECRET.encode()
    valid = 0
    with open(args.out, "w", encoding="utf-8") as out:
        for index in range(args.count):
            body = event_body(rng, index)
            t = T0 + index // 1000
            signed_body = body
            secret = key
            bad = rng.random() < args.bad_fraction
            if bad and rng.random() < 0.5:
                signed_body = body.replace('"livemode": false', '"livemode": true')
            elif bad:
                secret = b"whsec_wrong"
            mac = hmac.new(secret, f"{t}.{signed_body}".encode(), hashlib.sha256).hexdigest()
            received = t + 1
            envelope = {
                "idem": 1, "id": f"cap_{index:08d}",
                "received_at": f"2026-11-30T{8 + received // 3600 % 16:02d}:{received // 60 % 60:02d}:{received % 60:02d}.000Z",
                "method": "POST", "path": "/hooks/stripe",
                "headers": [["Host", "hooks.example.com"], ["User-Agent", "Stripe/1.0 (+https://stripe.com/docs/webhooks)"],
                            ["Content-Type", "application/json; charset=utf-8"], ["Stripe-Signature", f"t={t},v1={mac}"]],
                "body": body,
            }
            out.write(json.dumps(envelope, separators=(",", ":")) + "\n")
            valid += 0 if bad else 1
    print(json.dumps({"records": args.count, "valid": valid, "invalid": args.count - valid, "secret": SECRET}))


if __name__ == "__main__":
    main()
