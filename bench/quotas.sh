#!/usr/bin/env bash
# bench/quotas.sh - what 100,000 tenants holding overrides cost a decision
# through `weir serve` over HTTP, against the same rules with an empty
# quota database and against rules without tenants: bench/tenants/main.c's
# comparison (make bench-tenants) at the service, under wrk. Everything
# listens on 127.0.0.1 on ports picked at run time.
#
#   make bench-quotas                       # builds build/, ~5 minutes
#   ROUNDS=3 DURATION=5 THREADS="1 2" bench/quotas.sh
#
# Knobs: ROUNDS (5), DURATION (5 s a timed run), WARMUP (2 s before each
# timed run, not counted), THREADS ("1": weir serve --threads), CONNS (64
# connections), WRK_THREADS (2), FORMS ("get post2"), SETTINGS ("A B C"),
# TENANTS (100,000 keys and tenants), ALGORITHM (token_bucket: the rules'
# limits; an override names none, so it takes the one it replaces),
# WEIR_BIN (build/weir).
#
# Settings, one `weir serve` at a time (two would share the cores):
#   A  rules with a `tenants:` section (tiers free and pro, each with a
#      per-minute limit and one nested `endpoint: /orders` descriptor) and a
#      plain `api_key` descriptor, --quota-db on an empty SQLite database:
#      every key on the default tier
#   B  the same rules, --quota-db on a database of TENANTS tenants, tiers
#      alternating, each with two per-minute overrides (`default` and
#      `endpoint:/orders`), numbers distinct per tenant
#   C  the same limits as rule-file descriptors, no `tenants:` section and
#      no --quota-db: what a decision cost before tenants
# Both databases are made before timing: weir serve creates the schema
# (started once on each file), then the sqlite3 CLI writes B's tenants in
# one transaction. A daemon is timed only once /healthz shows its table
# in force ("quotas":{..."tenants":N}).
#
# Forms (tenants.lua; keys tN, N uniform over 0..TENANTS-1):
#   get    GET /v1/check?domain=api&api_key=tN     [api_key=tN]
#   post1  POST /v1/check, the same descriptor     [api_key=tN]
#   post2  POST /v1/check, two descriptors         [api_key=tN],[api_key=tN,endpoint=/orders]
# Each round starts every setting afresh, in an order rotating from round
# to round, and runs every form on it: WARMUP s of the form's load, then
# DURATION s timed, the same wrk settings for every setting. Reported per
# run: requests/s, weir's CPU time per request (utime + stime from
# /proc/PID/stat over the timed run), weir's CPU time over the run's
# (100% a thread would mean weir alone set the pace; wrk and weir share
# the machine's cores) and wrk's error counts; then per form the medians
# over the rounds and the cost ratios B / A and B / C (requests/s of the
# cheaper setting over B's, each the median of the rounds' own ratios),
# with the same ratios of CPU time per request. The limits are far above
# the load: every decision is allowed; that is the path measured.
set -euo pipefail

cd "$(dirname "$0")/.."
WEIR=${WEIR_BIN:-build/weir}
ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-5}
WARMUP=${WARMUP:-2}
THREADS=${THREADS:-1}
CONNS=${CONNS:-64}
WRK_THREADS=${WRK_THREADS:-2}
FORMS=${FORMS:-"get post2"}
SETTINGS=${SETTINGS:-"A B C"}
TENANTS=${TENANTS:-100000}
ALGORITHM=${ALGORITHM:-token_bucket}
here=bench/http

. bench/ports.sh
need wrk sqlite3 curl python3
need_weir "make build"
bench_tmp

# limits RPU INDENT: a per-minute limit of RPU and as much for the
# `endpoint: /orders` below it, INDENT spaces before them
limits() {
    local p
    p=$(printf '%*s' "$2" '')
    echo "${p}rate_limit: {unit: minute, requests_per_unit: $1, algorithm: $ALGORITHM}"
    echo "${p}descriptors:"
    echo "${p}  - key: endpoint"
    echo "${p}    value: /orders"
    echo "${p}    rate_limit: {unit: minute, requests_per_unit: $1, algorithm: $ALGORITHM}"
}
{
    echo "domain: api"
    echo "tenants:"
    echo "  key: api_key"
    echo "  default_tier: free"
    echo "  tiers:"
    echo "    free:"
    limits 1000000 6
    echo "    pro:"
    limits 2000000 6
    echo "descriptors:"
    echo "  - key: api_key"
    limits 1000000 4
} >"$tmp/tenants.yaml"
{
    echo "domain: api"
    echo "descriptors:"
    echo "  - key: api_key"
    limits 1000000 4
} >"$tmp/plain.yaml"

