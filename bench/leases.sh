#!/usr/bin/env bash
# bench/leases.sh - what a concurrency lease costs over HTTP: a round trip
# acquire + release (GET /v1/acquire, then POST /v1/release of its
# token) against one plain check (GET /v1/check), on one weir, in
# alternating rounds of one run.
#
#   make bench-leases              # 10 pairs of 5 s runs, about 2 min
#   ROUNDS=5 DURATION=10 bench/leases.sh
#
# wrk drives both through the same Lua hooks (bench/http/lease_pairs.lua
# alternates acquire and release; check_same_client.lua asks GET
# /v1/check with the same client work), so that the client's share of
# the two shared cores is alike on both sides. A pair is two requests, so
# its cost against a check is (check requests/s) / (lease requests/s /
# 2); the target is at most 2.
# Limits are far above the load: every request is admitted.
set -euo pipefail

cd "$(dirname "$0")/.."
WEIR=${WEIR_BIN:-build/weir}
ROUNDS=${ROUNDS:-10}
DURATION=${DURATION:-5}
CONNS=${CONNS:-64}
THREADS=${THREADS:-1}

. bench/ports.sh
need wrk python3
need_weir "make build"
bench_tmp

cat >"$tmp/rules.yaml" <<'YAML'
domain: bench
descriptors:
  - key: backend
    rate_limit: {unit: minute, requests_per_unit: 65536, algorithm: concurrency}
  - key: key
    rate_limit: {unit: minute, requests_per_unit: 1000000000}
YAML

hport=$(free_port)
"$WEIR" serve --rules "$tmp/rules.yaml" --http "127.0.0.1:$hport" --grpc '' --resp '' \
    --admin '' --threads "$THREADS" --log-level warn >/dev/null &
pids+=($!)
wait_port "$hport"

# weir's CPU time so far, in microseconds: its threads' run time from
# /proc (schedstat, in nanoseconds)
weir_cpu_us() {
    cat /proc/"${pids[0]}"/task/*/schedstat | awk '{ns += $1} END {printf "%.0f\n", ns / 1000}'
}

# one run: "requests/s µs-of-weir's-CPU-a-request"; a refused answer
# (non-2xx) would mean the limits were reached: the run stops the bench
run() {
    local c0 c1 out
    c0=$(weir_cpu_us)
    out=$(wrk -t1 -c"$CONNS" -d"${DURATION}s" "$@")
    c1=$(weir_cpu_us)
    if grep -q Non-2xx <<<"$out"; then
        echo "non-2xx answers: $out" >&2
        exit 1
    fi
    awk -v cpu=$((c1 - c0)) '/ requests in / {n = $1} /^Requests\/sec/ {r = $2}
        END {printf "%s %.3f\n", r, cpu / n}' <<<"$out"
}
check() { run -s bench/http/check_same_client.lua "http://127.0.0.1:$hport"; }
leases() { run -s bench/http/lease_pairs.lua "http://127.0.0.1:$hport"; }

check >/dev/null # warm-up
c=()
l=()
for round in $(seq "$ROUNDS"); do
    if [ $((round % 2)) -eq 1 ]; then
        c+=("$(check)")
        l+=("$(leases)")
    else
        l+=("$(leases)")
        c+=("$(check)")
    fi
    printf 'round %d: check %s (requests/s, µs CPU each); acquire+release %s\n' "$round" \
        "${c[-1]}" "${l[-1]}"
done
python3 - "${c[*]}" "${l[*]}" <<'PY'
import statistics, sys
def pairs(s):
    v = [float(x) for x in s.split()]
    return v[0::2], v[1::2]
cr, cc = pairs(sys.argv[1])
lr, lc = pairs(sys.argv[2])
m = statistics.median
print(f"\nmedians of {len(cr)} rounds:")
print(f"  GET /v1/check          {m(cr):>10,.0f} requests/s  {m(cc):6.2f} µs of weir's CPU each")
print(f"  acquire + release      {m(lr):>10,.0f} requests/s  {m(lc):6.2f} µs each "
      f"({m(lr) / 2:,.0f} pairs/s)")
print(f"a pair against a check, throughput: {m(cr) / (m(lr) / 2):.2f} (ratio of medians), "
      f"{m(x / (y / 2) for x, y in zip(cr, lr)):.2f} (median of the rounds')")
print(f"a pair against a check, weir's CPU: {2 * m(lc) / m(cc):.2f} (ratio of medians), "
      f"{m(2 * y / x for x, y in zip(cc, lc)):.2f} (median of the rounds')")
PY
