#!/usr/bin/env python3
"""Writes the sample captures in samples/captures/.

The signatures are computed here with Python's own hmac module, following each
provider's documentation, independently of idem, so that the demo and the
end-to-end tests check idem against a second implementation. The secrets are
test secrets, published here on purpose.

Run from anywhere: python3 samples/generate.py
"""
import base64
import hashlib
import hmac
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "captures")

STRIPE_SECRET = "whsec_demo_stripe_secret"
STRIPE_OLD_SECRET = "whsec_demo_rotated_out"
GITHUB_SECRET = "gh-demo-secret"
STANDARD_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
SLACK_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
SHOPIFY_SECRET = "shopify-demo-secret"

T0 = 1796025600  # 2026-11-30T08:00:00Z


def iso(seconds, millis=0):
    import datetime
    moment = datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % millis


def envelope(capture_id, received, path, headers, body):
    return json.dumps({"idem": 1, "id": capture_id, "received_at": received, "method": "POST",
                       "path": path, "headers": headers, "body": body}, separators=(",", ":"))


def stripe_header(secret, t, body):
    mac = hmac.new(secret.encode(), f"{t}.{body}".encode(), hashlib.sha256).hexdigest()
    return f"t={t},v1={mac}"


def stripe_captures():
    lines = []
    events = [
        ("evt_1QaA", "payment_intent.succeeded", "pi_3QaA", 2000),
        ("evt_1QaB", "charge.refunded", "ch_3QaB", 500),
        ("evt_1QaC", "invoice.paid", "in_1QaC", 12900),
        ("evt_1QaD", "payment_intent.succeeded", "pi_3QaD", 4200),
    ]
    for i, (evt, kind, obj, amount) in enumerate(events):
        t = T0 + 60 * i
        body = json.dumps({"id": evt, "object": "event", "type": kind,
                           "data": {"object": {"id": obj, "amount": amount, "currency": "usd"}}}, indent=2)
        secret = STRIPE_OLD_SECRET if i == 2 else STRIPE_SECRET  # one signed before the rotation
        lines.append(envelope(f"cap_{i+1:04}", iso(t, 120), "/hooks/stripe",
                              [["Content-Type", "application/json; charset=utf-8"],
                               ["Stripe-Signature", stripe_header(secret, t, body)]], body))
    # A forged delivery: a valid-looking header made with a guessed secret.
    body = json.dumps({"id": "evt_forged", "object": "event", "type": "payment_intent.succeeded",
                       "data": {"object": {"id": "pi_forged", "amount": 999999, "currency": "usd"}}}, indent=2)
    t = T0 + 300
    lines.append(envelope("cap_0005", iso(t, 5), "/hooks/stripe",
                          [["Content-Type", "application/json"], ["Stripe-Signature", stripe_header("whsec_guess", t, body)]],
                          body))
    # A replay: the first delivery's exact bytes, captured again 40 minutes later.
    first = json.loads(lines[0])
    first["id"] = "cap_0006"
    first["received_at"] = iso(T0 + 2400)
    lines.append(json.dumps(first, separators=(",", ":")))
    # A tampered amount under the original signature.
    tampered = json.loads(lines[1])
    tampered["id"] = "cap_0007"
    tampered["body"] = tampered["body"].replace("500", "50000")
    lines.append(json.dumps(tampered, separators=(",", ":")))
    return lines


def github_captures():
    lines = []
    for i, (event, payload) in enumerate([
            ("push", {"ref": "refs/heads/main", "after": "9f1c2e7", "repository": {"full_name": "acme/api"}}),
            ("check_run", {"action": "completed", "check_run": {"head_sha": "9f1c2e7", "conclusion": "success"}}),
            ("push", {"ref": "refs/heads/main", "after": "a41b0d3", "repository": {"full_name": "acme/api"}})]):
        body = json.dumps(payload, separators=(",", ":"))
        mac = hmac.new(GITHUB_SECRET.encode(), body.encode(), hashlib.sha256).hexdigest()
        lines.append(envelope(f"gh_{i+1:04}", iso(T0 + 10 * i), "/hooks/github",
                              [["X-GitHub-Event", event], ["X-GitHub-Delivery", f"d6b1c5a0-{i:04}-11ef-9e0f-0242ac120002"],
                               ["X-Hub-Signature-256", f"sha256={mac}"], ["Content-Type", "application/json"]], body))
    # GitHub's "Redeliver" button in the UI resends the same delivery id.
    redelivered = json.loads(lines[0])
    redelivered["id"] = "gh_0004"
    redelivered["received_at"] = iso(T0 + 45)
    lines.append(json.dumps(redelivered, separators=(",", ":")))
    return lines


