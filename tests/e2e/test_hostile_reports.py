"""One hostile corpus through every report format of audit, states,
reconcile, merge and verify --explain (docs/architecture.md, "Untrusted
input"): terminal escapes, C1, bidi and zero-width characters, line breaks,
Markdown's | and backticks, HTML that would run, Mermaid arrows and YAML
syntax, as keys, entities, states, operations, groups, sources and bodies.
Every format holds only its own structure: no control byte but its own
newlines, no C1 or bidi character, no raw < in Markdown, no Mermaid or DOT
statement a value made, a learned machine that reads back as the log's,
and HTML whose rendered DOM has exactly the elements a benign log's has.
Then the secrets: no message, summary, metrics file or report repeats a
marker secret or a marker store password."""
import collections
import json
import os
import re
import tempfile
import unittest

import yaml

from harness import CHROMIUM, ndjson, rendered_offline, run
from test_reports import assert_terminal_safe, run_on_terminal

CORPUS = [
    "esc\x1b[2J\x1b]52;c;SGVsbG8=\x07",
    "c1\u009b31m\u0085x",
    "bidi\u202eevil\u2066\u2069",
    "zw\u200b\ufeff\u200f",
    "nl\nFORGED line\r\n# heading",
    "pipe| forged | cell |",
    "tick`code` ```",
    "<script>alert(1)</script>",
    "\"><img src=x onerror=alert(1)>",
    "</script><b>x</b>",
    "mermaid\n    s0 --> s1 : INJECTED",
    "yaml: #comment\n- item",
]
BIDI_AND_C1 = re.compile("[\u007f-\u009f\u061c\u200b-\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ufeff]")
HIDDEN = re.compile("[\u0080-\u009f\u061c\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")


def escaped_width(value):
    """The columns a value takes once escaped (\\xNN, \\u{XXXX})."""
    return sum(4 if ord(ch) < 0x20 or ch == "\x7f" else 8 if HIDDEN.match(ch) else 1 for ch in value)


# The same log with plain names as wide as the hostile ones once escaped
# (a chart's legend fits as many): what each report holds when no value is
# hostile.
BENIGN = [f"v{i}".ljust(escaped_width(value), "x") for i, value in enumerate(CORPUS)]


def records(values):
    """Each value a key two or three times, with the others as its states,
    operation, group, source and body."""
    out = []
    n = len(values)
    for i, value in enumerate(values):
        for copy in range(2 + i % 2):
            out.append({"id": value, "status": values[(i + copy) % n], "event": values[(i + 3) % n],
                        "g": values[(i + 1) % n], "src": values[(i + 2) % n], "body": values[(i + 4) % n],
                        "ts": f"2026-11-30T08:{i:02d}:{copy:02d}Z"})
    return out


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)
    return path


def reports(tmp, values, name):
    """Every report, by (command, format): the arguments that make it."""
    log = write(os.path.join(tmp, f"{name}.ndjson"), ndjson(records(values)))
    later = write(os.path.join(tmp, f"{name}-b.ndjson"), ndjson(records(values)[::3]))
    audit = ["audit", "--key", "id", "--source-field", "src", "--time-field", "ts",
             "--what-if", "key=g", log]
    states = ["states", "--entity", "id", "--state", "status", "--event", "event", "--time-field", "ts",
              "--allow", "a>b", "--store", ":memory:", log]
    reconcile = ["reconcile", "--stage", f"a={log}", "--stage", f"b={later}", "--key", "id", "--by", "g",
                 "--time", "ts", "--missing", os.path.join(tmp, f"{name}-missing.ndjson")]
    made = {}
    for fmt in ("table", "json", "markdown", "html"):
        made[("audit", fmt)] = audit + ["--format", fmt]
        made[("states", fmt)] = states + ["--report", fmt]
        made[("reconcile", fmt)] = reconcile + ["--report", fmt]
    made[("states", "dot")] = states + ["--report", "dot"]
    made[("states", "mermaid")] = states + ["--report", "mermaid"]
    made[("merge", "preview-json")] = ["merge", "--group", "g", "--window", "1h", "--time-field", "ts",
                                       "--action", "merge_content", "--preview", log]
    return log, made


def assert_no_hidden_characters(test, text, where):
    for ch in text:
        test.assertFalse(ord(ch) < 0x20 and ch != "\n", f"{where}: {ch!r}")
    found = BIDI_AND_C1.search(text)
    test.assertIsNone(found, f"{where}: {found and repr(found.group())}")


def unescaped_pipes(line):
    return len(re.findall(r"(?<!\\)\|", line.replace("\\\\", "")))


def assert_markdown_structure(test, text, where):
    """No raw HTML, every row of a table as many cells as its header, and
    headings only where idem writes them."""
    test.assertNotIn("<", text, where)
    cells = None
    for line in text.splitlines():
        if line.startswith("|"):
            if cells is None:
                cells = unescaped_pipes(line)
            test.assertEqual(unescaped_pipes(line), cells, f"{where}: {line}")
        else:
            cells = None
        test.assertFalse(line.startswith("FORGED") or line.startswith("# heading"), f"{where}: {line}")
        test.assertFalse(line.startswith("- item"), f"{where}: {line}")


