#!/usr/bin/env bash
# bench/cluster.sh - weir on a Redis Cluster of 3 masters against weir on a
# Redis Cluster of one master holding every slot, side by side in one run:
# the same weir binary, rules and load (weir bench grpc, ShouldRateLimit,
# as bench/redis.sh drives it), rounds alternating, medians.
#
#   make bench-cluster                  # builds build/, 3 rounds of 5 s (5 paced)
#   ROUNDS=5 PACED_ROUNDS=7 DURATION=8 DESCRIPTORS=1 bench/cluster.sh
#
# The clusters: one redis-server with --cluster-enabled yes and all 16384
# slots (CLUSTER ADDSLOTSRANGE), and three made into one cluster by
# redis-cli --cluster create (no replicas). Each has its own weir serve
# (--store redis+cluster://..., one server thread). Counter keys carry no
# hash tag, so a decision's descriptors land on any master.
#
# The load: requests of DESCRIPTORS descriptors (3 by default, or 1 with
# DESCRIPTORS=1), each value drawn on its own among KEYS, 4 connections x
# 32 streams, unpaced; then paced at half the slower cluster's unpaced
# rate, with --redis-batch-window 0 and 1ms (decisions held up to 1 ms to
# share a call). Every weir runs with --redis-timeout 1s: the runs measure
# what the masters do, and a closed loop of clients pushes a short timeout
# until it fails open. Reported per decision (request):
#   - Redis CPU: user+system time (/proc/PID/stat) summed over the
#     cluster's masters, over the run, divided by the decisions made; the
#     ratio 3 masters / 1 master is the portable figure (client, weir and
#     every Redis share this machine's cores);
#   - script calls (INFO commandstats: FCALL, EVALSHA, EVAL, summed over
#     the masters), script time, Redis CPU per call, ops (descriptors) per
#     call, batches (weir's parts of a request: one per master it has keys
#     on), and weir's own CPU;
#   - split: decisions whose keys live on several masters
#     (weir_redis_cluster_split_total);
#   - failed: anything not decided by Redis (weir_redis_errors_total,
#     _timeouts_total, _rejected_total, weir_failure_mode_total,
#     weir_redis_cluster_refund_errors_total, gRPC errors): must be 0.
# The summary fits Redis CPU per decision against calls per decision over
# the load runs (least squares): what an op costs, and a call beyond its
# ops.
#
# Round trips: requests of two descriptors whose keys are on one master,
# or on two masters of the 3-master cluster (values chosen by the keys'
# hash slots), one at a time (PACE, 200/s): p50/p99 and script calls per
# request; then, if strace is installed, a weir run under strace shows
# whether a request's two calls leave before either answer comes back.
set -euo pipefail

cd "$(dirname "$0")/.."
WEIR=${WEIR_BIN:-build/weir}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5}
DESCRIPTORS=${DESCRIPTORS:-3}
KEYS=${KEYS:-100000}
PACED_ROUNDS=${PACED_ROUNDS:-5}
PACE=${PACE:-200} # requests/s of the round-trip runs

. bench/ports.sh
need redis-server redis-cli python3
need_weir "make build"
bench_tmp

# ------------------------------------------------------------ the clusters

# start_node CLUSTER: a cluster-enabled redis-server on a free loopback
# port (and a free bus port), its files in $tmp/PORT; appended to the
# space-separated lists ports_CLUSTER and pids_CLUSTER.
start_node() {
    local port bus dir
    port=$(free_port)
    bus=$(free_port)
    dir="$tmp/$port"
    mkdir "$dir"
    redis-server --bind 127.0.0.1 --port "$port" --cluster-enabled yes --cluster-port "$bus" \
        --cluster-config-file nodes.conf --save '' --appendonly no --dir "$dir" \
        --logfile "$dir/redis.log" &
    pids+=($!)
    eval "pids_$1=\"\${pids_$1:+\$pids_$1 }$!\" ports_$1=\"\${ports_$1:+\$ports_$1 }$port\""
    wait_port "$port"
}

