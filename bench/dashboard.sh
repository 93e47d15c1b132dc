#!/usr/bin/env bash
# bench/dashboard.sh - what open dashboards cost the decisions: HTTP
# decisions/s (wrk, GET /v1/check) with no dashboard open against two,
# in one run of one weir. A "dashboard" here is what the page asks of
# weir: GET /admin/v1/stats with the admin token once a second (a small
# Python loop per dashboard, on the admin listener; the browser itself
# is not needed for the measurement).
#
#   make bench-dashboard                 # 20 pairs of 5 s runs, about 5 min
#   ROUNDS=7 DURATION=10 bench/dashboard.sh
#
# First, what one snapshot costs weir: its CPU time (its threads' run
# time) over IDLE seconds without load, without and then with the
# dashboards. Then the rounds: each a run with none and a run with two,
# the order alternating from round to round so a drift of the
# neighbours' load on this shared machine falls on both sides alike. The
# summary gives each side's median, the ratio of the medians, and the
# median of each round's own ratio. The limits are far above the load:
# the allowed path, the busiest, is what is measured.
set -euo pipefail

cd "$(dirname "$0")/.."
WEIR=${WEIR_BIN:-build/weir}
ROUNDS=${ROUNDS:-20}
DURATION=${DURATION:-5}
CONNS=${CONNS:-64}
THREADS=${THREADS:-1}
DASHBOARDS=${DASHBOARDS:-2}

. bench/ports.sh
need wrk python3
need_weir "make build"
bench_tmp

cat >"$tmp/rules.yaml" <<'YAML'
domain: bench
descriptors:
  - key: key
    rate_limit: {unit: second, requests_per_unit: 1000000000}
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 1000000000}
  - key: path
    rate_limit: {unit: hour, requests_per_unit: 1000000000}
YAML
token=$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')
printf 'bench %s\n' "$token" >"$tmp/tokens"

hport=$(free_port)
aport=$(free_port)
"$WEIR" serve --rules "$tmp/rules.yaml" --http "127.0.0.1:$hport" --grpc '' --resp '' \
    --admin "127.0.0.1:$aport" --admin-token-file "$tmp/tokens" --threads "$THREADS" \
    --log-level warn >/dev/null &
pids+=($!)
wait_port "$hport"
wait_port "$aport"

# One dashboard: GET /admin/v1/stats once a second until killed; each
# answer's size appended to its file (a check that it really asked).
cat >"$tmp/poll.py" <<'PY'
import http.client, sys, time
port, token, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
while True:
    t = time.monotonic()
    c.request("GET", "/admin/v1/stats", headers={"Authorization": "Bearer " + token})
    r = c.getresponse()
    body = r.read()
    if r.status != 200:
        sys.exit(f"GET /admin/v1/stats: {r.status} {body[:200]!r}")
    with open(out, "a") as f:
        f.write(f"{len(body)}\n")
    time.sleep(max(0.0, 1.0 - (time.monotonic() - t)))
PY

rps() {
    wrk -t1 -c"$CONNS" -d"${DURATION}s" \
        "http://127.0.0.1:$hport/v1/check?domain=bench&key=k1&user=u1&path=/p" |
        awk '/^Requests\/sec/ {print $2}'
}

# warm-up: the first seconds of a fresh process are not its steady state
wrk -t1 -c"$CONNS" -d2s "http://127.0.0.1:$hport/v1/check?domain=bench&key=k1" >/dev/null

pollers=()
open_dashboards() {
    for i in $(seq "$DASHBOARDS"); do
        python3 "$tmp/poll.py" "$aport" "$token" "$tmp/polls.$i" &
        pollers+=($!)
        pids+=($!)
    done
    sleep 1.2 # every one asking already
}
close_dashboards() {
    for p in "${pollers[@]}"; do
        kill "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
    pollers=()
}

# weir's CPU time so far, in microseconds: its threads' run time from
# /proc (schedstat, in nanoseconds; the clock ticks of stat are too coarse)
weir_cpu_us() {
    cat /proc/"${pids[0]}"/task/*/schedstat | awk '{ns += $1} END {printf "%.0f\n", ns / 1000}'
}

# What one snapshot costs weir: its CPU time while idle, with the
# dashboards open and without, over the same time.
idle=${IDLE:-10}
c0=$(weir_cpu_us)
sleep "$idle"
c1=$(weir_cpu_us)
open_dashboards
p0=$(cat "$tmp"/polls.* 2>/dev/null | wc -l)
c2=$(weir_cpu_us)
sleep "$idle"
c3=$(weir_cpu_us)
p1=$(cat "$tmp"/polls.* 2>/dev/null | wc -l)
close_dashboards

# Then decisions/s, in pairs whose order alternates (none first, then
# the dashboards first) so a drift of the neighbours' load cancels out.
none=()
two=()
for round in $(seq "$ROUNDS"); do
    if [ $((round % 2)) -eq 1 ]; then
        none+=("$(rps)")
        open_dashboards
        two+=("$(rps)")
        close_dashboards
    else
        open_dashboards
        two+=("$(rps)")
        close_dashboards
        none+=("$(rps)")
    fi
    printf 'round %d: none %s/s, %d dashboards %s/s\n' "$round" "${none[-1]}" "$DASHBOARDS" \
        "${two[-1]}"
done

polls=$(cat "$tmp"/polls.* 2>/dev/null | wc -l)
bytes=$(sort -n "$tmp"/polls.* 2>/dev/null | tail -1)
python3 - "$DASHBOARDS" "$polls" "${bytes:-0}" "${none[*]}" "${two[*]}" \
    "$c0 $c1 $c2 $c3" "$((p1 - p0))" "$idle" <<'PY'
import statistics, sys
dash, polls, size = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
none = [float(x) for x in sys.argv[4].split()]
two = [float(x) for x in sys.argv[5].split()]
c0, c1, c2, c3 = (float(x) for x in sys.argv[6].split())
idle_polls, idle = int(sys.argv[7]), float(sys.argv[8])
extra = (c3 - c2) - (c1 - c0)
print(f"weir's CPU time over {idle:.0f} s idle: {c1 - c0:,.0f} µs without a dashboard, "
      f"{c3 - c2:,.0f} µs with {dash} ({idle_polls} snapshots): "
      f"{extra / max(idle_polls, 1):,.0f} µs a snapshot, "
      f"{extra / idle / 1e6 * 100:.3f} % of one core")
a, b = statistics.median(none), statistics.median(two)
print(f"\nHTTP decisions/s, median of {len(none)} rounds each (GET /v1/check, 3 limits):")
print(f"  no dashboard       {a:>10,.0f}/s")
print(f"  {dash} dashboards       {b:>10,.0f}/s   ({polls} GET /admin/v1/stats answered, "
      f"{size} bytes the largest)")
print(f"  ratio of medians   {b / a:10.3f}   ({(b / a - 1) * 100:+.1f} %)")
paired = statistics.median(y / x for x, y in zip(none, two))
print(f"  median of the rounds' own ratios {paired:.3f}   ({(paired - 1) * 100:+.1f} %)")
PY
