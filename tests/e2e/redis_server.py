"""A real redis-server on a loopback port, for tests; stopped by its pid."""
import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time


def available():
    return shutil.which("redis-server") is not None


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start(port, directory, *extra):
    """Starts redis-server on `port` (again, after a stop: the same port) and
    returns its process once it answers commands: a restarted server
    accepts connections while it still loads its data, and answers LOADING
    until it is done."""
    server = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                               "--appendonly", "no", "--dir", directory, *extra],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(400):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as connection:
                connection.sendall(b"PING\r\n")
                # A server with a password answers NOAUTH: up, and not loading.
                if connection.recv(64).startswith((b"+PONG", b"-NOAUTH")):
                    break
        except OSError:
            pass
        time.sleep(0.05)
    return server


def stop(server):
    if server.poll() is None:
        server.terminate()
    server.wait()


@contextlib.contextmanager
def running():
    port = free_port()
    with tempfile.TemporaryDirectory() as directory:
        server = start(port, directory)
        try:
            yield f"redis://127.0.0.1:{port}"
        finally:
            stop(server)


@contextlib.contextmanager
def serving(dump):
    """A Redis that loaded `dump`, an .rdb fixture (copied first: the fixture
    stays as it is): its port."""
    port = free_port()
    with tempfile.TemporaryDirectory() as directory:
        shutil.copy(dump, os.path.join(directory, "dump.rdb"))
        server = start(port, directory, "--dbfilename", "dump.rdb")
        try:
            yield port
        finally:
            stop(server)
