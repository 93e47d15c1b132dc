/*
 * bench_grpc.c - `weir bench grpc`: the command line of the gRPC load
 * generator. Parses and checks the flags, builds the request mix, makes
 * sure the target accepts connections, starts the worker threads
 * (bench_worker.c), prints a progress line every second while they run,
 * then merges their counts and histograms into the summary.
 *
 * The main thread blocks SIGINT and SIGTERM before starting the workers
 * (they inherit the mask) and waits for them with sigtimedwait(): an
 * interrupt ends the run early, with a summary of what was measured.
 * SIGPIPE is ignored: a write to a reset connection fails with EPIPE,
 * and the connection is reopened.
 */
#define _POSIX_C_SOURCE 200809L

#include "bench_grpc.h"
#include "number.h"
#include "readfile.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "cli.h"

#define NS_PER_MS 1000000u
/** How long the first connection may take before the target counts as
 *  unreachable. */
#define CONNECT_TIMEOUT_MS 3000
/** A run in which no connection has spoken HTTP/2 after this long stops. */
#define NO_H2_GRACE_NS (2ull * WEIR_BENCH_NS_PER_S)
#define DEFAULT_DOMAIN "bench"
#define DEFAULT_DESCRIPTOR "key=k1"
#define DEFAULT_KEYS 1000u

/* In parts: ISO C caps a string literal at 4095 bytes. */
static const char *const help_text[] = {
    "usage: weir bench grpc [OPTIONS]\n"
    "\n"
    "Load-tests weir's gRPC service: Envoy's ShouldRateLimit\n"
    "(" WEIR_BENCH_GRPC_PATH ")\n"
    "over HTTP/2 without TLS, as Envoy calls it. It opens --connections\n"
    "connections, keeps --streams calls in flight on each (or paces them with\n"
    "--rate), shows progress on stderr every second, and at the end prints\n"
    "requests and decisions per second, the answers (OK, OVER_LIMIT), the\n"
    "errors by gRPC status, and the latency percentiles.\n"
    "\n",
    "where:\n"
    "  --target HOST:PORT     the gRPC listener (default 127.0.0.1:8081, the\n"
    "                         default of 'weir serve --grpc'); [::1]:8081 for IPv6\n"
    "  --connections N        HTTP/2 connections, 1..10000 (default 4)\n"
    "  --streams M            calls in flight on each connection, 1..100000\n"
    "                         (default 32); the server's --grpc-max-streams\n"
    "                         (default 1024) caps what it runs at once\n"
    "  --threads T            client threads, each with its own event loop; the\n"
    "                         connections are split over them (default 1)\n"
    "\n"
    "how long (SECONDS: 10, 2.5, or with a unit: 500ms, 30s, 2m):\n"
    "  --duration SECONDS     how long to measure (default 10)\n"
    "  --warmup SECONDS       run this long first, not counted (default 1; 0 for\n"
    "                         none). Its requests still count against the limits.\n"
    "\n",
    "what to send (every call: one RateLimitRequest):\n"
    "  --domain D             the domain (default " DEFAULT_DOMAIN ")\n"
    "  --descriptor K=V[,K=V...]\n"
    "                         one descriptor; ',' separates its entries. Give the\n"
    "                         flag again for more descriptors in the same request\n"
    "                         (default " DEFAULT_DESCRIPTOR ")\n"
    "  --keys K               every {n} in a value becomes a random number 0..K-1,\n"
    "                         drawn for each request (one number for all the {n}\n"
    "                         of a request), 1..4294967296 (default 1000), e.g.\n"
    "                         --descriptor user=u{n} --keys 100000\n"
    "  --file PATH            a request mix instead of --domain and --descriptor:\n"
    "                         one request per line, a line picked at random for\n"
    "                         each call (repeat a line to weight it):\n"
    "                           DOMAIN KEY=VALUE[,KEY=VALUE...][;KEY=VALUE[,...]...]\n"
    "                         spaces between the domain and the descriptors; ','\n"
    "                         separates the entries of a descriptor, ';' the\n"
    "                         descriptors; keys and values hold no spaces, ',' or\n"
    "                         ';', keys no '='; {n} works as with --keys; blank\n"
    "                         lines and lines starting with '#' are skipped.\n"
    "                         Example line:  api remote_address=10.0.0.{n};path=/login\n"
    "                         Caps: 4096 bytes per line, 64 descriptors per\n"
    "                         request, 64 entries per descriptor, 100000 lines.\n"
    "  --hits N               hits_addend of every request, 1..4294967295\n"
    "                         (default: not sent, which counts as 1)\n"
    "  --encode auto|table|live\n"
    "                         table: encode every distinct request before the\n"
    "                         run; live: encode each request as it is sent;\n"
    "                         auto (default): table up to 262144 distinct requests\n"
    "\n",
    "how fast:\n"
    "  --rate R               offer R requests/s in total, paced evenly over the\n"
    "                         connections by a 0.1..1 ms tick (default 0: as fast\n"
    "                         as the server answers). --streams still caps the\n"
    "                         calls in flight per connection; a request that\n"
    "                         could not go when it was due (every stream busy, or\n"
    "                         the connection down) counts its latency from when\n"
    "                         it was due, so a server that falls behind shows it.\n"
    "                         For the latency at 80% of the peak: run once\n"
    "                         without --rate, then with 0.8 x its requests/s.\n"
    "\n"
    "output:\n"
    "  --json                 print the summary as one JSON object on stdout\n"
    "\n",
    "Counted: requests sent after the warmup and finished before the end.\n"
    "decisions = answered requests x their descriptors. Latency: from sending a\n"
    "call to its end, of the answered calls (grpc-status 0), read from a\n"
    "histogram of 64 buckets per power of two: percentiles within 0.8%, max\n"
    "exact. A connection refused or reset mid-run is reopened after 100 ms (the\n"
    "summary says so); its calls in flight count as lost. Ctrl-C ends the run\n"
    "early with a summary of what was measured.\n"
    "\n"
    "examples:\n"
    "  weir bench grpc\n"
    "  weir bench grpc --connections 8 --streams 64 --duration 30\n"
    "  weir bench grpc --descriptor user=u{n} --keys 100000 --threads 2\n"
    "  weir bench grpc --rate 40000          # latency at a fixed offered load\n"
    "  weir bench grpc --file mix.txt --json\n"
    "\n"
    "exit status: 0 the run completed (gRPC errors are reported, not fatal),\n"
    "1 the target could not be reached or does not speak HTTP/2, 2 bad\n"
    "arguments or a bad --file.\n",
};

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("weir bench grpc: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs("\nrun 'weir bench grpc --help' for the options\n", stderr);
    va_end(ap);
    return 2;
}

