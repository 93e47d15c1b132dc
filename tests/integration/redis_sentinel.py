"""
redis_sentinel.py - Redis Sentinel for the integration tests: a master and
a replica (redis_server.RedisServer) watched by real sentinels
(`redis-server sentinel.conf --sentinel`), each in a temporary directory of
its own on a loopback port chosen at run time. The sentinels decide fast
(down after 500 ms, quorum 1), so a failover takes about a second.

FakeSentinel names whatever address a test sets, which no real sentinel
can be made to do on demand: a replica, to test that weir checks ROLE.
"""

import os
import socketserver
import subprocess
import threading
import time

import pytest
import redis

from redis_server import RedisServer, free_port


class Sentinel(RedisServer):
    """A real sentinel: a RedisServer started from a sentinel's
    configuration file (stopped, killed and its log read the same way)."""

    def __init__(self, directory, name, master, password=None):
        super().__init__(directory, password=password)
        self.name = name
        self.master = master
        self.conf = os.path.join(self.dir, "sentinel.conf")

    def _write_conf(self):
        # the sentinel rewrites its file (what it learns): it must be writable
        lines = [
            f"port {self.port}",
            "bind 127.0.0.1",
            f"dir {self.dir}",
            f"logfile {os.path.join(self.dir, 'redis.log')}",
            "sentinel resolve-hostnames no",
            f"sentinel monitor {self.name} 127.0.0.1 {self.master.port} 1",
            f"sentinel down-after-milliseconds {self.name} 500",
            f"sentinel failover-timeout {self.name} 2000",
        ]
        if self.master.password:
            lines.append(f"sentinel auth-pass {self.name} {self.master.password}")
        if self.password:
            lines.append(f"requirepass {self.password}")
        with open(self.conf, "w") as f:
            f.write("\n".join(lines) + "\n")

    def start(self, port=None):
        self.port = port or free_port()
        self._write_conf()
        self.proc = subprocess.Popen(["redis-server", self.conf, "--sentinel"],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        if self._wait_ready():
            return self
        self.stop()
        pytest.fail("the sentinel did not start; its log:\n" + self.log(), pytrace=False)

    def client(self):
        return redis.Redis(host="127.0.0.1", port=self.port, password=self.password,
                           socket_timeout=5, decode_responses=True)

    def master_addr(self):
        return tuple(self.client().execute_command("SENTINEL", "get-master-addr-by-name",
                                                   self.name) or ())

    def replicas_seen(self):
        """The ports of the replicas this sentinel knows and considers up."""
        out = []
        for r in self.client().execute_command("SENTINEL", "replicas", self.name):
            fields = dict(zip(r[::2], r[1::2])) if isinstance(r, list) else r
            flags = fields.get("flags", "")
            if "s_down" not in flags and "disconnected" not in flags:
                out.append(int(fields["port"]))
        return out


class Watched:
    """A master, its replica and the sentinels watching them."""

    def __init__(self, name, master, replica, sentinels):
        self.name = name
        self.master = master
        self.replica = replica
        self.sentinels = sentinels

    def url(self, credentials="", extra_hosts=()):
        hosts = [f"127.0.0.1:{p}" for p in extra_hosts]
        hosts += [f"127.0.0.1:{s.port}" for s in self.sentinels]
        return f"redis+sentinel://{credentials}{self.name}@{','.join(hosts)}"

    def wait_ready(self, timeout=20.0):
        """The replica in sync and every sentinel seeing it: a failover can
        then promote it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            info = self.replica.client().info("replication")
            if info.get("master_link_status") == "up" and all(
                    self.replica.port in s.replicas_seen() for s in self.sentinels):
                return self
            time.sleep(0.1)
        pytest.fail("the sentinels did not see the replica in sync; a sentinel's log:\n"
                    + self.sentinels[0].log(), pytrace=False)


class FakeSentinel:
    """Answers SENTINEL get-master-addr-by-name with .addr (nil when None),
    PING, and SUBSCRIBE (confirmed; nothing is ever published)."""

    def __init__(self, name):
        self.name = name
        self.addr = None
        self.asked = 0
        fake = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self):
                while True:
                    cmd = self._read_command()
                    if cmd is None:
                        return
                    self.wfile.write(fake._answer(cmd))

            def _read_command(self):
                head = self.rfile.readline()
                if not head.startswith(b"*"):
                    return None
                args = []
                for _ in range(int(head[1:])):
                    n = int(self.rfile.readline()[1:])
                    args.append(self.rfile.read(n + 2)[:-2].decode())
                return args

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def _answer(self, cmd):
        def bulk(s):
            return b"$%d\r\n%s\r\n" % (len(s), s.encode())
        name = cmd[0].upper()
        if name == "PING":
            return b"+PONG\r\n"
        if name == "SUBSCRIBE":
            return b"*3\r\n" + bulk("subscribe") + bulk(cmd[1]) + b":1\r\n"
        if name == "SENTINEL" and cmd[1:2] == ["get-master-addr-by-name"]:
            self.asked += 1
            addr = self.addr
            if cmd[2] != self.name or not addr:
                return b"*-1\r\n"
            return b"*2\r\n" + bulk(addr[0]) + bulk(str(addr[1]))
        return b"-ERR unknown command\r\n"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def sentinel_factory(tmp_path):
    """start(name="mymaster", sentinels=1, password=None,
    sentinel_password=None) -> a Watched master, replica and sentinels,
    ready for a failover; all stopped at teardown. sentinels=0 starts
    none (a test adds them with add_sentinel())."""
    started = []

    def start(name="mymaster", sentinels=1, password=None, sentinel_password=None):
        extra = ["--masterauth", password] if password else []
        master = RedisServer(tmp_path / "master", *extra, password=password)
        started.append(master)
        master.start()
        replica = RedisServer(tmp_path / "replica", "--replicaof", "127.0.0.1", str(master.port),
                              *extra, password=password)
        started.append(replica)
        replica.start()
        w = Watched(name, master, replica, [])
        for _ in range(sentinels):
            add_sentinel(w, password=sentinel_password)
        return w.wait_ready() if sentinels else w

    def add_sentinel(w, port=None, password=None):
        s = Sentinel(tmp_path / f"sentinel{len(w.sentinels)}", w.name, w.master, password)
        started.append(s)
        s.start(port)
        w.sentinels.append(s)
        return s

    start.add_sentinel = add_sentinel
    yield start
    for s in reversed(started):
        s.stop()
