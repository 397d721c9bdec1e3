"""End-to-end tests of the CLI and `idem verify`: run the binary the way
users do (pipes, files, exit codes) and check stdout, stderr and the files
it writes. Samples come from samples/captures (written by
samples/generate.py with Python's own hmac, independently of idem); shared
helpers are in harness.py.
"""
import base64
import hashlib
import hmac
import json
import os
import subprocess
import tempfile
import unittest

import redis_server
from harness import CAPTURES, GH, IDEM, ROOT, github_envelope, run

T0 = 1796025600


def capture(name):
    return os.path.join(CAPTURES, name)


def capture_lines(name):
    with open(capture(name), "rb") as f:
        return f.read().splitlines()


def verdicts(stdout):
    return [json.loads(line)["_idem"]["verify"] for line in stdout.decode().splitlines()]


class Basics(unittest.TestCase):
    def test_help_lists_subcommands_and_each_ends_with_an_example(self):
        code, out, _ = run(["--help"])
        self.assertEqual(code, 0)
        self.assertIn(b"verify", out)
        self.assertIn(b"sign", out)
        for command in ("verify", "sign"):
            code, out, _ = run([command, "--help"])
            self.assertEqual(code, 0)
            self.assertIn(b"Example", out)

    def test_a_bad_flag_is_a_usage_error(self):
        code, _, err = run(["verify", "--tolerence", "5m"])
        self.assertEqual(code, 2)
        self.assertIn("idem: error:", err)

    def test_an_unknown_scheme_suggests_the_closest(self):
        code, _, err = run(["verify", "--scheme", "strpe", "--secret", "x"], stdin=b"")
        self.assertEqual(code, 2)
        self.assertIn("unknown scheme 'strpe' (did you mean 'stripe'?)", err)

    def test_a_bad_duration_names_the_value(self):
        code, _, err = run(["verify", "--tolerance", "5 minutes"], stdin=b"")
        self.assertEqual(code, 2)
        self.assertIn("invalid duration '5 minutes'", err)

    def test_a_missing_input_is_exit_3_before_any_output(self):
        code, out, err = run(["verify", "--secret", GH, capture("github.ndjson"), "/nonexistent.ndjson"])
        self.assertEqual(code, 3)
        self.assertEqual(out, b"")
        self.assertIn("idem: error: /nonexistent.ndjson: cannot open: No such file or directory", err)

    def test_empty_input_is_clean(self):
        code, out, err = run(["verify", "--secret", GH, "--summary", "json"], stdin=b"")
        self.assertEqual(code, 0)
        self.assertEqual(out, b"")
        self.assertEqual(json.loads(err)["in"], 0)


