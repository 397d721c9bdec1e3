#!/usr/bin/env python3
"""Incident logs that reconstruct real failure patterns, for `idem audit`'s
demo and end-to-end tests. Deterministic: rerunning rewrites the same files.

Each log is what the affected service recorded; README.md says how to audit
each and which causes the evidence supports."""
import json
import os
from datetime import datetime, timedelta, timezone

HERE = os.path.dirname(os.path.abspath(__file__))
T0 = datetime(2026, 11, 30, 9, 0, 0, tzinfo=timezone.utc)


def ts(at):
    return at.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def write(name, records):
    with open(os.path.join(HERE, name), "w", encoding="utf-8", newline="\n") as out:
        for record in records:
            out.write(json.dumps(record, separators=(",", ":")) + "\n")


def agent_retries():
    """An agent's ticket-creation call timed out; three retry layers (the
    agent loop 3x, the tool wrapper 2x, the HTTP client 2x) each made a new
    idempotency key, and seven of the twelve requests created a ticket within
    three minutes."""
    records = []
    # When each of the 12 nested attempts was sent: agent loop at 0/50/120 s,
    # tool wrapper +0/+20 s, HTTP client +0/+5 s.
    sent = [a + t + h for a in (0, 50, 120) for t in (0, 20) for h in (0, 5)]
    created = [sent[i] for i in (0, 1, 3, 5, 6, 9, 11)]  # the others failed before the insert
    for n, second in enumerate(created):
        records.append({"ts": ts(T0 + timedelta(seconds=second)), "agent": "agent-7",
                        "idempotency_key": f"tkt-{0x5a17 + 97 * n:x}", "user_id": "u_1042",
                        "fault_type": "login_timeout",
                        "ticket": {"title": "Cannot log in: request timed out", "priority": "high"}})
    for n, (user, fault) in enumerate([("u_2001", "billing"), ("u_2002", "login_timeout"),
                                       ("u_2003", "export_failed"), ("u_1042", "billing")]):
        records.append({"ts": ts(T0 + timedelta(seconds=30 + 40 * n)), "agent": f"agent-{n + 1}",
                        "idempotency_key": f"tkt-other-{n}", "user_id": user, "fault_type": fault,
                        "ticket": {"title": f"Issue {n}", "priority": "normal"}})
    records.sort(key=lambda r: r["ts"])
    return records


def ttl_expired():
    """The consumer's dedup key lived 5 minutes; the provider's retry of an
    invoice.paid event came 6 minutes after the first delivery, and the
    invoice was credited twice."""
    event = {"type": "invoice.paid", "invoice": "in_77", "amount": 4200, "currency": "eur"}
    records = [
        {"ts": ts(T0), "key": "evt_1Q77", "worker": "billing-1", "event": event},
        {"ts": ts(T0 + timedelta(minutes=6, seconds=4)), "key": "evt_1Q77", "worker": "billing-1", "event": event},
    ]
    for n in range(5):
        records.append({"ts": ts(T0 + timedelta(minutes=n, seconds=17)), "key": f"evt_1Q{80 + n}",
                        "worker": "billing-1", "event": dict(event, invoice=f"in_{80 + n}")})
    records.sort(key=lambda r: r["ts"])
    return records


def overnight_resume():
    """A payment workflow paused overnight; on resume it regenerated its
    idempotency key, so the processor saw a new request and charged again."""
    evening = datetime(2026, 11, 29, 18, 2, 11, tzinfo=timezone.utc)
    morning = datetime(2026, 11, 30, 8, 15, 40, tzinfo=timezone.utc)
    charge = {"order_id": "ord_9001", "step": "charge", "amount": 129.0, "currency": "usd"}
    return [
        dict({"ts": ts(evening), "workflow": "wf-311", "idempotency_key": "wf-311-charge-a1b2"}, **charge),
        {"ts": ts(evening + timedelta(seconds=3)), "workflow": "wf-311", "idempotency_key": "wf-311-ship-c3d4",
         "order_id": "ord_9001", "step": "reserve_stock"},
        dict({"ts": ts(morning), "workflow": "wf-311", "idempotency_key": "wf-311-charge-9f8e"}, **charge),
        dict({"ts": ts(morning + timedelta(minutes=2)), "workflow": "wf-312",
              "idempotency_key": "wf-312-charge-0b1c"}, **dict(charge, order_id="ord_9002")),
    ]


