#!/usr/bin/env bash
# bench/hybrid.sh - `sync: local` (the hybrid mode) on one local Redis: what
# it gains in throughput and what it costs in exactness, in one run.
#
#   make bench-hybrid                       # builds build/, ~4 minutes
#   ROUNDS=5 DURATION=8 bench/hybrid.sh
#   SVG=docs/hybrid_overshoot.svg bench/hybrid.sh   # the plot of docs/BENCHMARKS.md
#   PARTS=2 INTERVALS=1s ROUNDS=6 bench/hybrid.sh    # the overshoot alone, at 1 s
#
# Knobs: ROUNDS (3), DURATION (5 s a throughput run), SECONDS_OVER (5 s an
# overshoot run), LIMIT (1000/s), INTERVALS ("10ms 100ms 1s"), PARTS
# ("1 2"), SVG (build/hybrid_overshoot.svg), WEIR_BIN (build/weir).
#
# 1. Throughput through the same front end: three `weir serve` (gRPC,
#    --threads 1, --redis-timeout 1s), one on the memory store, one on
#    Redis with the rule `sync: local` (sync_interval 100ms), one on the
#    same Redis with the rule `sync: global`, each loaded in turn by
#    `weir bench grpc` unpaced (4 connections x 32 streams, one
#    descriptor a request), ROUNDS rounds of DURATION s, the order of the
#    stores rotating from round to round. Workloads: one key and 300 keys
#    of a token bucket of 10^9/s (every decision admitted), and one key of
#    a token bucket of 1,000/s asked unpaced (saturated: nearly every
#    decision denied). Reported per store: decisions/s; the share of
#    decisions made without a Redis call from a reservation
#    (weir_redis_sync_local_total over the rule's weir_decisions_total)
#    and the share decided at the instance's share as while Redis is away
#    (weir_redis_sync_outage_total); Redis calls per decision; the CPU
#    time of weir and of redis-server per decision (/proc/PID/stat); then
#    local / memory, the median of the rounds' own ratios (target >= 0.5).
# 2. Overshoot: three `weir serve` (--instances 3) on one Redis, a token
#    bucket of LIMIT/s (burst LIMIT) with `sync: local` at each of
#    INTERVALS; for each, a fresh key asked at LIMIT requests/s through
#    each instance at once (3x the limit in all, one paced `weir bench
#    grpc` per instance) for SECONDS_OVER s, ROUNDS rounds, the intervals
#    rotating, each run on three fresh instances. Admitted: the instances'
#    weir_decisions_total{result="allowed"} for that rule, before and
#    after. Allowed: burst + LIMIT x the clients' measured time (the
#    strictest bound). The overshoot (admitted - allowed) is set against
#    interval x instances x LIMIT and the target (at most half of it); the
#    under-admission (allowed - admitted) is what reservations left
#    unused. Every instance's /metrics is read every 100 ms meanwhile: the
#    last round's series, admitted per 100 ms, is drawn by
#    bench/hybrid/svg.py into SVG (default build/hybrid_overshoot.svg).
# Client, the weir instances and Redis share this machine's cores.
set -euo pipefail

cd "$(dirname "$0")/.."
WEIR=${WEIR_BIN:-build/weir}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5}
SECONDS_OVER=${SECONDS_OVER:-5}
LIMIT=${LIMIT:-1000}
INTERVALS=${INTERVALS:-"10ms 100ms 1s"}
PARTS=${PARTS:-"1 2"}
SVG=${SVG:-build/hybrid_overshoot.svg}

. bench/ports.sh
need redis-server redis-cli python3
need_weir "make build"
bench_tmp

start_redis

# serve NAME RULES STORE [FLAGS...]: weir serve on fresh ports; sets
# port_NAME (gRPC), hport_NAME (HTTP) and pid_NAME
serve() {
    local name=$1 rules=$2 store=$3 g h
    shift 3
    g=$(free_port)
    h=$(free_port)
    "$WEIR" serve --rules "$rules" --http "127.0.0.1:$h" --grpc "127.0.0.1:$g" --resp '' --admin '' \
        --threads 1 --store "$store" --redis-timeout 1s --log-level error "$@" >/dev/null &
    pids+=("$!")
    printf -v "pid_$name" %s "$!"
    printf -v "port_$name" %s "$g"
    printf -v "hport_$name" %s "$h"
    wait_port "$g"
    wait_port "$h"
}
stop() {
    kill "$1"
    wait "$1" 2>/dev/null || true
}

