"""
redis_cluster.py - a real Redis Cluster for the integration tests: six
redis-server processes (three masters, three replicas) in a temporary
directory on 127.0.0.1, at client and cluster-bus ports chosen at run
time, joined by `redis-cli --cluster create`; no persistence, a node
timeout of one second so that a replica takes over a killed master within
a few seconds.

Besides starting and stopping it, the tests can ask where a key lives
(its hash slot, computed here and checked against CLUSTER KEYSLOT, and
the master serving that slot), kill a master and wait for its replica's
promotion, and move one slot from a master to another the way
`redis-cli --cluster reshard` does, a few keys at a time, so that
traffic meets the slot while it migrates (ASK) and after (MOVED).
"""

import binascii
import os
import shutil
import subprocess
import time

import pytest
import redis

from redis_server import RedisServer, free_port

SLOTS = 16384


def key_slot(key):
    """The hash slot of @key (str or bytes), hash tags included: CRC16 of
    the key, the XMODEM variant (polynomial 0x1021, initial 0), which is
    binascii's crc_hqx from 0, mod 16384. master_of() checks it against
    CLUSTER KEYSLOT."""
    if isinstance(key, str):
        key = key.encode()
    start = key.find(b"{")
    if start >= 0:
        end = key.find(b"}", start + 1)
        if end > start + 1:
            key = key[start + 1:end]
    return binascii.crc_hqx(key, 0) % SLOTS


class ClusterNode(RedisServer):
    """One redis-server of the cluster (waiting for it, its log, stopping
    and killing it as a single server's)."""

    def __init__(self, directory, node_timeout_ms, extra_args=()):
        super().__init__(directory)
        self.node_timeout_ms = node_timeout_ms
        self.extra_args = list(extra_args)
        self.bus_port = None
        self.id = None

    def start(self):
        for _ in range(5):
            # the bus port is chosen too: port + 10000, Redis's default,
            # may be taken or past 65535
            self.port, self.bus_port = free_port(), free_port()
            if self.port == self.bus_port:
                continue
            argv = ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port),
                    "--cluster-enabled", "yes", "--cluster-port", str(self.bus_port),
                    "--cluster-config-file", "nodes.conf",
                    "--cluster-node-timeout", str(self.node_timeout_ms),
                    # a replica syncs at once (not after 5 s waiting for
                    # others), and may take over whatever its data's age
                    "--repl-diskless-sync-delay", "0",
                    "--cluster-replica-validity-factor", "0",
                    "--save", "", "--appendonly", "no", "--dir", self.dir,
                    "--logfile", os.path.join(self.dir, "redis.log")] + self.extra_args
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if self._wait_ready():
                self.id = self.client().execute_command("CLUSTER", "MYID").decode()
                return self
            self.proc.kill()
            self.proc.wait()
            try:
                os.remove(os.path.join(self.dir, "nodes.conf"))
            except OSError:
                pass
        pytest.fail("redis-server (cluster node) did not start; its log:\n" + self.log(),
                    pytrace=False)

    def client(self, timeout=5, **kw):
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=timeout, **kw)

    @property
    def address(self):
        return f"127.0.0.1:{self.port}"

    def alive(self):
        return self.proc is not None and self.proc.poll() is None



