#!/usr/bin/env python3
"""What users write instead of `idem dedup --key data.object.id,type --store :memory:`."""
import json
import sys

seen = set()
out = sys.stdout
for line in sys.stdin:
    event = json.loads(line)
    key = (event["data"]["object"]["id"], event["type"])
    if key not in seen:
        seen.add(key)
        out.write(line)