def mixed_captures():
    lines = []
    body = '{"type":"message.created","data":{"id":"m_1"}}'
    key = base64.b64decode(STANDARD_SECRET[len("whsec_"):])
    sig = base64.b64encode(hmac.new(key, f"msg_2Qx.{T0}.{body}".encode(), hashlib.sha256).digest()).decode()
    lines.append(envelope("mx_0001", iso(T0), "/hooks/resend",
                          [["webhook-id", "msg_2Qx"], ["webhook-timestamp", str(T0)], ["webhook-signature", f"v1,{sig}"]], body))
    body = "token=xyz&team_id=T1&command=%2Fdeploy&text=api+prod"
    sig = hmac.new(SLACK_SECRET.encode(), f"v0:{T0}:{body}".encode(), hashlib.sha256).hexdigest()
    lines.append(envelope("mx_0002", iso(T0, 400), "/hooks/slack",
                          [["Content-Type", "application/x-www-form-urlencoded"], ["X-Slack-Request-Timestamp", str(T0)],
                           ["X-Slack-Signature", f"v0={sig}"]], body))
    body = '{"id":820982911946154508,"email":"jon@example.com"}'
    sig = base64.b64encode(hmac.new(SHOPIFY_SECRET.encode(), body.encode(), hashlib.sha256).digest()).decode()
    lines.append(envelope("mx_0003", iso(T0 + 1), "/hooks/shopify",
                          [["X-Shopify-Topic", "orders/create"], ["X-Shopify-Hmac-Sha256", sig],
                           ["X-Shopify-Webhook-Id", "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043"]], body))
    # A body that is not UTF-8 travels as body_b64; GitHub signs its bytes.
    raw = b'{"blob":"\xff\xfe"}'
    mac = hmac.new(GITHUB_SECRET.encode(), raw, hashlib.sha256).hexdigest()
    lines.append(json.dumps({"idem": 1, "id": "mx_0004", "received_at": iso(T0 + 2), "method": "POST",
                             "path": "/hooks/github", "headers": [["X-Hub-Signature-256", f"sha256={mac}"]],
                             "body_b64": base64.b64encode(raw).decode()}, separators=(",", ":")))
    lines.append(json.dumps({"type": "ticket.created", "ticket": {"id": "T-1"}}))  # a plain event
    return lines


def bad_lines():
    good = github_captures()[0]
    return [good, '{"idem":1,"id":"half', "not json at all", '[1,2,3]', good.replace("gh_0001", "gh_0009")]


def har_file():
    body = '{"ref":"refs/heads/main"}'
    mac = hmac.new(GITHUB_SECRET.encode(), body.encode(), hashlib.sha256).hexdigest()
    entry = {"startedDateTime": "2026-11-30T09:00:00.000+01:00", "time": 12,
             "request": {"method": "POST", "url": "https://hooks.example.com/hooks/github", "httpVersion": "HTTP/2",
                         "headers": [{"name": ":authority", "value": "hooks.example.com"},
                                     {"name": "x-github-event", "value": "push"},
                                     {"name": "x-hub-signature-256", "value": f"sha256={mac}"}],
                         "queryString": [], "cookies": [], "headersSize": -1, "bodySize": len(body),
                         "postData": {"mimeType": "application/json", "text": body}},
             "response": {"status": 200, "statusText": "OK", "httpVersion": "HTTP/2", "headers": [], "cookies": [],
                          "content": {"size": 0, "mimeType": "text/plain"}, "redirectURL": "", "headersSize": -1,
                          "bodySize": 0},
             "cache": {}, "timings": {"send": 0, "wait": 10, "receive": 2}}
    return json.dumps({"log": {"version": "1.2", "creator": {"name": "devtools", "version": "1"},
                               "entries": [entry]}}, indent=2)


def stripe_events():
    """Plain Stripe events with the duplicates Stripe and retries produce:
    a redelivery of the same bytes, a re-send with a new request id and
    attempt counter, and the same event with its keys in another order."""
    events = []
    for i, (kind, amount) in enumerate([("payment_intent.succeeded", 2000), ("charge.refunded", 500),
                                        ("invoice.paid", 12900), ("payment_intent.succeeded", 4200)]):
        events.append({"id": f"evt_3Q{i}", "object": "event", "type": kind, "created": T0 + 60 * i,
                       "request": {"id": f"req_{i}a"}, "delivery_attempt": 1,
                       "data": {"object": {"id": f"pi_3Q{i}", "amount": amount, "currency": "usd"}}})
    lines = [json.dumps(e, separators=(",", ":")) for e in events]
    resent = dict(events[0], request={"id": "req_0b"}, delivery_attempt=2)
    reordered = dict(reversed(list(events[2].items())))
    return [lines[0], lines[1], lines[0], lines[2], json.dumps(resent, separators=(",", ":")), lines[3],
            json.dumps(reordered, separators=(",", ":"))]


