#!/usr/bin/python3
"""bench/redis/script_cost.py - what weir's Redis script costs Redis per decision.

Starts a redis-server of its own (unix socket, no persistence), loads each
script given as a function library (FCALL, the way the store calls it) or,
with --eval, as a script (EVALSHA), and sends it calls built the way
lib/store/redis/codec.c builds them: realistic limits, keys drawn from a
keyspace per descriptor (and one global key in hot_16x3), time moving
forward. Scenarios are named algorithm_BATCHESxOPS; the atomic ones charge
all of a request's descriptors or none, as the engine does.

Two measures:
  - by default, what Redis reports: INFO commandstats' usec per FCALL (or
    EVALSHA), and beside it the server's CPU time per op (INFO cpu, user +
    sys: protocol parsing and socket I/O included). The variants run
    alternately, round after round, and the medians are reported, as a
    shared machine is noisy;
  - with --callgrind, the instructions redis-server executes inside FCALL
    (or EVALSHA), counted by valgrind: exact and noise-free (up to Redis's
    own periodic work, a few per cent on small calls), about 50 times
    slower, so fewer calls and one round do. The best guide to compare
    two scripts; on this kind of machine ~7,000-8,000 instructions made a
    microsecond.

    /usr/bin/python3 bench/redis/script_cost.py                 # the tree's script
    git show HEAD:lib/store/redis/script.lua > /tmp/old.lua     # A/B
    /usr/bin/python3 bench/redis/script_cost.py --script /tmp/old.lua \
        --script lib/store/redis/script.lua --rounds 9
    /usr/bin/python3 bench/redis/script_cost.py --script /tmp/old.lua \
        --script lib/store/redis/script.lua --callgrind --rounds 1 --calls 100
    ... --scenarios tb_1x3,tb_16x3 --calls 3000 --eval --baseline
    ... --cluster --callgrind --rounds 1 --calls 100 --scenarios tb_1x1,tb_1x3,tb_64x1,tb_16x3

--cluster runs the redis-server as a Redis Cluster node holding every slot
and sends the calls as the store sends them to a cluster node: format 3,
the keys among the arguments (codec.h), which the script reads with one
MGET each (a call's keys span slots). Replies are not compared there (a
transaction may not span slots).

Each script's wire format (1 or 2, codec.h) is read from its header
("wire format N"), so a script from before format 2 can still be compared.
Before measuring, every variant runs the same calls on an empty database
and their results must be equal (--no-check skips it). --baseline adds the
approach users write without weir (bench/redis/token_bucket.lua, one
EVALSHA per descriptor), measured per descriptor. Needs redis-server in
$PATH, valgrind for --callgrind, and the `redis` module (Debian's
python3-redis: hence /usr/bin/python3).
"""

import argparse
import math
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import redis

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# ------------------------------------------------------------------ limits

TB, GCRA, LB, SHAPER, FW, LOG, SC, CONC = 1, 2, 3, 4, 5, 6, 7, 8
S = 1000000