def race():
    """Two workers checked "does a subscription exist?", both saw none, both
    inserted: 44 ms apart, one key, the same payload."""
    payload = {"action": "create_subscription", "user": "u_55", "plan": "pro"}
    return [
        dict({"ts": "2026-11-30T12:00:00.120Z", "key": "sub_create:u_55", "worker": "worker-a"}, **payload),
        dict({"ts": "2026-11-30T12:00:00.164Z", "key": "sub_create:u_55", "worker": "worker-b"}, **payload),
        dict({"ts": "2026-11-30T12:00:03.500Z", "key": "sub_create:u_56", "worker": "worker-a"},
             **dict(payload, user="u_56")),
    ]


def key_reuse():
    """A client kept one idempotency key across two checkouts: the second
    order was swallowed as a "duplicate" of the first."""
    return [
        {"ts": "2026-11-30T14:01:00.000Z", "idempotency_key": "checkout-42", "client": "web-3",
         "order": {"id": "ord_1", "total": 25.0}},
        {"ts": "2026-11-30T14:02:10.000Z", "idempotency_key": "checkout-43", "client": "web-4",
         "order": {"id": "ord_3", "total": 12.5}},
        {"ts": "2026-11-30T14:05:00.000Z", "idempotency_key": "checkout-42", "client": "web-3",
         "order": {"id": "ord_2", "total": 310.0}},
    ]


def layered_retries():
    """The same 3 x 2 x 2 incident, logged by the gateway in front of the
    ticket service: every request carries each retry layer's attempt
    counter (the agent loop, the tool wrapper, the HTTP client), and the
    agent kept one idempotency key, which the ticket service did not check."""
    sent = [(a, t, h, sa + st + sh) for a, sa in enumerate((0, 50, 120), 1)
            for t, st in enumerate((0, 20), 1) for h, sh in enumerate((0, 5), 1)]
    records = []
    for agent, tool, http, second in (sent[i] for i in (0, 1, 3, 5, 6, 9, 11)):
        records.append({"ts": ts(T0 + timedelta(seconds=second)), "idempotency_key": "tkt-u_1042-login",
                        "attempt": {"agent": agent, "tool": tool, "http": http},
                        "ticket": {"user_id": "u_1042", "title": "Cannot log in: request timed out"}})
    records.append({"ts": ts(T0 + timedelta(seconds=42)), "idempotency_key": "tkt-u_2001-billing",
                    "attempt": {"agent": 1, "tool": 1, "http": 1},
                    "ticket": {"user_id": "u_2001", "title": "Invoice missing"}})
    records.sort(key=lambda r: r["ts"])
    return records


def capture(at, path, headers, body, status, n):
    """One delivery as `idem listen` captures it, with what it answered."""
    return {"idem": 1, "id": f"cap_{n:03}", "received_at": ts(at), "method": "POST", "path": path,
            "headers": [["Host", "hooks.example.com"]] + [[k, v] for k, v in headers] +
                       [["Content-Type", "application/json"]],
            "body": json.dumps(body, separators=(",", ":")), "_idem": {"listen": {"status": status}}}


