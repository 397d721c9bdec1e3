"""Secrets that never leave, and report pages that run no script but their
own (docs/architecture.md, "Untrusted input"): store URIs are redacted in
every message, a process holding a secret leaves no core dump, and the
HTML reports' Content-Security-Policy allows exactly their one script."""
import base64
import hashlib
import os
import re
import tempfile
import unittest

from harness import CHROMIUM, ndjson, rendered_offline, run
from listener import listening

PASSWORD = "S3CRETPASS"
SECRET = "whsec_marker_SECRETVALUE"


class StoreUrisAreRedacted(unittest.TestCase):
    URIS = [f"rediss://default:{PASSWORD}@cache.example:6380",
            f"redis://127.0.0.1:6379/0?password={PASSWORD}",
            f"redis://127.0.0.1:6379/x?password={PASSWORD}",
            f"redis://default:{PASSWORD}@127.0.0.1:6379",
            f"memcached://u:{PASSWORD}@host"]

    def test_no_message_repeats_a_store_password(self):
        log = ndjson([{"id": "a"}])
        for uri in self.URIS:
            for args, env in ((["dedup", "--key", "id", "--store", uri, "-"], None),
                              (["dedup", "--key", "id", "-"], {"IDEM_STORE": uri}),
                              (["dedup", "--key", "id", "--store", uri, "--summary", "json", "-"], None)):
                with self.subTest(uri=uri, env=env):
                    code, out, err = run(args, stdin=log, env=env)
                    self.assertNotEqual(code, 0)
                    self.assertNotIn(PASSWORD, err)
                    self.assertNotIn(PASSWORD, out.decode())

    def test_the_redacted_uri_still_says_which_store(self):
        code, _, err = run(["dedup", "--key", "id", "--store", self.URIS[0], "-"], stdin=b"")
        self.assertEqual(code, 2, err)
        self.assertIn("rediss://default:***@cache.example:6380", err)


class SecretsStayInTheProcess(unittest.TestCase):
    def test_a_listener_holding_a_secret_cannot_dump_core(self):
        with tempfile.TemporaryDirectory() as tmp:
            secret_file = os.path.join(tmp, "secret")
            with open(secret_file, "w") as f:
                f.write(SECRET + "\n")
            with listening(tmp, ["--verify", "stripe", "--secret-file", secret_file]) as listener:
                with open(f"/proc/{listener.process.pid}/limits") as f:
                    limits = f.read()
                core = re.search(r"Max core file size\s+(\S+)\s+(\S+)", limits)
                self.assertEqual(core.groups(), ("0", "0"))

    def test_core_dumps_stay_when_asked_for(self):
        with tempfile.TemporaryDirectory() as tmp:
            env_before = os.environ.get("IDEM_ALLOW_CORE_DUMPS")
            os.environ["IDEM_ALLOW_CORE_DUMPS"] = "1"
            try:
                import resource
                soft, hard = resource.getrlimit(resource.RLIMIT_CORE)
                with listening(tmp, ["--verify", "stripe", "--secret", SECRET]) as listener:
                    with open(f"/proc/{listener.process.pid}/limits") as f:
                        limits = f.read()
                core = re.search(r"Max core file size\s+(\S+)\s+(\S+)", limits).groups()
                expected = tuple("unlimited" if v == resource.RLIM_INFINITY else str(v) for v in (soft, hard))
                self.assertEqual(core, expected)
            finally:
                if env_before is None:
                    del os.environ["IDEM_ALLOW_CORE_DUMPS"]
                else:
                    os.environ["IDEM_ALLOW_CORE_DUMPS"] = env_before


HOSTILE = "a\x1b[2J\x1b]52;c;SGVsbG8=\x07\u009b31m\u202eevil\u2066\u200b\x7f\nFORGED line\r"
BIDI_AND_C1 = re.compile("[\u0080-\u009f\u061c\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")


def assert_terminal_safe(test, text):
    """No control byte but the report's own newlines, no C1, bidi or
    invisible character, and no line a value started."""
    for ch in text:
        test.assertFalse(ord(ch) < 0x20 and ch != "\n", repr(ch))
        test.assertNotEqual(ch, "\x7f")
    test.assertIsNone(BIDI_AND_C1.search(text))
    for line in text.splitlines():
        test.assertFalse(line.startswith("FORGED"), line)


