#!/usr/bin/env bash
# bench/leases.sh - what a concurrency lease costs over HTTP: a round trip
# acquire + release (GET /v1/acquire, then POST /v1/release of its
# token) against one plain check (GET /v1/check), on one weir, in
# alternating rounds of one run.
#
#   make bench-leases              # 10 pairs of 5 s runs, about 2 min
#   ROUNDS=5 DURATION=10 bench/leases.sh
#
# wrk drives both (bench/http/lease_pairs.lua alternates acquire and
# release). A pair is two requests, so its cost against a check is
# (check requests/s) / (lease requests/s / 2); the target is at most 2.
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

run() { # $1: the wrk arguments after the URL's base
    wrk -t1 -c"$CONNS" -d"${DURATION}s" "$@" | awk '/^Requests\/sec/ {print $2} /Non-2xx/ {print "non2xx " $NF > "/dev/stderr"}'
}
check() { run "http://127.0.0.1:$hport/v1/check?domain=bench&key=k1"; }
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
    printf 'round %d: check %s/s, acquire+release %s requests/s\n' "$round" "${c[-1]}" "${l[-1]}"
done
python3 - "${c[*]}" "${l[*]}" <<'PY'
import statistics, sys
c = [float(x) for x in sys.argv[1].split()]
l = [float(x) for x in sys.argv[2].split()]
mc, ml = statistics.median(c), statistics.median(l)
print(f"\nmedians of {len(c)} rounds: GET /v1/check {mc:,.0f}/s; "
      f"acquire + release {ml:,.0f} requests/s = {ml / 2:,.0f} pairs/s")
print(f"a pair's cost against a check: {mc / (ml / 2):.2f} (ratio of medians), "
      f"{statistics.median(x / (y / 2) for x, y in zip(c, l)):.2f} (median of the rounds')")
PY