/* ------------------------------------------------------------ values */

bool weir_bench_parse_seconds(const char *s, uint64_t max_ns, uint64_t *ns)
{
    int64_t us;
    if (weir_duration_parse(s, &us) != WEIR_OK || (uint64_t)us > max_ns / 1000u)
        return false;
    *ns = (uint64_t)us * 1000u;
    return true;
}

bool weir_bench_parse_target(const char *s, char *host, size_t host_cap, char *port,
                             size_t port_cap)
{
    const char *colon, *h = s;
    size_t hn;
    if (*s == '[') {
        const char *close = strchr(s, ']');
        if (!close || close[1] != ':')
            return false;
        h = s + 1;
        hn = (size_t)(close - h);
        colon = close + 1;
    } else {
        colon = strrchr(s, ':');
        if (!colon)
            return false;
        hn = (size_t)(colon - s);
        if (memchr(s, ':', hn))
            return false; /* an IPv6 address needs brackets */
    }
    uint64_t p;
    if (hn == 0 || hn >= host_cap || !weir_cli_parse_u64(colon + 1, 65535, &p) || p == 0 ||
        strlen(colon + 1) >= port_cap)
        return false;
    memcpy(host, h, hn);
    host[hn] = '\0';
    snprintf(port, port_cap, "%llu", (unsigned long long)p);
    return true;
}

/* ------------------------------------------------------------ flags */

typedef enum opt_id {
    O_TARGET,
    O_CONNECTIONS,
    O_STREAMS,
    O_DURATION,
    O_WARMUP,
    O_THREADS,
    O_DOMAIN,
    O_DESCRIPTOR,
    O_KEYS,
    O_FILE,
    O_HITS,
    O_RATE,
    O_ENCODE,
    O_JSON,
    O_COUNT
} opt_id;

static const struct option_row {
    const char *name;
    bool flag; /* takes no value */
    bool repeat;
} options[O_COUNT] = {
    [O_TARGET] = {"target", false, false},   [O_CONNECTIONS] = {"connections", false, false},
    [O_STREAMS] = {"streams", false, false}, [O_DURATION] = {"duration", false, false},
    [O_WARMUP] = {"warmup", false, false},   [O_THREADS] = {"threads", false, false},
    [O_DOMAIN] = {"domain", false, false},   [O_DESCRIPTOR] = {"descriptor", false, true},
    [O_KEYS] = {"keys", false, false},       [O_FILE] = {"file", false, false},
    [O_HITS] = {"hits", false, false},       [O_RATE] = {"rate", false, false},
    [O_ENCODE] = {"encode", false, false},   [O_JSON] = {"json", true, false},
};

