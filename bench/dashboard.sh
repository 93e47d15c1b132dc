#!/usr/bin/env bash
# bench/dashboard.sh - what open dashboards cost the decisions: HTTP
# decisions/s (wrk, GET /v1/check) with no dashboard open against two,
# in one run of one weir. A "dashboard" here is what the page asks of
# weir: GET /admin/v1/stats with the admin token once a second (a small
# Python loop per dashboard, on the admin listener; the browser itself
# is not needed for the measurement).
#
#   make bench-dashboard                 # 7 rounds of 10 s each way
#   ROUNDS=5 DURATION=5 bench/dashboard.sh
#
# Rounds alternate (none, two, none, two, ...) so a busy minute on this
# shared machine falls on both; the table gives each side's median and
# the ratio of two dashboards to none. The limits are far above the
# load: the allowed path, the busiest, is what is measured.
set -euo pipefail

cd "$(dirname "$0")/.."
WEIR=${WEIR_BIN:-build/weir}
ROUNDS=${ROUNDS:-7}
DURATION=${DURATION:-10}
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

none=()
two=()
for round in $(seq "$ROUNDS"); do
    none+=("$(rps)")
    pollers=()
    for i in $(seq "$DASHBOARDS"); do
        python3 "$tmp/poll.py" "$aport" "$token" "$tmp/polls.$i" &
        pollers+=($!)
        pids+=($!)
    done
    sleep 1.2 # both asking already
    two+=("$(rps)")
    for p in "${pollers[@]}"; do
        kill "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
    printf 'round %d: none %s/s, %d dashboards %s/s\n' "$round" "${none[-1]}" "$DASHBOARDS" \
        "${two[-1]}"
done

polls=$(cat "$tmp"/polls.* 2>/dev/null | wc -l)
bytes=$(sort -n "$tmp"/polls.* 2>/dev/null | tail -1)
python3 - "$DASHBOARDS" "$polls" "${bytes:-0}" "${none[*]}" "${two[*]}" <<'PY'
import statistics, sys
dash, polls, size = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
none = [float(x) for x in sys.argv[4].split()]
two = [float(x) for x in sys.argv[5].split()]
a, b = statistics.median(none), statistics.median(two)
print(f"\nHTTP decisions/s, median of {len(none)} rounds each (GET /v1/check, 3 limits):")
print(f"  no dashboard       {a:>10,.0f}/s")
print(f"  {dash} dashboards       {b:>10,.0f}/s   ({polls} GET /admin/v1/stats answered, "
      f"{size} bytes the largest)")
print(f"  ratio              {b / a:10.3f}   ({(b / a - 1) * 100:+.1f} %)")
PY
