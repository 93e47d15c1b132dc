# weir - the two commands:
#   make run    install what is missing, build a release build, run the main job
#   make test   install what is missing, build with sanitizers, run every test
#
# build/       release build (the binary, the libraries, benchmarks; no tests)
# build-asan/  gcc, AddressSanitizer + UndefinedBehaviorSanitizer: every test
# build-tsan/  clang, ThreadSanitizer: the threaded tests
# build-ubsan-clang/  clang, ASan + UBSan: the unit tests and fuzz corpora again
#                     (clang's UBSan checks what gcc's does not, e.g. NULL + 0)
# build-fuzz/  clang, libFuzzer targets (make fuzz)

MAKEFLAGS += --no-print-directory
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE ?= cmake
# -Werror in CI (CI=true), plain warnings for local builds.
WERROR := $(if $(filter true 1 yes,$(CI)),ON,OFF)
FUZZ_SECONDS ?= 60
PREFIX ?= /usr/local

.PHONY: all deps node-deps build install run test test-asan test-tsan test-clang fuzz bench bench-cluster bench-hybrid bench-http bench-late bench-peers bench-redis bench-rss bench-held bench-resp bench-tenants bench-quotas bench-dashboard bench-cms bench-leases format format-check clean

all: build

deps:
	@scripts/deps.sh

# The release build: the binary, the libraries and the benchmarks; the
# tests live in the sanitizer builds (make test).
RELEASE = $(CMAKE) -S . -B build -DCMAKE_BUILD_TYPE=Release -DWEIR_SANITIZE= -DWEIR_TESTS=OFF \
	    -DWEIR_WERROR=$(WERROR) -DCMAKE_INSTALL_PREFIX=$(PREFIX) >/dev/null

build: deps
	$(RELEASE)
	$(CMAKE) --build build -j $(JOBS)

# Headers, libweir.a and libweir.so, weir.pc, the weir binary, its man page
# and a systemd unit under PREFIX (default /usr/local); DESTDIR stages them.
install: build
	DESTDIR=$(DESTDIR) $(CMAKE) --install build

# The service on the example rules and the embedded memory store; it prints
# the URLs it listens on. Ctrl-C stops it. Extra flags: make run ARGS='...'
# Only what the service needs is installed and built (the binary); the rule
# path is absolute, so the command works from any directory (make -C).
# The admin API (127.0.0.1:8082) gets a token of its own, made once into
# build/admin-tokens, and tenants' records in build/quotas.db (SQLite);
# RULES=examples/tenants.yaml serves the tenants example (docs/QUOTAS.md).
RULES ?= $(CURDIR)/examples/rules.yaml
run:
	@scripts/deps.sh run
	$(RELEASE)
	$(CMAKE) --build build -j $(JOBS) --target weir
	@[ -s build/admin-tokens ] || (umask 077; printf 'local %s\n' \
	    "$$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')" > build/admin-tokens)
	@echo "admin token: $$(awk '{print $$2}' build/admin-tokens) (build/admin-tokens)"
	./build/weir serve --rules $(abspath $(RULES)) --admin-token-file $(CURDIR)/build/admin-tokens \
	    --quota-db sqlite://$(CURDIR)/build/quotas.db $(ARGS)

test: deps node-deps test-asan test-tsan test-clang

# The gRPC tests' second client (@grpc/grpc-js), from npm: test tools only.
node-deps:
	@[ -d tests/integration/node/node_modules ] || \
	    (cd tests/integration/node && npm ci --silent --no-audit --no-fund)

test-asan:
	CC=gcc $(CMAKE) -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DWEIR_TEST_STORES=ON \
	    -DWEIR_SANITIZE=address,undefined -DWEIR_WERROR=$(WERROR) >/dev/null
	$(CMAKE) --build build-asan -j $(JOBS)
	ctest --test-dir build-asan --output-on-failure -j $(JOBS)

test-tsan:
	CC=clang $(CMAKE) -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWEIR_TEST_STORES=ON \
	    -DWEIR_SANITIZE=thread -DWEIR_WERROR=$(WERROR) >/dev/null
	$(CMAKE) --build build-tsan -j $(JOBS)
	ctest --test-dir build-tsan --output-on-failure -j $(JOBS) -L threads