static int int_option(const char *const *val, opt_id id, uint64_t min, uint64_t max, uint64_t *out)
{
    if (!val[id])
        return 0;
    if (!weir_cli_parse_u64(val[id], max, out) || *out < min)
        return usage_error("--%s wants an integer %llu..%llu, not '%s'", options[id].name,
                           (unsigned long long)min, (unsigned long long)max, val[id]);
    return 0;
}

static int u32_option(const char *const *val, opt_id id, uint32_t min, uint32_t max, uint32_t *out)
{
    uint64_t v = *out;
    int rc = int_option(val, id, min, max, &v);
    *out = (uint32_t)v;
    return rc;
}

static int seconds_option(const char *const *val, opt_id id, bool zero_ok, uint64_t *out)
{
    if (!val[id])
        return 0;
    if (!weir_bench_parse_seconds(val[id], (uint64_t)WEIR_BENCH_MAX_SECONDS * WEIR_BENCH_NS_PER_S,
                                  out))
        return usage_error("--%s wants a duration such as 10 (seconds), " WEIR_DURATION_EXAMPLES
                           " (at most %u s), not '%s'",
                           options[id].name, WEIR_BENCH_MAX_SECONDS, val[id]);
    if (!zero_ok && *out == 0)
        return usage_error("--%s must be more than 0", options[id].name);
    return 0;
}

void weir_bench_grpc_opts_free(weir_bench_grpc_opts *o)
{
    free(o->descriptors);
    o->descriptors = NULL;
}

int weir_bench_grpc_parse_args(int argc, char **argv, weir_bench_grpc_opts *o)
{
    memset(o, 0, sizeof *o);
    const char *val[O_COUNT] = {NULL};
    const char **descs = malloc((size_t)(argc > 0 ? argc : 1) * sizeof *descs);
    if (!descs) {
        fputs("weir bench grpc: out of memory\n", stderr);
        return 1;
    }
    size_t n_descs = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            free(descs);
            for (size_t k = 0; k < sizeof help_text / sizeof help_text[0]; k++)
                fputs(help_text[k], stdout);
            return 0;
        }
        if (strncmp(arg, "--", 2) != 0) {
            free(descs);
            return usage_error("unexpected argument '%s' (options start with --)", arg);
        }
        const char *name = arg + 2;
        const char *eq = strchr(name, '=');
        size_t n = eq ? (size_t)(eq - name) : strlen(name);
        int id = -1;
        for (int j = 0; j < O_COUNT; j++)
            if (strlen(options[j].name) == n && strncmp(options[j].name, name, n) == 0)
                id = j;
        if (id < 0) {
            free(descs);
            return usage_error("unknown option '%s'", arg);
        }
        const char *v;
        if (options[id].flag) {
            if (eq) {
                free(descs);
                return usage_error("--%s takes no value", options[id].name);
            }
            v = "";
        } else {
            v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
            if (!v) {
                free(descs);
                return usage_error("--%s needs a value", options[id].name);
            }
        }
        if (options[id].repeat) {
            descs[n_descs++] = v;
            continue;
        }
        if (val[id]) {
            free(descs);
            return usage_error("--%s given twice", options[id].name);
        }
        val[id] = v;
    }

    o->descriptors = descs;
    o->n_descriptors = n_descs;
    o->connections = 4;
    o->streams = 32;
    o->threads = 1;
    o->duration_ns = 10ull * WEIR_BENCH_NS_PER_S;
    o->warmup_ns = WEIR_BENCH_NS_PER_S;
    o->keys = DEFAULT_KEYS;
    o->json = val[O_JSON] != NULL;
    o->domain = val[O_DOMAIN];
    o->file = val[O_FILE];

    const char *target = val[O_TARGET] ? val[O_TARGET] : "127.0.0.1:8081";
    int rc = 0;
    if (!weir_bench_parse_target(target, o->host, sizeof o->host, o->port, sizeof o->port))
        rc = usage_error("--target wants HOST:PORT (or [IPV6]:PORT), not '%s'", target);
    else if (strlen(target) >= sizeof o->authority)
        rc = usage_error("--target '%s' is too long", target);
    else
        snprintf(o->authority, sizeof o->authority, "%s", target);
    if (!rc)
        rc = u32_option(val, O_CONNECTIONS, 1, WEIR_BENCH_MAX_CONNECTIONS, &o->connections);
    if (!rc)
        rc = u32_option(val, O_STREAMS, 1, WEIR_BENCH_MAX_STREAMS, &o->streams);
    if (!rc)
        rc = u32_option(val, O_THREADS, 1, WEIR_BENCH_MAX_THREADS, &o->threads);
    if (!rc)
        rc = seconds_option(val, O_DURATION, false, &o->duration_ns);
    if (!rc)
        rc = seconds_option(val, O_WARMUP, true, &o->warmup_ns);
    if (!rc)
        rc = int_option(val, O_KEYS, 1, WEIR_BENCH_MAX_KEYS, &o->keys);
    o->keys_given = val[O_KEYS] != NULL;
    if (!rc)
        rc = int_option(val, O_HITS, 1, UINT32_MAX, &o->hits);
    if (!rc)
        rc = int_option(val, O_RATE, 0, WEIR_BENCH_MAX_RATE, &o->rate);
    if (!rc && val[O_ENCODE]) {
        if (strcmp(val[O_ENCODE], "auto") == 0)
            o->encode = WEIR_BENCH_ENCODE_AUTO;
        else if (strcmp(val[O_ENCODE], "table") == 0)
            o->encode = WEIR_BENCH_ENCODE_TABLE;
        else if (strcmp(val[O_ENCODE], "live") == 0)
            o->encode = WEIR_BENCH_ENCODE_LIVE;
        else
            rc = usage_error("--encode wants auto, table or live, not '%s'", val[O_ENCODE]);
    }
    if (!rc && o->threads > o->connections)
        rc = usage_error("--threads %u is more than --connections %u: each thread needs a "
                         "connection of its own",
                         o->threads, o->connections);
    if (!rc && o->file && (o->domain || n_descs))
        rc = usage_error("--file holds the domains and descriptors: give it, or --domain and "
                         "--descriptor, not both");
    if (!rc && val[O_DOMAIN] && !val[O_DOMAIN][0])
        rc = usage_error("--domain is empty");
    if (!rc && o->file && !o->file[0])
        rc = usage_error("--file is empty");
    if (rc) {
        weir_bench_grpc_opts_free(o);
        return rc;
    }
    return -1;
}