def compile_limit(algo, limit, window_us, burst=0, k=0):
    """weir_limit_compile()'s fields the script is sent (lib/algo/registry.c)."""
    if not burst:
        burst = limit if algo in (TB, SHAPER) else (1 if algo in (GCRA, LB) else limit)
    if algo in (FW, LOG, SC, CONC):
        burst = limit
    unit = rate = cap = 0
    if algo in (TB, LB, SHAPER):
        g = math.gcd(limit, window_us)
        unit, rate = window_us // g, limit // g
        cap = unit * burst
    elif algo == GCRA:
        unit = -(-window_us * 1000 // limit)
        cap = unit * burst
    if algo == SC:
        k = k or 1
    else:
        k = 0
    return (algo, limit, window_us, burst, k, unit, rate, cap)


# A request's descriptors, as rules give them: (limit, keyspace); a keyspace
# of 1 is a global key that every request charges.
SCENARIOS = {
    # name: (descriptors, batches per call, atomic)
    "tb_1x1": ([(compile_limit(TB, 100, S), 10000)], 1, False),
    "tb_1x3": ([(compile_limit(TB, 100, S), 10000), (compile_limit(TB, 1000, 60 * S), 10000),
                (compile_limit(TB, 20, S, 40), 1000)], 1, True),
    "tb_16x3": ([(compile_limit(TB, 100, S), 10000), (compile_limit(TB, 1000, 60 * S), 10000),
                 (compile_limit(TB, 20, S, 40), 1000)], 16, True),
    "gcra_16x3": ([(compile_limit(GCRA, 100, S, 10), 10000),
                   (compile_limit(GCRA, 1000, 60 * S, 50), 10000),
                   (compile_limit(GCRA, 7, S, 3), 1000)], 16, True),
    "fw_16x3": ([(compile_limit(FW, 100, S), 10000), (compile_limit(FW, 1000, 60 * S), 10000),
                 (compile_limit(FW, 20, S), 1000)], 16, True),
    "sc_16x3": ([(compile_limit(SC, 100, S), 10000), (compile_limit(SC, 1000, 60 * S, k=6), 10000),
                 (compile_limit(SC, 20, S), 1000)], 16, True),
    "mixed_16x3": ([(compile_limit(TB, 100, S), 10000), (compile_limit(GCRA, 1000, 60 * S, 50), 10000),
                    (compile_limit(FW, 20, S), 1000)], 16, True),
    "hot_16x3": ([(compile_limit(TB, 100, S), 10000), (compile_limit(TB, 1000, 60 * S), 10000),
                  (compile_limit(TB, 100000, S), 1)], 16, True),
    "tb_64x1": ([(compile_limit(TB, 100, S), 10000)], 64, False),
}
DEFAULT = "tb_1x1,tb_1x3,tb_16x3,gcra_16x3,fw_16x3,sc_16x3,mixed_16x3,hot_16x3"


def make_calls(name, n, seed, t0):
    """n calls of the scenario: lists of batches (now_us, atomic, ops), an op
    (kind, hits, lease, limit, key)."""
    descs, nb, atomic = SCENARIOS[name]
    rng = random.Random(seed)
    calls, now = [], t0
    for _ in range(n):
        batches = []
        for _ in range(nb):
            now += 20
            ops = []
            for d, (lim, space) in enumerate(descs):
                key = "weir:%s:%d:%d" % (name, d, rng.randrange(space))
                ops.append((0, 1, 0, lim, key))
            batches.append((now, atomic, ops))
        calls.append(batches)
    return calls


# ---------------------------------------------------------------- encoders


def encode_v1(batches):
    keys = [op[4] for b in batches for op in b[2]]
    args = ["1", str(len(batches))]
    for now, atomic, ops in batches:
        args += [str(now), "1" if atomic else "0", str(len(ops))]
        for kind, hits, lease, lim, _ in ops:
            args += [str(kind), str(hits), str(lease)] + [str(x) for x in lim]
    return keys, args


def encode_v2(batches):
    keys = [op[4] for b in batches for op in b[2]]
    index, table = {}, []
    for b in batches:
        for op in b[2]:
            if op[3] not in index:
                index[op[3]] = str(len(table) + 1)
                table.append(" ".join(str(x) for x in op[3]))
    args = ["2", str(len(table))] + table + [str(len(batches))]
    for now, atomic, ops in batches:
        args += [str(now), "1" if atomic else "0", str(len(ops))]
        for kind, hits, lease, lim, _ in ops:
            args += [str(kind), str(hits), str(lease), index[lim]]
    return keys, args


def decode_v1(reply):
    """(time, [(status, allowed, limit, remaining, reset, retry, delay, lease)])"""
    return reply[0], [tuple(reply[i:i + 8]) for i in range(1, len(reply), 8)]


def decode_v2(reply):
    ops, i = [], 1
    while i < len(reply):
        h = reply[i]
        if h < 0:
            ops.append((h, 0, 0, 0, 0, 0, 0, 0))
            i += 1
            continue
        allowed, rem, reset = h & 1, reply[i + 1], reply[i + 2]
        i += 3
        retry = delay = lease = 0
        if not allowed:
            retry, i = reply[i], i + 1
        if h & 2:
            delay, i = reply[i], i + 1
        if h & 4:
            lease, i = reply[i], i + 1
        ops.append((0, allowed, h >> 3, rem, reset, retry, delay, lease))
    return reply[0], ops


ENCODERS = {1: encode_v1, 2: encode_v2}
DECODERS = {1: decode_v1, 2: decode_v2}

# ------------------------------------------------------------------ server


def start_server(tmp, callgrind, cpu=None, cluster=False):
    sock = os.path.join(tmp, "redis.sock")
    argv = ["redis-server", "--port", "0", "--unixsocket", sock, "--save", "", "--appendonly", "no",
            "--dir", tmp, "--logfile", os.path.join(tmp, "redis.log")]
    if cluster:
        argv += ["--cluster-enabled", "yes", "--cluster-config-file",
                 os.path.join(tmp, "nodes.conf")]
    if callgrind:
        # instructions counted inside FCALL and EVALSHA only, as commandstats
        # times them (redis-server's exported symbols name them)
        argv = ["valgrind", "--tool=callgrind", "--toggle-collect=fcallCommand",
                "--toggle-collect=evalShaCommand",
                "--callgrind-out-file=" + os.path.join(tmp, "cg.out")] + argv
    if cpu is not None:
        argv = ["taskset", "-c", str(cpu)] + argv
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(1000):
        if os.path.exists(sock):
            try:
                r = redis.Redis(unix_socket_path=sock)
                r.ping()
                if cluster:
                    r.execute_command("CLUSTER", "ADDSLOTSRANGE", 0, 16383)
                    while b"cluster_state:ok" not in r.execute_command("CLUSTER", "INFO"):
                        time.sleep(0.05)
                return proc, r
            except redis.exceptions.ConnectionError:
                pass
        time.sleep(0.02)
    proc.kill()
    sys.exit("script_cost.py: redis-server did not start")


class Variant:
    def __init__(self, r, path, idx, use_eval, cluster=False):
        self.path = path
        self.label = "%s:%s" % (chr(ord("A") + idx), os.path.relpath(path))
        src = open(path).read()
        m = re.search(r"wire format (\d+)", src[:2000])
        if not m or int(m.group(1)) not in ENCODERS:
            sys.exit("script_cost.py: %s: no known wire format in its header" % path)
        if cluster and int(m.group(1)) != 2:
            sys.exit("script_cost.py: %s: --cluster needs wire format 2 (and its format 3)" % path)
        self.cluster = cluster
        self.encode = ENCODERS[int(m.group(1))]
        self.decode = DECODERS[int(m.group(1))]
        self.fname = "weir_bench_%d" % idx
        self.eval = use_eval
        if use_eval:
            self.sha = r.script_load(src)
            self.cmd = ("EVALSHA", self.sha)
        else:
            # register_function('weir_vN', ...) or {function_name = 'weir_vN', ...}
            lib = re.sub(r"(register_function\(|function_name = )'weir_v\d+'",
                         lambda m: "%s'%s'" % (m.group(1), self.fname), src)
            r.execute_command("FUNCTION", "LOAD", "REPLACE", "#!lua name=%s\n%s" % (self.fname, lib))
            self.cmd = ("FCALL", self.fname)
        self.stat = "cmdstat_evalsha" if use_eval else "cmdstat_fcall"

    def argv(self, batches):
        keys, args = self.encode(batches)
        if self.cluster:  # format 3: "3", the keys, then format 2's arguments
            return self.cmd + (0, "3", len(keys)) + tuple(keys) + tuple(args[1:])
        return self.cmd + (len(keys),) + tuple(keys) + tuple(args)


def cpu(r):
    i = r.info("cpu")
    return i["used_cpu_user"] + i["used_cpu_sys"]


def send(r, argvs, pipe=32):
    replies = []
    for i in range(0, len(argvs), pipe):
        p = r.pipeline(transaction=False)
        for a in argvs[i:i + pipe]:
            p.execute_command(*a)
        replies += p.execute()
    return replies


def callgrind_ir(pid, tmp):
    """Instructions counted since the last call (callgrind_control -z)."""
    for f in os.listdir(tmp):
        if f.startswith("cg.out."):
            os.remove(os.path.join(tmp, f))
    subprocess.run(["callgrind_control", "-d", str(pid)], check=True, capture_output=True)
    for _ in range(100):
        dumps = [f for f in os.listdir(tmp) if f.startswith("cg.out.")]
        if dumps:
            time.sleep(0.1)  # written whole
            for line in open(os.path.join(tmp, dumps[0])):
                if line.startswith(("summary:", "totals:")):
                    return int(line.split()[1])
        time.sleep(0.05)
    sys.exit("script_cost.py: callgrind wrote no dump")


def measure(r, argvs, stat, cg=None):
    """(usec per call from commandstats, server CPU usec per call), or with
    cg = (pid, tmp) (instructions per call, 0)"""
    if cg:
        subprocess.run(["callgrind_control", "-z", str(cg[0])], check=True, capture_output=True)
        send(r, argvs)
        return callgrind_ir(*cg) / len(argvs), 0.0
    r.config_resetstat()
    c0 = cpu(r)
    send(r, argvs)
    c1 = cpu(r)
    st = r.info("commandstats")[stat]
    return st["usec"] / st["calls"], (c1 - c0) * 1e6 / len(argvs)


def baseline_argvs(r, calls):
    src = open(os.path.join(HERE, "token_bucket.lua")).read()
    sha = r.script_load(src)
    out = []
    for batches in calls:
        for now, _, ops in batches:
            for _, hits, _, lim, key in ops:
                rate = lim[1] / (lim[2] / S)
                out.append(("EVALSHA", sha, 1, "base:" + key, rate, lim[3], now // 1000, hits))
    return out


# -------------------------------------------------------------------- main


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--script", action="append",
                    help="a script.lua to measure (repeat for A/B; default: the tree's)")
    ap.add_argument("--scenarios", default=DEFAULT, help="comma-separated; all: " +
                    ",".join(SCENARIOS))
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=2000, help="calls per round and variant")
    ap.add_argument("--eval", action="store_true", help="EVALSHA instead of FCALL")
    ap.add_argument("--baseline", action="store_true",
                    help="also bench/redis/token_bucket.lua, one EVALSHA per descriptor")
    ap.add_argument("--no-check", action="store_true", help="skip the replies' comparison")
    ap.add_argument("--redis-cpu", type=int,
                    help="pin redis-server to this CPU (and this program to the others)")
    ap.add_argument("--cluster", action="store_true",
                    help="a Redis Cluster node holding every slot, sent format 3 (keys among the "
                    "arguments) as weir sends a cluster node")
    ap.add_argument("--callgrind", action="store_true",
                    help="count instructions instead (redis-server under valgrind's callgrind: "
                    "exact and noise-free, about 50 times slower; use fewer calls and 1 round)")
    o = ap.parse_args()
    scripts = o.script or [os.path.join(ROOT, "lib/store/redis/script.lua")]
    if not shutil.which("redis-server"):
        sys.exit("script_cost.py: redis-server is not in $PATH")
    tmp = tempfile.mkdtemp(prefix="weir-script-cost-")
    if o.callgrind and not shutil.which("callgrind_control"):
        sys.exit("script_cost.py: valgrind (callgrind_control) is not in $PATH")
    if o.redis_cpu is not None:
        others = set(range(os.cpu_count() or 1)) - {o.redis_cpu}
        if others:
            os.sched_setaffinity(0, others)
    proc, r = start_server(tmp, o.callgrind, o.redis_cpu, o.cluster)
    cg = (proc.pid, tmp) if o.callgrind else None
    try:
        print("redis-server %s, %d round(s) of %d calls, %s%s" %
              (r.info("server")["redis_version"], o.rounds, o.calls,
               "EVALSHA" if o.eval else "FCALL",
               ", a cluster node (format 3)" if o.cluster else ""))
        variants = [Variant(r, p, i, o.eval, o.cluster) for i, p in enumerate(scripts)]
        t0 = int(time.time() * 1e6)
        if cg:
            print("%-11s %4s  %-40s %9s %8s" % ("scenario", "ops", "variant", "Ir/call", "Ir/op"))
        else:
            print("%-11s %4s  %-40s %9s %8s %9s" %
                  ("scenario", "ops", "variant", "us/call", "us/op", "cpu/op"))
        for name in o.scenarios.split(","):
            if name not in SCENARIOS:
                sys.exit("script_cost.py: unknown scenario %s" % name)
            if not o.no_check and not o.cluster and len(variants) > 1:
                check = make_calls(name, 200, 1, t0)
                ref = None
                for v in variants:
                    r.flushall()
                    # keys expire on Redis's clock, not on the calls' made-up
                    # one: each call's keys lose their TTL in its transaction
                    got = []
                    for c in check:
                        p = r.pipeline(transaction=True)
                        p.execute_command(*v.argv(c))
                        for b in c:
                            for op in b[2]:
                                p.persist(op[4])
                        got.append(v.decode(p.execute()[0]))
                    if ref is None:
                        ref = got
                    elif got != ref:
                        sys.exit("script_cost.py: %s: %s answers otherwise than %s" %
                                 (name, v.label, variants[0].label))
                r.flushall()
            # each round's calls at later times than the last's: a clock
            # that went back would turn admissions into cheaper denials
            clock = [t0 + 10**9]

            def fresh(seed):
                calls = make_calls(name, o.calls, seed, clock[0])
                clock[0] = calls[-1][-1][0] + 1000
                return calls

            nops = sum(len(b[2]) for b in make_calls(name, 1, 0, 0)[0])
            send(r, [variants[0].argv(c) for c in fresh(0)])  # warm-up: the keyspace
            if o.baseline:
                send(r, baseline_argvs(r, fresh(0)))
            res = [[] for _ in variants]
            bres = []
            for rnd in range(o.rounds):
                for i, v in enumerate(variants):
                    argvs = [v.argv(c) for c in fresh(rnd + 1)]
                    res[i].append(measure(r, argvs, v.stat, cg))
                if o.baseline:
                    bres.append(
                        measure(r, baseline_argvs(r, fresh(rnd + 1)), "cmdstat_evalsha", cg))
            rows = [(v.label[:40], nops, res[i]) for i, v in enumerate(variants)]
            if o.baseline:
                rows.append(("baseline: token_bucket.lua", 1, bres))
            for label, n, rs in rows:
                us = statistics.median(x[0] for x in rs)
                cp = statistics.median(x[1] for x in rs)
                if cg:
                    print("%-11s %4d  %-40s %9.0f %8.0f" % (name, n, label, us, us / n))
                else:
                    print("%-11s %4d  %-40s %9.2f %8.2f %9.2f" %
                          (name, n, label, us, us / n, cp / n))
            r.flushall()
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
