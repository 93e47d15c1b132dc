#!/usr/bin/python3
"""bench/hybrid/drive.py - the two measurements of bench/hybrid.sh, which
starts the servers and passes their ports; standard library only.

  drive.py throughput --weir BIN --redis-pid PID --duration S --rounds N \\
      --store NAME:GRPC_PORT:HTTP_PORT:PID ... --workload NAME:RULE:ARGS ...
      For each round, each workload, each store (the order of the stores
      rotates from round to round): `weir bench grpc` unpaced against that
      store's `weir serve`, and around it the server's /metrics and the CPU
      time of weir and redis-server (/proc/PID/stat). Prints a line per run
      and the medians.

  drive.py overshoot-run --weir BIN --redis-pid PID --seconds S --round K \\
      --limit R --instance GRPC_PORT:HTTP_PORT:PID ... --interval IV --out RUNS
      One run: a fresh key (r<K>) of the rule i<IV>, asked at R requests/s
      through every instance at once (one paced `weir bench grpc` each),
      every instance's /metrics read every 100 ms meanwhile: what all
      admitted against burst + R x the clients' time, and the series, as
      one JSON line appended to RUNS.

  drive.py overshoot-summary --runs RUNS --limit R --instances N --series OUT
      The medians per interval against interval x N x R, and for
      bench/hybrid/svg.py in OUT the series of each interval's round
      furthest from the limit.
"""

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import time

HZ = os.sysconf("SC_CLK_TCK")


def cpu_us(pid):
    """utime + stime of PID so far, in microseconds."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1e6 / HZ


class Metrics:
    """/metrics of one instance over a kept-alive connection."""

    def __init__(self, port):
        self.port = port
        self.conn = None

    def read(self):
        for attempt in (0, 1):
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                self.conn.request("GET", "/metrics")
                text = self.conn.getresponse().read().decode()
                break
            except (OSError, http.client.HTTPException):
                self.conn = None
                if attempt:
                    raise
        out = {}
        for line in text.splitlines():
            if not line or line[0] == "#":
                continue
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
        return out


def decisions(m, rule, result=None):
    """weir_decisions_total of one rule, one result or all."""
    total = 0.0
    for name, v in m.items():
        if name.startswith("weir_decisions_total{") and ('rule="%s"' % rule) in name:
            if result is None or ('result="%s"' % result) in name:
                total += v
    return total


def delta(a, b, name):
    return b.get(name, 0.0) - a.get(name, 0.0)


def bench_grpc(weir, port, seconds, rate=None, connections=4, streams=32):
    """weir bench grpc against 127.0.0.1:port, no warmup, JSON out; the
    descriptors are the caller's to add."""
    cmd = [weir, "bench", "grpc", "--target", "127.0.0.1:%d" % port, "--duration", str(seconds),
           "--warmup", "0", "--connections", str(connections), "--streams", str(streams),
           "--json"]
    if rate:
        cmd += ["--rate", str(rate)]
    return cmd


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def warn_outage(runs):
    """Decisions made at the instance's share while Redis answered every
    call: syncs that did not reach Redis (see weir_redis_sync_age_seconds)."""
    bad = [x for x in runs if x["outage"] > 0 and not x["unanswered"]]
    if bad:
        print("warning: in %d of %d sync: local runs, with Redis answering every call, up to "
              "%.1f%% of the decisions were made at the instance's share as while Redis is away "
              "(weir_redis_sync_outage_total): syncs did not reach Redis" % (
                  len(bad), len(runs), 100 * max(x["outage"] for x in bad)))


# ------------------------------------------------------------ throughput