# wait_ok CLUSTER: until every master says cluster_state:ok and sees every
# master (10 s at most)
wait_ok() {
    local ports n
    ports=$(eval echo "\$ports_$1")
    n=$(wc -w <<<"$ports")
    for _ in $(seq 200); do
        local ok=1
        for p in $ports; do
            redis-cli -p "$p" cluster info | grep -q '^cluster_state:ok' || ok=0
            [ "$(redis-cli -p "$p" cluster nodes | grep -c master)" = "$n" ] || ok=0
        done
        [ "$ok" = 1 ] && return 0
        sleep 0.05
    done
    echo "$(basename "$0"): cluster $1 is not ok" >&2
    exit 1
}

# shellcheck disable=SC2034 # (read through eval)
ports_1m='' pids_1m='' ports_3m='' pids_3m=''
start_node 1m
# shellcheck disable=SC2086
redis-cli -p $ports_1m cluster addslotsrange 0 16383 >/dev/null
for _ in 1 2 3; do start_node 3m; done
# shellcheck disable=SC2046,SC2086
redis-cli --cluster create $(printf '127.0.0.1:%s ' $ports_3m) --cluster-replicas 0 \
    --cluster-yes >"$tmp/create.log" 2>&1 || { cat "$tmp/create.log" >&2; exit 1; }
wait_ok 1m
wait_ok 3m

# cpu_us CLUSTER: user+system time of its masters so far, in microseconds
cpu_us() {
    # shellcheck disable=SC2046
    pid_cpu_us $(eval echo "\$pids_$1")
}
# pid_cpu_us PID...: their user+system time so far, in microseconds
pid_cpu_us() {
    # shellcheck disable=SC2046
    awk -v hz="$(getconf CLK_TCK)" '{t += $14 + $15} END {printf "%.0f\n", t * 1000000 / hz}' \
        $(for p in "$@"; do echo "/proc/$p/stat"; done)
}
# calls CLUSTER: "usec calls" of the script commands (INFO commandstats),
# summed over its masters
calls() {
    for p in $(eval echo "\$ports_$1"); do redis-cli -p "$p" info commandstats; done | tr -d '\r' |
        awk -F'[:=,]' '/^cmdstat_(evalsha|eval|fcall):/ {u += $5; c += $3} END {printf "%d %d\n", u, c}'
}

# ------------------------------------------------------------ weir

# The load: requests of DESCRIPTORS descriptors d1..dN, each value drawn
# on its own among KEYS (v0 .. v<KEYS-1>), 100,000 distinct requests at
# most (weir bench grpc --file). Values drawn apart matter on a cluster:
# the keys of one value under two rules differ only in the limit's
# identity, and CRC16 being linear (XOR) their slots then differ by a
# constant, so with one {n} in every descriptor (--keys) whether two keys
# of a request share a master hardly depends on the value: 99.5% of such
# requests were split here, against 8/9 by chance.
python3 - "$tmp/load.txt" "$DESCRIPTORS" "$KEYS" <<'EOF'
import random, sys
rnd = random.Random(1)
d, keys = int(sys.argv[2]), int(sys.argv[3])
with open(sys.argv[1], "w") as f:
    for _ in range(min(keys, 100000)):
        f.write("bench " + ";".join("d%d=v%d" % (i + 1, rnd.randrange(keys)) for i in range(d)) + "\n")
EOF
load=(--file "$tmp/load.txt")
# (a directory of their own: weir watches the rules' directory)
mkdir "$tmp/rules"
{
    echo "domain: bench"
    echo "descriptors:"
    for i in 1 2 3; do
        echo "  - key: d$i"
        echo "    rate_limit: {unit: second, requests_per_unit: 1000000000, algorithm: token_bucket}"
    done
} >"$tmp/rules/rules.yaml"

