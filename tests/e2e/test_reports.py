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