def throughput(a):
    stores = []
    for s in a.store:
        name, gport, hport, pid = s.split(":")
        stores.append({"name": name, "grpc": int(gport), "metrics": Metrics(int(hport)),
                       "pid": int(pid)})
    workloads = []
    for w in a.workload:
        name, rule, args = w.split(":", 2)
        workloads.append({"name": name, "rule": rule, "args": args.split()})
    runs = []  # dicts: round, workload, store, figures
    head = "%-6s %-10s %-7s %12s %8s %8s %10s %10s %10s %5s" % (
        "round", "workload", "store", "decisions/s", "local", "outage", "calls/dec", "weir us/d",
        "Redis us/d", "unans")
    print(head)
    for r in range(a.rounds):
        order = stores[r % len(stores):] + stores[:r % len(stores)]
        for w in workloads:
            for s in order:
                cmd = bench_grpc(a.weir, s["grpc"], a.duration) + w["args"]
                m0 = s["metrics"].read()
                w0, r0 = cpu_us(s["pid"]), cpu_us(a.redis_pid)
                out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
                w1, r1 = cpu_us(s["pid"]), cpu_us(a.redis_pid)
                m1 = s["metrics"].read()
                res = json.loads(out)
                if res["errors"]:
                    sys.exit("drive.py: weir bench grpc saw %d errors" % res["errors"])
                n = max(decisions(m1, w["rule"]) - decisions(m0, w["rule"]), 1)
                run = {
                    "round": r + 1, "workload": w["name"], "store": s["name"],
                    "decisions_per_s": res["decisions_per_s"],
                    "allowed_frac": res["ok"] / max(res["ok"] + res["over_limit"], 1),
                    "local": delta(m0, m1, "weir_redis_sync_local_total") / n,
                    "outage": delta(m0, m1, "weir_redis_sync_outage_total") / n,
                    "calls": delta(m0, m1, "weir_redis_calls_total") / n,
                    "weir_us": (w1 - w0) / n,
                    "redis_us": (r1 - r0) / n,
                    "unanswered": sum(delta(m0, m1, k) for k in (
                        "weir_redis_timeouts_total", "weir_redis_errors_total",
                        "weir_redis_rejected_total")),
                }
                runs.append(run)
                redis = s["name"] != "memory"
                print("%-6d %-10s %-7s %12.0f %8s %8s %10s %10.2f %10s %5s" % (
                    r + 1, w["name"], s["name"], run["decisions_per_s"],
                    "%.4f" % run["local"] if redis else "-",
                    "%.4f" % run["outage"] if redis else "-",
                    "%.5f" % run["calls"] if redis else "-", run["weir_us"],
                    "%.2f" % run["redis_us"] if redis else "-",
                    "%.0f" % run["unanswered"] if redis else "-"), flush=True)
    print()
    print("medians of %d rounds of %g s (decisions/s unpaced; local: decided from a "
          "reservation without a call (weir_redis_sync_local_total), outage: decided at the "
          "instance's share as if Redis were away (weir_redis_sync_outage_total), both of all "
          "decisions; CPU per decision)" % (a.rounds, a.duration))
    print("%-10s %-7s %12s %9s %8s %8s %10s %10s %10s" % (
        "workload", "store", "decisions/s", "admitted", "local", "outage", "calls/dec",
        "weir us/d", "Redis us/d"))
    for w in workloads:
        for s in stores:
            rs = [x for x in runs if x["workload"] == w["name"] and x["store"] == s["name"]]
            med = {k: median([x[k] for x in rs]) for k in (
                "decisions_per_s", "allowed_frac", "local", "outage", "calls", "weir_us",
                "redis_us", "unanswered")}
            redis = s["name"] != "memory"
            print("%-10s %-7s %12.0f %8.1f%% %8s %8s %10s %10.2f %10s" % (
                w["name"], s["name"], med["decisions_per_s"], 100 * med["allowed_frac"],
                "%.2f%%" % (100 * med["local"]) if redis else "-",
                "%.2f%%" % (100 * med["outage"]) if redis else "-",
                "%.5f" % med["calls"] if redis else "-", med["weir_us"],
                "%.2f" % med["redis_us"] if redis else "-"))
    print()
    print("ratios (median of the rounds' own ratios; target: local / memory >= 0.5)")
    for w in workloads:
        def ratio(x, y):
            per = []
            for r in range(1, a.rounds + 1):
                vx = [q["decisions_per_s"] for q in runs
                      if q["round"] == r and q["workload"] == w["name"] and q["store"] == x]
                vy = [q["decisions_per_s"] for q in runs
                      if q["round"] == r and q["workload"] == w["name"] and q["store"] == y]
                if vx and vy:
                    per.append(vx[0] / vy[0])
            return median(per), per
        lm, lper = ratio("local", "memory")
        gm, _ = ratio("global", "memory")
        lg, _ = ratio("local", "global")
        print("%-10s local/memory %.2f (rounds %s) %s  global/memory %.2f  local/global %.2f" % (
            w["name"], lm, ", ".join("%.2f" % x for x in lper),
            "met" if lm >= 0.5 else "MISSED", gm, lg))
    unans = sum(x["unanswered"] for x in runs)
    if unans:
        print("warning: %d decisions were not answered by Redis in time (failure mode)" % unans)
    warn_outage([x for x in runs if x["store"] == "local"])


# ------------------------------------------------------------ overshoot