# start_weir NAME CLUSTER BATCH_WINDOW [PREFIX...]: weir serve on that
# cluster (run under PREFIX, e.g. strace, if given), on fresh ports
# (gport_NAME, hport_NAME; its pid wpid_NAME), --redis-timeout 1s; one
# warm-up second (the slot map read, the library loaded)
start_weir() {
    local name=$1 cluster=$2 window=$3 g h seeds pid prefix=''
    shift 3
    g=$(free_port)
    h=$(free_port)
    seeds=$(for p in $(eval echo "\$ports_$cluster"); do printf '127.0.0.1:%s,' "$p"; done)
    "$@" "$WEIR" serve --rules "$tmp/rules/rules.yaml" --http "127.0.0.1:$h" --grpc "127.0.0.1:$g" \
        --resp '' --admin '' --threads 1 --store "redis+cluster://${seeds%,}" --redis-timeout 1s \
        --redis-batch-window "$window" --log-level error >/dev/null &
    pid=$!
    pids+=("$pid")
    wait_port "$g"
    if [ $# -gt 0 ]; then # weir is the prefix's child
        prefix=$pid
        pid=$(pgrep -P "$prefix" | head -1)
        pids+=("$pid")
    fi
    eval "gport_$name=$g hport_$name=$h cluster_$name=$cluster wpid_$name=$pid ppid_$name=$prefix"
    "$WEIR" bench grpc --target "127.0.0.1:$g" --duration 1 --warmup 0 --connections 1 \
        --rate 1000 "${load[@]}" --json >/dev/null 2>&1
}

# metrics NAME: "split failed redirections calls batches" from that weir's
# /metrics
metrics() {
    python3 - "$(eval echo "\$hport_$1")" <<'EOF'
import re, sys, urllib.request
text = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1]).read().decode()
tot = {}
for line in text.splitlines():
    m = re.match(r"^([a-z_]+)(\{[^}]*\})? (\S+)$", line)
    if m:
        tot[m.group(1)] = tot.get(m.group(1), 0) + float(m.group(3))
failed = sum(tot.get(n, 0) for n in (
    "weir_redis_errors_total", "weir_redis_timeouts_total", "weir_redis_rejected_total",
    "weir_failure_mode_total", "weir_redis_cluster_refund_errors_total"))
print("%d %d %d %d %d" % (tot.get("weir_redis_cluster_split_total", 0), failed,
      tot.get("weir_redis_cluster_moved_total", 0) + tot.get("weir_redis_cluster_asked_total", 0),
      tot.get("weir_redis_calls_total", 0), tot.get("weir_redis_batches_total", 0)))
EOF
}

