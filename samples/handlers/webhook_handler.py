"""A small webhook receiver for `idem probe` to judge (docs/probe.md):
standard library only, its state in SQLite. Three reference handlers run
it in one of its modes (correct.py, check_after_work.py, short_ttl.py,
queued.py, memory_keys.py);
the tests run broken variants of it with the flags marked "for tests".

Every delivery carries an Idempotency-Key. The correct mode keeps a key
table as the IETF Idempotency-Key draft describes: a key is claimed
(in_progress) before the work, the work and the key's completion (with the
stored response) commit together, a copy that comes while the first is in
progress is answered 409, a completed one gets the stored response again,
the same key with another payload 422. Side effects are rows of `effects`:

    SELECT count(*) FROM effects WHERE key = :key
"""
import argparse
import hashlib
import hmac
import json
import sqlite3
import sys
import threading
import time
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MAX_BODY = 1 << 20

SCHEMA = """
CREATE TABLE IF NOT EXISTS keys (
    key TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, state TEXT NOT NULL,
    status INTEGER, response TEXT, created_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS effects (
    id INTEGER PRIMARY KEY, key TEXT NOT NULL, event_id TEXT, at REAL NOT NULL);
"""


def options(mode, argv=None):
    parser = argparse.ArgumentParser(description=f"reference webhook handler ({mode})")
    parser.add_argument("--port", type=int, default=0, help="0: any free port (printed)")
    parser.add_argument("--db", required=True, help="the handler's SQLite database")
    parser.add_argument("--secret", help="verify Stripe-Signature with this secret")
    parser.add_argument("--tolerance", type=float, default=300, help="signature age limit, seconds")
    parser.add_argument("--ttl", type=float, default=None, help="a key expires after this many seconds")
    parser.add_argument("--work-seconds", type=float, default=0.05, help="how long the work takes")
    parser.add_argument("--fault-header", default="X-Inject-Fault",
                        help="a delivery with this header is answered 503 (fault injection)")
    parser.add_argument("--trust-clock-header", default=None,
                        help="read the time from this header (a test's clock), not the system's")
    # For tests: handlers broken in one way each.
    parser.add_argument("--accept-reuse", action="store_true", help="answer 200 to a reused key")
    parser.add_argument("--skip-signature-check", action="store_true", help="accept forged signatures")
    parser.add_argument("--delay", type=float, default=0, help="answer this many seconds late")
    parser.add_argument("--fail-concurrent", action="store_true", help="500 instead of 409")
    parser.add_argument("--act-after-answer", action="store_true",
                        help="answer 202 once the key is claimed, then do the work (a queue)")
    parser.add_argument("--fingerprint-ignore", action="append", default=[],
                        help="a top-level field a provider changes on every copy: left out of the "
                             "payload a key is compared on (repeatable)")
    parser.add_argument("--fault-after-effect", action="store_true",
                        help="the fault header strikes after the work's effect, before the answer")
    parser.add_argument("--forget-key-on-fault", action="store_true",
                        help="with --fault-after-effect: the failure also drops the key (as a "
                             "handler whose error path deletes its claim)")
    parser.add_argument("--reuse-status", type=int, default=422,
                        help="the status a key reused with another payload is refused with")
    parser.add_argument("--keys-in-memory", action="store_true",
                        help="keep the keys only while the process lives (forgotten at a restart)")
    parser.add_argument("--key-by-body", action="store_true",
                        help="key a delivery by a hash of its body, not its Idempotency-Key")
    parser.add_argument("--key-per-path", action="store_true",
                        help="key a delivery by its path and key: the same key at another endpoint is new")
    parser.add_argument("--queue-delay", type=float, default=2.0,
                        help="queued mode: how long after answering a delivery's work starts")
    parsed = parser.parse_args(argv)
    parsed.mode = mode
    return parsed


def now_of(headers, settings):
    if settings.trust_clock_header and headers.get(settings.trust_clock_header):
        text = headers[settings.trust_clock_header].replace("Z", "+00:00")
        return datetime.fromisoformat(text).timestamp()
    return time.time()