OVER_HEAD = "%-6s %-8s %9s %9s %9s %10s %10s %10s %8s %8s %8s %5s" % (
    "round", "interval", "asked", "admitted", "allowed", "overshoot", "under", "answered/s",
    "local", "outage", "calls/d", "unans")


def overshoot_run(a):
    """One run: a fresh key of rule i<interval>, asked through every instance
    at once; one JSON line appended to a.out."""
    insts = []
    for s in a.instance:
        gport, hport, pid = (int(x) for x in s.split(":"))
        insts.append({"grpc": gport, "metrics": Metrics(hport), "pid": pid})
    burst = a.burst or a.limit
    iv = a.interval
    rule = "i" + iv
    descriptor = "%s=r%d" % (rule, a.round)
    m0 = [i["metrics"].read() for i in insts]
    c0 = [cpu_us(i["pid"]) for i in insts] + [cpu_us(a.redis_pid)]
    procs = []
    t_launch = time.monotonic()
    for i in insts:
        cmd = bench_grpc(a.weir, i["grpc"], a.seconds, rate=a.limit, connections=1) + [
            "--descriptor", descriptor]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                      text=True))
    # admitted by all instances, read every 100 ms until every client is done:
    # [seconds since launch, admitted since the last read, seconds since it]
    points = []
    prev = sum(decisions(m, rule, "allowed") for m in m0)
    prev_t = t_launch
    try:
        while any(p.poll() is None for p in procs):
            time.sleep(max(0.0, prev_t + 0.1 - time.monotonic()))
            now_m = [i["metrics"].read() for i in insts]
            t = time.monotonic()
            tot = sum(decisions(m, rule, "allowed") for m in now_m)
            points.append([round(t - t_launch, 4), tot - prev, round(t - prev_t, 4)])
            prev, prev_t = tot, t
        outs = [p.communicate()[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    wall = time.monotonic() - t_launch
    time.sleep(0.2)  # answers on their way
    m1 = [i["metrics"].read() for i in insts]
    c1 = [cpu_us(i["pid"]) for i in insts] + [cpu_us(a.redis_pid)]
    res = [json.loads(o) for o in outs]
    errors = sum(x["errors"] for x in res)
    if errors:
        sys.exit("drive.py: weir bench grpc saw %d errors" % errors)

    def total(name=None, result=None):
        if name:
            return sum(delta(x, y, name) for x, y in zip(m0, m1))
        return sum(decisions(y, rule, result) - decisions(x, rule, result)
                   for x, y in zip(m0, m1))

    admitted, asked = total(result="allowed"), total()
    # The clients' own measured time: the key was asked over at least that
    # long (the clients start within milliseconds of each other), so
    # burst + rate x it is the least the limit allows over the run, and an
    # overshoot is counted against the strictest bound.
    span = max(x["duration_s"] for x in res)
    allowed = burst + a.limit * span
    n = max(asked, 1)
    run = {"round": a.round, "interval": iv, "asked": asked, "admitted": admitted,
           "client_ok": sum(x["ok"] for x in res), "allowed": allowed, "span": span,
           "wall": wall, "overshoot": admitted - allowed, "under": allowed - admitted,
           "answered_per_s": sum(x["requests"] for x in res) / span,
           "local": total("weir_redis_sync_local_total") / n,
           "outage": total("weir_redis_sync_outage_total") / n,
           "calls": total("weir_redis_calls_total") / n,
           "reserved": total("weir_redis_sync_reserved_total"),
           "returned": total("weir_redis_sync_returned_total"),
           "unanswered": sum(total(k) for k in (
               "weir_redis_timeouts_total", "weir_redis_errors_total",
               "weir_redis_rejected_total")),
           "weir_us": sum(y - x for x, y in zip(c0[:-1], c1[:-1])) / n,
           "redis_us": (c1[-1] - c0[-1]) / n,
           "points": points}
    with open(a.out, "a") as f:
        f.write(json.dumps(run) + "\n")
    if a.head:
        print(OVER_HEAD)
    print("%-6d %-8s %9.0f %9.0f %9.0f %10.0f %10.0f %10.0f %7.1f%% %7.1f%% %8.4f %5.0f" % (
        a.round, iv, asked, admitted, allowed, max(run["overshoot"], 0), max(run["under"], 0),
        run["answered_per_s"], 100 * run["local"], 100 * run["outage"], run["calls"],
        run["unanswered"]), flush=True)


def overshoot_summary(a):
    runs = [json.loads(line) for line in open(a.runs)]
    burst = a.burst or a.limit
    n = a.instances
    intervals = []
    for r in runs:
        if r["interval"] not in intervals:
            intervals.append(r["interval"])
    intervals.sort(key=parse_seconds)
    rounds = max(r["round"] for r in runs)
    print()
    print("medians of %d rounds: %d instances, token bucket %d/s burst %d, asked %d/s through "
          "each for %g s" % (rounds, n, a.limit, burst, a.limit, a.seconds))
    print("allowed = burst + rate x the clients' measured time; overshoot = admitted - allowed "
          "(0 when below), under = allowed - admitted (0 when above);")
    print("formula = interval x instances x rate; target: overshoot <= formula / 2")
    print("%-8s %9s %9s %10s %8s %8s %10s %10s %8s %8s %8s %10s" % (
        "interval", "admitted", "allowed", "overshoot", "formula", "target", "under",
        "answered/s", "local", "outage", "calls/d", "weir us/d"))
    summary = []
    for iv in intervals:
        rs = [x for x in runs if x["interval"] == iv]
        med = {k: median([x[k] for x in rs]) for k in (
            "admitted", "allowed", "overshoot", "under", "answered_per_s", "local", "outage",
            "calls", "weir_us", "redis_us")}
        formula = parse_seconds(iv) * n * a.limit
        worst = max(x["overshoot"] for x in rs)
        med.update(interval=iv, formula=formula, worst_overshoot=worst,
                   overshoots=[x["overshoot"] for x in rs])
        summary.append(med)
        print("%-8s %9.0f %9.0f %10.0f %8.0f %8.0f %10.0f %10.0f %7.1f%% %7.1f%% %8.4f %10.2f  "
              "%s" % (
                  iv, med["admitted"], med["allowed"], max(med["overshoot"], 0), formula,
                  formula / 2, max(med["under"], 0), med["answered_per_s"], 100 * med["local"],
                  100 * med["outage"], med["calls"], med["weir_us"],
                  "met" if worst <= formula / 2 else "MISSED (worst round %.0f)" % worst))
    unans = sum(x["unanswered"] for x in runs)
    if unans:
        print("warning: %d decisions were not answered by Redis in time" % unans)
    warn_outage(runs)
    # per interval, the round furthest from the limit (overshoot or unused)
    far = {}
    for iv in intervals:
        far[iv] = max((x for x in runs if x["interval"] == iv),
                      key=lambda x: abs(x["admitted"] - x["allowed"]))
    with open(a.series, "w") as f:
        json.dump({"limit": a.limit, "burst": burst, "instances": n, "seconds": a.seconds,
                   "bucket_s": 0.1, "rounds": rounds,
                   "series": {iv: far[iv]["points"] for iv in intervals},
                   "shown": {iv: {k: v for k, v in far[iv].items() if k != "points"}
                             for iv in intervals},
                   "summary": summary,
                   "runs": [{k: v for k, v in r.items() if k != "points"} for r in runs]}, f)


def parse_seconds(s):
    for unit, mul in (("ms", 1e-3), ("s", 1.0)):
        if s.endswith(unit):
            return float(s[:-len(unit)]) * mul
    return float(s)


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("throughput")
    t.add_argument("--weir", required=True)
    t.add_argument("--redis-pid", type=int, required=True)
    t.add_argument("--duration", type=float, default=5)
    t.add_argument("--rounds", type=int, default=3)
    t.add_argument("--store", action="append", required=True)
    t.add_argument("--workload", action="append", required=True)
    o = sub.add_parser("overshoot-run")
    o.add_argument("--weir", required=True)
    o.add_argument("--redis-pid", type=int, required=True)
    o.add_argument("--seconds", type=float, default=5)
    o.add_argument("--round", type=int, required=True)
    o.add_argument("--limit", type=int, default=1000)
    o.add_argument("--burst", type=int, default=0)
    o.add_argument("--instance", action="append", required=True)
    o.add_argument("--interval", required=True)
    o.add_argument("--out", required=True)
    o.add_argument("--head", action="store_true")
    o = sub.add_parser("overshoot-summary")
    o.add_argument("--runs", required=True)
    o.add_argument("--seconds", type=float, default=5)
    o.add_argument("--limit", type=int, default=1000)
    o.add_argument("--burst", type=int, default=0)
    o.add_argument("--instances", type=int, default=3)
    o.add_argument("--series", required=True)
    a = p.parse_args()
    {"throughput": throughput, "overshoot-run": overshoot_run,
     "overshoot-summary": overshoot_summary}[a.cmd](a)


if __name__ == "__main__":
    main()