# wait_tenants PORT N: wait up to 30 s until /healthz shows a table of N
# tenants in force read from a database that answers; exit 1 if not
wait_tenants() {
    local h
    for _ in $(seq 300); do
        h=$(curl -s "http://127.0.0.1:$1/healthz" || true)
        case $h in *'"status":"ok","tenants":'"$2"[,\}]*) return 0 ;; esac
        sleep 0.1
    done
    echo "bench/quotas.sh: no table of $2 tenants on port $1: $h" >&2
    exit 1
}

# serve SETTING: weir serve for the setting on a fresh port; sets port and
# wpid, and waits until it listens with its table in force
serve() {
    local args=(--rules "$tmp/tenants.yaml")
    case $1 in
    A) args+=(--quota-db "sqlite://$tmp/empty.db") ;;
    B) args+=(--quota-db "sqlite://$tmp/tenants.db") ;;
    C) args=(--rules "$tmp/plain.yaml") ;;
    *) echo "bench/quotas.sh: SETTINGS holds A, B and/or C, not $1" >&2 && exit 1 ;;
    esac
    port=$(free_port)
    "$WEIR" serve "${args[@]}" --http "127.0.0.1:$port" --grpc '' --resp '' --admin '' \
        --threads "${threads:-1}" --log-level warn >/dev/null &
    wpid=$!
    pids+=("$wpid")
    wait_port "$port"
    case $1 in
    A) wait_tenants "$port" 0 ;;
    B) wait_tenants "$port" "$TENANTS" ;;
    esac
}
stop() {
    kill "$wpid"
    wait "$wpid" 2>/dev/null || true
}

# The schema, from weir serve itself (its migrations), then B's tenants.
for db in empty tenants; do
    threads=1
    port=$(free_port)
    "$WEIR" serve --rules "$tmp/tenants.yaml" --quota-db "sqlite://$tmp/$db.db" \
        --http "127.0.0.1:$port" --grpc '' --resp '' --admin '' --log-level warn >/dev/null &
    wpid=$!
    pids+=("$wpid")
    wait_port "$port"
    wait_tenants "$port" 0
    stop
done
t0=$(date +%s.%N)
# times are Unix microseconds; tiers alternate; overrides `default` and
# `endpoint:/orders` a minute, numbers distinct per tenant
sqlite3 "$tmp/tenants.db" <<SQL
BEGIN;
WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < $TENANTS - 1)
INSERT INTO tenants (api_key, tier, effective_at, expires_at, version, created_at, updated_at)
SELECT 't' || i, CASE i % 2 WHEN 0 THEN 'free' ELSE 'pro' END, NULL, NULL, 1,
       1795600000000000, 1795600000000000 FROM n;
WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < $TENANTS - 1)
INSERT INTO quota_overrides (api_key, position, descriptor, requests_per_unit, unit,
                             created_at, updated_at)
SELECT 't' || i, 0, 'default', 3000000 + i, 'minute', 1795600000000000, 1795600000000000 FROM n
UNION ALL
SELECT 't' || i, 1, 'endpoint:/orders', 1500000 + i, 'minute', 1795600000000000,
       1795600000000000 FROM n;
COMMIT;
SQL
made=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')

# cpu_us: weir's CPU time so far, in microseconds
cpu_us() {
    awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) * 1000000 / hz}' "/proc/$wpid/stat"
}

