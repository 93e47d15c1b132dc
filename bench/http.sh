#!/usr/bin/env bash
# bench/http.sh - weir's HTTP front end under wrk, with nginx's own
# limit_req on an equivalent configuration measured in the same run as the
# reference. Everything listens on 127.0.0.1 on ports picked at run time.
#
#   bench/http.sh                 # 10 s per run
#   DURATION=5 WORKERS="1" bench/http.sh
#
# Scenarios, for each worker count (weir --threads N / nginx
# worker_processes N):
#   get-1      GET /v1/check?domain=bench&key=k1 (nginx: GET /check?key=k1)
#   get-100k   the same with 100,000 random keys
#   post3-1    POST /v1/check with 3 descriptors, fixed values (weir only)
#   post3-100k POST /v1/check with 3 descriptors, 100,000 random values
# Then the latency under a paced load, for weir and nginx: PACED_CONNS
# connections (default 120), each pausing 1 ms between requests. wrk paces
# per connection and cannot hold an exact rate; on this machine 120 such
# connections offer about 75-80k requests/s, about 80% of the get-1 peak
# with one worker. The line prints the rate actually reached.
# Last, latency against load with the server and the client on separate
# cores (PINNED=0 skips it): weir (1 worker) and nginx (1 worker) each
# pinned to CPU 1, wrk (1 thread, no script) pinned to CPU 0. The peak is
# taken with PEAK_CONNS connections (default 32); then for each count in
# LAT_CONNS (default "1 2 3 4 6 8 16") the rate reached, as a share of
# that peak, and its p50 and p99. With few connections wrk holds the load
# below the peak without a pacing script, whose own cost (a Lua timer per
# request) would make wrk, not the server, the bottleneck on one core.
# The limits are far above the load: what is measured is the allowed path.
set -euo pipefail

cd "$(dirname "$0")/.."
WEIR=${WEIR_BIN:-build/weir}
DURATION=${DURATION:-10}
WORKERS=${WORKERS:-"1 2"}
CONNS=${CONNS:-64}
PACED_CONNS=${PACED_CONNS:-120}
PINNED=${PINNED:-1}
PEAK_CONNS=${PEAK_CONNS:-32}
LAT_CONNS=${LAT_CONNS:-"1 2 3 4 6 8 16"}
here=bench/http

. bench/ports.sh
need wrk nginx python3
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
need_weir "make build"
bench_tmp

cat >"$tmp/rules.yaml" <<'YAML'
domain: bench
descriptors:
  - key: key
    rate_limit: {unit: second, requests_per_unit: 1000000000}
  - key: user
    rate_limit: {unit: second, requests_per_unit: 1000000000}
  - key: path
    rate_limit: {unit: second, requests_per_unit: 1000000000}
  - key: ip
    rate_limit: {unit: second, requests_per_unit: 1000000000}
YAML

nginx_conf() { # workers port
    mkdir -p "$tmp/nginx"
    cat >"$tmp/nginx/nginx.conf" <<CONF
worker_processes $1;
pid $tmp/nginx/nginx.pid;
error_log $tmp/nginx/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $tmp/nginx;
    proxy_temp_path $tmp/nginx;
    fastcgi_temp_path $tmp/nginx;
    uwsgi_temp_path $tmp/nginx;
    scgi_temp_path $tmp/nginx;
    limit_req_zone \$arg_key zone=bench:64m rate=1000000r/s;
    limit_req_status 429;
    server {
        listen 127.0.0.1:$2 reuseport;
        keepalive_requests 1000000;
        # limit_req runs in the preaccess phase; 'return' would answer in
        # the rewrite phase before it and measure nothing, so the body
        # comes from empty_gif (content phase).
        location /check {
            limit_req zone=bench burst=1000 nodelay;
            empty_gif;
        }
    }
}
CONF
}

# stats OUT: sets rps, p50, p99 and errs from wrk's output
stats() {
    rps=$(awk '/^Requests\/sec/ {print $2}' <<<"$1")
    p50=$(awk '$1=="50%" {print $2}' <<<"$1")
    p99=$(awk '$1=="99%" {print $2}' <<<"$1")
    errs=$(awk '/Non-2xx|Socket errors/ {printf "%s ", $0}' <<<"$1")
}

# run NAME SCRIPT URL [env...]: one wrk run; prints req/s, p50, p99
run() {
    local name=$1 script=$2 url=$3
    shift 3
    stats "$(env "$@" wrk -t2 -c"$CONNS" -d"${DURATION}s" --latency -s "$here/$script" "$url" 2>&1)"
    printf '%-28s %12s req/s   p50 %-9s p99 %-9s %s\n' "$name" "$rps" "$p50" "$p99" "$errs"
}

