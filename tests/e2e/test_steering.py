"""A request target or a captured path must never steer `listen --forward-to`
or `replay` to a host the user did not configure (issue #12, item 1).

Every test runs a "victim" listener on 127.0.0.2, a second loopback address
no configured URL names, and checks that it received nothing."""
import json
import os
import socket
import tempfile
import unittest

from listener import listening, summary_of
from harness import run

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def raw_request(port, target, body=b"{}", method="POST"):
    """Sends one request with a request target exactly as given; returns the status."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(f"{method} ".encode() + target + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
        answer = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
    return int(answer.split(b" ", 2)[1])


def hostile_targets(victim_port):
    """(request target, what a safe server does with it)."""
    v = str(victim_port).encode()
    return [
        (b"@127.0.0.2:" + v + b"/pwned", "refused"),
        (b".127.0.0.2:" + v + b"/x", "refused"),
        (b":" + v + b"@127.0.0.2/x", "refused"),
        (b"127.0.0.2:" + v, "refused"),
        (b"/\\127.0.0.2:" + v + b"/x", "refused"),
        (b"/a\\@127.0.0.2:" + v + b"/x", "refused"),
        (b"//127.0.0.2:" + v + b"/x", "kept"),
        (b"/a@127.0.0.2:" + v + b"/x", "kept"),
        (b"/%40127.0.0.2:" + v + b"/x", "kept"),
        (b"http://127.0.0.2:" + v + b"/pwned", "path only"),
        (b"https://127.0.0.2:" + v + b"/pwned?q=1", "path only"),
    ]


class Steering(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def victim(self):
        return listening(self.dir, ["--bind", "127.0.0.2"], name="victim.ndjson")

    def test_listen_refuses_targets_that_are_not_paths_and_forwards_only_to_the_configured_host(self):
        with self.victim() as victim, listening(self.dir, name="target.ndjson") as target, \
                listening(self.dir, ["--forward-to", target.url], name="gateway.ndjson") as gateway:
            expected_paths = []
            for request_target, fate in hostile_targets(victim.port):
                status = raw_request(gateway.port, request_target)
                if fate == "refused":
                    self.assertEqual(status, 400, request_target)
                else:
                    self.assertEqual(status, 200, request_target)
                    path = request_target.decode()
                    if fate == "path only":
                        path = "/" + path.split("/", 3)[3]
                    expected_paths.append(path)
            # OPTIONS * is the one target that is not a path, and only for OPTIONS.
            self.assertEqual(raw_request(gateway.port, b"*", method="OPTIONS"), 200)
            self.assertEqual(raw_request(gateway.port, b"*"), 400)
            gateway.stop()
            target.stop()
            victim.stop()
        self.assertEqual(victim.envelopes(), [])
        forwarded = [e["path"] for e in target.envelopes()]
        self.assertEqual(forwarded, expected_paths + ["/"])
        self.assertEqual([e["path"] for e in gateway.envelopes()], expected_paths + ["*"])
        self.assertIn("is not a path", gateway.stderr)

    def replay_hostile_capture(self, extra_args):
        with self.victim() as victim, listening(self.dir, name="target.ndjson") as target:
            capture = os.path.join(self.dir, "crafted.ndjson")
            with open(capture, "w") as out:
                for n, (request_target, _) in enumerate(hostile_targets(victim.port)):
                    out.write(json.dumps({
                        "idem": 1, "id": f"cap_{n}", "received_at": "2026-11-30T08:00:00Z",
                        "method": "POST", "path": request_target.decode(),
                        "headers": [["Content-Type", "application/json"]],
                        "body": json.dumps({"id": f"evt_{n}"})}) + "\n")
            rejects = os.path.join(self.dir, "rejects.ndjson")
            code, out, err = run(["replay", "--to", target.url, "--store", ":memory:", "--key", "id",
                                  "--backoff", "10ms..50ms", "--reject", rejects, "--summary", "json",
                                  *extra_args, capture])
            target.stop()
            victim.stop()
        self.assertEqual(victim.envelopes(), [])
        sent = sorted(e["path"] for e in target.envelopes())
        with open(rejects) as rejected:
            return code, err, sent, rejected.read().splitlines()

    def check_replay(self, extra_args):
        code, err, sent, rejected = self.replay_hostile_capture(extra_args)
        # Only captured paths that start with '/' (and hold no backslash) are sent, to the target.
        self.assertEqual(len(rejected), 8, err)
        self.assertEqual(len(sent), 3, err)
        for path in sent:
            self.assertTrue(path.startswith("/"), path)
        self.assertIn("does not start with '/'", err)
        self.assertIn("holds a backslash", err)
        self.assertEqual(summary_of(err)["rejected"], 8)
        self.assertNotEqual(code, 0)

    def test_replay_sends_a_crafted_capture_only_to_the_configured_host(self):
        self.check_replay([])

    def test_replay_with_resign_never_signs_a_body_for_another_host(self):
        self.check_replay(["--resign", "standard", "--secret", SECRET])


if __name__ == "__main__":
    unittest.main()