/* ------------------------------------------------------------ the mix */

int weir_bench_grpc_load_mix(const weir_bench_grpc_opts *o, weir_bench_mix *m)
{
    weir_bench_mix_error err = {0, ""};
    if (o->file) {
        char *data = NULL;
        size_t len = 0;
        if (!weir_cli_read_file("weir bench grpc: --file ", o->file, WEIR_BENCH_MAX_FILE_BYTES,
                                &data, &len))
            return 2;
        bool ok = weir_bench_mix_parse_file(m, data, len, &err);
        free(data);
        if (!ok) {
            if (err.line)
                fprintf(stderr, "weir bench grpc: %s:%llu: %s\n", o->file,
                        (unsigned long long)err.line, err.reason);
            else
                fprintf(stderr, "weir bench grpc: %s: %s\n", o->file, err.reason);
            return 2;
        }
    } else {
        static const char *const fallback[] = {DEFAULT_DESCRIPTOR};
        const char *const *descs = o->n_descriptors ? o->descriptors : fallback;
        size_t n = o->n_descriptors ? o->n_descriptors : 1;
        if (!weir_bench_mix_add_flags(m, o->domain ? o->domain : DEFAULT_DOMAIN, descs, n, &err))
            return usage_error("%s", err.reason);
    }
    if (o->keys_given && !m->has_mark)
        return usage_error("--keys has nothing to do: no value holds {n} (e.g. --descriptor "
                           "user=u{n})");
    return -1;
}

/* ------------------------------------------------------------ connecting */

/* One blocking connection attempt with a timeout; 0 or an errno. */
static int try_connect(const struct addrinfo *ai)
{
    int fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
    if (fd < 0)
        return errno;
    int flags = fcntl(fd, F_GETFL, 0);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
        int e = errno;
        close(fd);
        return e;
    }
    int e = 0;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
        e = errno;
        if (e == EINPROGRESS) {
            struct pollfd p = {.fd = fd, .events = POLLOUT};
            int n;
            do
                n = poll(&p, 1, CONNECT_TIMEOUT_MS);
            while (n < 0 && errno == EINTR);
            socklen_t len = sizeof e;
            if (n == 0)
                e = ETIMEDOUT;
            else if (n < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &len) < 0)
                e = errno;
        }
    }
    close(fd);
    return e;
}

/* Resolve the target and connect to it once: its address into @run.
 * Prints why not. */