echo "# bench/http.sh  $(date -u +%Y-%m-%dT%H:%MZ)  $(nproc) cores  $(uname -r)"
echo "# wrk -t2 -c$CONNS -d${DURATION}s; weir $("$WEIR" version | cut -d' ' -f2); $("$NGINX" -v 2>&1)"
for w in $WORKERS; do
    wport=$(free_port)
    "$WEIR" serve --rules "$tmp/rules.yaml" --http "127.0.0.1:$wport" --grpc '' --resp '' --admin '' \
        --threads "$w" --log-level warn --headers ietf,legacy,retry-after >/dev/null &
    pids+=($!)
    wait_port "$wport"
    nport=$(free_port)
    nginx_conf "$w" "$nport"
    "$NGINX" -p "$tmp/nginx" -c "$tmp/nginx/nginx.conf" -g 'daemon off;' &
    pids+=($!)
    wait_port "$nport"

    W="http://127.0.0.1:$wport"
    N="http://127.0.0.1:$nport"
    echo "## $w worker(s)"
    run "weir  get-1      w=$w" random_get.lua "$W" KEYS=1 PATH_PREFIX="/v1/check?domain=bench&key="
    run "nginx get-1      w=$w" random_get.lua "$N" KEYS=1 PATH_PREFIX="/check?key="
    run "weir  get-100k   w=$w" random_get.lua "$W" KEYS=100000 PATH_PREFIX="/v1/check?domain=bench&key="
    run "nginx get-100k   w=$w" random_get.lua "$N" KEYS=100000 PATH_PREFIX="/check?key="
    run "weir  post3-1    w=$w" random_post.lua "$W" KEYS=1
    run "weir  post3-100k w=$w" random_post.lua "$W" KEYS=100000
    if [ "$w" = "1" ]; then
        CONNS=$PACED_CONNS run "weir  get-1 paced   w=$w" random_get.lua "$W" KEYS=1 PACE_MS=1 \
            PATH_PREFIX="/v1/check?domain=bench&key="
        CONNS=$PACED_CONNS run "nginx get-1 paced   w=$w" random_get.lua "$N" KEYS=1 PACE_MS=1 \
            PATH_PREFIX="/check?key="
    fi
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    pids=()
done

# pinned_curve NAME URL: the peak, then rate (share of peak), p50, p99 per
# connection count, wrk on CPU 0
pinned_curve() {
    local name=$1 url=$2 peak c
    stats "$(taskset -c 0 wrk -t1 -c"$PEAK_CONNS" -d"${DURATION}s" --latency "$url" 2>&1)"
    peak=$rps
    printf '%-28s %12s req/s   p50 %-9s p99 %-9s (peak, %s connections) %s\n' "$name" "$rps" \
        "$p50" "$p99" "$PEAK_CONNS" "$errs"
    for c in $LAT_CONNS; do
        stats "$(taskset -c 0 wrk -t1 -c"$c" -d"${DURATION}s" --latency "$url" 2>&1)"
        printf '%-28s %12s req/s   p50 %-9s p99 %-9s (%s%% of peak, %s connections) %s\n' \
            "$name" "$rps" "$p50" "$p99" \
            "$(awk -v r="$rps" -v p="$peak" 'BEGIN {printf "%.0f", 100 * r / p}')" "$c" "$errs"
    done
}

if [ "$PINNED" = "1" ] && [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then
    echo "## pinned: server on CPU 1 (1 worker), wrk -t1 on CPU 0"
    wport=$(free_port)
    taskset -c 1 "$WEIR" serve --rules "$tmp/rules.yaml" --http "127.0.0.1:$wport" --grpc '' \
        --resp '' --admin '' --threads 1 --log-level warn --headers ietf,legacy,retry-after >/dev/null &
    pids+=($!)
    wait_port "$wport"
    nport=$(free_port)
    nginx_conf 1 "$nport"
    taskset -c 1 "$NGINX" -p "$tmp/nginx" -c "$tmp/nginx/nginx.conf" -g 'daemon off;' &
    pids+=($!)
    wait_port "$nport"
    pinned_curve "weir  get-1 pinned" "http://127.0.0.1:$wport/v1/check?domain=bench&key=k1"
    pinned_curve "nginx get-1 pinned" "http://127.0.0.1:$nport/check?key=k1"
fi
