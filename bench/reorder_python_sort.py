#!/usr/bin/env python3
"""What users do today without a sequencer: load the whole log, sort it by
partition and sequence, write it out. Needs the whole file; reports no gaps."""
import json
import sys

records = [(r["p"], r["seq"], line) for line in sys.stdin for r in (json.loads(line),)]
records.sort(key=lambda item: (item[0], item[1]))
sys.stdout.writelines(line for _, _, line in records)
