#!/usr/bin/env bash
# Installs the Debian packages weir needs, if any is missing: to build and
# run it (`scripts/deps.sh run`, what `make run` asks for), or to build and
# test it, benchmarks included (no argument), or all that and the peers the
# benchmarks measure weir against (`scripts/deps.sh bench`, what
# `make bench-peers` asks for). As root it runs apt-get;
# otherwise it prints the exact command to run and exits 1. Packages are
# grouped by what needs them.
set -euo pipefail

packages=(
    # build
    cmake make gcc pkg-config
    # libraries
    libxxhash-dev libyaml-dev libuv1-dev libhttp-parser-dev
    libnghttp2-dev libprotobuf-c-dev protobuf-c-compiler libhiredis-dev
    # the quota database: SQLite (embedded) and PostgreSQL's client library
    libsqlite3-dev libpq-dev
    # the IANA time zones of calendar limits
    tzdata
    # the well-known .proto files (google/protobuf/duration.proto, ...)
    libprotobuf-dev
)
if [ "${1:-all}" != run ]; then
packages+=(
    # second compiler, sanitizer and libFuzzer runtimes, formatter
    clang libclang-rt-14-dev clang-format
    # tests: unit tests (jansson: the API fuzz target's JSON oracle), the
    # daemon's integration tests and their peers
    libjansson-dev libcmocka-dev python3 python3-pytest nginx-light curl
    # the Redis store's tests: a real redis-server, redis-cli and redis-py
    redis-server redis-tools python3-redis
    # the example alert rules' test reads them (promtool, Debian's
    # prometheus package, is not needed: the test checks without it)
    python3-yaml
    # the quota database's tests: a throwaway PostgreSQL server (initdb,
    # postgres, psql) and the sqlite3 shell
    postgresql sqlite3
    # gRPC tests: Python's grpcio client (protoc makes its descriptors)
    python3-grpcio python3-protobuf protobuf-compiler
    # the web pages' browser tests (/sim, /dashboard): headless Chromium
    # driven by chromedriver through Selenium
    chromium chromium-driver python3-selenium
    # benchmarks
    wrk nghttp2-client
)
# Node.js runs the second gRPC client of the tests (@grpc/grpc-js from
# npm). Any node on the PATH will do; Debian's is installed when none is.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    packages+=(nodejs npm)
fi
fi
# The peers of bench/peers.sh: Go and golang.org/x/time/rate, built from
# Debian's source package with no module download.
if [ "${1:-all}" = bench ]; then
    packages+=(golang-go golang-golang-x-time-dev)
fi

missing=()
for p in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$p")
    fi
done

if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi

cmd="apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
    echo "weir: missing Debian packages: ${missing[*]}" >&2
    echo "run as root:  apt-get update && $cmd" >&2
    exit 1
fi

echo "weir: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
$cmd