# run NAME [RATE [BENCH ARGS...]]: one run of weir bench grpc against weir
# NAME (4 connections x 32 streams of the main load unless BENCH ARGS say
# otherwise); prints, per decision (request) and per script call:
#   1 decisions/s  2 p50 ms  3 p99 ms  4 Redis CPU us/decision
#   5 script time us/decision  6 calls/decision  7 Redis CPU us/call
#   8 ops/call  9 batches/decision (weir's parts of requests, one per
#   master a request has keys on)  10 split
#   11 failed  12 redirections  13 weir's CPU us/decision
run() {
    local name=$1 rate=${2:-} c pace=() args=()
    shift 2 || shift $#
    c=$(eval echo "\$cluster_$name")
    [ -n "$rate" ] && pace=(--rate "$rate")
    if [ $# -gt 0 ]; then args=("$@"); else args=(--connections 4 --streams 32 "${load[@]}"); fi
    local c0 s0 m0 out c1 s1 m1 w0 w1 wpid
    wpid=$(eval echo "\$wpid_$name")
    w0=$(pid_cpu_us "$wpid")
    c0=$(cpu_us "$c")
    s0=$(calls "$c")
    m0=$(metrics "$name")
    out=$("$WEIR" bench grpc --target "127.0.0.1:$(eval echo "\$gport_$name")" \
        --duration "$DURATION" --warmup 0 "${args[@]}" "${pace[@]}" --json 2>/dev/null)
    c1=$(cpu_us "$c")
    w1=$(pid_cpu_us "$wpid")
    s1=$(calls "$c")
    m1=$(metrics "$name")
    python3 - "$out" "$c0 $c1" "$s0 $s1" "$m0" "$m1" "$w0 $w1" <<'EOF'
import json, sys
r = json.loads(sys.argv[1])
c0, c1 = [float(x) for x in sys.argv[2].split()]
u0, n0, u1, n1 = [float(x) for x in sys.argv[3].split()]
m0, m1 = [[float(x) for x in a.split()] for a in sys.argv[4:6]]
split, failed, redir, wcalls, batches = [b - a for a, b in zip(m0, m1)]
req = max(r["requests"], 1)
calls = max(n1 - n0, 1)
w0, w1 = [float(x) for x in sys.argv[6].split()]
print("%.0f %.3f %.3f %.2f %.2f %.3f %.1f %.1f %.1f %.3f %d %d %.2f" % (
    r["requests_per_s"], r["latency_ns"]["p50"] / 1e6, r["latency_ns"]["p99"] / 1e6,
    (c1 - c0) / req, (u1 - u0) / req, (n1 - n0) / req, (c1 - c0) / calls,
    r["decisions"] / calls, batches / req, split / req, failed + r["errors"], redir, (w1 - w0) / req))
EOF
}

row='%-24s %11s %7s %7s %9s %9s %8s %9s %6s %9s %6s %6s %9s\n'
header() {
    printf "$row" "" "decisions/s" "p50 ms" "p99 ms" "CPU us/d" "script/d" "calls/d" \
        "CPU us/c" "ops/c" "batches/d" "split" "failed" "weir us/d"
}
# shellcheck disable=SC2046
line() { printf "$row" "$1" $(cut -d' ' -f1-11,13 <<<"$2"); }
# the round-trip runs: what matters there (CPU at 200/s is mostly idle cost)
rrow='%-24s %11s %7s %7s %9s %9s %6s %6s\n'
rheader() { printf "$rrow" "" "requests/s" "p50 ms" "p99 ms" "calls/req" "batches/r" "split" "failed"; }
# shellcheck disable=SC2046
rline() { printf "$rrow" "$1" $(cut -d' ' -f1-3,6,9-11 <<<"$2"); }

start_weir w1 1m 0ms
start_weir w3 3m 0ms
start_weir b1 1m 1ms
start_weir b3 3m 1ms

echo "# bench/cluster.sh  $(date -u +%Y-%m-%dT%H:%MZ)  $(nproc) cores  $(uname -r)  $(redis-server --version | awk '{print $3}')  load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# $DESCRIPTORS descriptors a decision, $KEYS keys each; ${DURATION}s runs; $ROUNDS rounds ($PACED_ROUNDS paced); one weir thread; --redis-timeout 1s"
# Idle: what the clusters cost with no load (cron, the cluster bus), from
# INFO cpu (finer than /proc's clock ticks)
info_cpu() {
    for p in $(eval echo "\$ports_$1"); do redis-cli -p "$p" info cpu; done | tr -d '\r' |
        awk -F: '/^used_cpu_(user|sys):/ {t += $2} END {printf "%.6f\n", t}'
}
i1=$(info_cpu 1m) i3=$(info_cpu 3m)
sleep 2
awk -v a="$i1" -v b="$(info_cpu 1m)" -v c="$i3" -v d="$(info_cpu 3m)" \
    'BEGIN {printf "# idle Redis CPU: 1 master %.1f ms/s, 3 masters %.1f ms/s\n", (b - a) * 500, (d - c) * 500}'

# Every run, one line each: "SECTION WEIR ROUND", run()'s 13 figures, and
# "ok" or "behind" (below)
runs="$tmp/runs"
: >"$runs"
label() {
    case $1 in
    w1) echo "1 master" ;; w3) echo "3 masters" ;;
    b1) echo "1 master, window 1ms" ;; b3) echo "3 masters, window 1ms" ;; esac
}
# A paced run whose median latency passed 5 ms fell behind its pace (a
# neighbour took the cores a while): its decisions queued, and queued
# decisions share calls, so it measures another regime. It is shown with a
# "*" and left out of the medians, unless every round of it fell behind.
# rounds SECTION RATE N WEIR...: N rounds of a run against each WEIR, the
# order reversed every other round
rounds() {
    local section=$1 rate=$2 n=$3 r w order o ok
    shift 3
    for r in $(seq "$n"); do
        order="$*"
        [ $((r % 2)) = 0 ] && order=$(tr ' ' '\n' <<<"$*" | tac | tr '\n' ' ')
        for w in $order; do
            o=$(run "$w" "$rate")
            ok=ok
            [ -n "$rate" ] && awk -v p="$(cut -d' ' -f2 <<<"$o")" 'BEGIN {exit !(p > 5)}' && ok=behind
            echo "$section $w $r $o $ok" >>"$runs"
            line "round $r  $(label "$w")$([ $ok = ok ] || echo ' *')" "$o"
        done
    done
}
# median SECTION WEIR: the medians of its runs' figures (of those that kept
# their pace, if any did)
median() {
    awk -v s="$1" -v w="$2" '
        NR == FNR {if ($1 == s && $2 == w && $17 == "ok") good = 1; next}
        $1 == s && $2 == w && (!good || $17 == "ok") {n++; for (k = 4; k <= 16; k++) v[k, n] = $k}
        END {for (k = 4; k <= 16; k++) {
                 for (i = 1; i <= n; i++) a[i] = v[k, i]
                 for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
                     if (a[j] + 0 < a[i] + 0) {t = a[i]; a[i] = a[j]; a[j] = t}
                 printf "%s%s", a[int((n + 1) / 2)], k < 16 ? " " : "\n"}}' "$runs" "$runs"
}

