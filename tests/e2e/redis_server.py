"""A real redis-server on a free loopback port, for tests; stopped by its pid."""
import contextlib
import shutil
import socket
import subprocess
import tempfile
import time


def available():
    return shutil.which("redis-server") is not None


@contextlib.contextmanager
def running():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with tempfile.TemporaryDirectory() as directory:
        server = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                   "--appendonly", "no", "--dir", directory], stdout=subprocess.DEVNULL)
        try:
            for _ in range(200):
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                    break
                except OSError:
                    time.sleep(0.05)
            yield f"redis://127.0.0.1:{port}"
        finally:
            server.terminate()
            server.wait()