def dom_elements(dom):
    """The rendered page's elements, by tag, with their attribute names."""
    return collections.Counter(
        (tag.lower(), tuple(sorted(re.findall(r"\s([a-zA-Z-]+)=", attributes))))
        for tag, attributes in re.findall(r"<([a-zA-Z][a-zA-Z0-9-]*)([^>]*)>", dom))


class EveryFormatHoldsOnlyItsOwnStructure(unittest.TestCase):
    def test_the_hostile_corpus_through_every_report(self):
        with tempfile.TemporaryDirectory() as tmp:
            _, hostile = reports(tmp, CORPUS, "hostile")
            _, benign = reports(tmp, BENIGN, "benign")
            for (command, fmt), args in hostile.items():
                with self.subTest(command=command, format=fmt):
                    page = os.path.join(tmp, f"{command}-{fmt}.html")
                    code, out, err = run(args + (["-o", page] if fmt == "html" else []))
                    self.assertIn(code, (0, 1), err)
                    where = f"{command} {fmt}"
                    assert_terminal_safe(self, err)
                    if fmt == "html":
                        self.check_page(page, benign[(command, fmt)], tmp, where)
                        continue
                    text = out.decode("utf-8")
                    self.assertTrue(text.strip(), where)
                    assert_no_hidden_characters(self, text, where)
                    if fmt == "table":
                        assert_terminal_safe(self, text)
                    elif fmt in ("json", "preview-json"):
                        for document in ([text] if fmt == "json" else text.splitlines()):
                            json.loads(document)
                    elif fmt == "markdown":
                        assert_markdown_structure(self, text, where)
                    elif fmt == "mermaid":
                        self.check_mermaid(text, benign[(command, fmt)])
                    elif fmt == "dot":
                        self.check_dot(text, benign[(command, fmt)])

    def check_page(self, page, benign_args, tmp, where):
        if not CHROMIUM:
            self.skipTest("no Chromium to render the page")
        dom = rendered_offline(self, page, tmp)
        twin = page.replace(".html", "-benign.html")
        code, _, err = run(benign_args + ["-o", twin])
        self.assertIn(code, (0, 1), err)
        benign_dom = rendered_offline(self, twin, tmp)
        self.assertEqual(dom_elements(dom), dom_elements(benign_dom), where)
        self.assertNotRegex(dom, r"<[a-zA-Z][^>]*\son[a-z]+=", where)

    def check_mermaid(self, text, benign_args):
        statement = re.compile(r"^(stateDiagram-v2|    s\d+ : .*|    \[\*\] --> s\d+|    s\d+ --> \[\*\]|"
                               r"    s\d+ --> s\d+ : [0-9]+( [a-z-]+( \(not judged\))?(, [0-9]+ [a-z-]+( \(not judged\))?)*)?"
                               r"( NOT IN THE MACHINE)?|    classDef .*|    class .*)$")
        for line in text.splitlines():
            self.assertRegex(line, statement)
        _, benign_out, _ = run(benign_args)
        self.assertEqual(len(text.splitlines()), len(benign_out.decode().splitlines()))

    def check_dot(self, text, benign_args):
        quoted = r'"(?:[^"\\]|\\.)*"'
        statement = re.compile(rf"^(digraph states {{|  rankdir=LR;|  node \[.*\];|}}|"
                               rf"  {quoted} \[label={quoted}[^\]\"]*\];|"
                               rf"  {quoted} -> {quoted} \[label={quoted}[^\]\"]*\];)$")
        for line in text.splitlines():
            self.assertRegex(line, statement)
        _, benign_out, _ = run(benign_args)
        self.assertEqual(len(text.splitlines()), len(benign_out.decode().splitlines()))

    def test_merge_preview_on_a_terminal(self):
        with tempfile.TemporaryDirectory() as tmp:
            _, made = reports(tmp, CORPUS, "hostile")
            code, out, err = run_on_terminal(made[("merge", "preview-json")])
            self.assertEqual(code, 0, err)
            text = out.decode("utf-8")
            self.assertIn("=>", text)
            assert_terminal_safe(self, text)
            assert_no_hidden_characters(self, text, "merge --preview")

    def test_a_learned_machine_reads_back_as_the_log(self):
        with tempfile.TemporaryDirectory() as tmp:
            log, _ = reports(tmp, CORPUS, "hostile")
            base = ["states", "--entity", "id", "--state", "status", "--event", "event", "--time-field", "ts"]
            code, out, err = run(base + ["--learn", log])
            self.assertEqual(code, 0, err)
            text = out.decode("utf-8")
            assert_no_hidden_characters(self, text, "states --learn")
            learned = yaml.safe_load(text)  # another YAML parser reads it as the same names
            self.assertEqual(set(learned["states"]), {r["status"] for r in records(CORPUS)})
            self.assertEqual({t["on"] for t in learned["transitions"]}, {r["event"] for r in records(CORPUS)})
            machine = write(os.path.join(tmp, "learned.yaml"), out)
            code, out, err = run(base + ["--machine", machine, "--store", ":memory:", "--summary", "json",
                                         "--fail-on", "any", log])
            self.assertEqual(code, 0, err)
            summary = json.loads(err.strip().splitlines()[-1])
            self.assertEqual(summary["ok"], summary["events"])

    def test_verify_explain_quotes_every_value_it_names(self):
        envelopes = [{"idem": 1, "id": value, "received_at": "2026-11-30T08:00:00Z", "method": "POST",
                      "path": "/h" + value,
                      "headers": [["Stripe-Signature", "t=1764489600,v1=" + value], ["X-Hostile", value]],
                      "body": json.dumps({"id": value, "type": value})} for value in CORPUS]
        code, out, err = run(["verify", "--scheme", "auto", "--secret", "whsec_x", "--explain", "--summary", "json",
                              "-"], stdin=ndjson(envelopes))
        self.assertEqual(code, 1, err)
        assert_terminal_safe(self, err)
        lines = out.decode().splitlines()
        self.assertEqual(len(lines), len(CORPUS))
        for line in lines:
            verdict = json.loads(line)["_idem"]
            assert_no_hidden_characters(self, json.dumps(verdict, ensure_ascii=False), "verify --explain")