echo
echo "## unpaced (4 connections x 32 streams)"
header
rounds unpaced '' "$ROUNDS" w1 w3

# at half the slower cluster's unpaced throughput, batch window 0 and 1 ms
half=$(awk -v a="$(median unpaced w1 | cut -d' ' -f1)" -v b="$(median unpaced w3 | cut -d' ' -f1)" \
    'BEGIN {printf "%d", (a < b ? a : b) / 2}')
echo
echo "## paced at $half decisions/s (half the slower unpaced median), --redis-batch-window 0 and 1ms"
header
rounds paced "$half" "$PACED_ROUNDS" w1 w3 b1 b3

# ------------------------------------------------------------ round trips
#
# Values of d1 and d2 whose keys are on one master, or on two: a request
# of d1=probe1 and d2=probe2 taking a whole bucket (10^9 hits) leaves their
# keys (weir:2:bench:<identity>:6:probeN) in the cluster for a second; the
# identities read, the keys of other values are computed and hashed (CRC16
# mod 16384, the slot, checked against CLUSTER KEYSLOT) and looked up in
# CLUSTER NODES.
for _ in 1 2 3; do
    "$WEIR" bench grpc --target "127.0.0.1:$gport_w3" --duration 0.1 --warmup 0 --connections 1 \
        --rate 10 --descriptor d1=probe1 --descriptor d2=probe2 --hits 1000000000 --json \
        >/dev/null 2>&1
    probe_keys=$(for p in $ports_3m; do redis-cli -p "$p" --scan --pattern 'weir:2:bench:*:6:probe?'; done)
    [ "$(wc -w <<<"$probe_keys")" = 2 ] && break
done
python3 - "$tmp" "$(redis-cli -p "${ports_3m%% *}" cluster nodes)" \
    "$(for k in $probe_keys; do echo "$k $(redis-cli -p "${ports_3m%% *}" cluster keyslot "$k")"; done)" \
    <<'EOF'
import sys
tmp, nodes, probes = sys.argv[1], sys.argv[2].splitlines(), sys.argv[3].splitlines()

def crc16(b):
    c = 0
    for x in b:
        c ^= x << 8
        for _ in range(8):
            c = ((c << 1) ^ 0x1021) if c & 0x8000 else c << 1
            c &= 0xffff
    return c

def slot(key):
    return crc16(key.encode()) % 16384

ident = {}
for p in probes:
    key, ks = p.split()
    assert slot(key) == int(ks), "CRC16 disagrees with CLUSTER KEYSLOT on " + key
    ident[key[-1]] = key.rsplit(":", 2)[0]   # weir:2:bench:<identity>
assert sorted(ident) == ["1", "2"], probes
# CLUSTER NODES: "id host:port@bus flags master ... link-state slot-range..."
owner = [None] * 16384
for n in nodes:
    f = n.split()
    if "master" not in f[2].split(","):
        continue
    for rng in f[8:]:
        if rng.startswith("["):
            continue  # a slot migrating
        a, _, b = rng.partition("-")
        for s in range(int(a), int(b or a) + 1):
            owner[s] = f[1].split("@")[0]
assert None not in owner
masters = sorted(set(owner))
by_master = {d: {m: [] for m in masters} for d in "12"}
for n in range(20000):
    v = "v%d" % n
    for d in "12":
        by_master[d][owner[slot("%s:%d:%s" % (ident[d], len(v), v))]].append(v)
