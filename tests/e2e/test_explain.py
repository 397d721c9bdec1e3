"""`idem verify --explain` (issue #18): for each way a genuine delivery gets
broken on its way to the verifier, one planted case, diagnosed exactly; and
forged deliveries never explained. The signatures are computed here, by the
providers' documented rules:
  - Stripe: v1 = hex HMAC-SHA256(secret, "{t}.{body}")
    (https://docs.stripe.com/webhooks#verify-manually)
  - GitHub: sha256= / sha1= hex HMAC of the body
    (https://docs.github.com/webhooks/using-webhooks/validating-webhook-deliveries)
  - Slack: v0= hex HMAC-SHA256(secret, "v0:{timestamp}:{body}")
    (https://api.slack.com/authentication/verifying-requests-from-slack)
  - Twilio: base64 HMAC-SHA1(token, url + sorted form "name"+"value")
    (https://www.twilio.com/docs/usage/webhooks/webhooks-security)"""
import base64
import hashlib
import hmac
import json
import os
import random
import tempfile
import unittest
from urllib.parse import parse_qsl

from harness import run

RECEIVED = 1_796_000_000  # seconds: what each delivery's received_at says
SECRET = "whsec_plantedSecret123"


def iso(seconds):
    import datetime
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def envelope(body, headers, path="/hooks"):
    return {"idem": 1, "id": "cap_1", "received_at": iso(RECEIVED), "method": "POST", "path": path,
            "headers": [[k, v] for k, v in headers.items()], "body": body}


def stripe(signed_body, logged_body=None, secret=SECRET, t=RECEIVED, extra=None):
    signature = hmac.new(secret.encode(), f"{t}.{signed_body}".encode(), hashlib.sha256).hexdigest()
    headers = {"Content-Type": "application/json", "Stripe-Signature": f"t={t},v1={signature}"}
    headers.update(extra or {})
    return envelope(signed_body if logged_body is None else logged_body, headers)


def github(signed_body, logged_body=None, secret="gh-secret", sha1_only=False):
    digest = hashlib.sha1 if sha1_only else hashlib.sha256
    name = "X-Hub-Signature" if sha1_only else "X-Hub-Signature-256"
    prefix = "sha1=" if sha1_only else "sha256="
    signature = prefix + hmac.new(secret.encode(), signed_body.encode(), digest).hexdigest()
    return envelope(signed_body if logged_body is None else logged_body,
                    {"Content-Type": "application/json", "X-GitHub-Event": "push", name: signature})


def slack(signed_body, logged_body, secret="slack-secret"):
    signature = "v0=" + hmac.new(secret.encode(), f"v0:{RECEIVED}:{signed_body}".encode(), hashlib.sha256).hexdigest()
    return envelope(logged_body, {"Content-Type": "application/x-www-form-urlencoded",
                                  "X-Slack-Request-Timestamp": str(RECEIVED), "X-Slack-Signature": signature})


def twilio(signed_url, body, token="twilio-token", path="/sms"):
    params = sorted(parse_qsl(body, keep_blank_values=True))
    message = signed_url + "".join(k + v for k, v in params)
    signature = base64.b64encode(hmac.new(token.encode(), message.encode(), hashlib.sha1).digest()).decode()
    return envelope(body, {"Content-Type": "application/x-www-form-urlencoded", "X-Twilio-Signature": signature},
                    path=path)


def square(signed_url, body, key="square-key"):
    """Square: base64 HMAC-SHA256(key, url + body), x-square-hmacsha256-signature
    (https://developer.squareup.com/docs/webhooks/step3validate)."""
    signature = base64.b64encode(hmac.new(key.encode(), (signed_url + body).encode(), hashlib.sha256).digest())
    return envelope(body, {"Content-Type": "application/json", "x-square-hmacsha256-signature": signature.decode()},
                    path="/square")


def explain(test, record, *args, env=None):
    """The diagnosis verify --explain gives one delivery."""
    code, out, err = run(["verify", "--explain", "--summary", "json", *args],
                         stdin=(json.dumps(record) + "\n").encode(), env=env)
    test.assertIn(code, (0, 1), err)
    verdict = json.loads(out.splitlines()[0])["_idem"]["verify"]
    return verdict, err


COMPACT = json.dumps({"id": "evt_1", "type": "invoice.paid", "amount": 1250, "name": "Zoë"},
                     separators=(",", ":"), ensure_ascii=False)