def run_on_terminal(args, columns=None, env=None):
    """idem with stdout on a pseudo-terminal (where merge --preview shows
    its table), `columns` wide when given, with `env` over the environment
    (None as a value unsets); returns (exit code, what it printed, stderr)."""
    import fcntl
    import pty
    import struct
    import subprocess
    import termios
    from harness import IDEM, read_until_closed
    leader, follower = pty.openpty()
    if columns:
        fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    full_env = dict(os.environ)
    for name, value in (env or {}).items():
        if value is None:
            full_env.pop(name, None)
        else:
            full_env[name] = value
    process = subprocess.Popen([IDEM] + args, stdout=follower, stderr=subprocess.PIPE, env=full_env)
    os.close(follower)
    printed = read_until_closed(leader)
    err = process.communicate(timeout=60)[1].decode("utf-8", "replace")
    return process.returncode, printed.replace(b"\r\n", b"\n"), err


class TextReportsEscapeLogValues(unittest.TestCase):
    """Every table report of every command, fed one hostile value as
    entity, state, key, group and source."""

    def test_no_value_drives_the_terminal_or_forges_a_line(self):
        with tempfile.TemporaryDirectory() as tmp:
            log = os.path.join(tmp, "hostile.ndjson")
            records = [{"id": HOSTILE, "status": "pending", "g": HOSTILE, "ts": "2026-11-30T08:00:00Z"},
                       {"id": HOSTILE, "status": HOSTILE, "g": HOSTILE, "ts": "2026-11-30T08:00:01Z"},
                       {"id": HOSTILE, "status": "pending", "g": HOSTILE, "ts": "2026-11-30T08:00:02Z"}]
            with open(log, "wb") as f:
                f.write(ndjson(records))
            other = os.path.join(tmp, "other.ndjson")
            with open(other, "wb") as f:
                f.write(ndjson([{"id": "x", "g": HOSTILE}]))
            cases = {
                "audit": ["audit", "--key", "id", log],
                "states": ["states", "--entity", "id", "--state", "status", "--allow", "pending>paid",
                           "--report", "table", "--store", ":memory:", log],
                "reconcile": ["reconcile", "--stage", f"a={log}", "--stage", f"b={other}", "--key", "id",
                              "--by", "g"],
                "merge --preview": ["merge", "--group", "g", "--window", "5m", "--time-field", "ts",
                                    "--action", "merge_content", "--preview", log],
            }
            for name, args in cases.items():
                with self.subTest(report=name):
                    code, out, err = (run_on_terminal if name == "merge --preview" else run)(args)
                    self.assertIn(code, (0, 1), err)
                    text = out.decode("utf-8")
                    self.assertTrue(text.strip(), name)
                    assert_terminal_safe(self, text)
                    assert_terminal_safe(self, err)


