#!/usr/bin/env bash
# bench/redis.sh - weir on one local Redis, side by side in one run with the
# approach users build without weir: one token-bucket EVALSHA per
# descriptor (bench/redis/token_bucket.lua), driven straight at the same
# Redis by redis-benchmark.
#
#   make bench-redis                    # builds build/, 3 rounds of 5 s
#   ROUNDS=5 DURATION=8 bench/redis.sh
#
# Reported per decision (one request of DESCRIPTORS descriptors, 3 by
# default, or 1 with DESCRIPTORS=1):
#   - Redis CPU: the redis-server process's user+system time
#     (/proc/PID/stat) over the run, divided by the decisions made;
#   - Redis command time: INFO commandstats' usec for EVALSHA/EVAL, the
#     same way;
#   - unanswered: weir's batches Redis did not answer in time, decided by
#     their failure mode instead (they make a run invalid). The unpaced
#     runs use --redis-timeout 1s: they measure what Redis can do, and a
#     closed loop of clients pushes any timeout until it fails open; the
#     paced run uses the default 5 ms;
#   - throughput and p50/p99 (weir: weir bench grpc, ShouldRateLimit, one
#     server thread; the baseline: redis-benchmark, 64 clients, each
#     decision DESCRIPTORS pipelined EVALSHA calls), then weir paced at 80%
#     of its own throughput for the p99 there.
# Client, weir and Redis share this machine's cores.
set -euo pipefail

cd "$(dirname "$0")/.."
WEIR=${WEIR_BIN:-build/weir}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5}
DESCRIPTORS=${DESCRIPTORS:-3}
KEYS=${KEYS:-100000}

. bench/ports.sh
need redis-server redis-cli redis-benchmark python3
need_weir "make build"
bench_tmp

start_redis
rcli() { redis-cli -p "$rport" "$@"; }
# usec and calls of the script commands, from INFO commandstats
script_usec() {
    rcli info commandstats | tr -d '\r' |
        awk -F'[:=,]' '/^cmdstat_(evalsha|eval|fcall):/ {u += $5; c += $3} END {printf "%d %d\n", u, c}'
}

descriptor_flags=()
for i in $(seq "$DESCRIPTORS"); do
    descriptor_flags+=(--descriptor "d$i=v{n}")
done
{
    echo "domain: bench"
    echo "descriptors:"
    for i in $(seq "$DESCRIPTORS"); do
        echo "  - key: d$i"
        echo "    rate_limit: {unit: second, requests_per_unit: 1000000000, algorithm: token_bucket}"
    done
    echo "  - key: abuser"
    echo "    rate_limit: {unit: hour, requests_per_unit: 10, algorithm: token_bucket}"
} >"$tmp/rules.yaml"

# start_weir TIMEOUT [BATCH_WINDOW [OVER_LIMIT_CACHE]]: weir serve on fresh
# ports ($gport, $hport), pid $wpid
start_weir() {
    gport=$(free_port)
    hport=$(free_port)
    "$WEIR" serve --rules "$tmp/rules.yaml" --http "127.0.0.1:$hport" --grpc "127.0.0.1:$gport" \
        --resp '' --admin '' --threads 1 --store "redis://127.0.0.1:$rport" --redis-timeout "$1" \
        --redis-batch-window "${2:-0ms}" --redis-over-limit-cache "${3:-4096}" \
        --log-level error >/dev/null &
    wpid=$!
    pids+=("$wpid")
    wait_port "$gport"
}

# batches that did not get Redis's answer (timed out, failed, refused by the
# open breaker): their decisions were the failure mode's, not Redis's
unanswered() {
    python3 -c '
import sys, urllib.request
text = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1]).read().decode()
print(sum(float(l.split()[1]) for l in text.splitlines()
          if l.split(" ")[0] in ("weir_redis_timeouts_total", "weir_redis_errors_total",
                                 "weir_redis_rejected_total")))' "$hport"
}

sha=$(rcli script load "$(cat bench/redis/token_bucket.lua)")