class Verify(unittest.TestCase):
    def test_records_pass_through_byte_for_byte_with_the_verdict_spliced_in(self):
        with open(capture("github.ndjson"), "rb") as f:
            lines = f.read().splitlines()
        code, out, _ = run(["verify", "--secret", GH, "--ignore-timestamp"], stdin=b"\n".join(lines) + b"\n")
        self.assertEqual(code, 0)
        for original, written in zip(lines, out.splitlines()):
            self.assertTrue(written.startswith(original[:-1] + b',"_idem":{"verify":'))

    def test_invalid_records_exit_1_and_no_fail_turns_that_off(self):
        args = ["verify", "--scheme", "stripe", "--secret", "whsec_demo_stripe_secret", capture("stripe.ndjson")]
        code, out, _ = run(args)
        self.assertEqual(code, 1)
        self.assertEqual([v["valid"] for v in verdicts(out)], [True, True, False, True, False, False, False])
        code, _, _ = run(args + ["--no-fail"])
        self.assertEqual(code, 0)

    def test_rotation_names_the_secret_that_matched(self):
        env = {"STRIPE_OLD": "whsec_demo_rotated_out", "STRIPE_NOW": "whsec_demo_stripe_secret"}
        code, out, _ = run(["verify", "--secret-env", "old=STRIPE_OLD", "--secret-env", "STRIPE_NOW",
                            capture("stripe.ndjson")], env=env)
        self.assertEqual([v.get("key") for v in verdicts(out)][:4], ["STRIPE_NOW", "STRIPE_NOW", "old", "STRIPE_NOW"])
        code, out, _ = run(["verify", "--secret", "whsec_demo_rotated_out", "--secret", "whsec_demo_stripe_secret",
                            capture("stripe.ndjson")])
        self.assertEqual([v.get("key") for v in verdicts(out)][:4], ["#2", "#2", "#1", "#2"])

    def test_a_secret_with_an_equals_sign_is_used_whole_and_never_shown(self):
        # Issue #12 item 2: '=' inside, at the end and at the start of a secret.
        for secret in ["GHSECRETMARK_p4ss=w0rdTAIL", "GHSECRETMARK_base64pad==", "=GHSECRETMARK_lead"]:
            whole = github_envelope(b'{"n":1}', secret=secret)
            tail = github_envelope(b'{"n":2}', secret=secret.split("=", 1)[1] or "x")
            stdin = (whole + "\n" + tail + "\n").encode()
            with tempfile.TemporaryDirectory() as tmp:
                secret_file = os.path.join(tmp, "gh.secret")
                with open(secret_file, "w") as f:
                    f.write(secret + "\n")
                for flags, env, label in [(["--secret", secret], {}, "#1"),
                                          (["--secret-env", "GH_SECRET"], {"GH_SECRET": secret}, "GH_SECRET"),
                                          (["--secret-env", "gh=GH_SECRET"], {"GH_SECRET": secret}, "gh"),
                                          (["--secret-file", secret_file], {}, "gh.secret"),
                                          (["--secret-file", "gh=" + secret_file], {}, "gh")]:
                    code, out, err = run(["verify", "--scheme", "github", *flags], stdin=stdin, env=env)
                    results = verdicts(out)
                    self.assertTrue(results[0]["valid"], (secret, flags, results))
                    self.assertFalse(results[1]["valid"], (secret, flags, results))
                    self.assertEqual(results[0]["key"], label)
                    self.assertNotIn("GHSECRETMARK", out.decode().replace(whole, "").replace(tail, ""))
                    self.assertNotIn("GHSECRETMARK", err)

    def test_invalid_records_can_be_diverted_to_a_file(self):
        with tempfile.TemporaryDirectory() as tmp:
            invalid = os.path.join(tmp, "invalid.ndjson")
            code, out, err = run(["verify", "--secret", "whsec_demo_stripe_secret", "--invalid", invalid,
                                  "--summary", "json", capture("stripe.ndjson")])
            self.assertEqual(code, 1)
            self.assertEqual(len(out.splitlines()), 3)
            with open(invalid, "rb") as f:
                self.assertEqual(len(f.read().splitlines()), 4)
            summary = json.loads(err)
            self.assertEqual(summary["in"], summary["out"] + summary["invalid_file"] + summary["rejected"])

    def test_several_inputs_from_files_and_stdin(self):
        with open(capture("github.ndjson"), "rb") as f:
            piped = f.read()
        code, out, err = run(["verify", "--secret", GH, "--ignore-timestamp", "--summary", "json",
                              capture("github.ndjson"), "-", capture("github.ndjson")], stdin=piped)
        self.assertEqual(code, 0)
        self.assertEqual(json.loads(err)["in"], 12)
        self.assertEqual(len(out.splitlines()), 12)

    def test_now_judges_old_captures_as_of_a_moment(self):
        body = b'{"a":1}'
        signed_at = 1700000000  # 2023-11-14T22:13:20Z
        key = base64.b64decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
        sig = base64.b64encode(hmac.new(key, b"m1.%d.%s" % (signed_at, body), hashlib.sha256).digest()).decode()
        record = json.dumps({"idem": 1, "headers": [["webhook-id", "m1"], ["webhook-timestamp", str(signed_at)],
                                                     ["webhook-signature", "v1," + sig]], "body": body.decode()})
        secret = ["--secret", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]
        _, out, _ = run(["verify"] + secret, stdin=record.encode())
        self.assertIn("old, beyond the 5m tolerance", verdicts(out)[0]["reason"])
        _, out, _ = run(["verify", "--now", "2023-11-14T22:17:00Z"] + secret, stdin=record.encode())
        self.assertTrue(verdicts(out)[0]["valid"])
        _, out, _ = run(["verify", "--ignore-timestamp"] + secret, stdin=record.encode())
        self.assertEqual(verdicts(out)[0]["reason"], "signature matches (timestamp not checked)")

    def test_a_body_that_is_not_utf8_verifies_from_body_b64(self):
        line = github_envelope(b'{"x":"\xff\xfe\x00"}', binary=True)
        code, out, _ = run(["verify", "--secret", GH], stdin=line.encode() + b"\n")
        self.assertEqual(code, 0)
        self.assertTrue(verdicts(out)[0]["valid"])

    def test_a_har_file_is_read_as_envelopes(self):
        code, out, _ = run(["verify", "--input-format", "har", "--secret", GH, "--ignore-timestamp",
                            capture("deliveries.har")])
        self.assertEqual(code, 0)
        record = json.loads(out)
        self.assertEqual(record["path"], "/hooks/github")
        self.assertEqual(record["received_at"], "2026-11-30T08:00:00.000Z")
        self.assertTrue(record["_idem"]["verify"]["valid"])

    def test_secrets_never_appear_in_output_or_errors(self):
        secret = "s3cr3t-never-printed"
        line = github_envelope(b"{}", secret="other")
        _, out, err = run(["verify", "--secret", secret], stdin=line.encode())
        self.assertNotIn(secret.encode(), out)
        self.assertNotIn(secret, err)
        _, out, err = run(["verify", "--scheme", "standard", "--secret", "whsec_" + secret + "*"],
                          stdin=b'{"idem":1,"headers":[["webhook-signature","v1,AAAA"],["webhook-id","m"],["webhook-timestamp","1"]],"body":""}')
        self.assertIn("secret #1 is not a Standard Webhooks secret", err)
        self.assertNotIn(secret, err)