MARKER_SECRET = "whsec_MARKERSECRET0123456789"
MARKER_PASSWORD = "MARKERPASSWORD42"


class NoOutputHoldsASecret(unittest.TestCase):
    """Every message, summary, metrics file and report of runs given a
    marker secret or a store URI with a marker password."""

    def assert_clean(self, where, *texts):
        for text in texts:
            if isinstance(text, bytes):
                text = text.decode("utf-8", "replace")
            self.assertNotIn(MARKER_SECRET, text, where)
            self.assertNotIn(MARKER_SECRET[len("whsec_"):], text, where)
            self.assertNotIn(MARKER_PASSWORD, text, where)

    def test_verify_sign_and_store_runs(self):
        with tempfile.TemporaryDirectory() as tmp:
            secret_file = write(os.path.join(tmp, "secret"), (MARKER_SECRET + "  \n").encode())
            events = ndjson([{"id": f"evt_{i}", "type": "charge.succeeded"} for i in range(3)])
            code, signed, err = run(["sign", "--scheme", "stripe", "--secret", MARKER_SECRET,
                                     "--timestamp", "2026-11-30T08:00:00Z"], stdin=events)
            self.assertEqual(code, 0, err)
            self.assert_clean("sign", signed, err)
            tampered = signed.replace(b"charge.succeeded", b"charge.refunded", 1)
            metrics = os.path.join(tmp, "verify.prom")
            runs = {
                "verify --explain": ["verify", "--scheme", "stripe", "--secret-file", secret_file, "--explain",
                                     "--now", "2026-11-30T08:00:00Z", "--summary", "json", "--metrics", metrics, "-"],
                "verify wrong scheme": ["verify", "--scheme", "github", "--secret", MARKER_SECRET, "--explain",
                                        "--summary", "json", "-"],
                "verify bad secret": ["verify", "--scheme", "svix", "--secret", "whsec_" + MARKER_PASSWORD + "!",
                                      "-"],
            }
            for name, args in runs.items():
                with self.subTest(run=name):
                    code, out, err = run(args, stdin=tampered)
                    self.assertIn(code, (1, 2), err)
                    self.assert_clean(name, out, err)
            with open(metrics) as f:
                self.assert_clean("verify metrics", f.read())
            store = f"redis://default:{MARKER_PASSWORD}@127.0.0.1:1/0"
            log = write(os.path.join(tmp, "in.ndjson"), ndjson(records(BENIGN)))
            for name, args in {
                "dedup": ["dedup", "--key", "id", "--store", store, log],
                "merge": ["merge", "--group", "g", "--window", "1h", "--time-field", "ts", "--store", store,
                          "-o", os.path.join(tmp, "merged.ndjson"), log],
                "states": ["states", "--entity", "id", "--state", "status", "--allow", "a>b", "--store", store, log],
                "audit": ["audit", "--key", "id", "--verdicts", store, log],
                "verify --nonce": ["verify", "--scheme", "stripe", "--secret", MARKER_SECRET, "--nonce",
                                   "--store", f"redis://127.0.0.1:1/0?password={MARKER_PASSWORD}", "-"],
            }.items():
                with self.subTest(run=name):
                    metrics = os.path.join(tmp, f"{name.split()[0]}.prom")
                    code, out, err = run(args + ["--summary", "json", "--metrics", metrics,
                                                 "--store-timeout", "200ms"], stdin=signed)
                    self.assertNotEqual(code, 0, err)
                    self.assert_clean(name, out, err)
                    if os.path.exists(metrics):
                        with open(metrics) as f:
                            self.assert_clean(name + " metrics", f.read())


if __name__ == "__main__":
    unittest.main()
