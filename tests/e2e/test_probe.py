"""idem probe (docs/probe.md) against real handlers on loopback: the three
reference handlers of samples/handlers/ and variants broken one way each
(flags of the same handler, marked "for tests" there). Each test asserts
exactly which checks pass, fail, warn or are skipped."""
import http.server
import json
import os
import socketserver
import subprocess
import sys
import tempfile
import threading
import unittest
import xml.etree.ElementTree as ElementTree

from harness import ROOT, run, summary_of

HANDLERS = os.path.join(ROOT, "samples", "handlers")
QUERY = "SELECT count(*) FROM effects WHERE key = :key"
SECRET = "whsec_probe_test"
CHECKS = ["sequential-duplicate", "concurrent-duplicates", "key-reuse", "other-endpoint", "retry-after-drop",
          "retry-after-5xx", "late-retry", "retry-after-restart", "regenerated-key", "forged-signature", "stale-replay",
          "out-of-order", "slow-answer"]


import contextlib
import signal
import socket


@contextlib.contextmanager
def socket_bound():
    """A loopback port that was free a moment ago and is closed again."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


class Handler:
    """A reference handler in a process of its own, stopped by PID."""

    def __init__(self, script, db, *flags):
        self.process = subprocess.Popen([sys.executable, os.path.join(HANDLERS, script), "--db", db, *flags],
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.process.stdout.readline()
        if not line.startswith("listening on "):
            self.stop()
            raise RuntimeError(f"{script} did not start: {line}{self.process.stderr.read()}")
        self.url = line.split()[2]

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=10)
        self.process.stdout.close()
        self.process.stderr.close()


class Listener:
    """A loopback server that counts every connection made to it."""

    def __init__(self, redirect_to=None):
        self.connections = 0
        outer = self

        class Handle(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def handle_one(self):
                outer.connections += 1
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                if redirect_to:
                    self.send_response(307)
                    self.send_header("Location", redirect_to)
                else:
                    self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_POST = do_GET = handle_one

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handle)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


class Probe(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.handlers = []

    def tearDown(self):
        for handler in self.handlers:
            handler.stop()
        self.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def start(self, script, *flags):
        db = self.path(f"{script}-{len(self.handlers)}.db")
        handler = Handler(script, db, *flags)
        self.handlers.append(handler)
        return handler, db

    def probe(self, handler, db, *args):
        """The whole plan against a handler: signed, a fault it injects, its
        clock set by probe, side effects read from its database."""
        code, out, err = run(["probe", "--to", handler.url, "--report", "json", "--summary", "json",
                              "--clock-header", "X-Idem-Now", "--speed", "3600",
                              "--fail-first", "X-Inject-Fault: 1", "--schedule", "fixed:1s,2s",
                              "--effects-sqlite", db, "--effects-query", QUERY, *args])
        self.assertIn(code, (0, 1), err)
        report = json.loads(out)
        return code, {c["check"]: c["verdict"] for c in report["checks"]}, report, err

    def expected(self, **changes):
        """The verdicts of the correct handler, signed, with `changes`."""
        verdicts = {name: "pass" for name in CHECKS}
        verdicts["regenerated-key"] = "warn"
        verdicts["out-of-order"] = "skipped"
        verdicts["other-endpoint"] = "skipped"  # without --also-to
        verdicts["retry-after-restart"] = "skipped"  # without --restart-cmd
        verdicts.update({name.replace("_", "-"): verdict for name, verdict in changes.items()})
        return verdicts

    def signed(self, script, *flags):
        return self.start(script, "--secret", SECRET, "--trust-clock-header", "X-Idem-Now", *flags)

    def test_the_correct_handler_passes_every_check_it_can(self):
        handler, db = self.signed("correct.py")
        code, verdicts, report, err = self.probe(handler, db, "--scheme", "stripe", "--secret", SECRET)
        self.assertEqual(verdicts, self.expected())
        self.assertEqual(code, 0, err)
        self.assertEqual(report["effects"], "sqlite")
        summary = summary_of(err)
        self.assertEqual((summary["passed"], summary["failed"], summary["warned"], summary["skipped"]), (9, 0, 1, 3))
        # The evidence names each request's status and the side effects seen.
        concurrent = next(c for c in report["checks"] if c["check"] == "concurrent-duplicates")
        self.assertEqual(len(concurrent["evidence"]["requests"]), 8)
        self.assertEqual(concurrent["evidence"]["effects"], 1)
        self.assertTrue(all(r["status"] in (200, 409) for r in concurrent["evidence"]["requests"]))

    def test_a_handler_that_checks_its_key_after_the_work_fails_concurrent_duplicates(self):
        handler, db = self.signed("check_after_work.py")
        code, verdicts, _, _ = self.probe(handler, db, "--scheme", "stripe", "--secret", SECRET)
        self.assertEqual(verdicts, self.expected(concurrent_duplicates="fail"))
        self.assertEqual(code, 1)

    def test_a_handler_whose_keys_live_five_minutes_fails_late_retry(self):
        handler, db = self.signed("short_ttl.py")
        code, verdicts, report, _ = self.probe(handler, db, "--scheme", "stripe", "--secret", SECRET)
        self.assertEqual(verdicts, self.expected(late_retry="fail"))
        late = next(c for c in report["checks"] if c["check"] == "late-retry")
        self.assertIn("2 side effects", late["reason"])
        self.assertEqual(code, 1)

    def test_a_handler_answering_200_to_a_reused_key_fails_key_reuse(self):
        handler, db = self.signed("correct.py", "--accept-reuse")
        code, verdicts, _, _ = self.probe(handler, db, "--scheme", "stripe", "--secret", SECRET)
        self.assertEqual(verdicts, self.expected(key_reuse="fail"))
        self.assertEqual(code, 1)

    def test_a_handler_accepting_forged_signatures_fails_forgery_and_replay(self):
        handler, db = self.signed("correct.py", "--skip-signature-check")
        code, verdicts, _, _ = self.probe(handler, db, "--scheme", "stripe", "--secret", SECRET)
        self.assertEqual(verdicts, self.expected(forged_signature="fail", stale_replay="fail"))
        self.assertEqual(code, 1)

    def test_a_handler_500ing_on_concurrent_copies_fails_concurrent_duplicates(self):
        handler, db = self.signed("correct.py", "--fail-concurrent")
        code, verdicts, report, _ = self.probe(handler, db, "--scheme", "stripe", "--secret", SECRET,
                                               "--checks", "concurrent-duplicates,sequential-duplicate")
        self.assertEqual(verdicts, {"sequential-duplicate": "pass", "concurrent-duplicates": "fail"})
        concurrent = next(c for c in report["checks"] if c["check"] == "concurrent-duplicates")
        self.assertIn("500", concurrent["reason"])
        self.assertEqual(code, 1)

    def test_a_handler_answering_after_12_seconds_fails_slow_answer(self):
        handler, db = self.signed("correct.py", "--delay", "12")
        code, verdicts, report, _ = self.probe(handler, db, "--scheme", "stripe", "--secret", SECRET,
                                               "--checks", "forged-signature,slow-answer")
        self.assertEqual(verdicts, {"forged-signature": "pass", "slow-answer": "fail"})
        slow = next(c for c in report["checks"] if c["check"] == "slow-answer")
        self.assertIn("10s deadline", slow["reason"])
        self.assertEqual(code, 1)

    def test_a_handler_that_acts_after_it_answers_is_judged_on_what_it_did(self):
        # It answers 202 at once and works 0.3 s later: a copy meanwhile is 409
        # (delivered again, as a provider would), and the side effect shows late.
        handler, db = self.start("correct.py", "--act-after-answer")
        code, out, err = run(["probe", "--to", handler.url, "--report", "json", "-q",
                              "--checks", "sequential-duplicate,concurrent-duplicates,key-reuse",
                              "--effects-sqlite", db, "--effects-query", QUERY])
        self.assertEqual(code, 0, err)
        report = json.loads(out)
        self.assertEqual({c["check"]: c["verdict"] for c in report["checks"]},
                         {"sequential-duplicate": "pass", "concurrent-duplicates": "pass", "key-reuse": "pass"})
        sequential = report["checks"][0]["evidence"]
        self.assertEqual(sequential["effects"], 1)
        self.assertIn(409, [r.get("status") for r in sequential["requests"]])

    def test_a_queued_handler_is_judged_on_effects_that_come_after_the_answer(self):
        # Issue 61, item 4: samples/handlers/queued.py answers 200 at once and
        # acts 2 s later, looking the key up only then: two copies both act.
        # Without --settle, probe waits for the effects, counts the late
        # second one, and says the handler acts after answering.
        handler, db = self.start("queued.py")
        code, out, err = run(["probe", "--to", handler.url, "--report", "json", "-q",
                              "--checks", "sequential-duplicate,key-reuse",
                              "--effects-sqlite", db, "--effects-query", QUERY])
        self.assertEqual(code, 1, err)
        checks = {c["check"]: c for c in json.loads(out)["checks"]}
        sequential = checks["sequential-duplicate"]
        self.assertEqual(sequential["verdict"], "fail")
        self.assertIn("2 side effects for two identical deliveries", sequential["reason"])
        self.assertNotIn("is the effects query right", sequential["reason"])
        self.assertRegex(sequential["reason"], r"the handler acts after it answers: a side-effect reading grew "
                                               r"\d\.\d s after the answer.*--settle \d+s or more")
        # Its answer is shown: status and the first bytes of the body.
        self.assertIn('[the handler answered copy 2, attempt 1: 200, {"queued"', sequential["reason"])
        self.assertEqual(sequential["evidence"]["requests"][0]["body_start"][:10], '{"queued":')
        reuse = checks["key-reuse"]
        self.assertIn("acted on: 2 side effects under one key", reuse["reason"])

    def test_one_key_at_another_endpoint_of_the_handler_is_one_effect(self):
        # Issue 61, item 2: --also-to PATH sends the same key to another path
        # of --to's origin. A handler keyed by (path, key) acts again.
        by_id = "SELECT count(*) FROM effects WHERE event_id = :id"
        args = ["--report", "json", "-q", "--checks", "other-endpoint", "--also-to", "/hooks/other",
                "--effects-query", by_id]
        handler, db = self.start("correct.py")
        code, out, err = run(["probe", "--to", handler.url + "hooks/stripe", "--effects-sqlite", db, *args])
        check = json.loads(out)["checks"][0]
        self.assertEqual((code, check["verdict"]), (0, "pass"), check["reason"])
        self.assertIn("1 side effect observed", check["reason"])
        self.assertEqual([r["status"] for r in check["evidence"]["requests"]], [200, 200])
        handler, db = self.start("correct.py", "--key-per-path")
        code, out, err = run(["probe", "--to", handler.url + "hooks/stripe", "--effects-sqlite", db, *args])
        check = json.loads(out)["checks"][0]
        self.assertEqual((code, check["verdict"]), (1, "fail"), check["reason"])
        self.assertIn("sent to /hooks/other, was answered 200 and acted on again: 2 side effects", check["reason"])
        # Without it, skipped with the flag it needs; never another host.
        code, out, err = run(["probe", "--to", handler.url, "--report", "json", "-q", "--checks", "other-endpoint"])
        self.assertIn("--also-to PATH", json.loads(out)["checks"][0]["reason"])
        for bad in ("http://elsewhere.example/hooks", "//elsewhere.example/x", "hooks"):
            code, _, err = run(["probe", "--to", handler.url, "--also-to", bad])
            self.assertEqual(code, 2, bad)
            self.assertIn("a path on --to's host", err)

    def test_copies_that_differ_as_a_providers_do_reach_a_handler_keyed_by_its_body(self):
        # Issue 61, item 3: a handler that tells copies apart by a hash of
        # the body passes while every copy is the same bytes; --vary sets an
        # attempt counter and a send time on each copy, as providers do.
        by_id = "SELECT count(*) FROM effects WHERE event_id = :id"
        args = ["--report", "json", "-q", "--checks", "sequential-duplicate,key-reuse",
                "--effects-query", by_id]
        vary = ["--vary", "attempt=attempt", "--vary", "meta.sent_at=now"]
        handler, db = self.start("correct.py", "--key-by-body")
        code, out, _ = run(["probe", "--to", handler.url, "--effects-sqlite", db, *args])
        checks = {c["check"]: c for c in json.loads(out)["checks"]}
        self.assertEqual(checks["sequential-duplicate"]["verdict"], "pass")  # identical bytes: caught by luck
        code, out, _ = run(["probe", "--to", handler.url, "--effects-sqlite", db, *args, *vary])
        checks = {c["check"]: c for c in json.loads(out)["checks"]}
        self.assertEqual(checks["sequential-duplicate"]["verdict"], "fail")
        self.assertIn("2 side effects for two identical deliveries", checks["sequential-duplicate"]["reason"])
        # A handler that compares the whole body refuses a provider's retry
        # as another payload; one that leaves the varied fields out passes,
        # and still refuses a changed business field under the key.
        handler, db = self.start("correct.py")
        code, out, _ = run(["probe", "--to", handler.url, "--effects-sqlite", db, *args, *vary])
        checks = {c["check"]: c for c in json.loads(out)["checks"]}
        self.assertIn("differs from the first only in the fields a provider sets anew on every copy "
                      "(attempt, meta.sent_at), was refused 422", checks["sequential-duplicate"]["reason"])
        handler, db = self.start("correct.py", "--fingerprint-ignore", "attempt", "--fingerprint-ignore", "meta")
        code, out, err = run(["probe", "--to", handler.url, "--effects-sqlite", db, *args, *vary])
        checks = {c["check"]: c for c in json.loads(out)["checks"]}
        self.assertEqual({name: c["verdict"] for name, c in checks.items()},
                         {"sequential-duplicate": "pass", "key-reuse": "pass"}, err)
        self.assertIn("refused 422", checks["key-reuse"]["reason"])
        code, _, err = run(["probe", "--to", handler.url, "--vary", "attempt=counter"])
        self.assertEqual(code, 2)
        self.assertIn("none of attempt, now and uuid", err)

    def test_a_restart_between_a_delivery_and_its_retry_reaches_keys_kept_in_memory(self):
        # Issue 61, item 1: samples/handlers/memory_keys.py keeps its keys in
        # the process. --restart-cmd stops it (by its PID) and starts it
        # again on its port; probe waits for it, then sends the retry.
        for script, verdict in (("memory_keys.py", "fail"), ("correct.py", "pass")):
            with socket_bound() as port:
                pass
            db, pidfile = self.path(f"{script}.db"), self.path(f"{script}.pid")
            handler = Handler(script, db, "--port", str(port))
            self.handlers.append(handler)
            with open(pidfile, "w") as f:
                f.write(str(handler.process.pid))
            start = f"{sys.executable} {os.path.join(HANDLERS, script)} --db {db} --port {port}"
            # Stopped when its port refuses connections (the first process
            # is this test's child: a zombie until reaped, so not asked by PID).
            refuses = f"{sys.executable} -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 0.2)'"
            restart = (f"kill $(cat {pidfile}); while {refuses} 2>/dev/null; do sleep 0.05; done; "
                       f"{start} & echo $! > {pidfile}")
            try:
                code, out, err = run(["probe", "--to", handler.url, "--report", "json", "-q",
                                      "--checks", "retry-after-restart", "--restart-cmd", restart,
                                      "--effects-sqlite", db, "--effects-query", QUERY])
            finally:
                with open(pidfile) as f:
                    restarted = int(f.read().strip() or 0)
                if restarted and restarted != handler.process.pid:
                    os.kill(restarted, signal.SIGTERM)
            check = json.loads(out)["checks"][0]
            self.assertEqual(check["verdict"], verdict, check["reason"] + err)
            self.assertEqual([r["request"] for r in check["evidence"]["requests"]],
                             ["before the restart", "again after the restart"])
            if verdict == "fail":
                self.assertIn("2 side effects for a delivery and its retry after a restart", check["reason"])
        # Without it, skipped with the flag it needs; a command that fails
        # fails the check with its exit status.
        handler, db = self.start("correct.py")
        code, out, _ = run(["probe", "--to", handler.url, "--report", "json", "-q", "--checks", "retry-after-restart"])
        self.assertIn("--restart-cmd CMD", json.loads(out)["checks"][0]["reason"])
        code, out, _ = run(["probe", "--to", handler.url, "--report", "json", "-q", "--checks", "retry-after-restart",
                            "--restart-cmd", "exit 3"])
        self.assertIn("--restart-cmd exited 3", json.loads(out)["checks"][0]["reason"])

    def test_a_fault_after_the_effect_is_a_retry_that_must_not_act_again(self):
        # Issue 61, item 8 (docs/probe.md, "Where the fault strikes"): the
        # fault --fail-first names strikes after the work's effect and
        # before the answer. A handler whose effect and key complete together
        # answers the retry with its stored response; one whose error path
        # drops the key acts again.
        for flags, verdict in ((("--fault-after-effect",), "pass"),
                               (("--fault-after-effect", "--forget-key-on-fault"), "fail")):
            handler, db = self.start("correct.py", *flags)
            code, out, err = run(["probe", "--to", handler.url, "--report", "json", "-q",
                                  "--checks", "retry-after-5xx", "--fail-first", "X-Inject-Fault: 1",
                                  "--schedule", "fixed:1s", "--speed", "100",
                                  "--effects-sqlite", db, "--effects-query", QUERY])
            check = json.loads(out)["checks"][0]
            self.assertEqual(check["verdict"], verdict, check["reason"] + err)
            if verdict == "fail":
                self.assertIn("2 side effects for a failed delivery and its retries", check["reason"])

    def test_expect_draft_turns_the_drafts_warnings_into_failures(self):
        # Issue 61, item 7: a handler that refuses a reused key with 409, not
        # the draft's 422 (webhook_handler.py --reuse-status).
        handler, db = self.start("correct.py", "--reuse-status", "409")
        args = ["probe", "--to", handler.url, "--report", "json", "-q", "--checks", "key-reuse",
                "--effects-sqlite", db, "--effects-query", QUERY]
        code, out, _ = run(args)
        check = json.loads(out)["checks"][0]
        self.assertEqual((code, check["verdict"]), (0, "warn"), check["reason"])
        self.assertIn('the IETF Idempotency-Key draft ("Error Scenarios") answers a key reused with another '
                      'payload 422', check["reason"])
        code, out, _ = run(args + ["--expect", "draft"])
        self.assertEqual((code, json.loads(out)["checks"][0]["verdict"]), (1, "fail"))
        code, _, err = run(args + ["--expect", "rfc"])
        self.assertEqual(code, 2)
        self.assertIn("'draft'", err)

    def test_a_claim_probe_did_not_see_is_never_made(self):
        # Issue 61, item 5: the effects query counts nothing (another
        # table's rows): regenerated-key says what it measured, no "once".
        handler, db = self.start("correct.py")
        code, out, err = run(["probe", "--to", handler.url, "--report", "json", "-q",
                              "--checks", "regenerated-key", "--effects-sqlite", db,
                              "--effects-query", "SELECT count(*) FROM effects WHERE key = :key AND 0"])
        report = json.loads(out)
        reason = report["checks"][0]["reason"]
        self.assertEqual(report["checks"][0]["verdict"], "fail", reason)
        self.assertNotIn("once", reason)
        self.assertIn("no side effect was observed for either (is the effects query right?)", reason)

    def test_without_a_signature_or_effects_the_checks_say_what_they_could_not_judge(self):
        handler, _ = self.start("correct.py")
        code, out, err = run(["probe", "--to", handler.url, "--report", "json"])
        self.assertEqual(code, 0, err)
        report = json.loads(out)
        verdicts = {c["check"]: c["verdict"] for c in report["checks"]}
        for name in ("retry-after-5xx", "late-retry", "forged-signature", "stale-replay", "out-of-order"):
            self.assertEqual(verdicts[name], "skipped", name)
        self.assertEqual(report["effects"], "unobserved")
        self.assertIn("statuses only", err)
        reasons = {c["check"]: c["reason"] for c in report["checks"]}
        self.assertIn("--fail-first", reasons["retry-after-5xx"])
        self.assertIn("--clock-header", reasons["late-retry"])
        self.assertIn("--scheme", reasons["forged-signature"])

    def test_probe_sends_only_to_the_to_origin(self):
        elsewhere = Listener()
        redirecting = Listener(redirect_to=elsewhere.url)
        try:
            # Templates that try to steer: an envelope whose path and Host
            # name the other listener, and a redirect from the target.
            template = self.path("steer.ndjson")
            with open(template, "w") as f:
                f.write(json.dumps({"idem": 1, "method": "POST", "path": elsewhere.url,
                                    "headers": [["Host", elsewhere.url[7:-1]], ["X-Forwarded-Host", "evil"]],
                                    "body": json.dumps({"id": "evt_1", "url": elsewhere.url})}) + "\n")
            code, out, err = run(["probe", "--to", redirecting.url, "--template", template,
                                  "--report", "json", "-q"])
            self.assertEqual(code, 1, err)  # 307 is no 2xx
            self.assertGreater(redirecting.connections, 10)
            self.assertEqual(elsewhere.connections, 0)
        finally:
            redirecting.stop()
            elsewhere.stop()

    def test_a_template_cannot_add_a_header_line_and_an_unsafe_key_is_digested(self):
        handler, db = self.start("correct.py")
        template = self.path("evil.ndjson")
        with open(template, "w") as f:
            f.write(json.dumps({"idem": 1, "method": "POST", "path": "/",
                                "headers": [["X-Note", "a\r\nX-Injected: 1"]], "body": "{\"id\":\"e\"}"}) + "\n")
        code, out, err = run(["probe", "--to", handler.url, "--template", template, "-q"])
        self.assertEqual(code, 2, err)
        self.assertIn("X-Note", err)
        self.assertEqual(out, b"")
        # A key taken from the event (--key) that a header cannot carry goes as a digest.
        with open(template, "w") as f:
            f.write(json.dumps({"id": "evt 1\r\nX-Injected: 1", "amount": 1}) + "\n")
        ledger = self.path("ledger.ndjson")
        code, out, err = run(["probe", "--to", handler.url, "--template", template, "--key", "id",
                              "--checks", "sequential-duplicate", "--ledger", ledger, "--report", "json", "-q",
                              "--effects-sqlite", db, "--effects-query", QUERY])
        self.assertEqual(code, 0, err)
        with open(ledger) as f:
            keys = {json.loads(line)["key"] for line in f}
        self.assertEqual(len(keys), 1)
        self.assertTrue(next(iter(keys)).startswith("idem-"))

    def test_the_junit_report_has_a_test_case_per_check(self):
        handler, db = self.signed("check_after_work.py")
        report = self.path("probe.xml")
        code, out, err = run(["probe", "--to", handler.url, "--scheme", "stripe", "--secret", SECRET,
                              "--effects-sqlite", db, "--effects-query", QUERY,
                              "--report", "junit", "-o", report, "-q"])
        self.assertEqual(code, 1, err)
        self.assertEqual(out, b"")
        suites = ElementTree.parse(report).getroot()
        self.assertEqual(suites.tag, "testsuites")
        cases = {case.get("name"): case for case in suites.iter("testcase")}
        self.assertEqual(sorted(cases), sorted(CHECKS))
        failed = sorted(name for name, case in cases.items() if case.find("failure") is not None)
        skipped = sorted(name for name, case in cases.items() if case.find("skipped") is not None)
        self.assertEqual(failed, ["concurrent-duplicates"])
        self.assertEqual(skipped, ["late-retry", "other-endpoint", "out-of-order", "retry-after-5xx",
                                   "retry-after-restart"])
        self.assertEqual(suites.get("failures"), "1")
        self.assertEqual(suites.get("tests"), str(len(CHECKS)))

    def test_a_probe_that_fails_leaves_the_previous_report_as_it_was(self):
        """CI keeps the last report: a handler that is down (exit 4) or a
        refused --to (exit 2) never empties -o FILE, nor leaves a partial
        file beside it."""
        report = self.path("probe.xml")
        before = b"<testsuites tests=\"1\" failures=\"0\"><testsuite/></testsuites>\n"
        with open(report, "wb") as f:
            f.write(before)
        with socket_bound() as port:  # a port nothing answers on
            down = f"http://127.0.0.1:{port}/hooks"
        for to, expected in ((down, 4), ("ftp://127.0.0.1/hooks", 2)):
            with self.subTest(to=to):
                code, out, err = run(["probe", "--to", to, "--report", "junit", "-o", report, "-q"])
                self.assertEqual(code, expected, err)
                with open(report, "rb") as f:
                    self.assertEqual(f.read(), before)
                self.assertEqual(sorted(os.listdir(os.path.dirname(report))).count("probe.xml"), 1)
                self.assertEqual([n for n in os.listdir(os.path.dirname(report)) if "partial" in n], [])

    def test_markdown_and_table_reports_name_each_check(self):
        handler, _ = self.start("correct.py")
        for fmt, marker in (("markdown", r"\| `sequential-duplicate` \| \*\*pass\*\* \|"),
                            ("table", r"\nsequential-duplicate +pass +answered 200")):
            code, out, err = run(["probe", "--to", handler.url, "--report", fmt, "-q",
                                  "--checks", "sequential-duplicate,key-reuse"])
            self.assertEqual(code, 0, err)
            self.assertRegex(out.decode(), marker)
            self.assertNotIn("concurrent-duplicates", out.decode())

    def test_the_ledger_holds_every_request_and_answer(self):
        handler, db = self.signed("correct.py")
        ledger = self.path("ledger.ndjson")
        _, _, report, _ = self.probe(handler, db, "--scheme", "stripe", "--secret", SECRET, "--ledger", ledger)
        with open(ledger) as f:
            lines = [json.loads(line) for line in f]
        self.assertEqual(len(lines), report["requests"])
        self.assertEqual({line["check"] for line in lines}, set(CHECKS) - {"out-of-order", "other-endpoint", "retry-after-restart", "slow-answer"})
        self.assertTrue(all({"key", "sent_at", "outcome", "latency_ms"} <= set(line) for line in lines))
        # idem audit reads it: the eight concurrent copies are one key's duplicates.
        code, out, err = run(["audit", "--key", "key", "--time-field", "sent_at", "--summary", "json",
                              "--format", "json", ledger])
        self.assertIn(code, (0, 1), err)
        self.assertEqual(summary_of(err)["records"], len(lines))
        self.assertGreaterEqual(summary_of(err)["duplicates"], 7)

    def test_side_effects_read_from_a_url_or_a_command_judge_alike(self):
        handler, db = self.start("check_after_work.py")
        asked = []

        class Count(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                from urllib.parse import parse_qs, urlparse
                key = parse_qs(urlparse(self.path).query)["key"][0]
                asked.append(key)
                import sqlite3
                conn = sqlite3.connect(db)
                count = conn.execute(QUERY.replace(":key", "?"), (key,)).fetchone()[0]
                conn.close()
                body = json.dumps({"count": count}).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Count)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            url = f"http://127.0.0.1:{server.server_address[1]}/count?key={{key}}"
            # The handler writes while probe asks: the command waits for its
            # lock as the handler's own connections do (sqlite3's shell waits 0 ms).
            command = (f"sqlite3 -cmd '.timeout 30000' -readonly {db} "
                       f"\"SELECT count(*) FROM effects WHERE key = '$IDEM_KEY'\"")
            checks = "sequential-duplicate,concurrent-duplicates"
            for observer in (["--effects-url", url], ["--effects-cmd", command]):
                with self.subTest(observer=observer[0]):
                    code, out, err = run(["probe", "--to", handler.url, "--checks", checks, "--report", "json",
                                          "-q", *observer])
                    self.assertEqual(code, 1, err)
                    report = json.loads(out)
                    self.assertEqual(report["effects"], observer[0].split("-")[-1])
                    verdicts = {c["check"]: c["verdict"] for c in report["checks"]}
                    self.assertEqual(verdicts, {"sequential-duplicate": "pass", "concurrent-duplicates": "fail"})
            self.assertTrue(asked and all(key.startswith("probe-") for key in asked))
        finally:
            server.shutdown()
            server.server_close()

    def test_an_unreachable_target_is_exit_4(self):
        listener = Listener()
        url = listener.url
        listener.stop()
        code, out, err = run(["probe", "--to", url, "-q"])
        self.assertEqual(code, 4, err)
        self.assertIn("cannot reach", err)
        self.assertEqual(out, b"")

    def test_typos_and_contradictions_are_usage_errors(self):
        handler, db = self.start("correct.py")
        cases = [
            (["--checks", "sequental-duplicate"], "did you mean sequential-duplicate"),
            (["--effects-sqlite", db, "--effects-query", "DELETE FROM effects WHERE key = :key"], "only read"),
            (["--effects-sqlite", db, "--effects-query", "SELECT count(*) FROM effects"], "neither :key nor :id"),
            (["--effects-sqlite", self.path("missing.db"), "--effects-query", QUERY], "missing.db"),
            (["--secret", SECRET], "--secret without --scheme"),
            (["--schedule", "stirpe"], "--schedule"),
            (["--fail-first", "no colon"], "HEADER: VALUE"),
            (["--report", "xml"], "--report"),
            (["--to", "ftp://example.com/"], "--to"),
        ]
        for extra, message in cases:
            with self.subTest(extra=extra):
                code, out, err = run(["probe", "--to", handler.url, *extra])
                self.assertEqual(code, 2, err)
                self.assertIn(message, err)
                self.assertEqual(out, b"")
        with open(db, "rb") as f:
            self.assertTrue(f.read(16).startswith(b"SQLite format 3"))

    def test_out_of_order_with_the_state_read_back(self):
        handler, db = self.start("correct.py")
        template = self.path("order.ndjson")
        with open(template, "w") as f:
            for seq in (1, 2, 3):
                f.write(json.dumps({"id": f"evt_{seq}", "order_id": "o1", "seq": seq}) + "\n")
        # A state reading that does not depend on the order: equal both ways.
        code, out, err = run(["probe", "--to", handler.url, "--template", template, "--order", "seq",
                              "--checks", "out-of-order", "--report", "json", "-q",
                              "--effects-cmd", "echo 1"])
        self.assertEqual(code, 0, err)
        check = json.loads(out)["checks"][0]
        self.assertEqual(check["verdict"], "pass", check)
        self.assertEqual([r["request"].split(" (")[0] for r in check["evidence"]["requests"]], ["newest first"] * 3)
        self.assertIn("seq 3", check["evidence"]["requests"][0]["request"])
        # A reading that shows the last event applied: the oldest, sent last.
        code, out, err = run(["probe", "--to", handler.url, "--template", template, "--order", "seq",
                              "--checks", "out-of-order", "--report", "json", "-q",
                              "--effects-sqlite", db, "--effects-query",
                              "SELECT count(*) FROM effects WHERE event_id = :id AND id = (SELECT max(id) FROM effects)"])
        self.assertEqual(code, 1, err)
        self.assertEqual(json.loads(out)["checks"][0]["verdict"], "fail")


if __name__ == "__main__":
    unittest.main()