static bool reach_target(const weir_bench_grpc_opts *o, weir_bench_run *run)
{
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    int g = getaddrinfo(o->host, o->port, &hints, &res);
    if (g != 0) {
        fprintf(stderr, "weir bench grpc: cannot resolve %s: %s\n", o->host, gai_strerror(g));
        return false;
    }
    int e = 0;
    for (const struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        if (ai->ai_addrlen > sizeof run->addr)
            continue;
        e = try_connect(ai);
        if (e == 0) {
            memcpy(&run->addr, ai->ai_addr, ai->ai_addrlen);
            run->addr_len = ai->ai_addrlen;
            freeaddrinfo(res);
            return true;
        }
    }
    freeaddrinfo(res);
    fprintf(stderr,
            "weir bench grpc: cannot connect to %s: %s\n"
            "  (is 'weir serve' running with its gRPC listener, --grpc, there?)\n",
            o->authority, strerror(e ? e : EADDRNOTAVAIL));
    return false;
}

/* ------------------------------------------------------------ output */

static const char *const grpc_names[WEIR_BENCH_GRPC_CODES] = {
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
    "other",
};

uint64_t weir_bench_counts_errors(const weir_bench_counts *c)
{
    uint64_t n = c->unknown_code + c->http_errors + c->resets + c->lost;
    for (unsigned i = 1; i < WEIR_BENCH_GRPC_CODES; i++)
        n += c->grpc[i];
    return n;
}

void weir_bench_counts_add(weir_bench_counts *into, const weir_bench_counts *from)
{
    into->requests += from->requests;
    into->decisions += from->decisions;
    into->ok += from->ok;
    into->over_limit += from->over_limit;
    into->unknown_code += from->unknown_code;
    for (unsigned i = 0; i < WEIR_BENCH_GRPC_CODES; i++)
        into->grpc[i] += from->grpc[i];
    into->http_errors += from->http_errors;
    into->resets += from->resets;
    into->lost += from->lost;
    into->sessions += from->sessions;
    into->connect_failures += from->connect_failures;
    into->disconnects += from->disconnects;
    into->reconnects += from->reconnects;
}

/* 10s, 2.5s, 0.25s */
static void format_seconds(uint64_t ns, char *buf, size_t len)
{
    snprintf(buf, len, "%.3f", (double)ns / 1e9);
    char *end = buf + strlen(buf);
    while (end[-1] == '0')
        *--end = '\0';
    if (end[-1] == '.')
        *--end = '\0';
    snprintf(end, len - (size_t)(end - buf), "s");
}

/* 812ns, 41.3us, 1.25ms, 2.50s */
static void format_ns(uint64_t ns, char *buf, size_t len)
{
    if (ns < 1000)
        snprintf(buf, len, "%lluns", (unsigned long long)ns);
    else if (ns < 1000000)
        snprintf(buf, len, "%.1fus", (double)ns / 1e3);
    else if (ns < 1000000000)
        snprintf(buf, len, "%.2fms", (double)ns / 1e6);
    else
        snprintf(buf, len, "%.2fs", (double)ns / 1e9);
}

typedef struct summary {
    const weir_bench_grpc_opts *o;
    weir_bench_counts c;
    weir_hist hist;
    uint64_t measured_ns;
    bool interrupted;
    bool table;
    size_t distinct;
    const char *last_error;
    const char *grpc_message;
} summary;

static const uint32_t pct_ppm[] = {500000, 900000, 990000, 999000};
static const char *const pct_name[] = {"p50", "p90", "p99", "p999"};
static const char *const pct_label[] = {"p50", "p90", "p99", "p99.9"};
#define N_PCT (sizeof pct_ppm / sizeof pct_ppm[0])

static double per_second(uint64_t n, uint64_t ns)
{
    return ns ? (double)n * 1e9 / (double)ns : 0.0;
}