test-clang:
	CC=clang $(CMAKE) -S . -B build-ubsan-clang -DCMAKE_BUILD_TYPE=Debug \
	    -DWEIR_SANITIZE=address,undefined -DWEIR_WERROR=$(WERROR) >/dev/null
	$(CMAKE) --build build-ubsan-clang -j $(JOBS)
	ctest --test-dir build-ubsan-clang --output-on-failure -j $(JOBS) -L 'unit|fuzz'

fuzz: deps
	CC=clang $(CMAKE) -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWEIR_FUZZ=ON >/dev/null
	$(CMAKE) --build build-fuzz -j $(JOBS)
	scripts/fuzz.sh build-fuzz $(FUZZ_SECONDS)

bench: build
	./build/weir-bench
	./build/weir-bench-engine
	bench/http.sh

bench-http: build
	bench/http.sh

# Decisions of tenants holding overrides against the same rules without a
# table and against rules without tenants, side by side in one process
# (build/weir-bench-tenants; under a minute).
bench-tenants: build
	./build/weir-bench-tenants

# The count-min limiter (weir/cms.h) against exact counts: 10M distinct
# keys and a Zipf trace through a sketch of at most 4 MB: under-counted
# keys (none), the over-count, wrong denials at three limits, ns per take
# (build/weir-bench-cms; about 30 s).
bench-cms: build
	./build/weir-bench-cms

# The same comparison through `weir serve` over HTTP under wrk: an empty
# quota database, one of 100,000 tenants holding overrides, and rules
# without tenants, one daemon at a time, rounds alternating (bench/quotas.sh).
bench-quotas: build
	bench/quotas.sh

# HTTP decisions/s with two dashboards open (GET /admin/v1/stats once a
# second each) against none, alternating rounds in one run.
bench-dashboard: build
	bench/dashboard.sh

# A concurrency lease's round trip (GET /v1/acquire, POST /v1/release)
# against one GET /v1/check over HTTP, alternating rounds in one run.
bench-leases: build
	bench/leases.sh

# Decisions completed later (the deferred test store) against inline ones,
# side by side: a release build with the test stores, in build-bench/.
bench-late: deps
	$(CMAKE) -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DWEIR_SANITIZE= -DWEIR_TEST_STORES=ON \
	    -DWEIR_WERROR=$(WERROR) >/dev/null
	$(CMAKE) --build build-bench -j $(JOBS) --target weir
	WEIR_BIN=build-bench/weir bench/late.sh

# weir on one local Redis against one token-bucket EVALSHA per descriptor:
# Redis CPU per decision, throughput, latency (bench/redis.sh).
bench-redis: build
	bench/redis.sh

# weir on a Redis Cluster of 3 masters against one master holding every
# slot: Redis CPU and script calls per decision, decisions split over
# masters, the round trips of a request over two masters (bench/cluster.sh).
bench-cluster: build
	bench/cluster.sh

# sync: local (hybrid mode) on one local Redis (bench/hybrid.sh): decisions/s
# against the memory store and sync: global through the same front end,
# and what three instances admit together against the limit at sync
# intervals of 10 ms, 100 ms and 1 s (a plot in build/hybrid_overshoot.svg).
bench-hybrid: build
	bench/hybrid.sh

# weir's CL.THROTTLE against Redis + a Lua token bucket, side by side
# (bench/resp.sh): redis-benchmark, pipelines 1 and 16, 1 or 100k keys.
bench-resp: build
	bench/resp.sh

# weir beside the libraries users pick without it, in the same run
# (bench/peers.sh): Go's golang.org/x/time/rate (Debian) and Node.js's
# rate-limiter-flexible (npm, in bench/peers/node_modules), in process and
# on one Redis. Not part of make test.
# Resident memory around bursts of idle connections (bench/rss.sh).
bench-rss: build
	bench/rss.sh

# What connections whose clients take no answers hold (bench/held.sh).
bench-held: build
	bench/held.sh

bench-peers: build
	@scripts/deps.sh bench
	@[ -d bench/peers/node_modules ] || \
	    (cd bench/peers && npm ci --silent --no-audit --no-fund)
	bench/peers.sh

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

format-check:
	scripts/format-check.sh

clean:
	rm -rf build build-asan build-tsan build-ubsan-clang build-fuzz build-bench
