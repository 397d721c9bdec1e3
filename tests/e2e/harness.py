"""What every end-to-end suite shares: where the binary and the samples
are, running the binary the way users do, and the kill-and-rerun harness
behind the crash guarantee (docs/architecture.md, "The crash guarantee").

IDEM_BIN names the binary (default: build/idem).
"""
import base64
import hashlib
import hmac
import json
import os
import random
import atexit
import shutil
import subprocess
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
IDEM = os.environ.get("IDEM_BIN", os.path.join(ROOT, "build", "idem"))
CAPTURES = os.path.join(ROOT, "samples", "captures")
GH = "gh-demo-secret"  # the samples' GitHub secret
SECRET = "whsec_listen_test"  # what listen and replay tests sign with

# The directory idem runs in: a scratch one, so a default path (idem.db,
# a report's default name) lands there and never in the source tree.
SCRATCH = tempfile.mkdtemp(prefix="idem-e2e-cwd.")
atexit.register(shutil.rmtree, SCRATCH, True)


def read_until_closed(leader):
    """Everything written to a pseudo-terminal until its last writer is
    gone (read from its leader side, which this closes)."""
    written = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the follower side was closed
            break
        if not chunk:
            break
        written += chunk
    os.close(leader)
    return written


def run(args, stdin=None, env=None):
    """Runs idem with `args`; returns (exit code, stdout bytes, stderr text)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    result = subprocess.run([IDEM] + args, input=stdin, capture_output=True, env=full_env, timeout=120,
                            cwd=SCRATCH)
    return result.returncode, result.stdout, result.stderr.decode("utf-8", "replace")


# Where the HTML reports are rendered (make test-deps installs it).
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def rendered_offline(test, page, tmp):
    """The DOM headless Chromium makes of the HTML report at `page`, once
    the report is shown to fetch nothing: no src or href attributes, a
    policy that forbids loading anything, its script ran, and the page
    loaded no resource. `tmp` holds the browser's profile."""
    with open(page) as f:
        html = f.read()
    test.assertNotRegex(html, r"<[a-zA-Z][^>]*\s(src|href)=")  # in a tag, not in escaped text
    test.assertIn("default-src 'none'", html)
    dom = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                          "--user-data-dir=" + os.path.join(tmp, "profile"), "--dump-dom",
                          "file://" + page], capture_output=True, text=True, timeout=120).stdout
    test.assertIn('data-ready="1"', dom)      # the script ran
    test.assertIn('data-resources="0"', dom)  # and the page loaded nothing
    return dom


# The incident logs (samples/incidents/generate.py), as docs/audit.md audits them.
INCIDENTS = os.path.join(ROOT, "samples", "incidents")


def audit_json(args, stdin=None):
    """Runs `idem audit --format json ARGS`; returns (exit code, the report
    parsed, or None when nothing was written, stderr text)."""
    code, out, err = run(["audit", "--format", "json"] + args, stdin=stdin)
    return code, (json.loads(out) if out else None), err


def compressed(data, kind):
    """`data` as the `kind` tool ("gzip", "zstd", "xz", "bzip2") writes it."""
    return subprocess.run([kind, "-q", "-c"], input=data, capture_output=True, check=True).stdout


def ndjson(records):
    return ("\n".join(json.dumps(r) for r in records) + "\n").encode()


def signed_envelopes(events, scheme="stripe", secret=SECRET, timestamp=None):
    """Envelopes signed by `idem sign`, as listen would have captured them."""
    stdin = ndjson(events)
    at = ["--timestamp", timestamp] if timestamp else []
    code, out, err = run(["sign", "--scheme", scheme, "--secret", secret, *at], stdin=stdin)
    assert code == 0, err
    return [json.loads(line) for line in out.splitlines()]