def webhook_deliveries():
    """Webhook deliveries captured by `idem listen` (signatures elided), one
    event per provider delivered more than once, each for its own reason:
    Svix retrying on its schedule (and once more after a 200 that came too
    late), Slack retrying an answer slower than its 3 s timeout, one Stripe
    event sent to two endpoints of the same account, and a GitHub delivery
    redelivered by hand an hour later. Svix, Slack and Stripe sign every
    attempt afresh, at the time they send it: each retry carries its own
    signed time. One Stripe delivery is also sent again 40 minutes later with
    its first signed time: a replayed delivery, which no provider makes."""
    t = T0

    def signed_at(second):
        return str(int((t + timedelta(seconds=second)).timestamp()))

    rows = []
    svix_event = {"id": "msg_2b7Q", "type": "invoice.paid", "data": {"invoice": "in_88"}}
    for second, status in ((0, 500), (5.3, 503), (311.0, 200), (2123.0, 200)):
        svix = [("webhook-id", "msg_2b7Q"), ("webhook-timestamp", signed_at(second)),
                ("webhook-signature", f"v1,...{signed_at(second)}")]
        rows.append((t + timedelta(seconds=second), "/hooks/svix", svix, svix_event, status))
    slack_event = {"id": "Ev07Q2LZ", "type": "event_callback", "event": {"type": "app_mention"}}

    def slack(second):
        return [("X-Slack-Request-Timestamp", signed_at(second)), ("X-Slack-Signature", f"v0=...{signed_at(second)}")]

    rows.append((t + timedelta(seconds=100), "/hooks/slack", slack(100), slack_event, 200))
    rows.append((t + timedelta(seconds=103.1), "/hooks/slack",
                 slack(103.1) + [("X-Slack-Retry-Num", "1"), ("X-Slack-Retry-Reason", "http_timeout")], slack_event,
                 200))
    rows.append((t + timedelta(seconds=163.4), "/hooks/slack",
                 slack(163.4) + [("X-Slack-Retry-Num", "2"), ("X-Slack-Retry-Reason", "http_timeout")], slack_event,
                 200))
    stripe_event = {"id": "evt_1QfanOut", "type": "customer.created", "data": {"object": {"id": "cus_9"}}}
    for second, path in ((200.0, "/hooks/billing"), (200.6, "/hooks/ledger")):
        rows.append((t + timedelta(seconds=second), path, [("Stripe-Signature", "t=1796029400,v1=...")],
                     stripe_event, 200))
    github_event = {"id": "72d3162e-cc78-11e3-81ab-4c9367dc0958", "action": "opened", "number": 7}
    github = [("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958"), ("X-GitHub-Event", "pull_request"),
              ("X-GitHub-Hook-ID", "292430182")]
    for second in (400.0, 4012.0):
        rows.append((t + timedelta(seconds=second), "/hooks/github", github, github_event, 200))
    for second in (500.0, 500.0 + 2401):
        rows.append((t + timedelta(seconds=second), "/hooks/billing", [("Stripe-Signature", "t=1796029700,v1=...")],
                     {"id": "evt_1Qonce", "type": "charge.succeeded"}, 200))
    rows.sort(key=lambda row: row[0])
    return [capture(at, path, headers, body, status, n) for n, (at, path, headers, body, status) in enumerate(rows)]


def clean():
    """A day of deliveries with nothing twice."""
    return [{"ts": ts(T0 + timedelta(minutes=7 * n)), "key": f"evt_{n:04}", "worker": f"w{n % 3}",
             "event": {"type": "charge.succeeded", "charge": f"ch_{n}", "amount": 100 * n}} for n in range(20)]


def write_day_folder(records):
    """The webhook deliveries as a log shipper keeps a day of them:
    samples/captures/2026-11-30/, a compressed file per half hour (gzip,
    the last zstd), for the README's postmortem. gzip without a time in
    its header, so the files are the same on every run."""
    import gzip
    import subprocess
    day = os.path.join(HERE, "..", "captures", "2026-11-30")
    os.makedirs(day, exist_ok=True)
    parts = {}
    for record in records:
        at = datetime.fromisoformat(record["received_at"].replace("Z", "+00:00"))
        parts.setdefault(f"{at.hour:02}{30 * (at.minute // 30):02}", []).append(record)
    names = sorted(parts)
    for name in names:
        data = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in parts[name]).encode()
        if name == names[-1]:
            packed = subprocess.run(["zstd", "-q", "-c", "--no-check"], input=data, capture_output=True,
                                    check=True).stdout
            path = os.path.join(day, name + ".ndjson.zst")
        else:
            packed = gzip.compress(data, mtime=0)
            path = os.path.join(day, name + ".ndjson.gz")
        with open(path, "wb") as out:
            out.write(packed)


if __name__ == "__main__":
    write("agent-retries.ndjson", agent_retries())
    write("ttl-expired.ndjson", ttl_expired())
    write("overnight-resume.ndjson", overnight_resume())
    write("race.ndjson", race())
    write("key-reuse.ndjson", key_reuse())
    write("clean.ndjson", clean())
    write("layered-retries.ndjson", layered_retries())
    write("webhook-deliveries.ndjson", webhook_deliveries())
    write_day_folder(webhook_deliveries())
