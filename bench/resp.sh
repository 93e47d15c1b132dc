#!/usr/bin/env bash
# bench/resp.sh - weir's CL.THROTTLE over the Redis protocol, side by side
# in one run with what users pick without weir: a real redis-server running
# a token bucket Lua script (bench/redis/token_bucket.lua) through EVALSHA,
# with the same limit. redis-benchmark drives both the same way: 50
# connections, pipelines of 1 and 16, one key or 100,000 random keys.
#
#   make bench-resp                     # builds build/, 3 rounds
#   ROUNDS=5 N1=200000 N16=2000000 bench/resp.sh
#
# weir serve runs one worker thread on the memory store, redis-server is
# single-threaded: each server gets core 1, redis-benchmark core 0
# (taskset), and the two servers run one after the other, alternating,
# round by round. Reported: the median decisions per second of the rounds
# and weir's ratio to Redis + Lua.
set -euo pipefail

cd "$(dirname "$0")/.."
WEIR=${WEIR_BIN:-build/weir}
ROUNDS=${ROUNDS:-3}
N1=${N1:-300000}   # requests per run, pipeline 1
N16=${N16:-3000000} # requests per run, pipeline 16
CLIENTS=${CLIENTS:-50}
KEYS=${KEYS:-100000}

. bench/ports.sh
need redis-server redis-cli redis-benchmark python3 taskset
need_weir "make build"
bench_tmp

start_redis taskset -c 1
sha=$(redis-cli -p "$rport" script load "$(cat bench/redis/token_bucket.lua)")

wport=$(free_port)
echo "domain: bench" >"$tmp/rules.yaml"
taskset -c 1 "$WEIR" serve --rules "$tmp/rules.yaml" --http '' --grpc '' \
    --resp "127.0.0.1:$wport" --threads 1 --log-level warn >/dev/null &
pids+=($!)
wait_port "$wport"

# The same limit both ways, generous enough that every request is admitted
# (the admitting path is the one both sides take most): a burst of 10^6,
# 10^6 a second. The Lua script is given a fixed `now`: redis-benchmark
# cannot send a clock, and the script's cost does not depend on it.
weir_cmd() { echo "CL.THROTTLE $1 999999 1000000 1"; }
lua_cmd() { echo "EVALSHA $sha 1 $1 1000000 1000000 1 1"; }

# rps PORT PIPELINE N RANDOM COMMAND...: requests per second of one run
rps() {
    local port=$1 pipe=$2 n=$3 rnd=$4
    shift 4
    local r=()
    [ "$rnd" = 1 ] && r=(-r "$KEYS")
    taskset -c 0 redis-benchmark -p "$port" -c "$CLIENTS" -n "$n" -P "$pipe" "${r[@]}" -q "$@" 2>/dev/null |
        tr "\r" "\n" | awk '/requests per second/ {for (i = 1; i <= NF; i++) if ($(i+1) == "requests") print $i}' |
        tail -1
}

median() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

echo "# bench/resp.sh: redis-benchmark -c $CLIENTS, $ROUNDS rounds, $(date -u +%Y-%m-%dT%H:%MZ)," \
    "$(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'))"
printf '%-10s %-8s %14s %14s %7s\n' keys pipeline "weir CL.THROTTLE" "Redis+Lua" ratio
for keys in 1 "$KEYS"; do
    for pipe in 1 16; do
        n=$N1
        [ "$pipe" = 16 ] && n=$N16
        rnd=0
        key=k
        if [ "$keys" != 1 ]; then
            rnd=1
            key=k:__rand_int__
        fi
        : >"$tmp/w"
        : >"$tmp/l"
        for _ in $(seq "$ROUNDS"); do
            # shellcheck disable=SC2046
            rps "$wport" "$pipe" "$n" "$rnd" $(weir_cmd "$key") >>"$tmp/w"
            # shellcheck disable=SC2046
            rps "$rport" "$pipe" "$n" "$rnd" $(lua_cmd "$key") >>"$tmp/l"
        done
        w=$(median <"$tmp/w")
        l=$(median <"$tmp/l")
        printf '%-10s %-8s %14.0f %14.0f %6.2fx\n' "$keys" "$pipe" "$w" "$l" \
            "$(awk -v a="$w" -v b="$l" 'BEGIN {print (b > 0 ? a / b : 0)}')"
    done
done
# the replies were decisions, not errors: one call each way
redis-cli -p "$wport" $(weir_cmd check) | head -1 | grep -qx 0 ||
    { echo "bench/resp.sh: weir did not answer CL.THROTTLE as expected" >&2; exit 1; }
redis-cli -p "$rport" $(lua_cmd check) | head -1 | grep -qx 1 ||
    { echo "bench/resp.sh: the Lua script did not admit" >&2; exit 1; }