# rules SYNC: the throughput rules with SYNC added to every limit
rules() {
    echo "domain: bench"
    echo "descriptors:"
    echo "  - key: hot"
    echo "    rate_limit: {unit: second, requests_per_unit: 1000000000, algorithm: token_bucket$1}"
    echo "  - key: sat"
    echo "    rate_limit: {unit: second, requests_per_unit: 1000, algorithm: token_bucket$1}"
}
rules "" >"$tmp/memory.yaml"
rules ", sync: local, sync_interval: 100ms" >"$tmp/local.yaml"
rules ", sync: global" >"$tmp/global.yaml"
{
    echo "domain: bench"
    echo "descriptors:"
    for iv in $INTERVALS; do
        echo "  - key: i$iv"
        echo "    rate_limit: {unit: second, requests_per_unit: $LIMIT, burst: $LIMIT, algorithm: token_bucket, sync: local, sync_interval: $iv}"
    done
} >"$tmp/over.yaml"

load=$(cut -d' ' -f1-3 /proc/loadavg)
echo "# bench/hybrid.sh  $(date -u +%Y-%m-%dT%H:%MZ)  $(nproc) cores  $(uname -r)  Redis $(redis-server --version | awk '{print $3}' | cut -d= -f2)  load $load"
echo "# client, weir and Redis on the same $(nproc) cores; weir serve --threads 1 --redis-timeout 1s"

throughput() {
    echo
    echo "## 1. throughput: one weir serve per store, weir bench grpc unpaced, 4 connections x 32 streams"
    serve memory "$tmp/memory.yaml" memory
    serve local "$tmp/local.yaml" "redis://127.0.0.1:$rport"
    serve global "$tmp/global.yaml" "redis://127.0.0.1:$rport"
    python3 bench/hybrid/drive.py throughput --weir "$WEIR" --redis-pid "$rpid" \
        --duration "$DURATION" --rounds "$ROUNDS" \
        --store "memory:$port_memory:$hport_memory:$pid_memory" \
        --store "local:$port_local:$hport_local:$pid_local" \
        --store "global:$port_global:$hport_global:$pid_global" \
        --workload "1-key:hot:--descriptor hot=k1" \
        --workload "300-keys:hot:--descriptor hot=k{n} --keys 300" \
        --workload "saturated:sat:--descriptor sat=s1"
    stop "$pid_memory"
    stop "$pid_local"
    stop "$pid_global"
}

overshoot() {
    echo
    echo "## 2. overshoot: 3 instances on one Redis, token bucket $LIMIT/s burst $LIMIT, sync: local, $LIMIT requests/s through each"
    # each run on three fresh instances: what one interval's run leaves in
    # their tables (reservations, keys still followed) stays out of the next
    read -ra ivs <<<"$INTERVALS"
    head=1
    for r in $(seq "$ROUNDS"); do
        for k in $(seq 0 $((${#ivs[@]} - 1))); do
            iv=${ivs[$(((k + r - 1) % ${#ivs[@]}))]}
            serve a "$tmp/over.yaml" "redis://127.0.0.1:$rport" --instances 3
            serve b "$tmp/over.yaml" "redis://127.0.0.1:$rport" --instances 3
            serve c "$tmp/over.yaml" "redis://127.0.0.1:$rport" --instances 3
            python3 bench/hybrid/drive.py overshoot-run ${head:+--head} --weir "$WEIR" \
                --redis-pid "$rpid" --seconds "$SECONDS_OVER" --round "$r" --limit "$LIMIT" \
                --interval "$iv" \
                --instance "$port_a:$hport_a:$pid_a" --instance "$port_b:$hport_b:$pid_b" \
                --instance "$port_c:$hport_c:$pid_c" --out "$tmp/runs.jsonl"
            head=
            stop "$pid_a"
            stop "$pid_b"
            stop "$pid_c"
        done
    done
    python3 bench/hybrid/drive.py overshoot-summary --runs "$tmp/runs.jsonl" \
        --seconds "$SECONDS_OVER" --limit "$LIMIT" --instances 3 --series "$tmp/series.json"
    mkdir -p "$(dirname "$SVG")"
    python3 bench/hybrid/svg.py "$tmp/series.json" "$SVG"
    echo
    echo "plot: $SVG"
}

# (not `cond && f`: set -e does not apply inside a function called so)
for part in $PARTS; do
    case $part in
    1) throughput ;;
    2) overshoot ;;
    *) echo "bench/hybrid.sh: PARTS holds 1 and/or 2, not $part" >&2 && exit 1 ;;
    esac
done
