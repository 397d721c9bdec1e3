#!/usr/bin/env python3
"""What users write instead of `idem dedup --key data.object.id,type` with a
SQLite file: the same persistence, INSERT OR IGNORE in batches."""
import json
import sqlite3
import sys

db = sqlite3.connect(sys.argv[1])
db.execute("PRAGMA journal_mode=WAL")
db.execute("PRAGMA synchronous=NORMAL")
db.execute("CREATE TABLE IF NOT EXISTS seen (key TEXT PRIMARY KEY) WITHOUT ROWID")
out = sys.stdout
cursor = db.cursor()
pending = 0
for line in sys.stdin:
    event = json.loads(line)
    cursor.execute("INSERT OR IGNORE INTO seen(key) VALUES (?)", (event["data"]["object"]["id"] + "\x1f" + event["type"],))
    if cursor.rowcount == 1:
        out.write(line)
    pending += 1
    if pending == 10000:
        out.flush()
        db.commit()
        pending = 0
out.flush()
db.commit()