static void print_text(const summary *s)
{
    const weir_bench_grpc_opts *o = s->o;
    const weir_bench_counts *c = &s->c;
    char a[32], b[32];
    format_seconds(s->measured_ns, a, sizeof a);
    format_seconds(o->warmup_ns, b, sizeof b);
    printf("weir bench grpc: %s, %u connection%s x %u stream%s, %u thread%s, %s measured "
           "%s%s%s%s\n",
           o->authority, o->connections, o->connections == 1 ? "" : "s", o->streams,
           o->streams == 1 ? "" : "s", o->threads, o->threads == 1 ? "" : "s", a,
           o->warmup_ns ? "after a " : "with no warmup", o->warmup_ns ? b : "",
           o->warmup_ns ? " warmup" : "", s->interrupted ? " (interrupted)" : "");
    printf("  %zu distinct request%s, encoded %s\n", s->distinct, s->distinct == 1 ? "" : "s",
           s->table ? "ahead of time" : "as sent");
    if (o->rate)
        printf("  offered %llu requests/s, paced; a request sent late counts its latency from "
               "when it was due\n",
               (unsigned long long)o->rate);
    uint64_t answered = c->ok + c->over_limit;
    printf("requests     %llu  (%.1f/s)\n", (unsigned long long)c->requests,
           per_second(c->requests, s->measured_ns));
    printf("decisions    %llu  (%.1f/s", (unsigned long long)c->decisions,
           per_second(c->decisions, s->measured_ns));
    if (answered)
        printf(", %.2f descriptor%s per request", (double)c->decisions / (double)answered,
               c->decisions == answered ? "" : "s");
    printf(")\n");
    printf("answers      OK %llu, OVER_LIMIT %llu\n", (unsigned long long)c->ok,
           (unsigned long long)c->over_limit);
    uint64_t errors = weir_bench_counts_errors(c);
    printf("errors       %llu", (unsigned long long)errors);
    const char *sep = ": ";
    for (unsigned i = 1; i < WEIR_BENCH_GRPC_CODES; i++)
        if (c->grpc[i]) {
            printf("%s%s %llu", sep, grpc_names[i], (unsigned long long)c->grpc[i]);
            sep = ", ";
        }
    const struct {
        const char *name;
        uint64_t n;
    } other[] = {
        {"no overall_code", c->unknown_code},
        {"HTTP (no grpc-status)", c->http_errors},
        {"reset streams", c->resets},
        {"lost with their connection", c->lost},
    };
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++)
        if (other[i].n) {
            printf("%s%s %llu", sep, other[i].name, (unsigned long long)other[i].n);
            sep = ", ";
        }
    printf("\n");
    if (errors && s->grpc_message[0])
        printf("             first grpc-message: %s\n", s->grpc_message);
    if (s->hist.count) {
        printf("latency     ");
        for (size_t i = 0; i < N_PCT; i++) {
            format_ns(weir_hist_percentile(&s->hist, pct_ppm[i]), a, sizeof a);
            printf(" %s %s", pct_label[i], a);
        }
        format_ns(s->hist.max, a, sizeof a);
        printf(" max %s\n", a);
        printf("             (of the answered requests; percentiles within 0.8%%, max exact)\n");
    } else {
        printf("latency      none: no request was answered\n");
    }
    if (c->connect_failures || c->disconnects) {
        printf("connections  %llu failed to connect, %llu dropped mid-run; %llu reconnect%s, "
               "each after 100 ms\n",
               (unsigned long long)c->connect_failures, (unsigned long long)c->disconnects,
               (unsigned long long)c->reconnects, c->reconnects == 1 ? "" : "s");
        if (s->last_error[0])
            printf("             last: %s\n", s->last_error);
    }
}

static void print_json(const summary *s)
{
    const weir_bench_grpc_opts *o = s->o;
    const weir_bench_counts *c = &s->c;
    weir_buf b;
    weir_buf_init(&b, (size_t)1 << 20);
    weir_buf_printf(&b, "{\"target\":\"");
    weir_buf_put_json_str(&b, o->authority, strlen(o->authority));
    weir_buf_printf(&b,
                    "\",\"connections\":%u,\"streams\":%u,\"threads\":%u,"
                    "\"duration_s\":%.3f,\"warmup_s\":%.3f,\"rate\":%llu,\"interrupted\":%s,"
                    "\"encode\":\"%s\",\"distinct_requests\":%zu,",
                    o->connections, o->streams, o->threads, (double)s->measured_ns / 1e9,
                    (double)o->warmup_ns / 1e9, (unsigned long long)o->rate,
                    s->interrupted ? "true" : "false", s->table ? "table" : "live", s->distinct);
    weir_buf_printf(&b,
                    "\"requests\":%llu,\"requests_per_s\":%.1f,\"decisions\":%llu,"
                    "\"decisions_per_s\":%.1f,\"ok\":%llu,\"over_limit\":%llu,\"errors\":%llu,",
                    (unsigned long long)c->requests, per_second(c->requests, s->measured_ns),
                    (unsigned long long)c->decisions, per_second(c->decisions, s->measured_ns),
                    (unsigned long long)c->ok, (unsigned long long)c->over_limit,
                    (unsigned long long)weir_bench_counts_errors(c));
    weir_buf_printf(&b, "\"grpc_status\":{");
    const char *sep = "";
    for (unsigned i = 1; i < WEIR_BENCH_GRPC_CODES; i++)
        if (c->grpc[i]) {
            weir_buf_printf(&b, "%s\"%s\":%llu", sep, grpc_names[i],
                            (unsigned long long)c->grpc[i]);
            sep = ",";
        }
    weir_buf_printf(&b,
                    "},\"no_overall_code\":%llu,\"http_errors\":%llu,\"resets\":%llu,"
                    "\"lost\":%llu,",
                    (unsigned long long)c->unknown_code, (unsigned long long)c->http_errors,
                    (unsigned long long)c->resets, (unsigned long long)c->lost);
    weir_buf_printf(&b, "\"latency_ns\":{\"count\":%llu", (unsigned long long)s->hist.count);
    for (size_t i = 0; i < N_PCT; i++)
        weir_buf_printf(&b, ",\"%s\":%llu", pct_name[i],
                        (unsigned long long)weir_hist_percentile(&s->hist, pct_ppm[i]));
    weir_buf_printf(&b, ",\"max\":%llu},", (unsigned long long)s->hist.max);
    weir_buf_printf(&b,
                    "\"sessions\":%llu,\"connect_failures\":%llu,\"disconnects\":%llu,"
                    "\"reconnects\":%llu,\"last_error\":\"",
                    (unsigned long long)c->sessions, (unsigned long long)c->connect_failures,
                    (unsigned long long)c->disconnects, (unsigned long long)c->reconnects);
    weir_buf_put_json_str(&b, s->last_error, strlen(s->last_error));
    weir_buf_printf(&b, "\",\"grpc_message\":\"");
    weir_buf_put_json_str(&b, s->grpc_message, strlen(s->grpc_message));
    weir_buf_printf(&b, "\"}\n");
    if (weir_buf_ok(&b))
        fwrite(b.p, 1, b.len, stdout);
    weir_buf_free(&b);
}

