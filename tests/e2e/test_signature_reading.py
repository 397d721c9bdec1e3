"""End-to-end tests of how verify, listen and --explain read a delivery's
signature: header lines as HTTP reads them (RFC 9110 §5.3, docs/verify.md
"Header lines"), and --nonce keyed on the content a provider signs, never
on the text of its signature (docs/verify.md "Replays")."""
import base64
import hashlib
import hmac
import json
import os
import socket
import time
import tempfile
import unittest

import redis_cluster
import redis_server
from harness import ROOT, run
from listener import listening

PROVIDERS = os.path.join(ROOT, "providers")
STORES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "stores")

# orbcorp/orb-node tests/api-resources/webhooks.test.ts, 'should pass for
# valid signature' (the vector test_providers.py pins too); orb-go's
# webhook test "multiple signatures" sends an invalid v1 on a line before it.
ORB_SECRET = "c-UGKYdnhHh436B_sMouYAPUvXyWpzOdunZBV5dFSD8"
ORB_BODY = ('{"id": "o4mmewpfNNTnjfZc", "created_at": "2024-03-27T15:42:29+00:00", "type": '
            '"resource_event.test", "properties": {"message": "A test webhook from Orb. Happy testing!"}}')
ORB_TIMESTAMP = "2024-03-27T15:42:29.551"
ORB_SIGNATURE = "v1=9d25de966891ab0bc18754faf8d83d0980b44ae330fcc130b41a6cf3daf1f391"
ORB_AT = "2024-03-27T15:42:30Z"

STRIPE_SECRET = "whsec_stripe_reading"
STANDARD_SECRET = "whsec_" + base64.b64encode(b"standard-reading-key-0123456789").decode()
AT = 1_700_000_000
RECEIVED = "2023-11-14T22:13:30Z"  # 10 s after AT


def envelope(body, headers, received_at=RECEIVED, capture_id="cap_1"):
    return {"idem": 1, "id": capture_id, "received_at": received_at, "method": "POST",
            "path": "/hooks", "headers": [[k, v] for k, v in headers], "body": body}


def verify(records, *args):
    """One verify run: exit code, each record's verdict, stderr."""
    code, out, err = run(["verify", *args],
                         stdin="".join(json.dumps(r) + "\n" for r in records).encode())
    return code, [json.loads(line)["_idem"]["verify"] for line in out.splitlines()], err


def stripe_signature(body, at=AT, secret=STRIPE_SECRET):
    """Stripe's v1: hex HMAC-SHA256 of "<t>.<body>" keyed by the secret's
    text (stripe.com/docs/webhooks, "Verify signatures manually")."""
    return hmac.new(secret.encode(), f"{at}.{body}".encode(), hashlib.sha256).hexdigest()


def standard_signature(msg_id, at, body, secret=STANDARD_SECRET):
    """Standard Webhooks' v1: base64 HMAC-SHA256 of "<id>.<t>.<body>" keyed
    by the base64 after whsec_ (standard-webhooks spec, "Signature scheme")."""
    key = base64.b64decode(secret.removeprefix("whsec_"))
    return base64.b64encode(hmac.new(key, f"{msg_id}.{at}.{body}".encode(), hashlib.sha256).digest()).decode()


