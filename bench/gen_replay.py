"""Small Stripe-like events for bench/run_listen_replay.sh, one per line,
each with its own id (the idempotency key)."""
import argparse
import json


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=100000)
    parser.add_argument("out")
    args = parser.parse_args()
    with open(args.out, "w") as out:
        for n in range(args.count):
            out.write(json.dumps({"id": f"evt_{n:07d}", "object": "event", "type": "charge.succeeded",
                                  "data": {"object": {"id": f"ch_{n:07d}", "amount": 100 + n % 9000}}},
                                 separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()