/* ------------------------------------------------------------ the run */

typedef struct progress {
    bool tty;
    bool printed;
    uint64_t last_ns, last_decisions;
} progress;

static void show_progress(progress *p, const weir_bench_run *run, weir_bench_worker **w, uint32_t n,
                          uint64_t now)
{
    uint64_t done = 0, decisions = 0, errors = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t d, x, e, h;
        bool f;
        weir_bench_worker_progress(w[i], &d, &x, &e, &h, &f);
        done += d;
        decisions += x;
        errors += e;
    }
    double rate = per_second(decisions - p->last_decisions, now - p->last_ns);
    p->last_ns = now;
    p->last_decisions = decisions;
    char line[160];
    snprintf(line, sizeof line, "%6.1fs  %10.0f decisions/s  %12llu requests  %llu errors%s",
             (double)(now - run->t0) / 1e9, rate, (unsigned long long)done,
             (unsigned long long)errors, now < run->warmup_end ? "  (warmup)" : "");
    if (p->tty)
        fprintf(stderr, "\r%s\033[K", line);
    else
        fprintf(stderr, "%s\n", line);
    p->printed = true;
}

/* Wait for the workers, printing progress each second. An interrupt, or
 * no HTTP/2 session NO_H2_GRACE_NS into the run, sets run->stop_at.
 * Returns whether an interrupt came. */
static bool wait_workers(weir_bench_run *run, weir_bench_worker **w, uint32_t n,
                         const sigset_t *sigs)
{
    progress p = {isatty(STDERR_FILENO) == 1, false, run->t0, 0};
    uint64_t next = run->t0 + WEIR_BENCH_NS_PER_S;
    bool interrupted = false;
    for (;;) {
        bool all = true;
        uint64_t sessions = 0;
        for (uint32_t i = 0; i < n; i++) {
            uint64_t d, x, e, h;
            bool f;
            weir_bench_worker_progress(w[i], &d, &x, &e, &h, &f);
            all = all && f;
            sessions += h;
        }
        if (all)
            break;
        uint64_t now = uv_hrtime();
        if (sessions == 0 && now - run->t0 > NO_H2_GRACE_NS && atomic_load(&run->stop_at) == 0)
            atomic_store(&run->stop_at, now); /* nobody there speaks HTTP/2 */
        if (now >= next) {
            show_progress(&p, run, w, n, now);
            while (next <= now)
                next += WEIR_BENCH_NS_PER_S;
        }
        uint64_t wait = next - now;
        if (wait > 100u * NS_PER_MS)
            wait = 100u * NS_PER_MS;
        struct timespec ts = {(time_t)(wait / WEIR_BENCH_NS_PER_S),
                              (long)(wait % WEIR_BENCH_NS_PER_S)};
        int sig = sigtimedwait(sigs, NULL, &ts);
        if (sig > 0 && !interrupted) {
            interrupted = true;
            atomic_store(&run->stop_at, uv_hrtime());
        }
    }
    if (p.printed && p.tty)
        fputc('\n', stderr);
    return interrupted;
}