same, two = [], []
for k in range(600):
    a = masters[k % 3]
    b = masters[(k + 1 + k // 3 % 2) % 3]
    same.append("bench d1=%s;d2=%s" % (by_master["1"][a][k], by_master["2"][a][k]))
    two.append("bench d1=%s;d2=%s" % (by_master["1"][a][k], by_master["2"][b][k]))
open(tmp + "/same.txt", "w").write("\n".join(same) + "\n")
open(tmp + "/two.txt", "w").write("\n".join(two) + "\n")
EOF

echo
echo "## one request of 2 descriptors, paced at $PACE/s (1 connection), on the 3-master cluster"
rheader
for r in $(seq "$ROUNDS"); do
    order="same two"
    [ $((r % 2)) = 0 ] && order="two same"
    for f in $order; do
        o=$(run w3 "$PACE" --connections 1 --streams 32 --file "$tmp/$f.txt")
        echo "rtt $f $r $o ok" >>"$runs"
        rline "round $r  keys on $([ "$f" = same ] && echo "one master" || echo "two masters")" "$o"
    done
done

# Round trips, as weir makes them: a weir on the 3-master cluster run under
# strace (its reads and writes, in order), sent the requests over two
# masters one at a time (100/s). Its script calls go out in runs of writes
# (FCALL) that no answer from Redis (a read on a Redis connection)
# interrupts: calls sent together wait one round trip, calls sent one after
# the other's answer wait one each.
trace=''
if command -v strace >/dev/null; then
    start_weir s3 3m 0ms strace -f -qq -e trace=read,write -e signal=none -s 32 -o "$tmp/weir.strace"
    from=$(stat -c %s "$tmp/weir.strace")
    "$WEIR" bench grpc --target "127.0.0.1:$gport_s3" --duration 2 --warmup 0 --connections 1 \
        --rate 100 --file "$tmp/two.txt" --json >"$tmp/traced.json" 2>/dev/null
    kill "$wpid_s3"
    wait "$ppid_s3" 2>/dev/null || true
    trace=$(python3 - "$tmp/weir.strace" "$tmp/traced.json" "$from" <<'EOF'
import json, re, sys
# runs of FCALL writes that no read of an answer interrupts: calls sent
# together; a call sent only after the previous one's answer is a run of 1
redis_fds, runs, run = set(), [], 0
f = open(sys.argv[1], errors="replace")
f.seek(int(sys.argv[3]))
for line in f:
    m = re.match(r'^\d+\s+(read|write)\((\d+), "(.*?)"', line)
    if not m:
        continue
    op, fd, data = m.group(1), int(m.group(2)), m.group(3)
    if op == "write" and "FCALL" in data:
        redis_fds.add(fd)
        run += 1
    elif op == "read" and fd in redis_fds and "EAGAIN" not in line:
        if run:
            runs.append(run)
        run = 0
if run:
    runs.append(run)
requests = json.load(open(sys.argv[2]))["requests"]
print("%d %d %d" % (requests, sum(n for n in runs if n > 1), sum(runs)))
EOF
)
fi

echo
echo "# summary: medians of the rounds ($ROUNDS, paced $PACED_ROUNDS; * left out)"
header
line "unpaced, 1 master" "$(median unpaced w1)"
line "unpaced, 3 masters" "$(median unpaced w3)"
line "paced, 1 master" "$(median paced w1)"
line "paced, 3 masters" "$(median paced w3)"
line "paced, 1 master, 1ms" "$(median paced b1)"
line "paced, 3 masters, 1ms" "$(median paced b3)"
rheader
rline "2 keys on one master" "$(median rtt same)"
rline "2 keys on two masters" "$(median rtt two)"
python3 - "$runs" "$DESCRIPTORS" "$trace" <<'EOF'
import sys
runs = [l.split() for l in open(sys.argv[1]) if l.strip()]
trace = [int(x) for x in sys.argv[3].split()]
# columns after "section weir round": see run()
DPS, P50, P99, CPU, SCRIPT, CALLS, CPUC, OPSC, BAT, SPLIT, FAILED, REDIR, WEIR = range(3, 16)
def col(section, weir, c):
    rows = [r for r in runs if r[0] == section and r[1] == weir]
    ok = [r for r in rows if r[-1] == "ok"]
    return [float(r[c]) for r in (ok or rows)]
def med(v):
    v = sorted(v)
    return v[(len(v) - 1) // 2]
ratio = lambda s, a, b, c=CPU: med(col(s, b, c)) / med(col(s, a, c))
rounds = ", ".join("%.2f" % (x / y) for x, y in zip(col("unpaced", "w3", CPU), col("unpaced", "w1", CPU)))
print("\nRedis CPU per decision, 3 masters / 1 master (target <= 1.2): unpaced %.2f (rounds: %s); "
      "paced %.2f; paced, 1ms window %.2f" % (ratio("unpaced", "w1", "w3"), rounds,
      ratio("paced", "w1", "w3"), ratio("paced", "b1", "b3")))
print("script calls per decision, 3 masters / 1 master: unpaced %.2f, paced %.2f, paced, 1ms window %.2f"
      % (ratio("unpaced", "w1", "w3", CALLS), ratio("paced", "w1", "w3", CALLS),
         ratio("paced", "b1", "b3", CALLS)))
# Redis CPU per decision against script calls per decision, over the load
# runs (the same decisions, in more or fewer calls): least squares, cpu =
# a + b calls; a / DESCRIPTORS is what an op costs, b what a call costs
# beyond its ops. Fitted over every load run, then each cluster's alone.
def fit(sel):
    pts = [(float(r[CALLS]), float(r[CPU])) for r in runs if r[0] in ("unpaced", "paced") and sel(r)]
    n = len(pts)
    mx, my = sum(p[0] for p in pts) / n, sum(p[1] for p in pts) / n
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    b = sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx if sxx else 0
    a = my - b * mx
    ss = sum((p[1] - my) ** 2 for p in pts)
    r2 = 1 - sum((p[1] - a - b * p[0]) ** 2 for p in pts) / ss if ss else 0
    return a, b, r2, n
d = int(sys.argv[2])
a, b, r2, n = fit(lambda r: True)
print("Redis CPU per decision = %.1f us + %.1f us x calls per decision (least squares over the %d load "
      "runs, R^2 %.2f): %.1f us an op, %.1f us a call beyond its ops" % (a, b, n, r2, a / d, b))
for name, ws in (("1 master", ("w1", "b1")), ("3 masters", ("w3", "b3"))):
    a1, b1, r21, n1 = fit(lambda r: r[1] in ws)
    print("  %-9s alone: %.1f us an op, %.1f us a call (R^2 %.2f)" % (name, a1 / d, b1, r21))
for s, y0, y1 in (("unpaced", "w1", "w3"), ("paced", "w1", "w3"), ("paced, 1ms", "b1", "b3")):
    sec = s.split(",")[0]
    dc = med(col(sec, y1, CALLS)) - med(col(sec, y0, CALLS))
    du = med(col(sec, y1, CPU)) - med(col(sec, y0, CPU))
    print("  %-11s 3 masters %+.1f us a decision; %+.3f calls a decision x %.1f us = %+.1f us"
          % (s + ":", du, dc, b, dc * b))
print("weir's own CPU per decision, 3 masters / 1 master: unpaced %.2f (%.1f -> %.1f us), paced %.2f"
      % (ratio("unpaced", "w1", "w3", WEIR), med(col("unpaced", "w1", WEIR)),
         med(col("unpaced", "w3", WEIR)), ratio("paced", "w1", "w3", WEIR)))
print("split over several masters, 3-master cluster: unpaced %.3f, paced %.3f of the decisions"
      % (med(col("unpaced", "w3", SPLIT)), med(col("paced", "w3", SPLIT))))
print("a request of 2 descriptors on two masters: %.2f script calls (one master: %.2f), p50 %.3f ms "
      "(one master: %.3f), p99 %.3f ms (%.3f); split %.2f (%.2f)"
      % (med(col("rtt", "two", CALLS)), med(col("rtt", "same", CALLS)), med(col("rtt", "two", P50)),
         med(col("rtt", "same", P50)), med(col("rtt", "two", P99)), med(col("rtt", "same", P99)),
         med(col("rtt", "two", SPLIT)), med(col("rtt", "same", SPLIT))))
if trace:
    print("  weir under strace, %d such requests: %d of its %d script calls were written with another, "
          "no answer read in between (were each sent after the other's answer: none)"
          % (trace[0], trace[1], trace[2]))
else:
    print("  (strace is not installed: the order of weir's writes and reads was not traced)")
print("failed decisions over every run: %d; MOVED/ASK followed: %d"
      % (sum(int(r[FAILED]) for r in runs), sum(int(r[REDIR]) for r in runs)))
EOF
