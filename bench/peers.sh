#!/usr/bin/env bash
# bench/peers.sh - weir beside the rate limiting libraries users pick
# without it, on one workload, in the same run: each peer and weir run
# one after the other, ROUNDS times (who goes first alternates), and the
# table gives the medians and weir's ratio: the median of the rounds'
# ratios, each of two runs a minute apart, which drifts less with the
# machine's load than a ratio of medians.
#
#   make bench-peers                    # installs the peers, builds build/
#   ROUNDS=5 KEYS=1000000 bench/peers.sh
#
# Pairs (drivers in bench/peers/; the workload is described in weir.c):
#   x/time/rate   Go's golang.org/x/time/rate, a rate.Limiter per key in
#                 64 locked maps, Allow(), against weir_memstore_take() on
#                 the token bucket; 1 and 2 threads (THREADS)
#   flexible      rate-limiter-flexible's RateLimiterMemory (Node.js, one
#                 thread), await consume(), against weir_memstore_take() on
#                 the fixed window (the algorithm RateLimiterMemory has)
#   flexible-redis  RateLimiterRedis (ioredis, CONCURRENCY decisions in
#                 flight) against weir serve on the same Redis (one server
#                 thread, the fixed window, weir bench grpc: 4 connections
#                 x 32 streams, one descriptor), DURATION seconds each;
#                 the Redis CPU each decision costs, from /proc (REDIS=0
#                 skips it)
# Every key gets 60,000 a minute, far above what it is asked: the
# admitting path is measured. Everything shares this machine's cores.
set -euo pipefail

cd "$(dirname "$0")/.."
WEIR=${WEIR_BIN:-build/weir}
PEER=${PEER_BIN:-build/weir-bench-peer}
ROUNDS=${ROUNDS:-3}
KEYS=${KEYS:-100000}
OPS=${OPS:-1000000}       # decisions per pass and thread (in process)
NODE_OPS=${NODE_OPS:-$((OPS / 4))}
REPS=${REPS:-3}           # passes per process; each process prints their median
THREADS=${THREADS:-"1 2"}
REDIS=${REDIS:-1}
DURATION=${DURATION:-5}
CONCURRENCY=${CONCURRENCY:-128}
peers=bench/peers

. bench/ports.sh
need go node python3
[ "$REDIS" = 0 ] || need redis-server redis-cli
need_weir "make build"
[ -x "$PEER" ] || { echo "peers.sh: build $PEER first (make build)" >&2; exit 1; }
[ -d "$peers/node_modules/rate-limiter-flexible" ] ||
    { echo "peers.sh: run 'make bench-peers' (npm ci in $peers) first" >&2; exit 1; }
bench_tmp

# Go from Debian's packages: golang-golang-x-time-dev under /usr/share/gocode,
# no modules, nothing downloaded.
GO111MODULE=off GOPATH=/usr/share/gocode GOCACHE=$tmp/go-cache GOFLAGS='' \
    go build -o "$tmp/xtime_rate" "$peers/xtime_rate.go"

median() { sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
# col FILE N: the median of column N
col() { awk -v c="$2" '{print $c}' "$1" | median; }
# ratios FILE_A FILE_B N: the median of column N's round-by-round ratios, A / B
ratios() {
    paste -d' ' <(awk -v c="$3" '{print $c}' "$1") <(awk -v c="$3" '{print $c}' "$2") |
        awk '{print ($2 > 0 ? $1 / $2 : 0)}' | median | awk '{printf "%.2f", $1}'
}

echo "# bench/peers.sh  $(date -u +%Y-%m-%dT%H:%MZ)  $(nproc) cores" \
    "($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'))  $(uname -r)"
echo "# $KEYS keys, 60,000 a minute each, uniform random; $ROUNDS rounds, alternating;" \
    "in process: $OPS decisions per pass and thread (node: $NODE_OPS), median of $REPS passes"
echo "# $(go version | cut -d' ' -f3), x/time/rate $(dpkg-query -W -f='${Version}' golang-golang-x-time-dev 2>/dev/null);" \
    "node $(node --version), rate-limiter-flexible $(node -p "require('./$peers/node_modules/rate-limiter-flexible/package.json').version")"
row='%-44s %8s %13s %13s %9s %9s %7s\n'
printf "$row" "" threads "weir dec/s" "peer dec/s" "weir ns" "peer ns" "ratio"

# pair NAME THREADS WEIR_CMD... -- PEER_CMD...: ROUNDS alternating runs of
# the two commands, each printing "decisions/s ns admitted"
pair() {
    local name=$1 threads=$2
    shift 2
    local w=() p=()
    while [ "$1" != -- ]; do w+=("$1"); shift; done
    shift
    p=("$@")
    : >"$tmp/w"
    : >"$tmp/p"
    for r in $(seq "$ROUNDS"); do
        if [ $((r % 2)) = 1 ]; then
            "${w[@]}" >>"$tmp/w"
            "${p[@]}" >>"$tmp/p"
        else
            "${p[@]}" >>"$tmp/p"
            "${w[@]}" >>"$tmp/w"
        fi
    done
    if awk '$3 < 1 {bad = 1} END {exit !bad}' "$tmp/w" "$tmp/p"; then
        echo "peers.sh: $name: a decision was denied; the admitting path was to be measured" >&2
        exit 1
    fi
    local wr pr
    wr=$(col "$tmp/w" 1)
    pr=$(col "$tmp/p" 1)
    printf "$row" "$name" "$threads" "$wr" "$pr" "$(col "$tmp/w" 2)" "$(col "$tmp/p" 2)" \
        "$(ratios "$tmp/w" "$tmp/p" 1)x"
    echo "  runs: weir $(awk '{printf "%s ", $1}' "$tmp/w")| peer $(awk '{printf "%s ", $1}' "$tmp/p")"
}

for t in $THREADS; do
    pair "x/time/rate Allow() vs weir token_bucket" "$t" \
        "$PEER" "$KEYS" "$OPS" "$t" "$REPS" token_bucket -- \
        env GOMAXPROCS="$t" "$tmp/xtime_rate" "$KEYS" "$OPS" "$t" "$REPS"
done
pair "rate-limiter-flexible Memory vs weir fixed_window" 1 \
    "$PEER" "$KEYS" "$OPS" 1 "$REPS" fixed_window -- \
    node "$peers/flexible.js" memory "$KEYS" "$NODE_OPS" "$REPS"

[ "$REDIS" = 0 ] && exit 0

# ------------------------------------------------------------------ Redis
start_redis
cat >"$tmp/rules.yaml" <<'YAML'
domain: bench
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 60000, algorithm: fixed_window}
YAML
gport=$(free_port)
"$WEIR" serve --rules "$tmp/rules.yaml" --http '' --grpc "127.0.0.1:$gport" --resp '' --admin '' \
    --threads 1 --store "redis://127.0.0.1:$rport" --redis-timeout 1s --log-level error \
    >/dev/null &
pids+=($!)
wait_port "$gport"

# Each prints "decisions/s redis_cpu_us/decision admitted"
weir_redis() {
    local c0 c1 out
    c0=$(redis_cpu_us)
    out=$("$WEIR" bench grpc --target "127.0.0.1:$gport" --duration "$DURATION" --warmup 0 \
        --connections 4 --streams 32 --keys "$KEYS" --descriptor 'user=user:{n}' --json 2>/dev/null)
    c1=$(redis_cpu_us)
    python3 -c '
import json, sys
r = json.loads(sys.argv[1]); n = max(r["requests"], 1)
if r["errors"]:
    sys.exit("peers.sh: weir bench grpc saw %d errors" % r["errors"])
print("%.0f %.2f %.4f" % (r["requests_per_s"], (float(sys.argv[3]) - float(sys.argv[2])) / n,
      1 - r.get("over_limit", 0) / n))' "$out" "$c0" "$c1"
}
flexible_redis() {
    local c0 c1 out
    c0=$(redis_cpu_us)
    out=$(node "$peers/flexible.js" redis "$rport" "$KEYS" "$DURATION" "$CONCURRENCY")
    c1=$(redis_cpu_us)
    awk -v c0="$c0" -v c1="$c1" '{printf "%s %.2f %s\n", $1, (c1 - c0) / $3, $2}' <<<"$out"
}
: >"$tmp/w"
: >"$tmp/p"
for r in $(seq "$ROUNDS"); do
    if [ $((r % 2)) = 1 ]; then
        weir_redis >>"$tmp/w"
        flexible_redis >>"$tmp/p"
    else
        flexible_redis >>"$tmp/p"
        weir_redis >>"$tmp/w"
    fi
done
wr=$(col "$tmp/w" 1)
pr=$(col "$tmp/p" 1)
echo
printf '%-44s %13s %13s %15s %15s\n' "on one Redis $(redis-server --version | awk '{print $3}' | cut -d= -f2)" \
    "weir dec/s" "peer dec/s" "weir Redis us" "peer Redis us"
printf '%-44s %13s %13s %15s %15s\n' "RateLimiterRedis vs weir serve, fixed_window" "$wr" "$pr" \
    "$(col "$tmp/w" 2)" "$(col "$tmp/p" 2)"
echo "  runs: weir $(awk '{printf "%s/%s ", $1, $2}' "$tmp/w")| peer $(awk '{printf "%s/%s ", $1, $2}' "$tmp/p")"
echo "  throughput weir / peer: $(ratios "$tmp/w" "$tmp/p" 1)x;" \
    "Redis CPU per decision, weir / peer: $(ratios "$tmp/w" "$tmp/p" 2)"
