"""Logs as they are kept (docs/input.md, "Compressed logs"): gzip, zstd, xz and
bzip2 inputs are read decompressed, recognised by their first bytes on files
and on stdin; positions are the decompressed stream's; a stream cut short is
exit 3 naming the last good line, with every record before it processed."""
import bz2
import gzip
import json
import lzma
import os
import shutil
import subprocess
import tempfile
import unittest

from harness import run, summary_of

EVENTS = [{"id": f"evt_{n % 700}", "n": n, "ts": f"2026-11-30T08:{n // 60 % 60:02d}:{n % 60:02d}Z"}
          for n in range(1000)]
PLAIN = "".join(json.dumps(e) + "\n" for e in EVENTS).encode()


def zstd(data):
    return subprocess.run(["zstd", "-q", "-c"], input=data, capture_output=True, check=True).stdout


def zstd_without_size(data):
    # Streamed through a pipe, zstd writes no content size in the frame header.
    return subprocess.run("cat | zstd -q -c", shell=True, input=data, capture_output=True,
                          check=True).stdout


COMPRESSORS = {
    "gzip": gzip.compress,
    "zstd": zstd,
    "xz": lzma.compress,
    "bzip2": bz2.compress,
}


class CompressedInput(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def file(self, name, data):
        path = os.path.join(self.tmp.name, name)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def dedup(self, args, stdin=None):
        return run(["dedup", "--key", "id", "--store", ":memory:", "--summary", "json", *args], stdin=stdin)

    def test_each_format_on_a_file_and_on_stdin_reads_as_the_plain_log(self):
        plain = self.file("plain.ndjson", PLAIN)
        code, expected, err = self.dedup([plain])
        self.assertEqual(code, 0, err)
        self.assertEqual(summary_of(err)["unique"], 700)
        for name, compress in COMPRESSORS.items():
            data = compress(PLAIN)
            # A name that says nothing: the first bytes tell the format.
            path = self.file(f"log-{name}.data", data)
            for args, stdin in (([path], None), (["-"], data)):
                with self.subTest(format=name, stdin=stdin is not None):
                    code, out, err = self.dedup(args, stdin)
                    self.assertEqual(code, 0, err)
                    self.assertEqual(out, expected)
                    self.assertEqual(summary_of(err)["in"], 1000)

    def test_concatenated_members_frames_and_streams_are_one_log(self):
        half = len(PLAIN) // 2
        cut = PLAIN.rindex(b"\n", 0, half) + 1
        first, second = PLAIN[:cut], PLAIN[cut:]
        expected = self.dedup([self.file("plain.ndjson", PLAIN)])[1]
        cases = {name: compress(first) + compress(second) for name, compress in COMPRESSORS.items()}
        cases["zstd without content size"] = zstd_without_size(first) + zstd_without_size(second)
        for name, data in cases.items():
            with self.subTest(format=name):
                code, out, err = self.dedup([self.file("two", data)])
                self.assertEqual(code, 0, err)
                self.assertEqual(out, expected)

    def test_a_stream_cut_short_is_exit_3_naming_the_last_good_line_after_every_record_before_it(self):
        # 100,000 lines (3.3 MB): bzip2 decodes 900 kB blocks whole, so several.
        day = "".join(json.dumps({"id": f"evt_{n}", "n": n}) + "\n" for n in range(100000)).encode()
        for name, compress in COMPRESSORS.items():
            data = compress(day)
            with self.subTest(format=name):
                path = self.file(f"day.ndjson.{name}", data[: len(data) * 3 // 4])
                code, out, err = run(["dedup", "--key", "id", "--store", ":memory:", "-q", path])
                self.assertEqual(code, 3, err)
                self.assertIn("cut short?", err)
                self.assertIn("every line up to here was read, nothing after it", err)
                lines = out.splitlines()
                self.assertGreater(len(lines), 0)
                # Every record out is whole, and they are the log's first ones.
                self.assertEqual([json.loads(line)["n"] for line in lines][:5], [0, 1, 2, 3, 4])
                last_good = err.split(f"{path}:", 1)[1].split(":", 1)[0]
                self.assertEqual(int(last_good), len(lines))

    def test_a_corrupt_zstd_block_is_exit_3_after_every_record_before_it(self):
        day = "".join(json.dumps({"id": f"evt_{n}", "n": n}) + "\n" for n in range(100000)).encode()
        data = bytearray(zstd(day))
        data[len(data) // 2] ^= 0xff
        path = self.file("day.ndjson.zst", bytes(data))
        code, out, err = run(["dedup", "--key", "id", "--store", ":memory:", "-q", path])
        self.assertEqual(code, 3, err)
        self.assertIn("zstd: ", err)
        self.assertIn("every line up to here was read, nothing after it", err)
        kept = [json.loads(line)["n"] for line in out.splitlines()]
        self.assertEqual(kept, list(range(len(kept))))  # the log's first records, none invented
        self.assertEqual(int(err.split(f"{path}:", 1)[1].split(":", 1)[0]), len(kept))

    def test_rejects_and_warnings_point_into_the_decompressed_stream(self):
        lines = PLAIN.splitlines(keepends=True)
        lines[41] = b'{"id": "evt_41", "n": 41,\n'  # line 42, cut
        data = gzip.compress(b"".join(lines))
        path = self.file("day.ndjson.gz", data)
        rejects = os.path.join(self.tmp.name, "rejects.ndjson")
        code, _, err = self.dedup(["--reject", rejects, path])
        self.assertIn(code, (0, 1), err)
        self.assertIn(f"{path}:42:26: syntax error", err)
        with open(rejects, "rb") as f:
            self.assertEqual(f.read(), lines[41])  # the line as it was, decompressed

    def test_a_plain_log_that_starts_like_a_magic_number_is_read_as_it_is(self):
        # "BZh" without a block size digit is text, and a lone 0x1f byte is not gzip.
        path = self.file("odd.ndjson", b'BZh {"id": 1}\n{"id": "a"}\n')
        code, out, err = self.dedup(["--reject", os.path.join(self.tmp.name, "r"), path])
        self.assertEqual(out, b'{"id": "a"}\n', err)
        self.assertEqual(summary_of(err)["rejected"], 1)

    def test_every_command_that_reads_records_reads_them_compressed(self):
        path = self.file("events.ndjson.zst", zstd(PLAIN))
        for args in (["audit", "--key", "id", "--time-field", "ts", "--format", "json", "-q", path],
                     ["merge", "--group", "id", "--window", "1h", "--time-field", "ts", "-q", path],
                     ["reorder", "--seq", "n", "--partition", "id", "-q", path],
                     ["verify", "--scheme", "hmac", "--secret", "s", "-q", "--reject", os.devnull, path]):
            with self.subTest(command=args[0]):
                code, out, err = run(args)
                self.assertNotIn("syntax error", err)
                self.assertIn(code, (0, 1), err)
                self.assertTrue(out)


    def test_a_pzstd_file_starting_with_a_skippable_frame_is_zstd(self):
        """pzstd (Debian's zstd package) always writes a skippable frame
        first (RFC 8878 3.1.2); so may any writer, with any of its 16 magics."""
        plain = self.file("plain.ndjson", PLAIN)
        expected = self.dedup([plain])[1]
        made = subprocess.run(["pzstd", "-q", "-c", plain], capture_output=True, check=True).stdout
        self.assertIn(made[0], range(0x50, 0x60))
        for first in (made, bytes([0x5E, 0x2A, 0x4D, 0x18, 3, 0, 0, 0, 1, 2, 3]) + zstd(PLAIN)):
            code, out, err = self.dedup([self.file("p.zst", first)])
            self.assertEqual(code, 0, err)
            self.assertEqual(out, expected)

    def test_an_xz_header_claiming_a_huge_dictionary_is_refused_within_the_budget(self):
        """liblzma's memlimit: a 2 GiB dictionary is never allocated;
        exit 3 names the file and the budget."""
        import resource
        data = lzma.compress(PLAIN, format=lzma.FORMAT_XZ,
                             filters=[{"id": lzma.FILTER_LZMA2, "dict_size": 1536 << 20}])
        path = self.file("huge.xz", data)

        def a_gigabyte():
            resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

        from harness import IDEM
        # A sanitizer's shadow memory needs terabytes of address space: the
        # limit holds only for the release build (the exit and message
        # are checked under both).
        limited = os.environ.get("IDEM_SANITIZED") != "1"
        process = subprocess.run([IDEM, "dedup", "--key", "id", "--store", ":memory:", path],
                                 capture_output=True, preexec_fn=a_gigabyte if limited else None,
                                 timeout=60)
        err = process.stderr.decode()
        self.assertEqual(process.returncode, 3, err)
        self.assertIn("huge.xz", err)
        self.assertIn("128 MiB", err)
        honest = self.file("honest.xz", lzma.compress(PLAIN, format=lzma.FORMAT_XZ, preset=9))
        code, _, err = self.dedup([honest])
        self.assertEqual(code, 0, err)


@unittest.skipUnless(shutil.which("zstd"), "the zstd tool is needed")
class CompressedHar(unittest.TestCase):
    def test_a_gzipped_har_export_reads_as_the_har(self):
        har = {"log": {"version": "1.2", "entries": [{
            "startedDateTime": "2026-11-30T08:00:00.000Z",
            "request": {"method": "POST", "url": "https://example.test/hooks", "headers": [],
                        "postData": {"mimeType": "application/json", "text": '{"id":"evt_1"}'}},
            "response": {"status": 200}}]}}
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "export.har.gz")
            with open(path, "wb") as f:
                f.write(gzip.compress(json.dumps(har).encode()))
            code, out, err = run(["dedup", "--input-format", "har", "--store", ":memory:", "-q", path])
            self.assertEqual(code, 0, err)
            self.assertEqual(len(out.splitlines()), 1)


if __name__ == "__main__":
    unittest.main()


class EveryCommand(unittest.TestCase):
    """Every command that reads records gives the same output for one log
    kept plain, as gzip (one member and several), as zstd (one frame and
    several) and split across a folder: positions aside, which name each
    file as it is."""

    def test_each_form_of_one_log_gives_each_command_the_same_answer(self):
        from test_time_window import MACHINE, RULES, events, ndjson
        import re
        position = re.compile(rb'"[^" ]*(?:\.ndjson|\.gz|\.zst)(?::\d+)+"')
        records = events(900)
        plain = ndjson(records)
        half = len(records) // 2
        with tempfile.TemporaryDirectory() as tmp:
            def write(name, data):
                path = os.path.join(tmp, name)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "wb") as f:
                    f.write(data)
                return path
            machine = write("machine.yaml", MACHINE.encode())
            rules = write("rules.yaml", RULES.encode())
            forms = {
                "plain": [write("day.ndjson", plain)],
                "gzip": [write("day.ndjson.gz", gzip.compress(plain))],
                "gzip members": [write("members.ndjson.gz", gzip.compress(ndjson(records[:half])) +
                                       gzip.compress(ndjson(records[half:])))],
                "zstd": [write("day.ndjson.zst", zstd(plain))],
                "zstd frames": [write("frames.ndjson.zst", zstd(ndjson(records[:half])) +
                                      zstd_without_size(ndjson(records[half:])))],
                "folder": ["--recursive", os.path.dirname(write("split/b/2.ndjson.gz",
                                                                gzip.compress(ndjson(records[half:]))))
                           .rsplit("/", 1)[0]],
            }
            write("split/a/1.ndjson", ndjson(records[:half]))
            commands = {
                "dedup": ["dedup", "--key", "id", "--time-field", "ts", "--store", ":memory:"],
                "reorder": ["reorder", "--order-by", "ts", "--max-lateness", "2m", "--store", ":memory:"],
                "merge": ["merge", "--rules", rules, "--time-field", "ts", "--max-lateness", "2m",
                          "--store", ":memory:"],
                "states": ["states", "--entity", "order_id", "--state", "status", "--machine", machine,
                           "--time-field", "ts", "--store", ":memory:"],
                "audit": ["audit", "--key", "id", "--time-field", "ts", "--format", "json"],
                "verify": ["verify", "--scheme", "github", "--secret", "s"],
            }
            for name, args in commands.items():
                expected = None
                for form, inputs in forms.items():
                    with self.subTest(command=name, form=form):
                        code, out, err = run(args + ["--summary", "json"] + inputs)
                        self.assertIn(code, (0, 1), err)
                        summary = summary_of(err)
                        # audit's report tells its evidence by file and line
                        # in prose too: its counts are compared. Peaks (of
                        # memory held) follow how the input falls in blocks.
                        answer = (code, b"" if name == "audit" else position.sub(b'"@"', out),
                                  {k: v for k, v in summary.items()
                                   if k not in ("seconds", "version") and not k.startswith("peak_")})
                        if expected is None:
                            expected = answer
                            self.assertTrue(out.strip())
                        else:
                            self.assertEqual(answer, expected)
