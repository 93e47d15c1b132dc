#!/usr/bin/env bash
# bench/held.sh - what connections whose clients take no answers hold in
# weir serve: resident memory before and after CONNS gRPC connections that
# keep their flow-control window shut and each open CALLS calls (answered,
# never sent), and CONNS HTTP/1.1 connections that each pipeline REQS
# requests and never read. Reported per connection, against the bound
# docs/OPERATIONS.md gives ("Memory held by connections").
#
#   bench/held.sh                       # 100 + 100 connections
#   CONNS=500 bench/held.sh
#   WEIR_FLAGS="--max-unsent-bytes 64MiB" bench/held.sh   # as good as no cap
#
# The release build (make build); Linux /proc for the resident size.
set -euo pipefail

cd "$(dirname "$0")/.."
source bench/ports.sh
WEIR=${WEIR_BIN:-build/weir}
CONNS=${CONNS:-100}
CALLS=${CALLS:-1024}
REQS=${REQS:-20000}
need /usr/bin/python3
need_weir "make build"
bench_tmp

[ "$(ulimit -n)" -ge $((2 * CONNS + 256)) ] || ulimit -n $((2 * CONNS + 256))
printf 'domain: test\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 100000000}\n' \
    > "$tmp/rules.yaml"
hport=$(free_port)
gport=$(free_port)
"$WEIR" serve --rules "$tmp/rules.yaml" --http "127.0.0.1:$hport" --grpc "127.0.0.1:$gport" \
    --resp '' --admin '' --idle-timeout 600s ${WEIR_FLAGS:-} 2> "$tmp/log" > /dev/null &
wpid=$!
pids+=("$wpid")
wait_port "$hport"
wait_port "$gport"

/usr/bin/python3 - "$hport" "$gport" "$CONNS" "$CALLS" "$REQS" "$wpid" <<'PY'
import socket, struct, sys, time

sys.path.insert(0, "tests/integration")
from test_grpc_stall import (ACK, PREFACE, SETTINGS, SETTINGS_INITIAL_WINDOW_SIZE,  # noqa: E402
                             call_frames, frame, read_frames)

hport, gport, conns, calls, reqs, pid = (int(a) for a in sys.argv[1:])


def rss_kb():
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1])


def settle():
    time.sleep(1.0)
    return rss_kb()


base = settle()
held = []
for _ in range(conns):
    s = socket.create_connection(("127.0.0.1", gport))
    s.settimeout(0.2)
    s.sendall(PREFACE + frame(SETTINGS, 0, 0, struct.pack(">HI", SETTINGS_INITIAL_WINDOW_SIZE, 0)))
    buf = bytearray()
    for _ in range(20):
        frames = read_frames(s, buf) or []
        if any(t == SETTINGS and not f & ACK for t, f, _ in frames):
            s.sendall(frame(SETTINGS, ACK, 0))
            break
    s.sendall(b"".join(call_frames(2 * i + 1) for i in range(calls)))
    held.append(s)
grpc = settle()
print(f"gRPC, window shut, {calls} calls each: {(grpc - base) / conns:.0f} KiB a connection "
      f"({conns} connections, RSS {base} -> {grpc} KiB)")

request = b"POST /v1/check HTTP/1.1\r\nHost: t\r\nContent-Length: 60\r\n\r\n" + \
    b'{"domain":"test","descriptors":[{"entries":[{"key":"k","value":"v"}]}]}'[:60]
for _ in range(conns):
    s = socket.create_connection(("127.0.0.1", hport))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.setblocking(False)
    sent = 0
    data = request * reqs
    deadline = time.monotonic() + 2
    while sent < len(data) and time.monotonic() < deadline:
        try:
            sent += s.send(data[sent:sent + 65536])
        except BlockingIOError:
            time.sleep(0.01)
    held.append(s)
http = settle()
print(f"HTTP/1.1, never reading, up to {reqs} requests each: {(http - grpc) / conns:.0f} KiB a "
      f"connection ({conns} connections, RSS {grpc} -> {http} KiB)")
for s in held:
    s.close()
PY