class Mutations(unittest.TestCase):
    def check(self, record, kind, *args, proven=True, env=None):
        verdict, err = explain(self, record, *args, env=env)
        self.assertFalse(verdict["valid"], verdict)
        diagnosis = verdict["diagnosis"]
        self.assertEqual(diagnosis["kind"], kind, diagnosis)
        self.assertEqual(diagnosis["proven"], proven, diagnosis)
        for secret in (SECRET, "gh-secret", "slack-secret", "twilio-token", "plantedSecret123"):
            self.assertNotIn(secret, json.dumps(verdict))  # labels only, never a secret
            self.assertNotIn(secret, err)
        return diagnosis

    def test_body_reserialized(self):
        data = json.loads(COMPACT)
        cases = [
            (COMPACT, json.dumps(data, indent=2, ensure_ascii=False), "compact"),  # pretty-printed on the way
            (json.dumps(data, indent=2, ensure_ascii=False), COMPACT, "2 spaces"),  # compacted on the way
            (json.dumps(data, ensure_ascii=False), COMPACT, "Python"),  # signed with ", " and ": "
            (json.dumps(data, separators=(",", ":")), COMPACT, "escaped"),  # signed \\u00eb, logged ë
            (json.dumps(data, separators=(",", ":"), sort_keys=True, ensure_ascii=False),
             COMPACT, "order"),  # keys re-ordered on the way
        ]
        for signed, logged, words in cases:
            with self.subTest(words):
                diagnosis = self.check(stripe(signed, logged), "body-reserialized", "--secret", SECRET,
                                       "--scheme", "stripe")
                self.assertIn(words, diagnosis["detail"])
                self.assertEqual(diagnosis["key"], "#1")

    def test_trailing_newline_and_line_endings(self):
        self.check(stripe(COMPACT, COMPACT + "\n"), "trailing-newline", "--secret", SECRET)
        self.check(stripe(COMPACT + "\n", COMPACT), "trailing-newline", "--secret", SECRET)
        pretty = json.dumps(json.loads(COMPACT), indent=2, ensure_ascii=False)
        self.check(stripe(pretty, pretty.replace("\n", "\r\n")), "line-endings", "--secret", SECRET)

    def test_a_form_body_encoded_again(self):
        self.check(slack("text=hello%20world&user=U1", "text=hello+world&user=U1"), "form-reencoded",
                   "--scheme", "slack", "--secret", "slack-secret")
        self.check(slack("text=hi&user=U1", "user=U1&text=hi"), "form-reencoded",
                   "--scheme", "slack", "--secret", "slack-secret")

    def test_the_secret_as_users_get_it_wrong(self):
        record = stripe(COMPACT, secret="plantedSecret123")  # signed without the prefix
        self.check(record, "secret-prefix", "--secret", SECRET)
        record = stripe(COMPACT)  # signed with it, given without it
        self.check(record, "secret-prefix", "--secret", "plantedSecret123")
        record = github(COMPACT)  # given base64-encoded
        self.check(record, "secret-encoding", "--secret", base64.b64encode(b"gh-secret").decode())
        record = github(COMPACT)  # from an environment variable with a line end
        diagnosis = self.check(record, "secret-whitespace", "--secret-env", "GH_SECRET",
                               env={"GH_SECRET": "gh-secret\n"})
        self.assertEqual(diagnosis["key"], "GH_SECRET")

    def test_a_timestamp_signed_in_milliseconds(self):
        # A sender that signs Date.now(): Stripe-Signature t=1796000000000,
        # HMAC over "1796000000000.{body}" (Stripe's rule with the ms text).
        record = stripe(COMPACT, t=RECEIVED * 1000)
        diagnosis = self.check(record, "timestamp-milliseconds", "--secret", SECRET, "--scheme", "stripe")
        self.assertIn("milliseconds", diagnosis["detail"])
        # Slack's and Standard Webhooks' timestamps likewise.
        ms = str(RECEIVED * 1000)
        signature = "v0=" + hmac.new(b"slack-secret", f"v0:{ms}:{COMPACT}".encode(), hashlib.sha256).hexdigest()
        record = envelope(COMPACT, {"X-Slack-Request-Timestamp": ms, "X-Slack-Signature": signature})
        self.check(record, "timestamp-milliseconds", "--secret", "slack-secret", "--scheme", "slack")
        # A forged one with a millisecond timestamp stays unexplained.
        forged = stripe(COMPACT, t=RECEIVED * 1000, secret="not-the-secret")
        self.check(forged, "unexplained", "--secret", SECRET, "--scheme", "stripe", proven=False)

    def test_a_whsec_secret_used_as_text_by_the_sender(self):
        # Standard Webhooks: v1 = base64 HMAC-SHA256(base64-decoded key,
        # "{id}.{timestamp}.{body}") (https://www.standardwebhooks.com/,
        # "Verifying"). A sender that keys it with the secret's text, whole
        # or after whsec_, is told apart from a forgery.
        secret = "whsec_" + base64.b64encode(b"planted-standard-key-32-bytes!!").decode()
        for key, scheme in ((secret, "standard"), (secret[len("whsec_"):], "svix")):
            with self.subTest(scheme=scheme, whole=key == secret):
                names = ("webhook", "svix")[scheme == "svix"]
                message = f"msg_1.{RECEIVED}.{COMPACT}".encode()
                signature = base64.b64encode(hmac.new(key.encode(), message, hashlib.sha256).digest()).decode()
                record = envelope(COMPACT, {f"{names}-id": "msg_1", f"{names}-timestamp": str(RECEIVED),
                                            f"{names}-signature": f"v1,{signature}"})
                diagnosis = self.check(record, "secret-as-text", "--secret", secret, "--scheme", scheme)
                self.assertIn("text", diagnosis["detail"])
                self.assertNotIn(secret, json.dumps(diagnosis))

    def test_another_scheme_or_algorithm(self):
        self.check(github(COMPACT), "scheme", "--scheme", "stripe", "--secret", "gh-secret")
        diagnosis = self.check(github(COMPACT, sha1_only=True), "algorithm", "--scheme", "github",
                               "--secret", "gh-secret")
        self.assertIn("--allow-sha1", diagnosis["detail"])

    def test_time_clock_skew_or_a_stale_replay(self):
        diagnosis = self.check(stripe(COMPACT, t=RECEIVED - 420), "clock-skew", "--secret", SECRET)
        self.assertIn("beyond the 5m tolerance", diagnosis["detail"])
        diagnosis = self.check(stripe(COMPACT, t=RECEIVED - 3 * 3600), "stale", "--secret", SECRET)
        self.assertIn("not a forgery", diagnosis["detail"])

    def test_the_url_a_provider_signed(self):
        body = "Body=hi&From=%2B15551234567&To=%2B15557654321"
        cases = [
            ("https://example.com/sms", "http://example.com/sms", "url-scheme"),
            ("https://example.com/sms/", "https://example.com/sms", "url-trailing-slash"),
            ("https://example.com/sms?a=1&b=2", "https://example.com/sms?b=2&a=1", "url-query-order"),
        ]
        for signed, checked, kind in cases:
            with self.subTest(kind):
                path = signed.split("example.com", 1)[1]
                self.check(twilio(signed, body, path=path), kind, "--scheme", "twilio", "--secret",
                           "twilio-token", "--url", checked)
        # Square signs the URL and the body; a port written out is another URL to it.
        # (Twilio's own libraries try with and without the port, and so does idem.)
        self.check(square("https://example.com/square", COMPACT), "url-port", "--scheme", "square", "--secret",
                   "square-key", "--url", "https://example.com:443/square")
        record = twilio("https://hooks.example.com/sms", body)
        record["headers"].append(["X-Forwarded-Host", "hooks.example.com"])
        self.check(record, "url-host", "--scheme", "twilio", "--secret", "twilio-token",
                   "--url-base", "https://internal.local:8080")

    def test_what_the_delivery_shows_by_itself(self):
        record = stripe(COMPACT, COMPACT[:20], extra={"Content-Length": str(len(COMPACT.encode()))})
        diagnosis = self.check(record, "truncated", "--secret", SECRET, proven=False)
        self.assertIn("cut short", diagnosis["detail"])
        record = stripe(COMPACT, extra={"Content-Encoding": "gzip"})
        record["body"] = COMPACT + " "  # stored decompressed (and so not what was signed)
        self.check(record, "decompressed", "--secret", SECRET, proven=False)