def ci_pipeline_events():
    """Two CI pipelines' events as a webhook consumer received them: out of
    order ("build finished" before "commit pushed"), one approval never
    delivered, one redelivered after the pipeline had moved on."""
    steps = ["commit.pushed", "build.started", "build.finished", "tests.passed", "approval.granted",
             "deploy.started", "deploy.finished"]
    def event(pipeline, seq, offset):
        return json.dumps({"pipeline": pipeline, "seq": seq, "event": steps[seq - 1],
                           "at": iso(T0 + offset)}, separators=(",", ":"))
    order = [("web", 1, 0), ("web", 3, 40), ("api", 1, 5), ("web", 2, 20), ("api", 3, 50), ("api", 2, 30),
             ("web", 4, 60), ("web", 6, 90), ("api", 4, 70), ("web", 7, 120), ("api", 5, 80),
             ("api", 6, 100), ("api", 7, 130), ("web", 4, 61)]  # web 5 never came; web 4 came twice
    return [event(*item) for item in order]


def alerts_and_metrics():
    """The seed's merge case: one user's disk alerts in bursts (one of them
    critical), and two devices' CPU readings every 10 s, interleaved, one
    reading 15 s late and one 2 minutes late."""
    events = []
    for offset, msg in [(0, "disk 91%"), (20, "disk 93%"), (45, "disk 95%"), (70, "disk 97%")]:
        events.append((offset, {"type": "notification", "user_id": "u_42", "alert_type": "disk",
                                "msg": msg}))
    events.append((80, {"type": "notification", "user_id": "u_42", "alert_type": "disk",
                        "msg": "disk full", "priority": "critical"}))
    events.append((30, {"type": "notification", "user_id": "u_7", "alert_type": "login",
                        "msg": "new device"}))
    for device, base in [("edge-1", 40), ("edge-2", 70)]:
        for i in range(12):
            events.append((i * 10 + 1, {"type": "metrics", "device_id": device, "metric_name": "cpu",
                                        "value": base + (i * 7) % 13}))
    events.sort(key=lambda item: item[0])
    lines = []
    for offset, event in events:
        event["ts"] = iso(T0 + offset)
        lines.append((offset, json.dumps(event, separators=(",", ":"))))
    # Arrival order: one reading 15 s late (within --max-lateness 30s), one 2 minutes late.
    late = lines.pop(10)
    lines.insert(13, late)
    very_late = lines.pop(3)
    lines.append(very_late)
    lines.append((0, json.dumps({"type": "audit", "action": "login", "ts": iso(T0 + 125)},
                                separators=(",", ":"))))
    return [line for _, line in lines]


def order_events():
    """Four orders' status webhooks as a shop received them: out of order
    within seconds, one refunded before it was paid (illegal), one payment
    webhook delivered twice with different statuses for one version (a
    lost update), one version never delivered, one order left pending."""
    events = [
        ("ord_1", "pending", 1, 0, ""), ("ord_1", "paid", 2, 60, "confirm"), ("ord_1", "shipped", 3, 120, ""),
        ("ord_1", "delivered", 4, 180, ""), ("ord_1", "closed", 5, 240, ""),
        ("ord_2", "pending", 1, 10, ""), ("ord_2", "refunded", 2, 70, "refund"),
        ("ord_3", "pending", 1, 20, ""), ("ord_3", "paid", 2, 80, "confirm"), ("ord_3", "cancelled", 2, 81, "cancel"),
        ("ord_4", "pending", 1, 30, ""), ("ord_4", "paid", 2, 90, "confirm"), ("ord_4", "delivered", 4, 210, ""),
        ("ord_5", "pending", 1, 40, ""),
    ]
    arrival = {("ord_1", 3): 125, ("ord_1", 2): 126}  # shipped arrives before paid
    lines = []
    for entity, status, version, offset, op in events:
        record = {"order_id": entity, "status": status, "version": version, "ts": iso(T0 + offset)}
        if op:
            record["op"] = op
        lines.append((arrival.get((entity, version), offset), json.dumps(record, separators=(",", ":"))))
    lines.append((3700, json.dumps({"order_id": "ord_6", "status": "pending", "version": 1, "ts": iso(T0 + 3700)},
                                   separators=(",", ":"))))
    lines.sort(key=lambda item: item[0])
    return [line for _, line in lines]


def write(name, lines):
    with open(os.path.join(OUT, name), "w", encoding="utf-8", newline="\n") as out:
        out.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    write("stripe.ndjson", stripe_captures())
    write("github.ndjson", github_captures())
    write("mixed.ndjson", mixed_captures())
    write("bad-lines.ndjson", bad_lines())
    os.makedirs(os.path.join(HERE, "events"), exist_ok=True)
    write(os.path.join("..", "events", "stripe-events.ndjson"), stripe_events())
    write(os.path.join("..", "events", "ci-pipeline.ndjson"), ci_pipeline_events())
    write(os.path.join("..", "events", "alerts-metrics.ndjson"), alerts_and_metrics())
    write(os.path.join("..", "events", "orders.ndjson"), order_events())
    with open(os.path.join(OUT, "deliveries.har"), "w", encoding="utf-8") as out:
        out.write(har_file() + "\n")