class HeaderLines(unittest.TestCase):
    """Field lines of one name are one comma-joined list: a provider (or a
    proxy) that sends a signature on each line is judged on all of them."""

    def orb(self, signature_lines, *args):
        headers = [("X-Orb-Timestamp", ORB_TIMESTAMP)] + [("X-Orb-Signature", s) for s in signature_lines]
        return verify([envelope(ORB_BODY, headers, ORB_AT)], "--provider-file", PROVIDERS,
                      "--secret", ORB_SECRET, *args)

    def test_orb_signatures_on_two_lines_verify_in_either_order(self):
        for lines in (["v1=my-invalid-signature", ORB_SIGNATURE], [ORB_SIGNATURE, "v1=my-invalid-signature"]):
            for scheme in ("orb", "auto"):
                code, verdicts, err = self.orb(lines, "--scheme", scheme)
                self.assertEqual(code, 0, (lines, scheme, err))
                self.assertTrue(verdicts[0]["valid"], (lines, scheme, verdicts))

    def test_two_lines_of_invalid_signatures_stay_invalid(self):
        code, verdicts, _ = self.orb(["v1=my-invalid-signature", "v1=" + "0" * 64], "--scheme", "orb")
        self.assertEqual(code, 1)
        self.assertFalse(verdicts[0]["valid"])

    def test_stripe_and_standard_webhooks_signatures_on_two_lines(self):
        body = '{"id":"evt_1","type":"invoice.paid"}'
        good = stripe_signature(body)
        stripe = envelope(body, [("Stripe-Signature", f"t={AT},v1={'ab' * 32}"),
                                 ("Stripe-Signature", f"t={AT},v1={good}")])
        standard_good = standard_signature("msg_1", AT, body)
        standard = envelope(body, [("webhook-id", "msg_1"), ("webhook-timestamp", str(AT)),
                                   ("webhook-signature", "v1," + base64.b64encode(b"x" * 32).decode()),
                                   ("webhook-signature", "v1," + standard_good)])
        standard_first = envelope(body, [("webhook-id", "msg_1"), ("webhook-timestamp", str(AT)),
                                         ("webhook-signature", "v1," + standard_good),
                                         ("webhook-signature", "v1," + base64.b64encode(b"x" * 32).decode())])
        code, verdicts, err = verify([stripe], "--scheme", "stripe", "--secret", STRIPE_SECRET)
        self.assertEqual((code, verdicts[0]["valid"]), (0, True), (err, verdicts))
        code, verdicts, err = verify([standard, standard_first], "--scheme", "standard", "--secret", STANDARD_SECRET)
        self.assertEqual(code, 0, (err, verdicts))
        self.assertEqual([v["valid"] for v in verdicts], [True, True])

    def test_explain_reads_the_lines_as_verify_does(self):
        # The valid line second and the body changed: --explain finds the
        # change only if it judges the second line.
        headers = [("X-Orb-Timestamp", ORB_TIMESTAMP), ("X-Orb-Signature", "v1=my-invalid-signature"),
                   ("X-Orb-Signature", ORB_SIGNATURE)]
        changed = envelope(ORB_BODY + "\n", headers, ORB_AT)
        code, verdicts, err = verify([changed], "--provider-file", PROVIDERS, "--scheme", "orb",
                                     "--secret", ORB_SECRET, "--explain")
        self.assertEqual(code, 1, err)
        diagnosis = verdicts[0].get("diagnosis", {})
        self.assertTrue(diagnosis.get("proven"), verdicts)

    def test_listen_judges_a_request_with_two_signature_lines(self):
        body = '{"id":"evt_2","type":"invoice.paid"}'
        with tempfile.TemporaryDirectory() as tmp:
            with listening(tmp, ["--verify", "stripe", "--secret", STRIPE_SECRET]) as listener:

                at = int(time.time())
                request = (f"POST /hooks HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                           f"Stripe-Signature: t={at},v1={'cd' * 32}\r\n"
                           f"Stripe-Signature: t={at},v1={stripe_signature(body, at)}\r\n"
                           f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n{body}").encode()
                with socket.create_connection(("127.0.0.1", listener.port), timeout=10) as peer:
                    peer.sendall(request)
                    answer = b""
                    while chunk := peer.recv(4096):
                        answer += chunk
            self.assertTrue(answer.startswith(b"HTTP/1.1 200"), answer[:200])
            captured = listener.envelopes()[0]
            # The capture keeps both lines as received.
            self.assertEqual([v for k, v in captured["headers"] if k.lower() == "stripe-signature"][0],
                             f"t={at},v1={'cd' * 32}")
            self.assertEqual(len([k for k, v in captured["headers"] if k.lower() == "stripe-signature"]), 2)


P256_ORDER = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Replays(unittest.TestCase):
    """verify --nonce: a replay is the same signed content. Each delivery is
    sent once as its provider wrote it, then again re-spelled as an attacker
    can without the key: every copy is a replay, on every store."""

    def judge(self, records, *args):
        code, verdicts, err = verify(records, "--nonce", "--store", ":memory:", *args)
        return code, verdicts, err

    def assert_only_first_fresh(self, records, *args):
        code, verdicts, err = self.judge(records, *args)
        self.assertEqual(len(verdicts), len(records), err)
        self.assertTrue(verdicts[0]["valid"], (verdicts[0], err))
        for n, verdict in enumerate(verdicts[1:], 1):
            self.assertFalse(verdict["valid"], (n, records[n]["headers"], verdict))
            self.assertIn("replayed", verdict["reason"], (n, verdict))
        self.assertEqual(code, 1)

    def copies(self, body, header_sets):
        return [envelope(body, headers, f"2023-11-14T22:13:{30 + n:02d}Z", f"cap_{n}")
                for n, headers in enumerate(header_sets)]

    def test_stripe_hex_upper_cased_or_behind_a_bogus_item(self):
        body = '{"id":"evt_9","type":"charge.succeeded"}'
        good = stripe_signature(body)
        headers = [f"t={AT},v1={good}", f"t={AT},v1={good.upper()}", f"t={AT},v1=00,v1={good}",
                   f"t={AT},v1={'ab' * 32},v1={good}", f"t={AT},v0={'cd' * 32},v1={good}"]
        self.assert_only_first_fresh(self.copies(body, [[("Stripe-Signature", h)] for h in headers]),
                                     "--scheme", "stripe", "--secret", STRIPE_SECRET)

    def test_a_rotation_signature_dropped_is_still_a_replay(self):
        # Stripe signs with each live secret during a rotation; idem holds both.
        body = '{"id":"evt_10"}'
        old, new = stripe_signature(body, secret="whsec_old"), stripe_signature(body)
        headers = [f"t={AT},v1={old},v1={new}", f"t={AT},v1={new}", f"t={AT},v1={new},v1={old}"]
        self.assert_only_first_fresh(self.copies(body, [[("Stripe-Signature", h)] for h in headers]),
                                     "--scheme", "stripe", "--secret", "whsec_old", "--secret", STRIPE_SECRET)

    def test_slack_upper_cased(self):
        body = "token=x&team_id=T1&command=%2Fidem"
        mac = hmac.new(b"slack-secret", f"v0:{AT}:{body}".encode(), hashlib.sha256).hexdigest()
        sets = [[("X-Slack-Request-Timestamp", str(AT)), ("X-Slack-Signature", f"v0={sig}")]
                for sig in (mac, mac.upper())]
        self.assert_only_first_fresh(self.copies(body, sets), "--scheme", "slack", "--secret", "slack-secret",
                                     "--ignore-timestamp")

    def test_github_with_another_delivery_id(self):
        # The delivery id is not signed: a replay may carry any.
        body = '{"action":"opened","number":7}'
        mac = hmac.new(b"gh-secret", body.encode(), hashlib.sha256).hexdigest()
        sets = [[("X-GitHub-Delivery", f"d-{n}"), ("X-Hub-Signature-256", f"sha256={sig}")]
                for n, sig in enumerate((mac, mac, mac.upper()))]
        self.assert_only_first_fresh(self.copies(body, sets), "--scheme", "github", "--secret", "gh-secret")

    def test_a_netlify_token_padded_or_in_the_standard_alphabet(self):
        from test_providers import JsonWebTokens
        token = JsonWebTokens.NETLIFY_TOKEN
        head, signature = token.rsplit(".", 1)
        padded = head + "." + signature + "=" * (-len(signature) % 4)
        standard = head + "." + signature.replace("-", "+").replace("_", "/")
        sets = [[("X-Webhook-Signature", t)] for t in (token, padded, standard)]
        self.assert_only_first_fresh(self.copies(JsonWebTokens.NETLIFY_BODY, sets), "--provider-file", PROVIDERS,
                                     "--scheme", "netlify", "--secret", "netlify-jws-secret-token")

    def test_a_plaid_signature_with_s_replaced_by_n_minus_s(self):
        # Plaid's verification example (python-jose, jose) accepts a high-S
        # ECDSA signature, and so does idem; the copy is the same signed content.
        from test_providers import JsonWebTokens
        token = JsonWebTokens.PLAID_TOKEN
        head, signature = token.rsplit(".", 1)
        raw = unb64url(signature)
        r, s = raw[:32], int.from_bytes(raw[32:], "big")
        flipped = head + "." + b64url(r + (P256_ORDER - s).to_bytes(32, "big"))
        sets = [[("Plaid-Verification", t)] for t in (token, flipped)]
        records = self.copies(JsonWebTokens.PLAID_BODY, sets)
        code, verdicts, err = self.judge(records[1:], "--provider-file", PROVIDERS, "--scheme", "plaid",
                                         "--public-key", json.dumps(JsonWebTokens.PLAID_JWK))
        self.assertTrue(verdicts[0]["valid"], (verdicts, err))  # high-S verifies alone
        self.assert_only_first_fresh(records, "--provider-file", PROVIDERS, "--scheme", "plaid",
                                     "--public-key", json.dumps(JsonWebTokens.PLAID_JWK))

    def test_a_provider_retry_is_fresh_and_its_replay_is_not(self):
        # Standard Webhooks: the provider's retry keeps the message id and
        # signs a new timestamp: new signed content. Its copy is a replay.
        body = '{"type":"invoice.paid"}'
        first = [("webhook-id", "msg_r"), ("webhook-timestamp", str(AT)),
                 ("webhook-signature", "v1," + standard_signature("msg_r", AT, body))]
        retry = [("webhook-id", "msg_r"), ("webhook-timestamp", str(AT + 5)),
                 ("webhook-signature", "v1," + standard_signature("msg_r", AT + 5, body))]
        code, verdicts, err = self.judge(self.copies(body, [first, retry, retry]), "--scheme", "standard",
                                         "--secret", STANDARD_SECRET)
        self.assertEqual([v["valid"] for v in verdicts], [True, True, False], (verdicts, err))


# Each scheme of stores/nonce-deliveries.ndjson with its secret, as the
# fixtures were written (one run each into one store).
EARLIER_RUNS = [("stripe", STRIPE_SECRET), ("github", "gh-secret"), ("standard", STANDARD_SECRET)]


class EarlierNonceStores(unittest.TestCase):
    """Stores idem 0.2 (commit 22511b2) wrote, its nonces keyed on message
    ids and signature texts, still know the deliveries it saw. The fixtures
    were made with that build over stores/nonce-deliveries.ndjson (received
    2026-11-30T08:00), for each (scheme, secret) of EARLIER_RUNS:
    `idem verify --scheme S --secret K --nonce --ignore-timestamp
    --nonce-window 876000h --store STORE`, STORE being stores/nonces-0.2.db,
    then a Redis whose dump is stores/nonces-0.2.rdb. The same deliveries
    received an hour later are replays here; each again re-spelled, too."""

    def later_copies(self):
        with open(os.path.join(STORES, "nonce-deliveries.ndjson")) as f:
            records = [json.loads(line) for line in f]
        for record in records:
            record["received_at"] = "2026-11-30T09:00:00Z"
        return records

    def assert_replays(self, store):
        for (scheme, secret), record in zip(EARLIER_RUNS, self.later_copies()):
            code, verdicts, err = verify([record], "--scheme", scheme, "--secret", secret, "--nonce",
                                         "--ignore-timestamp", "--store", store)
            self.assertEqual(code, 1, (scheme, err))
            self.assertFalse(verdicts[0]["valid"], (scheme, verdicts))
            self.assertIn("already delivered at 2026-11-30T08:00:00.000Z", verdicts[0]["reason"], scheme)

    def test_sqlite(self):
        with tempfile.TemporaryDirectory() as tmp:
            store = os.path.join(tmp, "idem.db")
            with open(os.path.join(STORES, "nonces-0.2.db"), "rb") as src, open(store, "wb") as dst:
                dst.write(src.read())
            self.assert_replays(store)
            # Fresh content is fresh, and the store now keys it the new way.
            new_body = '{"id":"evt_new"}'
            fresh = envelope(new_body, [("Stripe-Signature", f"t={AT},v1={stripe_signature(new_body)}")])
            code, verdicts, err = verify([fresh], "--scheme", "stripe", "--secret", STRIPE_SECRET, "--nonce",
                                         "--ignore-timestamp", "--store", store)
            self.assertEqual((code, verdicts[0]["valid"]), (0, True), err)

    @unittest.skipUnless(redis_server.available(), "redis-server is needed")
    def test_redis(self):
        with redis_server.serving(os.path.join(STORES, "nonces-0.2.rdb")) as port:
            self.assert_replays(f"redis://127.0.0.1:{port}")

    @unittest.skipUnless(redis_cluster.available(), "redis-server is needed")
    def test_redis_cluster(self):
        # A dump does not load into a cluster: the keys are set as idem 0.2
        # kept them (idem:nonce:SCHEME:TEXT holding "FIRST_US LINE SOURCE",
        # the layout of the fixture's dump), each on the node of its slot.
        with redis_server.serving(os.path.join(STORES, "nonces-0.2.rdb")) as port:
            keys = redis_cluster.cli(port, "--scan", "--pattern", "idem:nonce:*").split()
            kept = {key: (redis_cluster.cli(port, "GET", key).strip(),
                          redis_cluster.cli(port, "PTTL", key).strip()) for key in keys}
        self.assertEqual(len(kept), 3, kept)
        with redis_cluster.running(masters=3) as cluster:
            for key, (value, ttl) in kept.items():
                redis_cluster.cli(cluster.ports[0], "-c", "SET", key, value, "PX", ttl)
            self.assert_replays(cluster.uri())


if __name__ == "__main__":
    unittest.main()