class Forged(unittest.TestCase):
    def test_forged_deliveries_are_never_explained(self):
        rng = random.Random(18)
        records = []
        for i in range(60):
            body = json.dumps({"id": f"evt_{i}", "amount": rng.randint(1, 10_000)})
            kind = i % 3
            if kind == 0:  # a made-up signature
                sig = "".join(rng.choice("0123456789abcdef") for _ in range(64))
                records.append(envelope(body, {"Stripe-Signature": f"t={RECEIVED},v1={sig}"}))
            elif kind == 1:  # signed with another secret
                records.append(stripe(body, secret="whsec_someone_else"))
            else:  # a genuine signature over another body (a tampered amount)
                forged = stripe(body)
                forged["body"] = body.replace('"amount": ', '"amount": 1')
                records.append(forged)
        stdin = ("\n".join(json.dumps(r) for r in records) + "\n").encode()
        code, out, err = run(["verify", "--explain", "--secret", SECRET, "--summary", "json"], stdin=stdin)
        self.assertEqual(code, 1, err)
        for line in out.splitlines():
            diagnosis = json.loads(line)["_idem"]["verify"]["diagnosis"]
            self.assertEqual(diagnosis["kind"], "unexplained", diagnosis)
            self.assertFalse(diagnosis["proven"])
            self.assertIn("treat as forged", diagnosis["detail"])
            self.assertLessEqual(diagnosis["tried"], 64)
        summary = json.loads(err.strip().splitlines()[-1])
        self.assertEqual((summary["invalid"], summary["unexplained"], summary["explained"]), (60, 60, 0))

    def test_the_budget_bounds_the_work(self):
        record = envelope(COMPACT, {"Stripe-Signature": f"t={RECEIVED},v1={'0' * 64}"})
        verdict, _ = explain(self, record, "--secret", SECRET, "--explain-budget", "3")
        self.assertEqual(verdict["diagnosis"]["tried"], 3)
        self.assertIn("within 3 tries", verdict["diagnosis"]["detail"])

    def test_valid_deliveries_get_no_diagnosis(self):
        verdict, _ = explain(self, stripe(COMPACT), "--secret", SECRET)
        self.assertTrue(verdict["valid"])
        self.assertNotIn("diagnosis", verdict)


if __name__ == "__main__":
    unittest.main()