# weir_run [RATE]: "decisions/s p50_ms p99_ms redis_cpu_us/decision command_us/decision"
weir_run() {
    local pace=()
    [ -n "${1:-}" ] && pace=(--rate "$1")
    local c0 s0 out c1 s1 u0 u1
    c0=$(redis_cpu_us)
    s0=$(script_usec)
    u0=$(unanswered)
    out=$("$WEIR" bench grpc --target "127.0.0.1:$gport" --duration "$DURATION" --warmup 0 \
        --connections 4 --streams 32 --keys "$KEYS" "${descriptor_flags[@]}" "${pace[@]}" --json \
        2>/dev/null)
    c1=$(redis_cpu_us)
    s1=$(script_usec)
    u1=$(unanswered)
    python3 -c '
import json, sys
r = json.loads(sys.argv[1]); c0, c1 = float(sys.argv[2]), float(sys.argv[3])
s0, s1 = [float(x) for x in sys.argv[4].split()], [float(x) for x in sys.argv[5].split()]
n = max(r["requests"], 1)
if r["errors"]:
    sys.exit("bench/redis.sh: weir bench grpc saw %d errors" % r["errors"])
unanswered = float(sys.argv[7]) - float(sys.argv[6])
print("%.0f %.3f %.3f %.2f %.2f %.0f" % (r["requests_per_s"], r["latency_ns"]["p50"] / 1e6,
      r["latency_ns"]["p99"] / 1e6, (c1 - c0) / n, (s1[0] - s0[0]) / n, unanswered))
' "$out" "$c0" "$c1" "$s0" "$s1" "$u0" "$u1"
}

# base_run: the same for DESCRIPTORS EVALSHA calls a decision
base_run() {
    local c0 s0 out c1 s1 n=$((200000 * DURATION / 5))
    c0=$(redis_cpu_us)
    s0=$(script_usec)
    out=$(redis-benchmark -p "$rport" -c 64 -n "$n" -r "$KEYS" -P "$DESCRIPTORS" -q \
        evalsha "$sha" 1 "base:__rand_int__" 1000000000 1000000000 0 1 2>/dev/null | tr '\r' '\n')
    c1=$(redis_cpu_us)
    s1=$(script_usec)
    awk -v c0="$c0" -v c1="$c1" -v s0="$s0" -v s1="$s1" -v n="$n" -v d="$DESCRIPTORS" '
        /requests per second/ {for (i = 2; i <= NF; i++) if ($i == "requests") {rps = $(i - 1); break}}
        END {split(s0, a, " "); split(s1, b, " ")
             printf "%.0f - - %.2f %.2f 0\n", rps / d, (c1 - c0) / (n / d), (b[1] - a[1]) / (n / d)}' <<<"$out"
}

start_weir 1s
echo "# bench/redis.sh  $(date -u +%Y-%m-%dT%H:%MZ)  $(nproc) cores  $(uname -r)  $(redis-server --version | awk '{print $3}')"
echo "# $DESCRIPTORS descriptors a decision, $KEYS keys each; ${DURATION}s runs; $ROUNDS rounds"
declare -A res
for r in $(seq "$ROUNDS"); do
    w=$(weir_run)
    b=$(base_run)
    res[w]+="$w;"
    res[b]+="$b;"
    printf 'round %d  weir      %s\n' "$r" "$w"
    printf 'round %d  baseline  %s\n' "$r" "$b"
