"""`idem listen` as a context manager for tests: started on a free port (read
from its first stderr line), stopped with SIGTERM, its capture read back."""
import contextlib
import http.client
import json
import os
import signal
import subprocess

from test_cli import IDEM


class FakeClock:
    """A clock the test moves while idem runs (IDEM_NOW=@FILE,
    docs/architecture.md "Time"): every deadline of the process reads it, so
    a test passes an idle grace or a header timeout without sleeping."""

    def __init__(self, directory):
        self.path = os.path.join(directory, "clock")
        self.offset_ms = 0
        self._write()

    def env(self):
        return {"IDEM_NOW": "@" + self.path}

    def advance(self, seconds):
        self.offset_ms += int(seconds * 1000)
        self._write()

    def _write(self):
        # Whole or not at all: the process reads the file when it changes.
        staged = self.path + ".new"
        with open(staged, "w") as out:
            out.write(f"+{self.offset_ms}ms\n")
        os.replace(staged, self.path)


class Listener:
    def __init__(self, process, port, capture):
        self.process = process
        self.port = port
        self.capture = capture
        self.url = f"http://127.0.0.1:{port}"
        self.stderr = ""

    def post(self, path, body, headers=None, connection=None):
        """Sends one request; returns (status, response headers, body)."""
        own = connection is None
        connection = connection or http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            connection.request("POST", path, body=body, headers=headers or {})
            response = connection.getresponse()
            return response.status, dict(response.getheaders()), response.read()
        finally:
            if own:
                connection.close()

    def cpu_seconds(self):
        """User plus system CPU time the listener has used so far."""
        with open(f"/proc/{self.process.pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def envelopes(self):
        with open(self.capture, "rb") as capture:
            return [json.loads(line) for line in capture.read().splitlines()]

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        self.stderr = self.process.communicate(timeout=30)[1].decode()
        return self.process.returncode


@contextlib.contextmanager
def listening(directory, args=(), name="capture.ndjson", preexec_fn=None, clock=None):
    capture = os.path.join(directory, name)
    env = {**os.environ, **clock.env()} if clock else None
    process = subprocess.Popen([IDEM, "listen", "--port", "0", "-o", capture, "--summary", "json", *args],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=preexec_fn,
                               env=env)
    first = process.stderr.readline().decode()
    metrics_port = None
    if "metrics at http://" in first:  # --metrics-listen: said before the capture's line
        metrics_port = int(first.split("http://", 1)[1].split("/")[0].rsplit(":", 1)[1])
        first = process.stderr.readline().decode()
    if "capturing http://" not in first:
        process.kill()
        raise AssertionError(f"idem listen did not start: {first}{process.stderr.read().decode()}")
    port = int(first.split("http://", 1)[1].split()[0].rsplit(":", 1)[1])
    listener = Listener(process, port, capture)
    listener.metrics_port = metrics_port
    try:
        yield listener
    finally:
        if process.poll() is None:
            listener.stop()


def summary_of(stderr):
    return json.loads(stderr.strip().splitlines()[-1])
