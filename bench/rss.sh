#!/usr/bin/env bash
# bench/rss.sh - weir serve's resident memory around bursts of idle
# connections: before, at the peak of each burst, and after the burst
# closed (polled each second up to WAIT seconds, until it is back within
# 20% of where it was before). Each burst opens CONNS connections, sends
# one request on each and keeps it open, then closes them all.
#
#   bench/rss.sh                        # 10 bursts of 8,000 connections
#   BURSTS=3 CONNS=2000 bench/rss.sh
#
# The release build (make build); Linux /proc for the resident size.
set -euo pipefail

cd "$(dirname "$0")/.."
source bench/ports.sh
WEIR=${WEIR_BIN:-build/weir}
BURSTS=${BURSTS:-10}
CONNS=${CONNS:-8000}
WAIT=${WAIT:-60}
need python3
need_weir "make build"
bench_tmp

[ "$(ulimit -n)" -ge $((CONNS + 256)) ] || ulimit -n $((CONNS + 256))
printf 'domain: api\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1000}\n' \
    > "$tmp/rules.yaml"
port=$(free_port)
"$WEIR" serve --rules "$tmp/rules.yaml" --http "127.0.0.1:$port" --grpc '' --resp '' --admin '' \
    --max-connections $((CONNS + 100)) --idle-timeout 600s --log-level debug 2> "$tmp/log" > /dev/null &
wpid=$!
pids+=("$wpid")
wait_port "$port"

rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$wpid/status"; }

python3 - "$port" "$CONNS" "$BURSTS" "$WAIT" "$wpid" <<'PY'
import socket, sys, time

port, conns, bursts, wait, pid = (int(a) for a in sys.argv[1:])


def rss_kb():
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])


req = b"GET /v1/check?domain=api&k=v HTTP/1.1\r\nHost: b\r\n\r\n"
time.sleep(1)
before = rss_kb()
print(f"before: {before / 1024:.1f} MB resident")
worst = 0.0
for b in range(bursts):
    socks = []
    for _ in range(conns):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(req)
        socks.append(s)
    for s in socks:  # every answer read: the connection is idle
        data = b""
        while b"\r\n\r\n" not in data:
            data += s.recv(4096)
    peak = rss_kb()
    for s in socks:
        s.close()
    t0 = time.monotonic()
    after = rss_kb()
    while time.monotonic() - t0 < wait and after > before * 1.2:
        time.sleep(1)
        after = rss_kb()
    took = time.monotonic() - t0
    worst = max(worst, after / before)
    print(f"burst {b + 1}: peak {peak / 1024:.1f} MB, after {after / 1024:.1f} MB "
          f"({after / before:.2f} of before) within {took:.0f} s")
print(f"worst after/before: {worst:.2f} (target: at most 1.20 within {wait} s)")
PY
echo "trims: $(grep -c event=memory_trimmed "$tmp/log" || true)"
