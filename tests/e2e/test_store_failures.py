"""A store that fails to answer is an error, never "not found": every SQLite
read goes through one checked step (lib/idem/store/sqlite/sqlite_support.hpp,
step_row). Each test makes a real SQLite file fail at the moment idem reads
it: the table is swapped for a view whose rows raise SQLite's own "integer
overflow" when read (abs() of the smallest integer), while writes still go
through to the table behind it."""
import json
import os
import sqlite3
import tempfile
import unittest

from harness import run

SECRET = "store-failure-secret"


def fail_reads_of(db, table, columns, failing):
    """`table` becomes a view over its rows in which column `failing` raises
    an error when a row is read; inserts reach the rows through a trigger."""
    with sqlite3.connect(db) as conn:
        kept = f"{table}_kept"
        shown = ", ".join(f"abs(-9223372036854775808) AS {c}" if c == failing else c for c in columns)
        names = ", ".join(columns)
        news = ", ".join(f"NEW.{c}" for c in columns)
        conn.executescript(f"""
            ALTER TABLE {table} RENAME TO {kept};
            CREATE VIEW {table} AS SELECT {shown} FROM {kept};
            CREATE TRIGGER {table}_insert INSTEAD OF INSERT ON {table}
            BEGIN INSERT OR REPLACE INTO {kept}({names}) VALUES ({news}); END;
        """)
    conn.close()


class StoreFailures(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.db = os.path.join(self.tmp.name, "idem.db")

    def tearDown(self):
        self.tmp.cleanup()

    def test_a_nonce_the_store_cannot_read_is_no_nonce_never_seen(self):
        # A GitHub delivery verified with --nonce, then delivered again while
        # the store fails to read its nonce: before, the failed read counted
        # as "never seen" and the replay passed as valid.
        code, out, err = run(["sign", "--scheme", "github", "--secret", SECRET, "-q"], stdin=b'{"id":"evt_1"}\n')
        self.assertEqual(code, 0, err)
        delivery = json.loads(out)
        delivery["headers"].append(["X-GitHub-Delivery", "dlv-1"])
        delivery["received_at"] = "2026-11-30T09:00:00Z"
        path = os.path.join(self.tmp.name, "delivery.ndjson")
        with open(path, "w") as f:
            f.write(json.dumps(delivery) + "\n")
        verify = ["verify", "--scheme", "github", "--secret", SECRET, "--nonce", "--store", self.db, path]
        code, _, err = run(verify + ["-q"])
        self.assertEqual(code, 0, err)
        fail_reads_of(self.db, "nonces", ["scope", "nonce", "first_seen_us", "expires_us", "source", "line"],
                      "first_seen_us")
        code, out, err = run(verify)
        self.assertEqual(code, 4, (out, err))
        self.assertIn("store", err)
        self.assertIn("integer overflow", err)
        self.assertNotIn(b'"valid": true', out)


if __name__ == "__main__":
    unittest.main()