class BadInput(unittest.TestCase):
    def test_bad_lines_go_to_the_reject_file_byte_for_byte_and_are_counted(self):
        with tempfile.TemporaryDirectory() as tmp:
            rejects = os.path.join(tmp, "rejects.ndjson")
            code, out, err = run(["verify", "--secret", GH, "--ignore-timestamp", "--reject", rejects,
                                  "--summary", "json", capture("bad-lines.ndjson")])
            self.assertEqual(code, 1)  # records were set aside: never a silent 0
            with open(capture("bad-lines.ndjson"), "rb") as f:
                lines = f.read().splitlines()
            with open(rejects, "rb") as f:
                self.assertEqual(f.read().splitlines(), lines[1:4])
            self.assertIn("bad-lines.ndjson:2:21: syntax error while parsing value - invalid string: missing closing quote", err)
            self.assertIn("bad-lines.ndjson:4:1: expected a JSON object per line, got a JSON array", err)
            summary = json.loads(err.strip().splitlines()[-1])
            self.assertEqual((summary["in"], summary["out"], summary["rejected"]), (5, 2, 3))

    def test_strict_stops_at_the_first_bad_record_with_exit_3(self):
        code, out, err = run(["verify", "--secret", GH, "--ignore-timestamp", "--strict", capture("bad-lines.ndjson")])
        self.assertEqual(code, 3)
        self.assertEqual(len(out.splitlines()), 1)  # what came before is written
        self.assertIn("idem: error: " + capture("bad-lines.ndjson") + ":2:21: syntax error", err)

    def test_a_20_mib_record_is_rejected_unbuffered_by_default_and_verified_when_allowed(self):
        body = b'{"blob":"' + b"a" * (20 << 20) + b'"}'
        line = github_envelope(body).encode()
        stream = github_envelope(b'{"n":1}').encode() + b"\n" + line + b"\n" + github_envelope(b'{"n":2}').encode() + b"\n"
        with tempfile.TemporaryDirectory() as tmp:
            rejects = os.path.join(tmp, "rejects.ndjson")
            code, out, err = run(["verify", "--secret", GH, "--reject", rejects, "--summary", "json"], stdin=stream)
            self.assertEqual(code, 1)  # a record set aside
            self.assertEqual(len(out.splitlines()), 2)
            self.assertIn("<stdin>:2: record of 20.0 MiB is larger than --max-record-size 16 MiB", err)
            with open(rejects, "rb") as f:
                self.assertEqual(f.read(), line + b"\n")
        code, out, _ = run(["verify", "--secret", GH, "--max-record-size", "32MiB"], stdin=stream)
        self.assertEqual(code, 0)
        self.assertEqual([v["valid"] for v in verdicts(out)], [True, True, True])

    def test_from_a_file_an_oversized_line_streams_whole_beside_other_rejects(self):
        # Files are read ahead on a thread of their own, which streams an
        # oversized line to the reject file while the calling thread rejects
        # bad lines into the same file: each must come out whole.
        big = github_envelope(b'{"blob":"' + b"a" * (20 << 20) + b'"}').encode()
        bad = [b'{"broken": %d' % n + b"x" * 200 for n in range(30000)]  # about 6 MB of them
        good = github_envelope(b'{"n":1}').encode()
        with tempfile.TemporaryDirectory() as tmp:
            source = os.path.join(tmp, "mixed.ndjson")
            with open(source, "wb") as f:
                f.write(b"\n".join(bad[:15000] + [good, big, good] + bad[15000:]) + b"\n")
            rejects = os.path.join(tmp, "rejects.ndjson")
            code, out, err = run(["verify", "--secret", GH, "--ignore-timestamp", "--reject", rejects, "-q",
                                  "--summary", "json", source])
            self.assertEqual(code, 1, err[-500:])
            self.assertEqual(len(out.splitlines()), 2)
            summary = json.loads(err.strip().splitlines()[-1])
            self.assertEqual((summary["in"], summary["rejected"]), (30003, 30001))
            with open(rejects, "rb") as f:
                kept = f.read().split(b"\n")[:-1]
            self.assertEqual(sorted(kept), sorted(bad + [big]))

    def test_a_plain_event_is_invalid_with_a_reason_not_rejected(self):
        code, out, _ = run(["verify", "--secret", GH], stdin=b'{"type":"ticket.created"}\n')
        self.assertEqual(code, 1)
        self.assertEqual(verdicts(out)[0]["reason"], "not an envelope: a plain event carries no signature headers to check")


