"""Every command the README shows runs as written from the checkout after
`make demo` (issue 60, item 12): each ```sh block is run by bash from the
project's root, each `build/idem` in it through a wrapper that records its
exit status. A block passes when no idem run exited 2 or more (a usage, an
input or a store error) or was killed, nothing printed "idem: error" or
"command not found", and the block itself exited 0 or 1 (findings).

Blocks that cannot run here are named below with the reason: they are
checked elsewhere, or need what only the reader has."""
import os
import re
import signal
import stat
import subprocess
import tempfile
import unittest

from harness import IDEM, ROOT

# A block whose text holds one of these is not run, for the reason given.
NOT_RUN_HERE = {
    "make demo": "the build itself: CI runs make test on a fresh clone, e2e_install the install",
    "make install": "installs into a prefix: tests/e2e/test_install.py does, in a scratch prefix",
    "cache-1:7001": "names the reader's own Redis Cluster (tests/e2e/test_stores.py runs one)",
}


def blocks():
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    return re.findall(r"^```sh\n(.*?)^```", text, flags=re.S | re.M)


class ReadmeCommands(unittest.TestCase):
    def test_every_block_runs_as_written(self):
        with tempfile.TemporaryDirectory() as tmp:
            statuses = os.path.join(tmp, "statuses")
            wrapper = os.path.join(tmp, "idem")
            with open(wrapper, "w") as f:
                # A signal to the wrapper (`kill %1`) goes on to idem, whose
                # own exit status is the one recorded.
                f.write(f'#!/bin/bash\n"{IDEM}" "$@" &\nchild=$!\n'
                        "trap 'kill -TERM $child 2>/dev/null' TERM INT\n"
                        'while :; do wait $child; status=$?; kill -0 $child 2>/dev/null || break; done\n'
                        f'echo "$status $*" >> "{statuses}"\nexit $status\n')
            os.chmod(wrapper, os.stat(wrapper).st_mode | stat.S_IXUSR)
            ran = 0
            for block in blocks():
                skipped = [reason for marker, reason in NOT_RUN_HERE.items() if marker in block]
                if skipped:
                    continue
                with self.subTest(block=block.splitlines()[0]):
                    open(statuses, "w").close()
                    script = re.sub(r"(?<![\w/])build/idem\b", wrapper, block)
                    # Its own process group: what it starts in the background
                    # (listen, a handler) is stopped with it, however it ends.
                    block_run = subprocess.Popen(["bash", "-c", script], cwd=ROOT, stdout=subprocess.PIPE,
                                                 stderr=subprocess.PIPE, text=True, start_new_session=True,
                                                 env={**os.environ, "TMPDIR": tmp})
                    try:
                        stdout, stderr = block_run.communicate(timeout=120)
                    finally:
                        try:
                            os.killpg(block_run.pid, signal.SIGKILL)
                        except ProcessLookupError:
                            pass
                        block_run.wait()
                    result = subprocess.CompletedProcess(block_run.args, block_run.returncode, stdout, stderr)
                    with open(statuses) as f:
                        runs = [line.split(" ", 1) for line in f.read().splitlines()]
                    self.assertTrue(runs, "the block ran no idem")
                    for status, args in runs:
                        self.assertLess(int(status), 2, f"idem {args}\n{result.stderr}")
                    self.assertNotIn("idem: error", result.stderr)
                    self.assertNotIn("command not found", result.stderr)
                    # 1: findings, as the README says of each command.
                    self.assertIn(result.returncode, (0, 1), result.stdout + result.stderr)
                    ran += 1
            self.assertGreaterEqual(ran, 15)

    def test_the_readme_names_only_files_the_checkout_has(self):
        # Every samples/ or providers/ path in a command is in the checkout.
        for block in blocks():
            for path in re.findall(r"(?:samples|providers)/[\w./*-]+", block):
                if "*" in path:
                    continue
                self.assertTrue(os.path.exists(os.path.join(ROOT, path.rstrip("/"))), path)


if __name__ == "__main__":
    unittest.main()