def github_envelope(body: bytes, secret=GH, capture_id="c1", binary=False):
    """A GitHub delivery signed here with Python's hmac, independently of idem."""
    mac = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    record = {"idem": 1, "id": capture_id, "received_at": "2026-11-30T08:00:00Z", "method": "POST", "path": "/h",
              "headers": [["X-Hub-Signature-256", "sha256=" + mac]]}
    if binary:
        record["body_b64"] = base64.b64encode(body).decode()
    else:
        record["body"] = body.decode()
    return json.dumps(record, separators=(",", ":"))


def summary_of(stderr):
    """The --summary json line, the last on stderr."""
    return json.loads(stderr.strip().splitlines()[-1])


class KillAndRerun:
    """The harness as an object, so a test can check more after it (reruns
    over the same input, a grown input). Use within a TemporaryDirectory."""

    def __init__(self, test, tmp, args, outputs, source_bytes, seed=11, store=True, clean_code=0):
        """`clean_code`: what a clean run exits with (1 when the input has
        records to reject)."""
        self.test, self.tmp, self.outputs, self.store = test, tmp, outputs, store
        self.clean_code = clean_code
        self.rng = random.Random(seed)
        self.source = os.path.join(tmp, "events.ndjson")
        with open(self.source, "wb") as f:
            f.write(source_bytes)
        self.args = list(args)

    def paths(self, prefix):
        return {flag: os.path.join(self.tmp, f"{prefix}.{name}") for flag, name in self.outputs.items()}

    def command(self, prefix):
        flags = []
        for flag, path in self.paths(prefix).items():
            flags += [flag, path]
        store = ["--store", os.path.join(self.tmp, prefix + ".db")] if self.store else []
        return self.args + store + flags + [self.source]

    def clean_run(self):
        code, _, err = run(self.command("clean"))
        self.test.assertEqual(code, self.clean_code, err)

    def crash_points(self, points):
        """Where the killed runs stop, one per run: record counts spread
        over the input and rising from run to run (a resumed run counts the
        records it skips, so each one gets further), and every third run at
        its first commit instead (outputs synced, the checkpoint written,
        the store not yet committed; the last commit too) when it has a
        store."""
        with open(self.source, "rb") as f:
            records = sum(1 for line in f if line.strip())
        counts = sorted(self.rng.sample(range(1, records + 1), min(points, records)))
        return ["commit:1" if i % 3 == 2 and self.store else f"record:{count}" for i, count in enumerate(counts)]

    def killed_runs(self, kills_wanted=3, points=16, after_kill=None):
        """Runs the command again and again, each killed by the process
        itself at a crash point (IDEM_CRASH_AT, util/crash_point.hpp) as
        kill -9 would, resuming what the one before left; then once with
        none, which must finish. The kills land at record counts, not at
        wall-clock times, so a slower build is killed at the same points.
        Returns how many runs were killed; `after_kill`, if given, checks
        what each killed run left."""
        command = [IDEM] + self.command("killed")
        kills = 0
        for point in self.crash_points(points):
            process = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     env=dict(os.environ, IDEM_CRASH_AT=point))
            if process.returncode == -9:
                kills += 1
                if after_kill:
                    after_kill()
                continue
            if process.returncode not in (0, 1):
                self.test.fail(f"exit {process.returncode} at {point}: {process.stderr.decode()}")
            break  # finished before its crash point: the input is done
        code, _, err = run(command[1:])
        self.test.assertIn(code, (0, 1), err)
        self.test.assertGreater(kills, kills_wanted)
        return kills

    def read(self, prefix, flag):
        path = self.paths(prefix)[flag]
        if not os.path.exists(path):
            return None
        with open(path, "rb") as f:
            return f.read()

    def assert_same_outputs(self, normalize=None):
        for flag in self.outputs:
            clean, killed = self.read("clean", flag), self.read("killed", flag)
            if normalize:
                clean, killed = normalize(flag, clean), normalize(flag, killed)
            self.test.assertEqual(clean, killed, flag)

    def run_through(self, normalize=None):
        """The clean run, the killed ones, and the comparison."""
        self.clean_run()
        kills = self.killed_runs()
        self.assert_same_outputs(normalize)
        return kills