class Nonce(unittest.TestCase):
    def test_a_replay_is_caught_within_a_run_and_across_runs(self):
        with tempfile.TemporaryDirectory() as tmp:
            store = os.path.join(tmp, "idem.db")
            lines = capture_lines("github.ndjson")
            code, out, _ = run(["verify", "--secret", GH, "--nonce", "--store", store], stdin=b"\n".join(lines[:2]))
            self.assertEqual(code, 0)
            code, out, err = run(["verify", "--secret", GH, "--nonce", "--summary", "json"],
                                 stdin=b"\n".join(lines), env={"IDEM_STORE": store})
            self.assertEqual(code, 1)
            # The first two are the records the first run read (same place, same
            # received_at): never their own replays. The last is a replay of the first.
            got = verdicts(out)
            self.assertEqual([v["valid"] for v in got], [True, True, True, False])
            self.assertIn("already verified in an earlier run", got[0]["reason"])
            self.assertTrue(got[3]["reason"].startswith("replayed: this message was already delivered at"))
            self.assertEqual((json.loads(err)["replayed"], json.loads(err)["already_verified"]), (1, 2))
            # Another stdin whose first line is a later copy of the first delivery: a replay.
            copy = json.loads(lines[0])
            copy["received_at"] = "2026-11-30T08:30:00.000Z"
            code, out, err = run(["verify", "--secret", GH, "--nonce", "--store", store],
                                 stdin=json.dumps(copy).encode())
            self.assertFalse(verdicts(out)[0]["valid"])
            self.assertIn("replayed", verdicts(out)[0]["reason"])

    @unittest.skipUnless(redis_server.available(), "redis-server is not installed")
    def test_two_runs_share_nonces_through_redis(self):
        with redis_server.running() as base:
            uri = base + "/3"
            lines = capture_lines("github.ndjson")
            code, _, _ = run(["verify", "--secret", GH, "--nonce", "--store", uri], stdin=lines[0])
            self.assertEqual(code, 0)
            code, out, _ = run(["verify", "--secret", GH, "--nonce", "--store", uri], stdin=lines[1] + b"\n" + lines[3])
            self.assertEqual([v["valid"] for v in verdicts(out)], [True, False])

    @unittest.skipUnless(redis_server.available(), "redis-server is not installed")
    def test_redis_judges_a_batch_as_sqlite_does_with_one_command_per_new_nonce(self):
        """A block's nonces go to Redis in one pipeline of SET NX GET; what
        one meets is judged in idem, and only a kept entry to replace runs
        the script. The verdicts are SQLite's, the same nonce several times
        in one block included."""
        import redis_cluster
        lines = capture_lines("github.ndjson")

        def at(line, received_at):
            delivery = json.loads(line)
            delivery["received_at"] = received_at
            return json.dumps(delivery).encode()

        stream = b"\n".join([
            lines[0],                                  # fresh
            lines[1],                                  # fresh
            at(lines[0], "2026-11-30T08:00:30.000Z"),  # replay, met in the same block
            at(lines[0], "2026-11-30T07:59:00.000Z"),  # came first: fresh, kept instead
            at(lines[0], "2026-11-30T08:01:00.000Z"),  # replay of 07:59
            at(lines[0], "2026-12-05T00:00:00.000Z"),  # past the 72h window: fresh, kept
            lines[2],                                  # fresh
            lines[3],                                  # far before the kept one: fresh
        ]) + b"\n"
        with tempfile.TemporaryDirectory() as tmp, redis_server.running() as uri:
            port = int(uri.rsplit(":", 1)[1])
            by_store = {}
            for store in (os.path.join(tmp, "idem.db"), uri):
                runs = []
                for _ in range(2):  # the second run reads the same records again
                    code, out, err = run(["verify", "--secret", GH, "--nonce", "--store", store], stdin=stream)
                    runs.append((code, [(v["valid"], v["reason"]) for v in verdicts(out)]))
                by_store[store] = runs
            sqlite_runs, redis_runs = by_store.values()
            self.assertEqual(redis_runs, sqlite_runs)
            self.assertEqual(redis_runs[0][0], 1)
            self.assertEqual([valid for valid, _ in redis_runs[0][1]], [True, True, False, True, False, True, True, True])
            self.assertIn("already delivered at 2026-11-30T07:59:00.000Z", redis_runs[0][1][4][1])

            # Distinct nonces and a redelivery: one SET per nonce (the
            # redelivery is judged against the entry its first copy left),
            # a GET per fresh one (the key an earlier release gave it), no
            # script.
            redis_cluster.cli(port, "FLUSHALL")
            redis_cluster.cli(port, "CONFIG", "RESETSTAT")
            code, out, err = run(["verify", "--secret", GH, "--nonce", "--store", uri], stdin=b"\n".join(lines))
            self.assertEqual([v["valid"] for v in verdicts(out)], [True, True, True, False], err)
            stats = redis_cluster.cli(port, "INFO", "commandstats")
            self.assertIn("cmdstat_set:calls=3,", stats)
            self.assertIn("cmdstat_get:calls=3,", stats)
            self.assertNotIn("cmdstat_evalsha", stats)
            self.assertNotIn("cmdstat_eval:", stats)

            # A nonce an earlier release kept as a hash, under the message id
            # that release keyed on: judged, read only (today's key is the
            # signed content's, docs/stores.md "Nonces an earlier release kept").
            key = "idem:nonce:github:d6b1c5a0-0001-11ef-9e0f-0242ac120002"
            redis_cluster.cli(port, "FLUSHALL")
            redis_cluster.cli(port, "HSET", key, "first", "1796025605000000", "source", "old.ndjson", "line", "1")
            redis_cluster.cli(port, "PEXPIRE", key, "600000")
            code, out, err = run(["verify", "--secret", GH, "--nonce", "--store", uri], stdin=lines[1])
            got = verdicts(out)[0]
            self.assertFalse(got["valid"], err)
            self.assertIn("already delivered at 2026-11-30T08:00:05.000Z", got["reason"])
            self.assertEqual(redis_cluster.cli(port, "TYPE", key).strip(), "hash")

    def test_on_store_error_local_still_catches_replays_within_the_run(self):
        lines = capture_lines("github.ndjson")
        code, out, err = run(["verify", "--secret", GH, "--nonce", "--store", "redis://127.0.0.1:1",
                              "--store-timeout", "0", "--on-store-error", "local", "--summary", "json"],
                             stdin=b"\n".join(lines))
        self.assertEqual(code, 1, err)  # the redelivery is still a replay
        got = verdicts(out)
        self.assertEqual([v["valid"] for v in got], [True, True, True, False])
        self.assertTrue(all("judged within this run only" in v["reason"] for v in got if v["valid"]))
        self.assertIn("judging replays within this process", err)
        self.assertIn("cannot write back to the store", err)
        self.assertEqual(json.loads(err.strip().splitlines()[-1])["degraded"], 4)  # all four judged here

    def test_an_unreachable_store_is_exit_4(self):
        code, _, err = run(["verify", "--secret", GH, "--nonce", "--store", "redis://127.0.0.1:1",
                            "--store-timeout", "300ms"], stdin=b"")
        self.assertEqual(code, 4)
        self.assertIn("cannot connect to store redis://127.0.0.1:1/0", err)
        self.assertIn("--store-timeout", err)


