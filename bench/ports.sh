# bench/ports.sh - sourced by the benchmark scripts: the tools they need,
# a temporary directory cleaned up at exit with the servers they started,
# loopback ports chosen at run time, waiting until something listens, and
# a redis-server with its CPU time.

# A free port on 127.0.0.1 (the kernel's choice).
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# Wait up to 10 s until 127.0.0.1:$1 accepts a connection; exit 1 if not.
wait_port() {
    for _ in $(seq 200); do
        python3 -c "import socket; socket.create_connection(('127.0.0.1',$1),0.2)" 2>/dev/null &&
            return 0
        sleep 0.05
    done
    echo "$(basename "$0"): nothing listens on port $1" >&2
    exit 1
}

# need TOOL...: exit 1 naming the first one missing (on the PATH, or in
# /usr/sbin for nginx and the like).
need() {
    for tool in "$@"; do
        command -v "$tool" >/dev/null || [ -x "/usr/sbin/$tool" ] || {
            echo "$(basename "$0"): $tool is missing (scripts/deps.sh installs it)" >&2
            exit 1
        }
    done
}

# need_weir HOW: exit 1 unless $WEIR is built (HOW says how to build it).
need_weir() {
    [ -x "$WEIR" ] || { echo "$(basename "$0"): build $WEIR first ($1)" >&2; exit 1; }
}

# A temporary directory $tmp; at exit the processes in $pids are stopped
# and $tmp is removed.
bench_tmp() {
    tmp=$(mktemp -d)
    pids=()
    trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"' EXIT
}

# start_redis [PREFIX...]: a redis-server on a free loopback port, its
# files in $tmp, run under PREFIX (e.g. taskset -c 1) if given; sets $rport
# and $rpid (also added to $pids) and waits until it listens.
start_redis() {
    rport=$(free_port)
    "$@" redis-server --bind 127.0.0.1 --port "$rport" --save '' --appendonly no --dir "$tmp" \
        --logfile "$tmp/redis.log" &
    rpid=$!
    pids+=("$rpid")
    wait_port "$rport"
}

# The CPU time of the redis-server $rpid so far, in microseconds (utime +
# stime from /proc, in clock ticks).
redis_cpu_us() {
    awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) * 1000000 / hz}' "/proc/$rpid/stat"
}
