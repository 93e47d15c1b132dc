/*
 * bench_grpc.h - `weir bench grpc`, a load generator for weir's gRPC
 * service (Envoy's ShouldRateLimit over HTTP/2 without TLS): its options,
 * the counts it reports, and the load-generating threads (bench_worker.c),
 * each a libuv loop with its share of the HTTP/2 client connections.
 *
 * Threads: the options, the mix and the run are written by the main
 * thread before the workers start and only read by them, except
 * weir_bench_run.stop_at (atomic). A worker's counts and histogram are
 * its own until it has been joined; its progress counters are atomic.
 */
#ifndef WEIR_TOOLS_BENCH_GRPC_H
#define WEIR_TOOLS_BENCH_GRPC_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "bench_hist.h"
#include "bench_mix.h"

#define WEIR_BENCH_NS_PER_S 1000000000u
/** The method every request calls. */
#define WEIR_BENCH_GRPC_PATH "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"

/** Caps of the options. */
#define WEIR_BENCH_MAX_CONNECTIONS 10000u
#define WEIR_BENCH_MAX_STREAMS 100000u
#define WEIR_BENCH_MAX_THREADS 64u
#define WEIR_BENCH_MAX_SECONDS 86400u
#define WEIR_BENCH_MAX_KEYS 4294967296u
#define WEIR_BENCH_MAX_RATE 100000000u
/** --encode auto: ahead of time when there are at most this many distinct
 *  requests. Measured (gcc -O2, 2.5 GHz Xeon): a request from the table
 *  costs about 40 ns, one encoded as sent 280 ns (1 descriptor) to 470 ns
 *  (3); a table of 100000 requests builds in about 35 ms. */
#define WEIR_BENCH_AUTO_TABLE 262144u

typedef enum weir_bench_encode_mode {
    WEIR_BENCH_ENCODE_AUTO,
    WEIR_BENCH_ENCODE_TABLE, /* every distinct request ahead of time */
    WEIR_BENCH_ENCODE_LIVE,  /* each request as it is sent */
} weir_bench_encode_mode;

typedef struct weir_bench_grpc_opts {
    char host[256]; /* without brackets */
    char port[8];
    char authority[272]; /* HOST:PORT as given, for :authority */
    uint32_t connections;
    uint32_t streams; /* in flight per connection */
    uint32_t threads;
    uint64_t duration_ns;
    uint64_t warmup_ns;
    const char *domain;
    const char **descriptors; /* the --descriptor values (argv's) */
    size_t n_descriptors;
    uint64_t keys;
    bool keys_given;
    const char *file;
    uint64_t hits; /* 0: not sent */
    uint64_t rate; /* requests per second over all connections; 0: no pacing */
    bool json;
    weir_bench_encode_mode encode;
} weir_bench_grpc_opts;

/** `weir bench grpc`: argv[0] is "grpc". Returns the exit code. */
int weir_cli_bench_grpc(int argc, char **argv);

/**
 * weir_bench_grpc_parse_args() - `weir bench grpc` flags into @o (argv[0]
 * is "grpc"). Returns -1 to go on; otherwise the exit code after printing
 * the help (0) or an error (2). Free @o with weir_bench_grpc_opts_free()
 * after -1.
 */
int weir_bench_grpc_parse_args(int argc, char **argv, weir_bench_grpc_opts *o);
void weir_bench_grpc_opts_free(weir_bench_grpc_opts *o);

/** A duration in weir's grammar (weir/units.h: "2" is seconds, "0.5s",
 *  "250ms", "1m30s") into *@ns (at most @max_ns).
 *  false when malformed or too large. */
bool weir_bench_parse_seconds(const char *s, uint64_t max_ns, uint64_t *ns);
/** "HOST:PORT" or "[V6]:PORT" into @host and @port. */
bool weir_bench_parse_target(const char *s, char *host, size_t host_cap, char *port,
                             size_t port_cap);

/**
 * weir_bench_grpc_load_mix() - the requests of @o (its --file, or its
 * --domain and --descriptor flags) into @m, checked against --keys.
 * Returns -1 to go on; 2 after printing what is wrong (with the file's
 * line number).
 */
int weir_bench_grpc_load_mix(const weir_bench_grpc_opts *o, weir_bench_mix *m);

/* ------------------------------------------------------------ results */

/** gRPC status codes counted one by one (0 .. 16); others share the last
 *  slot. */
#define WEIR_BENCH_GRPC_CODES 18u

typedef struct weir_bench_counts {
    /* Requests sent after the warmup and finished before the end. */
    uint64_t requests;
    uint64_t decisions; /* descriptors of the answered requests */
    uint64_t ok;
    uint64_t over_limit;
    uint64_t unknown_code;                /* grpc-status 0 without an overall_code */
    uint64_t grpc[WEIR_BENCH_GRPC_CODES]; /* by grpc-status; [0] unused */
    uint64_t http_errors;                 /* no grpc-status: an HTTP status, or nothing */
    uint64_t resets;                      /* RST_STREAM with an error code */
    uint64_t lost;                        /* in flight when the connection dropped */
    /* Over the whole run, warmup included. */
    uint64_t sessions;         /* HTTP/2 sessions the server spoke in */
    uint64_t connect_failures; /* connection attempts that failed */
    uint64_t disconnects;      /* sessions that ended before the run did */
    uint64_t reconnects;       /* attempts made 100 ms after a failure */
} weir_bench_counts;

/** Requests that got no answer: every error count. */
uint64_t weir_bench_counts_errors(const weir_bench_counts *c);
void weir_bench_counts_add(weir_bench_counts *into, const weir_bench_counts *from);

/* ------------------------------------------------------------ the run */

typedef struct weir_bench_run {
    const weir_bench_grpc_opts *opts;
    const weir_bench_mix *mix;
    bool table; /* the mix is encoded ahead of time */
    struct sockaddr_storage addr;
    socklen_t addr_len;
    /* uv_hrtime() times: the start, the end of the warmup, the end */
    uint64_t t0, warmup_end, end;
    /** 0, or the time an interrupt ended the run early. */
    _Atomic uint64_t stop_at;
} weir_bench_run;

typedef struct weir_bench_worker weir_bench_worker;

/** A worker for connections @first .. @first + @n - 1 of @run. NULL when
 *  out of memory. */
weir_bench_worker *weir_bench_worker_new(weir_bench_run *run, uint32_t index, uint32_t first,
                                         uint32_t n);
/** Start its thread; false when it cannot be created. */
bool weir_bench_worker_start(weir_bench_worker *w);
void weir_bench_worker_join(weir_bench_worker *w);
void weir_bench_worker_free(weir_bench_worker *w);

/** Progress so far (any thread): requests finished (warmup included),
 *  decisions, errors, HTTP/2 sessions; whether the thread is done. */
void weir_bench_worker_progress(weir_bench_worker *w, uint64_t *done, uint64_t *decisions,
                                uint64_t *errors, uint64_t *sessions, bool *finished);

/* After the join: */
const weir_bench_counts *weir_bench_worker_counts(const weir_bench_worker *w);
const weir_hist *weir_bench_worker_hist(const weir_bench_worker *w);
/** The last connection problem ("" when none). */
const char *weir_bench_worker_last_error(const weir_bench_worker *w);
/** The first grpc-message the server sent ("" when none). */
const char *weir_bench_worker_grpc_message(const weir_bench_worker *w);

#endif /* WEIR_TOOLS_BENCH_GRPC_H */
