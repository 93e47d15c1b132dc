# bench/ports.sh - sourced by the benchmark scripts: loopback ports chosen
# at run time, and waiting until something listens on one.

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