int weir_cli_bench_grpc(int argc, char **argv)
{
    weir_bench_grpc_opts o;
    int rc = weir_bench_grpc_parse_args(argc, argv, &o);
    if (rc >= 0)
        return rc;
    weir_bench_mix mix;
    weir_bench_mix_init(&mix);
    rc = weir_bench_grpc_load_mix(&o, &mix);
    uint64_t distinct = weir_bench_mix_distinct(&mix, o.keys);
    bool table = o.encode == WEIR_BENCH_ENCODE_TABLE ||
                 (o.encode == WEIR_BENCH_ENCODE_AUTO && distinct <= WEIR_BENCH_AUTO_TABLE);
    if (rc < 0 && table && distinct > WEIR_BENCH_MAX_TABLE)
        rc = usage_error("--encode table: %llu distinct requests, over the cap of %u (lower "
                         "--keys, or --encode live)",
                         (unsigned long long)distinct, WEIR_BENCH_MAX_TABLE);
    if (rc < 0 && table && !weir_bench_mix_encode_all(&mix, o.keys, o.hits)) {
        fprintf(stderr,
                "weir bench grpc: the requests take more than %zu MiB encoded (lower "
                "--keys, or --encode live)\n",
                WEIR_BENCH_MAX_TABLE_BYTES >> 20);
        rc = 2;
    }
    if (rc >= 0) {
        weir_bench_mix_free(&mix);
        weir_bench_grpc_opts_free(&o);
        return rc;
    }

    weir_bench_run run;
    memset(&run, 0, sizeof run);
    run.opts = &o;
    run.mix = &mix;
    run.table = table;
    atomic_init(&run.stop_at, 0);
    weir_bench_worker **w = NULL;
    uint32_t started = 0;
    rc = 1;
    if (!reach_target(&o, &run))
        goto out;
    w = calloc(o.threads, sizeof *w);
    if (!w) {
        fputs("weir bench grpc: out of memory\n", stderr);
        goto out;
    }
    run.t0 = uv_hrtime();
    run.warmup_end = run.t0 + o.warmup_ns;
    run.end = run.warmup_end + o.duration_ns;
    for (uint32_t i = 0, first = 0; i < o.threads; i++) {
        /* the connections split as evenly as they go */
        uint32_t n = o.connections / o.threads + (i < o.connections % o.threads ? 1 : 0);
        w[i] = weir_bench_worker_new(&run, i, first, n);
        if (!w[i]) {
            fputs("weir bench grpc: out of memory\n", stderr);
            goto out;
        }
        first += n;
    }

    /* a write to a connection the server reset fails with EPIPE instead */
    signal(SIGPIPE, SIG_IGN);
    sigset_t sigs, old;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, &old);
    for (; started < o.threads; started++)
        if (!weir_bench_worker_start(w[started])) {
            fputs("weir bench grpc: cannot start a thread\n", stderr);
            atomic_store(&run.stop_at, uv_hrtime());
            break;
        }
    bool interrupted = wait_workers(&run, w, started, &sigs);
    for (uint32_t i = 0; i < started; i++)
        weir_bench_worker_join(w[i]);
    /* drop the interrupts that came after the last wait, then unblock */
    struct timespec zero = {0, 0};
    while (sigtimedwait(&sigs, NULL, &zero) > 0)
        ;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (started < o.threads)
        goto out;

    summary s;
    memset(&s, 0, sizeof s);
    s.o = &o;
    s.interrupted = interrupted;
    s.table = table;
    s.distinct = (size_t)distinct;
    s.last_error = "";
    s.grpc_message = "";
    weir_hist_init(&s.hist);
    for (uint32_t i = 0; i < o.threads; i++) {
        weir_bench_counts_add(&s.c, weir_bench_worker_counts(w[i]));
        weir_hist_merge(&s.hist, weir_bench_worker_hist(w[i]));
        if (weir_bench_worker_last_error(w[i])[0])
            s.last_error = weir_bench_worker_last_error(w[i]);
        if (!s.grpc_message[0])
            s.grpc_message = weir_bench_worker_grpc_message(w[i]);
    }
    uint64_t stop = atomic_load(&run.stop_at);
    uint64_t end = stop && stop < run.end ? stop : run.end;
    s.measured_ns = end > run.warmup_end ? end - run.warmup_end : 0;
    if (s.c.sessions == 0) {
        fprintf(stderr,
                "weir bench grpc: %s accepted connections but never spoke HTTP/2%s%s\n"
                "  (is it weir's gRPC listener, --grpc, rather than its HTTP one?)\n",
                o.authority, s.last_error[0] ? ": " : "", s.last_error);
        goto out;
    }
    if (o.json)
        print_json(&s);
    else
        print_text(&s);
    fflush(stdout);
    rc = 0;
out:
    for (uint32_t i = 0; w && i < o.threads; i++)
        weir_bench_worker_free(w[i]);
    free(w);
    weir_bench_mix_free(&mix);
    weir_bench_grpc_opts_free(&o);
    return rc;
}
