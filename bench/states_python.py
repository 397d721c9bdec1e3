#!/usr/bin/env python3
"""What a user would write instead of `idem states` for one log: a dict of
each order's state and version, the allowed transitions as a set, and a
count of each finding (events arrive in version order here, so no
reordering is needed).

  bench/states_python.py orders.ndjson
"""
import json
import sys
from collections import Counter

ALLOWED = {("pending", "paid"), ("pending", "cancelled"), ("paid", "refunded"), ("paid", "shipped"),
           ("shipped", "in_transit"), ("in_transit", "in_transit"), ("in_transit", "delivered"),
           ("delivered", "closed")}
STATES = {"pending", "paid", "shipped", "in_transit", "delivered", "closed", "cancelled", "refunded"}
FINAL = {"closed", "cancelled", "refunded"}


def main():
    entities = {}
    findings = Counter()
    with open(sys.argv[1]) as f:
        for line in f:
            record = json.loads(line)
            entity, to, version = record["order_id"], record["status"], record["version"]
            known = entities.get(entity)
            unknown = to not in STATES
            if unknown:
                findings["unknown-state"] += 1
            if known is None:
                if not unknown and to != "pending":
                    findings["bad-start"] += 1
                entities[entity] = [to, version]
                continue
            state, last = known
            if version != last + 1:
                findings["version-gap" if version > last + 1 else "stale"] += 1
            if state in FINAL:
                findings["after-final"] += 1
                known[1] = version
                continue
            if to == state and (state, to) not in ALLOWED:
                findings["repeated"] += 1
            elif to in STATES and (state, to) not in ALLOWED:
                findings["illegal"] += 1
            known[0], known[1] = to, version
    print(json.dumps(dict(sorted(findings.items()))))


if __name__ == "__main__":
    main()