class Sign(unittest.TestCase):
    SCHEMES = [
        ("github", ["--secret", "gh"], ["--secret", "gh"]),
        ("stripe", ["--secret", "whsec_x"], ["--secret", "whsec_x"]),
        ("slack", ["--secret", "sl"], ["--secret", "sl"]),
        ("standard", ["--secret", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"], ["--secret", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]),
        ("svix", ["--secret", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"], ["--secret", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]),
        ("standard", ["--secret", "whsk_TM0Imyj/ltqdtsNG7BFOD1uKMZ81q6Yk2oz27U+4pvs="],
         ["--public-key", "whpk_PUAXw+hDiVqStwqnTRt+vJyYLM8uxJaMwM1V8Sr0Zgw="]),
        ("shopify", ["--secret", "sh"], ["--secret", "sh"]),
        ("discord", ["--secret", "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb"],
         ["--public-key", "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c"]),
        ("twilio", ["--secret", "tw", "--url-base", "https://example.com"], ["--secret", "tw", "--url-base", "https://example.com"]),
        ("square", ["--secret", "sq", "--url", "https://example.com/sq"], ["--secret", "sq", "--url", "https://example.com/sq"]),
        ("pagerduty", ["--secret", "pd"], ["--secret", "pd"]),
        ("hmac", ["--secret", "g", "--hmac-header", "X-Sig", "--hmac-prefix", "sha256=", "--hmac-message", "{timestamp}.{body}",
                  "--hmac-timestamp-header", "X-Ts"],
         ["--secret", "g", "--hmac-header", "X-Sig", "--hmac-prefix", "sha256=", "--hmac-message", "{timestamp}.{body}",
          "--hmac-timestamp-header", "X-Ts"]),
    ]

    def test_sign_then_verify_round_trips_for_every_scheme(self):
        with open(capture("mixed.ndjson"), "rb") as f:
            captures = f.read()
        for scheme, sign_args, verify_args in self.SCHEMES:
            with self.subTest(scheme=scheme):
                code, signed, err = run(["sign", "--scheme", scheme] + sign_args, stdin=captures)
                self.assertEqual(code, 0, err)
                # The captures carry other providers' headers too, so name the scheme.
                code, out, err = run(["verify", "--scheme", scheme] + verify_args, stdin=signed)
                self.assertEqual(code, 0, err)
                self.assertTrue(all(v["valid"] for v in verdicts(out)))

    def test_sign_replaces_old_signature_headers_and_keeps_the_body_bytes(self):
        with open(capture("github.ndjson"), "rb") as f:
            first = f.readline()
        code, out, _ = run(["sign", "--scheme", "github", "--secret", "new-secret", "--timestamp", "2026-11-30T09:00:00Z"],
                           stdin=first)
        self.assertEqual(code, 0)
        signed = json.loads(out)
        original = json.loads(first)
        self.assertEqual(signed["body"], original["body"])
        names = [h[0] for h in signed["headers"]]
        self.assertEqual(names.count("X-Hub-Signature-256"), 1)
        self.assertIn("X-GitHub-Delivery", names)

    def test_sign_without_a_scheme_is_a_usage_error(self):
        code, _, err = run(["sign", "--secret", "x"], stdin=b"{}\n")
        self.assertEqual(code, 2)
        self.assertIn("idem sign needs --scheme", err)


if __name__ == "__main__":
    unittest.main()


def sample(*parts):
    return os.path.join(ROOT, "samples", *parts)


class NeverSilentlyGreen(unittest.TestCase):
    """Issue #12, items 8-11, 16, 23: a typo or a wrong flag must never pass a check."""

    def test_any_rejected_record_exits_1_and_all_rejected_exits_3_with_a_hint(self):
        events = sample("events", "stripe-events.ndjson")
        code, _, err = run(["dedup", "--key", "idd", "--store", ":memory:", events])
        self.assertEqual(code, 3, err)
        self.assertIn("every record was rejected (7 of 7)", err)
        self.assertIn("check the field paths", err)
        code, _, err = run(["reorder", "--seq", "id", "--store", ":memory:", events])
        self.assertEqual(code, 3, err)
        # A HAR export is told by its first bytes; read as NDJSON because
        # the user said so, every line is rejected, and the hint says why.
        code, _, err = run(["verify", "--input-format", "ndjson", "--secret", GH, capture("deliveries.har")])
        self.assertEqual(code, 3, err)
        self.assertIn("looks like a HAR file: drop --input-format ndjson, or say --input-format har", err)
        code, _, err = run(["replay", "--to", "http://127.0.0.1:9", "--dry-run", "--timing", "original",
                            "--store", ":memory:", events])
        self.assertEqual(code, 3, err)
        # One bad line among good ones: exit 1, and the summary is still the last line.
        mixed = b'{"id":"a"}\nnot json\n{"id":"b"}\n'
        code, out, err = run(["dedup", "--key", "id", "--store", ":memory:", "--summary", "json"], stdin=mixed)
        self.assertEqual(code, 1, err)
        self.assertEqual(json.loads(err.strip().splitlines()[-1])["rejected"], 1)

    def test_a_mixed_log_with_a_provider_whose_key_is_missing_is_judged_per_record(self):
        discord = json.dumps({"idem": 1, "id": "d1", "received_at": "2026-11-30T08:00:00Z", "method": "POST",
                              "path": "/d", "headers": [["X-Signature-Ed25519", "ab" * 64],
                                                        ["X-Signature-Timestamp", "1764489600"]], "body": "{}"})
        stdin = (github_envelope(b'{"n":1}') + "\n" + discord + "\n").encode()
        code, out, err = run(["verify", "--secret", GH], stdin=stdin)
        self.assertEqual(code, 1, err)
        got = verdicts(out)
        self.assertTrue(got[0]["valid"])
        self.assertFalse(got[1]["valid"])
        self.assertEqual(got[1]["reason"], "no public key configured for discord: pass --public-key")
        # An explicit scheme without its key is a usage error before anything is read.
        code, out, err = run(["verify", "--scheme", "discord", "--secret", GH], stdin=stdin)
        self.assertEqual((code, out), (2, b""))
        self.assertIn("no public key configured for discord", err)

    def test_flags_that_conflict_or_do_nothing_are_usage_errors_naming_both(self):
        events = sample("events", "stripe-events.ndjson")
        cases = [
            (["verify", "--secret", GH, "--ignore-timestamp", "--now", "2026-11-30T08:00:00Z"], ["--now", "--ignore-timestamp"]),
            (["replay", "--to", "http://127.0.0.1:9", "--key", "id", "--no-key", "--dry-run"], ["--key", "--no-key"]),
            (["replay", "--to", "http://127.0.0.1:9", "--speed", "10x", "--dry-run"], ["--speed", "--timing original"]),
            (["dedup", "--tz", "Asia/Shanghai", "--store", ":memory:"], ["--tz", "--bucket"]),
            (["dedup", "--window", "24h", "--ttl", "5m", "--store", ":memory:"], ["--ttl", "--window"]),
            (["dedup", "--window", "0", "--store", ":memory:"], ["--window"]),
            (["listen", "--port", "99999"], ["--port", "1 to 65535"]),
            (["listen", "--port", "70000"], ["--port", "1 to 65535"]),
            (["listen", "--port", "-1"], ["--port", "1 to 65535"]),
            (["listen", "--port", "0", "--forward-to", "ftp://x"], ["--forward-to"]),
            (["replay", "--to", "http://127.0.0.1:/h", "--dry-run"], ["--to", "1 to 65535"]),
        ]
        for args, named in cases:
            code, out, err = run(args + ([events] if args[0] != "listen" else []), stdin=b"")
            self.assertEqual(code, 2, (args, err))
            for flag in named:
                self.assertIn(flag, err, args)

    def test_unknown_commands_and_flags_suggest_the_close_one(self):
        code, _, err = run(["verfy"])
        self.assertEqual(code, 2)
        self.assertIn("unknown command 'verfy'; did you mean 'verify'?", err)
        code, _, err = run(["--bogus"])
        self.assertEqual(code, 2)
        self.assertIn("unknown flag '--bogus'", err)
        code, _, err = run(["dedup", "--keys", "id"])
        self.assertEqual(code, 2)
        self.assertIn("unknown flag '--keys' for 'idem dedup'; did you mean '--key'?", err)
        # Issue 60 item 9: a peer's name for a flag leads to idem's, where
        # the command has it (no spelling distance does: '--metrics' was offered).
        code, _, err = run(["replay", "--retries", "3", "--to", "http://127.0.0.1:1", "x.ndjson"])
        self.assertEqual(code, 2)
        self.assertIn("unknown flag '--retries' for 'idem replay'; did you mean '--max-attempts'?", err)
        code, _, err = run(["audit", "--delimiter", ";", "--key", "k", "x.csv"])
        self.assertIn("did you mean '--csv-delimiter'?", err)

    def test_control_bytes_in_user_values_and_input_are_escaped_on_stderr(self):
        code, _, err = run(["dedup", "--key", "id\x1b[31m", "--store", ":memory:"], stdin=b'{"id":1}\n')
        self.assertNotIn("\x1b", err)
        self.assertIn("\\x1b[31m", err)
        code, _, err = run(["verify", "--secret", GH], stdin=b'{"idem":1,"headers":[["X-Hub-Signature-256","\xff\x1b"]]\n')
        self.assertNotIn("\x1b", err)
        self.assertNotIn("\ufffd", err)  # invalid UTF-8 is escaped, not passed through

    def test_a_stderr_that_cannot_be_written_never_aborts_or_changes_the_exit_code(self):
        with open("/dev/full", "w") as full:
            result = subprocess.run([IDEM, "dedup", "--bogus"], stderr=full, stdout=subprocess.DEVNULL)
            self.assertEqual(result.returncode, 2)
            result = subprocess.run([IDEM, "dedup", "--key", "id", "--store", ":memory:"], input=b'{"id":1}\nbad\n',
                                    stderr=full, stdout=subprocess.DEVNULL)
            self.assertEqual(result.returncode, 1)
        # stderr into a pipe nobody reads: no SIGPIPE death.
        read_end, write_end = os.pipe()
        os.close(read_end)
        result = subprocess.run([IDEM, "dedup", "--key", "id", "--store", ":memory:"], input=b'{"id":1}\nbad\n',
                                stderr=write_end, stdout=subprocess.DEVNULL)
        os.close(write_end)
        self.assertEqual(result.returncode, 1)


class ByteForByte(unittest.TestCase):
    """Issue #12, items 12, 13, 15: what comes in is what goes out."""

    def test_crlf_lines_keep_their_crlf_in_every_output_and_side_output(self):
        raw = (b'{"id":"a","seq":1}\r\n{"id":"a","seq":3}\r\nnot json\r\n{"id":"b","seq":2}\r\n'
               b'{"id":"c","seq":1}\r\n')
        with tempfile.TemporaryDirectory() as tmp:
            dups, rejects, late = (os.path.join(tmp, n) for n in ("dups", "rejects", "late"))
            code, out, err = run(["dedup", "--key", "id", "--store", ":memory:", "--dups", dups,
                                  "--reject", rejects], stdin=raw)
            self.assertEqual(code, 1, err)
            self.assertEqual(out, b'{"id":"a","seq":1}\r\n{"id":"b","seq":2}\r\n{"id":"c","seq":1}\r\n')
            with open(dups, "rb") as f:
                self.assertTrue(f.read().endswith(b'}\r\n'))
            with open(rejects, "rb") as f:
                self.assertEqual(f.read(), b"not json\r\n")
            code, out, err = run(["reorder", "--seq", "seq", "--start", "1", "--store", ":memory:",
                                  "--late", late, "--gaps", os.path.join(tmp, "gaps")], stdin=raw)
            self.assertTrue(out.startswith(b'{"id":"a","seq":1}\r\n{"id":"b","seq":2}\r\n'), out)
            with open(late, "rb") as f:
                self.assertTrue(f.read().endswith(b'}}\r\n'))
            line = github_envelope(b'{"n":1}').encode()
            code, out, err = run(["verify", "--secret", GH], stdin=line + b"\r\n")
            self.assertEqual(code, 0, err)
            self.assertTrue(out.endswith(b'}}}\r\n'), out[-20:])
            self.assertTrue(verdicts(out)[0]["valid"])

    def test_a_plain_events_body_is_the_event_without_its_crlf_or_bom(self):
        # The line keeps both for pass-through output; a body made of the event has neither.
        code, out, err = run(["sign", "--scheme", "github", "--secret", GH, "-q"], stdin=b'\xef\xbb\xbf{"a":1}\r\n')
        self.assertEqual(code, 0, err)
        self.assertEqual(json.loads(out)["body"], '{"a":1}')

    def test_a_byte_order_mark_is_read_past_and_kept(self):
        raw = b'\xef\xbb\xbf{"id":"a"}\n{"id":"a"}\n{"id":"b"}\n'
        code, out, err = run(["dedup", "--key", "id", "--store", ":memory:"], stdin=raw)
        self.assertEqual(code, 0, err)
        self.assertEqual(out, b'\xef\xbb\xbf{"id":"a"}\n{"id":"b"}\n')
        code, _, err = run(["dedup", "--key", "id", "--store", ":memory:"], stdin=b'\xef\xbb\xbf{"id":}\n')
        self.assertIn("<stdin>:1:10:", err)  # the column counts the BOM's three bytes

    def test_a_record_whose_idem_member_is_not_an_object_is_set_aside_whole(self):
        raw = b'{"id":"a","_idem":"mine"}\n{"id":"b","_idem":{"x":1}}\n'
        with tempfile.TemporaryDirectory() as tmp:
            rejects = os.path.join(tmp, "rejects")
            code, out, err = run(["dedup", "--key", "id", "--store", ":memory:", "--mark", "--reject", rejects],
                                 stdin=raw)
            self.assertEqual(code, 1, err)
            self.assertIn("<stdin>:1: member '_idem' is not an object", err)
            with open(rejects, "rb") as f:
                self.assertEqual(f.read(), b'{"id":"a","_idem":"mine"}\n')
            self.assertEqual(json.loads(out)["_idem"]["x"], 1)  # an object is extended, never replaced


class SignSaysWhatItSigned(unittest.TestCase):
    def test_a_hex_seed_for_standard_webhooks_is_refused_and_the_kind_is_named(self):
        event = b'{"type":"invoice.paid","id":"evt_1"}\n'
        code, out, err = run(["sign", "--scheme", "standard", "--secret", "ab" * 32], stdin=event)
        self.assertEqual((code, out), (2, b""))
        self.assertIn("64 hex digits", err)
        self.assertNotIn("ab" * 32, err)
        seed = base64.b64encode(bytes(range(32))).decode()
        code, out, err = run(["sign", "--scheme", "standard", "--secret", "whsk_" + seed], stdin=event)
        self.assertEqual(code, 0, err)
        headers = dict(json.loads(out)["headers"])
        self.assertTrue(headers["webhook-signature"].startswith("v1a,"))
        self.assertIn("signature v1a (ed25519)", err)
        code, out, err = run(["sign", "--scheme", "standard", "--secret", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"],
                             stdin=event)
        self.assertTrue(dict(json.loads(out)["headers"])["webhook-signature"].startswith("v1,"))
        self.assertIn("signature v1 (HMAC-SHA256)", err)


class HelpSaysTheTruth(unittest.TestCase):
    """Issue #12 item 24: each command's help in its own words."""

    def test_sign_and_replay_help_state_their_own_defaults(self):
        _, out, _ = run(["sign", "--help"])
        self.assertNotIn(b"auto (default: from the headers)", out)
        self.assertIn(b"required: what to sign for", out)
        _, out, _ = run(["replay", "--help"])
        self.assertIn(b"default idem.db", out)

    def test_a_store_that_looks_like_a_flag_is_refused(self):
        code, _, err = run(["dedup", "--key", "id", "--store", "--strict"], stdin=b"")
        self.assertEqual(code, 2)
        self.assertIn("looks like a flag", err)