def signature_problem(headers, body, now, settings):
    """Stripe's scheme: t=TIMESTAMP,v1=HMAC-SHA256(secret, "t.body")."""
    if not settings.secret or settings.skip_signature_check:
        return None
    items = dict(part.split("=", 1) for part in headers.get("Stripe-Signature", "").split(",") if "=" in part)
    if "t" not in items or "v1" not in items:
        return "missing signature"
    expected = hmac.new(settings.secret.encode(), items["t"].encode() + b"." + body, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, items["v1"]):
        return "bad signature"
    if abs(now - int(items["t"])) > settings.tolerance:
        return "signature timestamp outside the tolerance"
    return None


class Handler(BaseHTTPRequestHandler):
    settings = None
    lock = threading.Lock()

    def log_message(self, *args):
        pass

    def answer(self, status, payload):
        if self.settings.delay:
            time.sleep(self.settings.delay)
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the sender hung up: the work stands, a retry gets the stored answer

    def db(self):
        conn = sqlite3.connect(self.settings.db, timeout=30, isolation_level=None)
        conn.execute("PRAGMA busy_timeout = 30000")
        return conn

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            return self.answer(413, {"error": "body too large"})
        body = self.rfile.read(length)
        now = now_of(self.headers, self.settings)
        problem = signature_problem(self.headers, body, now, self.settings)
        if problem:
            return self.answer(400, {"error": problem})
        key = self.headers.get("Idempotency-Key")
        if not key:
            return self.answer(400, {"error": "Idempotency-Key is required"})
        if self.settings.key_by_body:
            key = "body-" + hashlib.sha256(body).hexdigest()  # broken on purpose: copies that differ are new
        if self.settings.key_per_path:
            key = self.path + " " + key  # broken on purpose: one key per endpoint
        try:
            event = json.loads(body)
        except ValueError:
            return self.answer(400, {"error": "the body is not JSON"})
        # What a key is compared on: the payload without the fields a
        # provider changes on every copy (an attempt counter, a send time).
        compared = {k: v for k, v in event.items() if k not in self.settings.fingerprint_ignore} \
            if isinstance(event, dict) else event
        fingerprint = hashlib.sha256(json.dumps(compared, sort_keys=True).encode()).hexdigest()
        faulty = self.settings.fault_header and self.headers.get(self.settings.fault_header)
        if self.settings.mode == "check-after-work":
            return self.check_after_work(key, fingerprint, event, now, faulty)
        if self.settings.mode == "queued":
            threading.Thread(target=self.queued_work, args=(key, fingerprint, event, now),
                             daemon=True).start()
            return self.answer(200, {"queued": event.get("id")})
        return self.claim_then_work(key, fingerprint, event, now, faulty)

    def stored(self, row, fingerprint):
        """The answer for a key already known, or None to process it."""
        stored_fingerprint, state, status, response = row
        if stored_fingerprint != fingerprint and not self.settings.accept_reuse:
            return self.settings.reuse_status, {"error": "this Idempotency-Key was used with another payload"}
        if state == "in_progress":
            if self.settings.fail_concurrent:
                return 500, {"error": "database is locked"}
            return 409, {"error": "a request with this Idempotency-Key is in progress"}
        return status, json.loads(response)

    def claim_then_work(self, key, fingerprint, event, now, faulty):
        conn = self.db()
        try:
            conn.execute("BEGIN IMMEDIATE")
            row = conn.execute("SELECT fingerprint, state, status, response, created_at FROM keys WHERE key = ?",
                               (key,)).fetchone()
            if row and self.settings.ttl is not None and row[4] + self.settings.ttl <= now:
                conn.execute("DELETE FROM keys WHERE key = ?", (key,))
                row = None
            if row:
                conn.execute("COMMIT")
                return self.answer(*self.stored(row[:4], fingerprint))
            if faulty and not self.settings.fault_after_effect:
                conn.execute("COMMIT")
                return self.answer(503, {"error": "fault injected"})
            conn.execute("INSERT INTO keys VALUES (?, ?, 'in_progress', NULL, NULL, ?)", (key, fingerprint, now))
            conn.execute("COMMIT")
            if faulty:
                # The partial failure: the work's effect is done (and, in the
                # correct handler, the key completed with it), then the
                # answer fails. A retry finds the key completed and gets the
                # stored response -- unless the error path drops the key.
                self.complete(conn, key, event, now)
                if self.settings.forget_key_on_fault:
                    conn.execute("DELETE FROM keys WHERE key = ?", (key,))
                return self.answer(503, {"error": "fault injected after the work"})
            if self.settings.act_after_answer:
                threading.Thread(target=self.work_later, args=(key, event, now), daemon=True).start()
                return self.answer(202, {"queued": event.get("id")})
            time.sleep(self.settings.work_seconds)
            return self.answer(200, self.complete(conn, key, event, now))
        except Exception:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            conn.execute("DELETE FROM keys WHERE key = ? AND state = 'in_progress'", (key,))
            return self.answer(500, {"error": "the work failed"})
        finally:
            conn.close()

    @staticmethod
    def complete(conn, key, event, now):
        """The work's side effect and the key's completion, with the response
        a later copy gets, in one transaction."""
        response = {"received": event.get("id"), "processed": True}
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO effects (key, event_id, at) VALUES (?, ?, ?)", (key, str(event.get("id")), now))
        conn.execute("UPDATE keys SET state = 'completed', status = 200, response = ? WHERE key = ?",
                     (json.dumps(response), key))
        conn.execute("COMMIT")
        return response

    def work_later(self, key, event, now):
        time.sleep(max(self.settings.work_seconds, 0.3))
        conn = self.db()
        try:
            self.complete(conn, key, event, now)
        finally:
            conn.close()

    def check_after_work(self, key, fingerprint, event, now, faulty):
        """Broken on purpose: the key is looked up, then the work is done,
        then the key is stored, so copies that come together all work."""
        conn = self.db()
        try:
            row = conn.execute("SELECT fingerprint, state, status, response FROM keys WHERE key = ?",
                               (key,)).fetchone()
            if row:
                return self.answer(*self.stored(row, fingerprint))
            if faulty:
                return self.answer(503, {"error": "fault injected"})
            time.sleep(self.settings.work_seconds)
            return self.answer(200, self.work_then_store_key(conn, key, fingerprint, event, now))
        finally:
            conn.close()


    def queued_work(self, key, fingerprint, event, now):
        """Broken on purpose: the queue's worker looks the key up when it
        gets to the delivery, --queue-delay after the answer, and stores it
        with the work's effect; copies queued before the first is done all
        work, and their effects show only after the answers."""
        time.sleep(self.settings.queue_delay)
        conn = self.db()
        try:
            if conn.execute("SELECT 1 FROM keys WHERE key = ?", (key,)).fetchone():
                return
            time.sleep(self.settings.work_seconds)
            self.work_then_store_key(conn, key, fingerprint, event, now)
        finally:
            conn.close()

    @staticmethod
    def work_then_store_key(conn, key, fingerprint, event, now):
        """The work's effect and the key stored as completed, together: the
        broken modes' flaw is the look-up before it, not a gap after it."""
        response = {"received": event.get("id"), "processed": True}
        with conn:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO effects (key, event_id, at) VALUES (?, ?, ?)",
                         (key, str(event.get("id")), now))
            conn.execute("INSERT OR REPLACE INTO keys VALUES (?, ?, 'completed', 200, ?, ?)",
                         (key, fingerprint, json.dumps(response), now))
        return response


def main(mode, argv=None):
    settings = options(mode, argv)
    conn = sqlite3.connect(settings.db)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.executescript(SCHEMA)
    if settings.keys_in_memory:
        # Broken on purpose: as a dict in the process would, a new process
        # starts with no key known; the effects stay (they are the world's).
        conn.execute("DELETE FROM keys")
        conn.commit()
    conn.close()
    Handler.settings = settings
    server = ThreadingHTTPServer(("127.0.0.1", settings.port), Handler)
    server.daemon_threads = True
    print(f"listening on http://127.0.0.1:{server.server_address[1]}/ ({mode})", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "correct", sys.argv[2:]))