# run FORM SECONDS: one wrk run; sets rps and errs
run() {
    local out
    out=$(env KEYS="$TENANTS" FORM="$1" wrk -t"$WRK_THREADS" -c"$CONNS" -d"${2}s" \
        -s "$here/tenants.lua" "http://127.0.0.1:$port" 2>&1)
    rps=$(awk '/^Requests\/sec/ {print $2}' <<<"$out")
    errs=$(awk '/Non-2xx|Socket errors/ {printf "%s ", $0}' <<<"$out")
}

load=$(cut -d' ' -f1-3 /proc/loadavg)
echo "# bench/quotas.sh  $(date -u +%Y-%m-%dT%H:%MZ)  $(nproc) cores  $(uname -r)  load $load"
echo "# weir $("$WEIR" version | cut -d' ' -f2); $(wrk -v 2>&1 | head -1 | cut -d' ' -f1-2)" \
    "-t$WRK_THREADS -c$CONNS, ${WARMUP}s warm-up + ${DURATION}s timed; $TENANTS keys" \
    "uniform; limits $ALGORITHM; sqlite3 $(sqlite3 --version | cut -d' ' -f1)"
echo "# B's database: $TENANTS tenants, $((2 * TENANTS)) overrides," \
    "$(($(stat -c %s "$tmp/tenants.db") / 1048576)) MB, written in $made s"
read -ra sets <<<"$SETTINGS"
: >"$tmp/runs"
for threads in $THREADS; do
    echo "## weir serve --threads $threads"
    for r in $(seq "$ROUNDS"); do
        for k in $(seq 0 $((${#sets[@]} - 1))); do
            s=${sets[$(((k + r - 1) % ${#sets[@]}))]}
            serve "$s"
            for form in $FORMS; do
                run "$form" "$WARMUP"
                c0=$(cpu_us)
                run "$form" "$DURATION"
                c1=$(cpu_us)
                cpu=$(awk -v a="$c0" -v b="$c1" -v r="$rps" -v d="$DURATION" \
                    'BEGIN {printf "%.2f", (b - a) / (r * d)}')
                busy=$(awk -v a="$c0" -v b="$c1" -v d="$DURATION" 'BEGIN {printf "%.0f", (b - a) / d / 1e4}')
                echo "$threads $form $s $r $rps $cpu $busy" >>"$tmp/runs"
                printf 'threads %s round %s  %s %-6s %12s req/s  %6s us CPU/request  weir %3s%%  %s\n' \
                    "$threads" "$r" "$s" "$form" "$rps" "$cpu" "$busy" "$errs"
            done
            stop
        done
    done
done

echo
echo "# medians over $ROUNDS rounds; ratios: the medians of the rounds' own ratios" \
    "(requests/s X / B; CPU per request B / X); load now $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$tmp/runs" <<'PY'
import statistics as st, sys
runs = {}
for line in open(sys.argv[1]):
    t, form, s, r, rps, cpu, _ = line.split()
    runs[(t, form, s, int(r))] = (float(rps), float(cpu))
keys = sorted({(t, f) for t, f, _, _ in runs}, key=lambda k: (int(k[0]), k[1]))
sets = sorted({s for _, _, s, _ in runs})
rounds = sorted({r for _, _, _, r in runs})
for t, f in keys:
    line = f"threads {t} {f:<6}"
    for s in sets:
        rps = st.median(runs[(t, f, s, r)][0] for r in rounds)
        cpu = st.median(runs[(t, f, s, r)][1] for r in rounds)
        line += f"  {s} {rps:10.0f} req/s {cpu:5.2f} us"
    print(line)
    for x in (x for x in sets if x != "B" and "B" in sets):
        rr = [runs[(t, f, x, r)][0] / runs[(t, f, "B", r)][0] for r in rounds]
        cr = [runs[(t, f, "B", r)][1] / runs[(t, f, x, r)][1] for r in rounds]
        print(f"    B / {x}: requests/s {st.median(rr):.3f}"
              f" ({', '.join(f'{v:.2f}' for v in rr)})"
              f"   CPU/request {st.median(cr):.3f} ({', '.join(f'{v:.2f}' for v in cr)})")
    if "A" in sets and "C" in sets:
        rr = [runs[(t, f, "C", r)][0] / runs[(t, f, "A", r)][0] for r in rounds]
        print(f"    A / C: requests/s {st.median(rr):.3f}")
PY