class TablesFitTheirReader(unittest.TestCase):
    """A table is cut to the terminal's width (COLUMNS first), by display
    width on character boundaries; into a pipe or with --wide, never."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.log = os.path.join(self.tmp.name, "long.ndjson")
        long_key = "k" * 150 + "\u65e5\u672c\u8a9e" * 40  # ASCII, then wide characters
        with open(self.log, "wb") as f:
            f.write(ndjson([{"id": long_key, "n": 1}, {"id": long_key, "n": 2}]))
        later = os.path.join(self.tmp.name, "later.ndjson")
        with open(later, "wb") as f:
            f.write(ndjson([{"id": long_key, "n": 1}]))
        self.reports = {
            "audit": ["audit", "--key", "id", self.log],
            "states": ["states", "--entity", "id", "--state", "id", "--allow", "a>b", "--report", "table",
                       "--store", ":memory:", self.log],
            "reconcile": ["reconcile", "--stage", f"a={self.log}", "--stage", f"b={later}", "--key", "n",
                          "--by", "id", "--grace", "0s"],
        }

    def tearDown(self):
        self.tmp.cleanup()

    def widths(self, text):
        import unicodedata
        return [sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in line)
                for line in text.splitlines()]

    def test_the_terminal_width_then_columns(self):
        for name, args in self.reports.items():
            for columns, env, width in ((120, {"COLUMNS": None}, 120), (120, {"COLUMNS": "200"}, 200),
                                        (None, {"COLUMNS": None}, 80)):
                with self.subTest(report=name, columns=columns, env=env):
                    code, out, err = run_on_terminal(args, columns=columns, env=env)
                    self.assertIn(code, (0, 1), err)
                    text = out.decode("utf-8")  # valid UTF-8: no cut inside a character
                    self.assertLessEqual(max(self.widths(text)), width, text)
                    self.assertIn("...", text)
                    self.assertTrue(any(w > 80 for w in self.widths(text)) or width == 80, text)

    def test_never_cut_into_a_pipe_or_with_wide(self):
        for name, args in self.reports.items():
            with self.subTest(report=name):
                code, out, err = run(args, env={"COLUMNS": "60"})
                self.assertIn(code, (0, 1), err)
                text = out.decode("utf-8")
                self.assertIn("\u65e5\u672c\u8a9e" * 40, text)  # the whole value, uncut
                self.assertGreater(max(self.widths(text)), 200)
                code, out, err = run_on_terminal(args + ["--wide"], columns=100)
                self.assertIn(code, (0, 1), err)
                self.assertGreater(max(self.widths(out.decode("utf-8"))), 200)


class DiagramsHoldOnlyTheirOwnStatements(unittest.TestCase):
    def test_a_state_name_with_a_newline_adds_no_mermaid_or_dot_statement(self):
        evil = "paid\n    s0 --> s1 : 999 INJECTED; x\r"
        with tempfile.TemporaryDirectory() as tmp:
            log = os.path.join(tmp, "in.ndjson")
            with open(log, "wb") as f:
                f.write(ndjson([{"id": "a", "status": "pending"}, {"id": "a", "status": evil}]))
            base = ["states", "--entity", "id", "--state", "status", "--allow", "pending>paid",
                    "--store", ":memory:", log]
            code, out, err = run(base + ["--report", "mermaid"])
            self.assertIn(code, (0, 1), err)
            text = out.decode()
            assert_terminal_safe(self, text)
            for line in text.splitlines():
                if "INJECTED" in line:
                    self.assertRegex(line, r"^    s\d+ : ")  # only inside the state's label
            edges = [line for line in text.splitlines() if re.match(r"^    s\d+ --> s\d+ : ", line)]
            # The machine's pending -> paid and the one the log showed: no third.
            self.assertEqual(len(edges), 2, text)
            self.assertFalse(any("INJECTED" in line for line in edges), text)
            code, out, err = run(base + ["--report", "dot"])
            self.assertIn(code, (0, 1), err)
            text = out.decode()
            assert_terminal_safe(self, text)
            for line in text.splitlines():
                if "INJECTED" in line:
                    self.assertIn('"', line.split("INJECTED")[0])  # inside a quoted string
            self.assertEqual(len([line for line in text.splitlines() if re.match(r'^  "[^"]*" -> ', line)]), 2, text)


def inline_scripts(html):
    return re.findall(r"<script>(.*?)</script>", html, re.S)


class ReportPagesRunOnlyTheirOwnScript(unittest.TestCase):
    def reports(self, tmp):
        log = os.path.join(tmp, "in.ndjson")
        with open(log, "wb") as f:
            f.write(ndjson([{"id": "a", "status": "pending"}, {"id": "a", "status": "paid"},
                            {"id": "a", "status": "paid"}]))
        return {
            "audit": ["audit", "--key", "id", "--format", "html", log],
            "states": ["states", "--entity", "id", "--state", "status", "--allow", "pending>paid",
                       "--report", "html", "--store", ":memory:", log],
            "reconcile": ["reconcile", "--stage", f"a={log}", "--stage", f"b={log}", "--key", "id",
                          "--report", "html"],
        }

    def test_the_policy_names_the_hash_of_the_one_inline_script(self):
        with tempfile.TemporaryDirectory() as tmp:
            for name, args in self.reports(tmp).items():
                with self.subTest(report=name):
                    page = os.path.join(tmp, name + ".html")
                    code, _, err = run(args + ["-o", page])
                    self.assertIn(code, (0, 1), err)
                    with open(page) as f:
                        html = f.read()
                    policy = re.search(r'Content-Security-Policy" content="([^"]*)"', html).group(1)
                    self.assertNotIn("script-src 'unsafe-inline'", policy)
                    scripts = inline_scripts(html)
                    self.assertEqual(len(scripts), 1)
                    digest = base64.b64encode(hashlib.sha256(scripts[0].encode()).digest()).decode()
                    self.assertIn(f"script-src 'sha256-{digest}'", policy)
                    if CHROMIUM:
                        rendered_offline(self, page, tmp)  # the script still runs under it


if __name__ == "__main__":
    unittest.main()