class RedisCluster:
    """Three masters and three replicas (by default)."""

    def __init__(self, directory, masters=3, replicas=1, node_timeout_ms=1000, extra_args=()):
        for tool in ("redis-server", "redis-cli"):
            if not shutil.which(tool):
                pytest.fail(f"{tool} is missing: make test installs it (scripts/deps.sh)",
                            pytrace=False)
        self.dir = str(directory)
        self.n_masters = masters
        self.replicas = replicas
        self.nodes = [ClusterNode(os.path.join(self.dir, f"node{i}"), node_timeout_ms, extra_args)
                      for i in range(masters * (1 + replicas))]

    # ---------------------------------------------------------------- life

    def start(self, timeout=30.0):
        for n in self.nodes:
            n.start()
        argv = (["redis-cli", "--cluster", "create"] + [n.address for n in self.nodes]
                + ["--cluster-replicas", str(self.replicas), "--cluster-yes"])
        r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=60)
        if r.returncode != 0:
            pytest.fail(f"redis-cli --cluster create failed ({r.returncode}):\n{r.stdout}\n"
                        f"{r.stderr}", pytrace=False)
        self.wait_ok(timeout)
        self.wait_replicas(timeout)
        return self

    def stop(self):
        for n in self.nodes:
            n.stop()

    def live_nodes(self):
        return [n for n in self.nodes if n.alive()]

    def node(self, port):
        for n in self.nodes:
            if n.port == port:
                return n
        raise KeyError(port)

    def seeds(self, *ports):
        """A redis+cluster:// URL naming @ports (every live master by default)."""
        ports = ports or [n.port for n in self.masters()]
        return "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in ports)

    # ---------------------------------------------------------------- state

    def _slots_seen_by(self, node):
        """{slot range (start, end): master port} from one node's CLUSTER SLOTS."""
        out = {}
        for entry in node.client().execute_command("CLUSTER", "SLOTS"):
            start, end, master = entry[0], entry[1], entry[2]
            out[(int(start), int(end))] = int(master[1])
        return out

    def _info(self, node):
        text = node.client().execute_command("CLUSTER", "INFO")
        if isinstance(text, bytes):
            text = text.decode()
        return dict(line.split(":", 1) for line in text.split("\r\n") if ":" in line)

    def agreed(self):
        """True when every live node says cluster_state:ok, serves all
        16384 slots, and gives the same slot map."""
        maps = []
        for n in self.live_nodes():
            try:
                info = self._info(n)
                if info.get("cluster_state") != "ok" or info.get("cluster_slots_ok") != str(SLOTS):
                    return False
                maps.append(self._slots_seen_by(n))
            except redis.exceptions.RedisError:
                return False
        return bool(maps) and all(m == maps[0] for m in maps)

    def wait_ok(self, timeout=30.0):
        deadline = time.monotonic() + timeout
        while not self.agreed():
            if time.monotonic() > deadline:
                pytest.fail("the cluster did not settle:\n" + self.describe(), pytrace=False)
            time.sleep(0.05)

    def _replica_synced(self, node):
        info = node.client().info("replication")
        return info.get("role") != "slave" or info.get("master_link_status") == "up"

    def wait_replicas(self, timeout=30.0):
        """Until every master has its replicas, as every live node sees
        it, and every replica has synced with its master."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                ok = all(len(self.masters(n)) == self.n_masters
                         and all(len(self.replicas_of(m.port, n)) == self.replicas
                                 for m in self.masters(n))
                         and self._replica_synced(n)
                         for n in self.live_nodes())
            except redis.exceptions.RedisError:
                ok = False
            if ok:
                return
            if time.monotonic() > deadline:
                pytest.fail("the replicas did not attach:\n" + self.describe(), pytrace=False)
            time.sleep(0.05)

    def _nodes_table(self, seen_by=None):
        """CLUSTER NODES of @seen_by (a live node): [{id, port, flags, master, slots}]."""
        seen_by = seen_by or self.live_nodes()[0]
        text = seen_by.client().execute_command("CLUSTER", "NODES")
        if isinstance(text, bytes):
            text = text.decode()
        rows = []
        for line in text.strip().splitlines():
            f = line.split()
            rows.append({"id": f[0], "port": int(f[1].split("@")[0].rsplit(":", 1)[1]),
                         "flags": set(f[2].split(",")), "master": f[3], "slots": f[8:]})
        return rows

    def masters(self, seen_by=None):
        """The live masters serving slots, by port order."""
        ports = {r["port"] for r in self._nodes_table(seen_by)
                 if "master" in r["flags"] and "fail" not in r["flags"] and r["slots"]}
        return [n for n in self.nodes if n.port in ports and n.alive()]

    def replicas_of(self, port, seen_by=None):
        rows = self._nodes_table(seen_by)
        master_id = next(r["id"] for r in rows if r["port"] == port)
        ports = {r["port"] for r in rows if r["master"] == master_id and "fail" not in r["flags"]}
        return [n for n in self.nodes if n.port in ports]

    def describe(self):
        lines = []
        for n in self.nodes:
            if not n.alive():
                lines.append(f"{n.address}: not running")
                continue
            try:
                info = self._info(n)
                lines.append(f"{n.address}: {info.get('cluster_state')} "
                             f"slots_ok={info.get('cluster_slots_ok')}")
                text = n.client().execute_command("CLUSTER", "NODES")
                lines.append(text.decode() if isinstance(text, bytes) else text)
            except redis.exceptions.RedisError as e:
                lines.append(f"{n.address}: {e!r}")
        return "\n".join(lines)

    # ---------------------------------------------------------------- keys

    def slot_owner(self, slot):
        """The master node serving @slot, as a live node's CLUSTER SLOTS says."""
        for (start, end), port in self._slots_seen_by(self.masters()[0]).items():
            if start <= slot <= end:
                return self.node(port)
        raise AssertionError(f"slot {slot} is served by no master")

    def master_of(self, key):
        """The master serving @key's slot, the slot checked with CLUSTER KEYSLOT."""
        slot = key_slot(key)
        asked = int(self.masters()[0].client().execute_command("CLUSTER", "KEYSLOT", key))
        assert asked == slot, (key, asked, slot)
        return self.slot_owner(slot)

    def keys(self, pattern="*"):
        """{key: master port} for every key on every master."""
        out = {}
        for m in self.masters():
            for k in m.client().scan_iter(match=pattern, count=1000):
                out[k.decode()] = m.port
        return out

    def get(self, key):
        """@key's value, read on the master serving it."""
        return self.master_of(key).client().get(key)

    def flushall(self):
        for m in self.masters():
            m.client().flushall()

    # ---------------------------------------------------------------- changes

    def kill_master(self, port):
        """SIGKILL the master at @port (wait_promoted waits for its
        replica to take over)."""
        assert self.replicas_of(port), f"{port} has no replica"
        self._masters_before = {n.port for n in self.masters()}
        self.node(port).kill()

    def wait_promoted(self, dead_port, timeout=30.0):
        """Until a replica of the dead master serves its slots and every
        live node agrees; returns the masters that were replicas before
        (the promoted one)."""
        deadline = time.monotonic() + timeout
        while True:
            if self.agreed():
                ports = {n.port for n in self.masters()}
                if len(ports) == self.n_masters and dead_port not in ports:
                    return [n for n in self.masters() if n.port not in self._masters_before]
            if time.monotonic() > deadline:
                pytest.fail("no replica took over:\n" + self.describe(), pytrace=False)
            time.sleep(0.05)

    def migrate_slot(self, slot, to_port, batch=2, pause=0.05, on_batch=None):
        """Move @slot from its master to the master at @to_port, as
        `redis-cli --cluster reshard` does: IMPORTING on the target,
        MIGRATING on the source, MIGRATE of @batch keys at a time with
        @pause seconds between (traffic meanwhile meets the migrating
        slot: ASK), then SETSLOT NODE on every master (MOVED from then on).
        @on_batch(moved so far) is called after each batch. Returns the
        number of keys moved."""
        src = self.slot_owner(slot)
        dst = self.node(to_port)
        assert src.port != dst.port
        sc, dc = src.client(), dst.client()
        dc.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", src.id)
        sc.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", dst.id)
        moved = 0
        while True:
            keys = sc.execute_command("CLUSTER", "GETKEYSINSLOT", slot, batch)
            if not keys:
                break
            sc.execute_command("MIGRATE", "127.0.0.1", dst.port, "", 0, 5000, "KEYS", *keys)
            moved += len(keys)
            if on_batch:
                on_batch(moved)
            time.sleep(pause)
        # the target first, then the source, then the other masters
        dc.execute_command("CLUSTER", "SETSLOT", slot, "NODE", dst.id)
        sc.execute_command("CLUSTER", "SETSLOT", slot, "NODE", dst.id)
        for m in self.masters():
            if m.port not in (src.port, dst.port):
                m.client().execute_command("CLUSTER", "SETSLOT", slot, "NODE", dst.id)
        self.wait_ok()
        return moved


def start_cluster(directory, **kw):
    c = RedisCluster(directory, **kw)
    try:
        return c.start()
    except BaseException:
        c.stop()
        raise


@pytest.fixture(scope="module")
def redis_cluster_module(tmp_path_factory):
    """One cluster shared by a module's tests (they must leave it whole)."""
    c = start_cluster(tmp_path_factory.mktemp("cluster"))
    yield c
    c.stop()


@pytest.fixture
def redis_cluster(redis_cluster_module):
    """The module's cluster, emptied (FLUSHALL on every master) and settled."""
    redis_cluster_module.wait_ok()
    redis_cluster_module.flushall()
    return redis_cluster_module


@pytest.fixture
def redis_cluster_factory(tmp_path):
    """start(**kw) -> a fresh RedisCluster, for a test that breaks it;
    all stopped at teardown."""
    started = []

    def start(**kw):
        c = RedisCluster(tmp_path / f"cluster{len(started)}", **kw)
        started.append(c)
        return c.start()

    yield start
    for c in started:
        c.stop()
