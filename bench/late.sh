#!/usr/bin/env bash
# bench/late.sh - what decisions that complete later cost, side by side in
# one run: weir serve on the memory store (decided inline) against the
# same binary on the deferred test store (every decision completed one
# loop iteration later, as a networked store's answer arrives), over HTTP
# (wrk, GET /v1/check) and gRPC (weir bench grpc, ShouldRateLimit). With
# BASE_BIN, a second weir (an older build) on the memory store runs in the
# same rounds, for a before/after of the inline path.
#
#   make bench-late                       # builds build-bench/, 3 rounds of 5 s
#   ROUNDS=5 DURATION=8 BASE_BIN=/tmp/old/build/weir bench/late.sh
#
# WEIR_BIN must be a build with -DWEIR_TEST_STORES=ON (make bench-late
# makes one in build-bench/). Each round runs every contender once, in
# turn, so a busy minute on this shared machine falls on all of them; the
# table gives each one's median and its ratio to the memory store's.
set -euo pipefail

cd "$(dirname "$0")/.."
WEIR=${WEIR_BIN:-build-bench/weir}
BASE=${BASE_BIN:-}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5}
CONNS=${CONNS:-64}
THREADS=${THREADS:-1}

for tool in wrk python3; do
    command -v "$tool" >/dev/null || {
        echo "bench/late.sh: $tool is missing (scripts/deps.sh installs it)" >&2
        exit 1
    }
done
[ -x "$WEIR" ] || { echo "bench/late.sh: build $WEIR first (make bench-late)" >&2; exit 1; }

tmp=$(mktemp -d)
pid=
cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT

cat >"$tmp/rules.yaml" <<'YAML'
domain: bench
descriptors:
  - key: key
    rate_limit: {unit: second, requests_per_unit: 1000000000}
YAML

. bench/ports.sh

# start BIN STORE: weir on fresh ports ($hport, $gport)
start() {
    hport=$(free_port)
    gport=$(free_port)
    "$1" serve --rules "$tmp/rules.yaml" --http "127.0.0.1:$hport" --grpc "127.0.0.1:$gport" \
        --resp '' --admin '' --threads "$THREADS" --store "$2" --log-level warn >/dev/null &
    pid=$!
    wait_port "$hport"
    wait_port "$gport"
}

stop() {
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    pid=
}

http_rps() {
    wrk -t1 -c"$CONNS" -d"${DURATION}s" "http://127.0.0.1:$hport/v1/check?domain=bench&key=k1" |
        awk '/^Requests\/sec/ {print $2}'
}

grpc_rps() {
    "$WEIR" bench grpc --target "127.0.0.1:$gport" --duration "$DURATION" --descriptor key=k1 \
        2>/dev/null | awk '$1 == "requests" {gsub(/[(\/s)]/, "", $3); print $3}'
}

names=("memory" "deferred")
bins=("$WEIR" "$WEIR")
stores=("memory" "memory+deferred")
if [ -n "$BASE" ]; then
    names+=("base memory")
    bins+=("$BASE")
    stores+=("memory")
fi

declare -A res
echo "# bench/late.sh  $(date -u +%Y-%m-%dT%H:%MZ)  $(nproc) cores  $(uname -r)"
echo "# weir serve --threads $THREADS; HTTP: wrk -t1 -c$CONNS -d${DURATION}s GET /v1/check;" \
    "gRPC: weir bench grpc (4 connections x 32 streams) -d ${DURATION}s; $ROUNDS rounds"
for r in $(seq "$ROUNDS"); do
    for i in "${!names[@]}"; do
        start "${bins[$i]}" "${stores[$i]}"
        h=$(http_rps)
        g=$(grpc_rps)
        stop
        res["$i,http"]+="$h "
        res["$i,grpc"]+="$g "
        printf 'round %d  %-12s  http %10s req/s   grpc %10s req/s\n' "$r" "${names[$i]}" "$h" "$g"
    done
done

median() { tr ' ' '\n' <<<"$1" | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo
printf '%-12s %14s %8s %14s %8s\n' "" "HTTP req/s" "ratio" "gRPC req/s" "ratio"
hm=$(median "${res[0,http]}")
gm=$(median "${res[0,grpc]}")
for i in "${!names[@]}"; do
    h=$(median "${res[$i,http]}")
    g=$(median "${res[$i,grpc]}")
    printf '%-12s %14s %8s %14s %8s\n' "${names[$i]}" "$h" \
        "$(awk -v a="$h" -v b="$hm" 'BEGIN {printf "%.3f", a / b}')" "$g" \
        "$(awk -v a="$g" -v b="$gm" 'BEGIN {printf "%.3f", a / b}')"
done
