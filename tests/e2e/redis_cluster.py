"""A real Redis Cluster of local nodes for tests: redis-server --cluster-enabled
on free loopback ports, joined with redis-cli --cluster create, stopped by pid."""
import contextlib
import shutil
import socket
import subprocess
import tempfile
import time


def available():
    return shutil.which("redis-server") is not None and shutil.which("redis-cli") is not None


def free_port():
    """A free port whose cluster bus port (port + 10000) is free and valid too."""
    while True:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        if port + 10000 > 65535:
            continue
        with socket.socket() as bus:
            try:
                bus.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        return port


def cli(port, *args, timeout=10, commands=None):
    """redis-cli's output; `commands`, one per line, run by one redis-cli
    (a process per key would be slow)."""
    return subprocess.run(["redis-cli", "-p", str(port), *args], capture_output=True, text=True,
                          input="".join(f"{c}\n" for c in commands) if commands is not None else None,
                          timeout=timeout).stdout


class Cluster:
    def __init__(self, directory, node_timeout_ms=1000):
        self.directory = directory
        self.node_timeout_ms = node_timeout_ms
        self.nodes = {}  # port -> Popen

    def start_node(self, port):
        self.nodes[port] = subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
             "--cluster-config-file", f"nodes-{port}.conf", "--cluster-node-timeout", str(self.node_timeout_ms),
             "--save", "", "--appendonly", "no", "--dir", self.directory],
            stdout=subprocess.DEVNULL)
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise AssertionError(f"redis-server on {port} did not start")

    @property
    def ports(self):
        return sorted(self.nodes)

    def uri(self, seeds=1):
        return "redis://" + ",".join(f"127.0.0.1:{p}" for p in self.ports[:seeds])

    def owner_of(self, key):
        """The port of the master that holds `key`'s slot now."""
        for port in self.ports:
            if self.nodes[port].poll() is not None:
                continue
            slot = int(cli(port, "cluster", "keyslot", key).strip())
            for line in cli(port, "cluster", "nodes").splitlines():
                fields = line.split()
                if len(fields) < 9 or "master" not in fields[2] or "fail" in fields[2]:
                    continue
                for ranges in fields[8:]:
                    low, _, high = ranges.partition("-")
                    if low.isdigit() and int(low) <= slot <= int(high or low):
                        return int(fields[1].split("@")[0].rsplit(":", 1)[1])
        return None

    def masters(self):
        """Ports of the nodes that are masters now, by CLUSTER NODES of a live node."""
        for port in self.ports:
            if self.nodes[port].poll() is not None:
                continue
            out = cli(port, "cluster", "nodes")
            found = []
            for line in out.splitlines():
                fields = line.split()
                if len(fields) > 2 and "master" in fields[2] and "fail" not in fields[2]:
                    found.append(int(fields[1].split("@")[0].rsplit(":", 1)[1]))
            if found:
                return sorted(found)
        return []

    def wait_ok(self, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            live = [p for p in self.ports if self.nodes[p].poll() is None]
            if live and all("cluster_state:ok" in cli(p, "cluster", "info") for p in live):
                return
            time.sleep(0.2)
        raise AssertionError("the cluster did not reach cluster_state:ok")

    def wait_replicas_synced(self, timeout=30):
        """A replica that never synced will not take over from its master."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            roles = [cli(p, "info", "replication") for p in self.ports]
            replicas = [r for r in roles if "role:slave" in r]
            if replicas and all("master_link_status:up" in r for r in replicas):
                return
            time.sleep(0.2)
        raise AssertionError("the replicas did not sync")

    def kill(self, port):
        self.nodes[port].kill()
        self.nodes[port].wait()

    def wait_failover(self, dead, timeout=30):
        """Until a live node no longer counts `dead` as a master and the cluster is ok."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if dead not in self.masters() and len(self.masters()) >= 1:
                self.wait_ok(timeout=max(1, deadline - time.monotonic()))
                return
            time.sleep(0.2)
        raise AssertionError(f"no replica took over from {dead}")

    def stop(self):
        for process in self.nodes.values():
            if process.poll() is None:
                process.terminate()
        for process in self.nodes.values():
            process.wait()


@contextlib.contextmanager
def running(masters=3, replicas=0, node_timeout_ms=1000):
    """`node_timeout_ms`: how long a master may be silent before it is
    failed over (Redis's default is 15 s; a longer one makes a failover
    outlast heartbeats and retries)."""
    with tempfile.TemporaryDirectory() as directory:
        cluster = Cluster(directory, node_timeout_ms)
        try:
            for _ in range(masters * (1 + replicas)):
                cluster.start_node(free_port())
            subprocess.run(["redis-cli", "--cluster", "create",
                            *[f"127.0.0.1:{p}" for p in cluster.ports],
                            "--cluster-replicas", str(replicas), "--cluster-yes"],
                           check=True, capture_output=True, timeout=60)
            cluster.wait_ok()
            if replicas:
                cluster.wait_replicas_synced()
            yield cluster
        finally:
            cluster.stop()
