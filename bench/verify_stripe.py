#!/usr/bin/env python3
"""What a user would write instead of `idem verify --scheme stripe`: the same
checks (Stripe-Signature t= and v1= entries, HMAC-SHA256 over "{t}.{body}",
constant-time comparison, the 5-minute tolerance against received_at), and
each record written out with its verdict.

usage: verify_stripe.py SECRET < envelopes.ndjson > verdicts.ndjson
"""
import datetime
import hashlib
import hmac
import json
import sys

TOLERANCE = 300


def verify(record, key):
    headers = {name.lower(): value for name, value in record.get("headers", [])}
    header = headers.get("stripe-signature")
    if header is None:
        return False, "missing header"
    timestamp, signatures = None, []
    for item in header.split(","):
        name, _, value = item.strip().partition("=")
        if name == "t" and timestamp is None:
            timestamp = value
        elif name == "v1":
            signatures.append(value)
    if timestamp is None or not signatures:
        return False, "malformed header"
    expected = hmac.new(key, f"{timestamp}.{record['body']}".encode(), hashlib.sha256).hexdigest()
    if not any(hmac.compare_digest(expected, s) for s in signatures):
        return False, "signature does not match"
    received = datetime.datetime.fromisoformat(record["received_at"].replace("Z", "+00:00")).timestamp()
    if int(timestamp) < received - TOLERANCE:
        return False, "timestamp too old"
    return True, "signature matches"


def main():
    key = sys.argv[1].encode()
    invalid = 0
    out = sys.stdout
    for line in sys.stdin:
        record = json.loads(line)
        valid, reason = verify(record, key)
        invalid += not valid
        record["_verify"] = {"valid": valid, "reason": reason}
        out.write(json.dumps(record, separators=(",", ":")) + "\n")
    print(f"invalid: {invalid}", file=sys.stderr)


if __name__ == "__main__":
    main()