done
median_col() { tr ';' '\n' <<<"$1" | grep -v '^$' | awk -v c="$2" '{print $c}' | sort -g |
    awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
wr=$(median_col "${res[w]}" 1)
# at 80% of that, with the default --redis-timeout (5 ms)
kill "$wpid"
wait "$wpid" 2>/dev/null || true
start_weir 5ms
paced=$(weir_run "$(awk -v r="$wr" 'BEGIN {printf "%d", r * 0.8}')")
echo
row='%-26s %12s %8s %8s %17s %14s %11s\n'
printf "$row" "" "decisions/s" "p50 ms" "p99 ms" "Redis CPU us/dec" "script us/dec" "unanswered"
printf "$row" "weir (median)" "$wr" "$(median_col "${res[w]}" 2)" "$(median_col "${res[w]}" 3)" \
    "$(median_col "${res[w]}" 4)" "$(median_col "${res[w]}" 5)" "$(median_col "${res[w]}" 6)"
read -r pr p50 p99 pc ps pu <<<"$paced"
printf "$row" "weir paced at 80%" "$pr" "$p50" "$p99" "$pc" "$ps" "$pu"
printf "$row" "EVALSHA per descriptor" "$(median_col "${res[b]}" 1)" "-" "-" \
    "$(median_col "${res[b]}" 4)" "$(median_col "${res[b]}" 5)" "-"
awk -v w="$(median_col "${res[w]}" 4)" -v b="$(median_col "${res[b]}" 4)" \
    'BEGIN {printf "\nRedis CPU per decision, weir / baseline: %.3f\n", w / b}'

# --redis-batch-window: decisions held up to that long to share a call,
# at half of the unpaced throughput (1 s timeout: nothing fails over)
echo
echo "# --redis-batch-window at $(awk -v r="$wr" 'BEGIN {printf "%d", r / 2}') decisions/s (half the unpaced throughput)"
printf "$row" "window" "decisions/s" "p50 ms" "p99 ms" "Redis CPU us/dec" "script us/dec" "unanswered"
for bw in 0ms 1ms 2ms; do
    kill "$wpid"
    wait "$wpid" 2>/dev/null || true
    start_weir 1s "$bw"
    read -r pr p50 p99 pc ps pu <<<"$(weir_run "$(awk -v r="$wr" 'BEGIN {printf "%d", r / 2}')")"
    printf "$row" "$bw" "$pr" "$p50" "$p99" "$pc" "$ps" "$pu"
done
kill "$wpid"
wait "$wpid" 2>/dev/null || true
start_weir 5ms

# An abusive client: one key, exhausted, asked again and again. The
# over-limit cache answers it without Redis until the key refills.
metric() {
    python3 -c '
import sys, urllib.request
text = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1]).read().decode()
print(sum(float(l.split()[1]) for l in text.splitlines() if l.split(" ")[0] == sys.argv[2]))' \
        "$hport" "$1"
}
echo
echo "# an abusive client: one exhausted key (10 per hour), unpaced"
printf '%-26s %12s %14s %18s\n' "over-limit cache" "requests/s" "Redis calls" "Redis CPU us/req"
for slots in 4096 0; do
    kill "$wpid"
    wait "$wpid" 2>/dev/null || true
    start_weir 1s 0ms "$slots"
    calls0=$(metric weir_redis_calls_total)
    c0=$(redis_cpu_us)
    out=$("$WEIR" bench grpc --target "127.0.0.1:$gport" --duration "$DURATION" --warmup 0 \
        --connections 4 --streams 32 --descriptor abuser=one --json 2>/dev/null)
    c1=$(redis_cpu_us)
    calls1=$(metric weir_redis_calls_total)
    python3 -c '
import json, sys
r = json.loads(sys.argv[1])
print("%-26s %12.0f %14.0f %18.2f" % (sys.argv[2], r["requests_per_s"], float(sys.argv[4]) - float(sys.argv[3]),
      (float(sys.argv[6]) - float(sys.argv[5])) / max(r["requests"], 1)))
' "$out" "$([ "$slots" = 0 ] && echo off || echo "on ($slots slots)")" "$calls0" "$calls1" "$c0" "$c1"
done
kill "$wpid"
wait "$wpid" 2>/dev/null || true
start_weir 5ms

# While Redis is away: every decision answered by its failure mode within
# --redis-timeout (5 ms) and a margin. Paced load, Redis paused (SIGSTOP:
# the socket stays open, nothing answers), then killed.
outage() {
    "$WEIR" bench grpc --target "127.0.0.1:$gport" --duration "$DURATION" --warmup 0 \
        --connections 4 --streams 32 --keys "$KEYS" "${descriptor_flags[@]}" --rate 10000 --json \
        2>/dev/null | python3 -c '
import json, sys
r = json.loads(sys.stdin.read())
l = r["latency_ns"]
print("%-26s %8d requests answered, %d errors; p50 %.3f ms, p99 %.3f ms, max %.3f ms" % (
      sys.argv[1], r["requests"], r["errors"], l["p50"] / 1e6, l["p99"] / 1e6, l["max"] / 1e6))
' "$1"
}
echo
echo "# Redis away, 10,000 requests/s paced, --redis-timeout 5ms (failure_mode allow)"
kill -STOP "$rpid"
outage "Redis paused (SIGSTOP)"
kill -CONT "$rpid"
kill "$rpid"
wait "$rpid" 2>/dev/null || true
outage "Redis killed"
