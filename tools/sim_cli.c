/*
 * sim_cli.c - `weir sim`: the command line. Replays a traffic pattern or a
 * CSV trace through every algorithm with the same limit (sim.c), prints one
 * row per algorithm and, with --svg, draws the same run (sim_svg.c).
 * Invariant: the output depends only on the arguments (and the trace file).
 */
#define _POSIX_C_SOURCE 200809L
#include "number.h"
#include "readfile.h"
#include "sim.h"
#include "sim_svg.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "pattern.h"

__extension__ typedef unsigned __int128 u128;

#define US_PER_S 1000000
#define MILLI 1000u
/* --rate: at most one request per microsecond, in thousandths per second */
#define MAX_RATE_MILLI ((uint64_t)US_PER_S * MILLI)
#define MAX_KEYS WEIR_TRACE_MAX_KEYS

/* ------------------------------------------------------------------------ */
/* The command line                                                         */

enum {
    P_STEADY = 1u << WEIR_PATTERN_STEADY,
    P_BURSTY = 1u << WEIR_PATTERN_BURSTY,
    P_BOUNDARY = 1u << WEIR_PATTERN_BOUNDARY,
    P_RANDOM = 1u << WEIR_PATTERN_RANDOM,
    P_TRACE = 1u << WEIR_PATTERN_COUNT,
    P_GENERATED = P_STEADY | P_BURSTY | P_BOUNDARY | P_RANDOM,
    P_ALL = P_GENERATED | P_TRACE
};

typedef enum opt_id {
    O_LIMIT,
    O_WINDOW,
    O_BUCKET_BURST,
    O_HOLD,
    O_WARMUP,
    O_COLD_FACTOR,
    O_RATE,
    O_DURATION,
    O_BURST,
    O_SPACING,
    O_GAP,
    O_KEYS,
    O_SEED,
    O_TRACE,
    O_SVG,
    O_COUNT
} opt_id;

/* The options and the traffic each one applies to. */
static const struct option_row {
    const char *name;
    unsigned applies;
} options[O_COUNT] = {
    [O_LIMIT] = {"limit", P_ALL},
    [O_WINDOW] = {"window", P_ALL},
    [O_BUCKET_BURST] = {"bucket-burst", P_ALL},
    [O_HOLD] = {"hold", P_ALL},
    [O_WARMUP] = {"warmup", P_ALL},
    [O_COLD_FACTOR] = {"cold-factor", P_ALL},
    [O_RATE] = {"rate", P_STEADY | P_RANDOM},
    [O_DURATION] = {"duration", P_GENERATED},
    [O_BURST] = {"burst", P_BURSTY | P_BOUNDARY},
    [O_SPACING] = {"spacing", P_BURSTY},
    [O_GAP] = {"gap", P_BURSTY},
    [O_KEYS] = {"keys", P_GENERATED},
    [O_SEED] = {"seed", P_GENERATED},
    [O_TRACE] = {"trace", P_TRACE},
    [O_SVG] = {"svg", P_ALL},
};

static const char help_text[] =
    "usage: weir sim [PATTERN] [OPTIONS]\n"
    "       weir sim --trace FILE [OPTIONS]\n"
    "\n"
    "Replays traffic through every algorithm with the same limit and prints one\n"
    "row per algorithm: requests admitted and denied, the most admitted in any\n"
    "window of the limit's length (exact, for the busiest key), and how often it\n"
    "decided unlike sliding_window_log, the exact sliding window, on the same\n"
    "request. The output depends only on the arguments.\n"
    "\n"
    "patterns (default: bursty):\n"
    "  steady     requests evenly spaced at --rate\n"
    "  bursty     bursts of --burst requests --spacing apart, --gap between bursts\n"
    "  boundary   --burst requests in the last tenth of a window and as many in\n"
    "             the first tenth of the next, at every other window boundary:\n"
    "             the fixed-window exploit\n"
    "  random     requests at uniformly random times, --rate on average (seeded)\n"
    "\n"
    "the limit (the same for every algorithm):\n"
    "  --limit N            requests per window, 1..65536 (default 10)\n"
    "  --window DURATION    the window (default 1s)\n"
    "  --bucket-burst N     the burst of token_bucket, gcra and the leaky buckets\n"
    "                       (default: each one's own: the limit for token_bucket\n"
    "                       and the shaper's queue, 1 for gcra and leaky_bucket)\n"
    "  --hold DURATION      concurrency is not a rate limit: here each admitted\n"
    "                       request holds its lease this long, then releases it\n"
    "                       (default: window / 10; a lease times out after a\n"
    "                       window)\n"
    "  --warmup DURATION    token_bucket only: a warm-up of this length (a cold\n"
    "                       key admits at limit / --cold-factor, then ramps up)\n"
    "  --cold-factor N      with --warmup: 1..100 (default 3)\n"
    "\n"
    "the traffic (per key):\n"
    "  --rate R             steady, random: requests per second, decimals allowed\n"
    "                       (default: 1.5 x the limit per window)\n"
    "  --duration DURATION  how long the traffic lasts (default: 10 windows)\n"
    "  --burst N            bursty: requests per burst (default: 2 x the limit);\n"
    "                       boundary: requests on each side of a boundary\n"
    "                       (default: the limit)\n"
    "  --spacing DURATION   bursty: between two requests of a burst\n"
    "                       (default: window / 100)\n"
    "  --gap DURATION       bursty: from a burst's last request to the next burst\n"
    "                       (default: the window)\n"
    "  --keys K             keys, each sending its own copy of the traffic; the\n"
    "                       steady and bursty copies are shifted by a random\n"
    "                       offset (default 1)\n"
    "  --seed S             seed of the random times and offsets (default 1)\n"
    "  --trace FILE         replay a CSV trace instead: lines time_us,key[,cost]\n"
    "                       sorted by time; blank lines, '#' comments and a\n"
    "                       header line time_us,key,cost are allowed\n"
    "\n"
    "the plot:\n"
    "  --svg FILE           also draw the run as an SVG plot (- for stdout, then\n"
    "                       without the table): one panel per algorithm, what it\n"
    "                       admitted in the last window at each moment against\n"
    "                       the limit's line, and its denied requests; of the key\n"
    "                       with the most requests. The same arguments give the\n"
    "                       same bytes.\n"
    "\n"
    "DURATION is weir's one duration grammar: <number><unit> parts with units us,\n"
    "ms, s, m, h, d or w, e.g. 500ms, 30s, 1.5s, 5m, 1h30m; a bare number is seconds.\n"
    "\n"
    "examples:\n"
    "  weir sim                                    bursts at 10 per second\n"
    "  weir sim boundary --limit 100 --window 1m   the fixed-window exploit\n"
    "  weir sim steady --rate 12 --keys 50\n"
    "  weir sim --trace requests.csv --limit 5 --window 1s\n"
    "  weir sim boundary --svg boundary.svg        the exploit as a plot\n"
    "  weir sim --adaptive                         the adaptive concurrency\n"
    "                                              controllers (--adaptive --help)\n"
    "\n"
    "exit status: 0 done, 1 a bad trace file, an SVG file it cannot write or a\n"
    "failure, 2 bad arguments.\n";

int weir_cli_sim_usage(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("weir sim: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs("\nrun 'weir sim --help' for the options\n", stderr);
    va_end(ap);
    return 2;
}

/* An integer option in [min, max]; 2 (after the message) when it is not. */
static int int_option(const char *const *val, opt_id id, uint64_t min, uint64_t max, uint64_t *out)
{
    if (!val[id])
        return 0;
    if (!weir_cli_parse_u64(val[id], max, out) || *out < min)
        return weir_cli_sim_usage("--%s wants an integer %llu .. %llu, not '%s'", options[id].name,
                                  (unsigned long long)min, (unsigned long long)max, val[id]);
    return 0;
}

static int duration_option(const char *const *val, opt_id id, int64_t min, int64_t *out)
{
    if (!val[id])
        return 0;
    int64_t v = 0;
    weir_status st = weir_duration_parse(val[id], &v);
    if (st == WEIR_ERANGE)
        return weir_cli_sim_usage("--%s %s is longer than the cap of 100 years", options[id].name,
                                  val[id]);
    if (st != WEIR_OK)
        return weir_cli_sim_usage("--%s wants a duration such as " WEIR_DURATION_EXAMPLES
                                  ", not '%s'",
                                  options[id].name, val[id]);
    if (v < min)
        return weir_cli_sim_usage("--%s must be at least 1us, not '%s'", options[id].name, val[id]);
    *out = v;
    return 0;
}

/* A rate in requests per second with at most three decimals, as
 * thousandths. */
static int rate_option(const char *const *val, uint64_t *milli)
{
    const char *s = val[O_RATE];
    if (!s)
        return 0;
    const char *dot = strchr(s, '.');
    char whole[32];
    size_t wn = dot ? (size_t)(dot - s) : strlen(s);
    uint64_t w = 0, f = 0;
    bool ok = wn > 0 && wn < sizeof(whole);
    if (ok) {
        memcpy(whole, s, wn);
        whole[wn] = '\0';
        ok = weir_cli_parse_u64(whole, MAX_RATE_MILLI / MILLI, &w);
    }
    if (ok && dot) {
        size_t fn = strlen(dot + 1);
        ok = fn >= 1 && fn <= 3 && weir_cli_parse_u64(dot + 1, 999, &f);
        for (size_t i = fn; ok && i < 3; i++)
            f *= 10;
    }
    uint64_t v = w * MILLI + f;
    if (!ok || v == 0 || v > MAX_RATE_MILLI)
        return weir_cli_sim_usage("--rate wants requests per second, 0.001 .. 1000000 with at most "
                                  "three decimals, not '%s'",
                                  s);
    *milli = v;
    return 0;
}

/* What was asked for, all values checked. */
typedef struct sim_args {
    weir_sim_config cfg;
    const char *trace_path; /* NULL: a pattern */
    const char *svg_path;   /* NULL: no plot; "-": stdout */
    weir_pattern pattern;
} sim_args;

/* Parse argv into @a. Returns -1 to go on, else the exit code (help: 0). */
static int parse_args(int argc, char **argv, sim_args *a)
{
    const char *val[O_COUNT] = {NULL};
    const char *pattern_name = NULL;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            fputs(help_text, stdout);
            return 0;
        }
        if (arg[0] != '-' || arg[1] == '\0') {
            if (pattern_name)
                return weir_cli_sim_usage("one pattern at a time, not '%s' and '%s'", pattern_name,
                                          arg);
            pattern_name = arg;
            continue;
        }
        const char *name = arg + (arg[1] == '-' ? 2 : 1);
        const char *eq = strchr(name, '=');
        size_t n = eq ? (size_t)(eq - name) : strlen(name);
        int id = -1;
        for (int j = 0; j < O_COUNT; j++)
            if (arg[1] == '-' && strlen(options[j].name) == n &&
                strncmp(options[j].name, name, n) == 0)
                id = j;
        if (id < 0)
            return weir_cli_sim_usage("unknown option '%s'", arg);
        const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!v)
            return weir_cli_sim_usage("--%s needs a value", options[id].name);
        if (val[id])
            return weir_cli_sim_usage("--%s given twice", options[id].name);
        val[id] = v;
    }

    unsigned mask = P_TRACE;
    weir_pattern_kind kind = WEIR_PATTERN_BURSTY;
    if (val[O_TRACE]) {
        if (pattern_name)
            return weir_cli_sim_usage("give a pattern or --trace, not both");
    } else {
        if (pattern_name && weir_pattern_parse(pattern_name, &kind) != WEIR_OK)
            return weir_cli_sim_usage("unknown pattern '%s': steady, bursty, boundary or random",
                                      pattern_name);
        mask = 1u << kind;
    }
    for (int j = 0; j < O_COUNT; j++)
        if (val[j] && !(options[j].applies & mask))
            return weir_cli_sim_usage("--%s does not apply to %s", options[j].name,
                                      val[O_TRACE] ? "--trace" : weir_pattern_name(kind));

    memset(a, 0, sizeof(*a));
    weir_sim_config *c = &a->cfg;
    c->limit = 10;
    c->window_us = US_PER_S;
    int rc = int_option(val, O_LIMIT, 1, WEIR_SIM_MAX_LIMIT, &c->limit);
    if (!rc)
        rc = duration_option(val, O_WINDOW, 1, &c->window_us);
    if (!rc)
        rc = int_option(val, O_BUCKET_BURST, 1, WEIR_MAX_LIMIT, &c->bucket_burst);
    c->hold_us = c->window_us / 10 ? c->window_us / 10 : 1;
    if (!rc)
        rc = duration_option(val, O_HOLD, 1, &c->hold_us);
    uint64_t cold = 0;
    if (!rc)
        rc = duration_option(val, O_WARMUP, 1, &c->warmup_us);
    if (!rc)
        rc = int_option(val, O_COLD_FACTOR, 1, WEIR_MAX_COLD_FACTOR, &cold);
    if (!rc && cold && !c->warmup_us)
        return weir_cli_sim_usage("--cold-factor needs --warmup");
    c->cold_factor = (uint32_t)cold;
    a->trace_path = val[O_TRACE];
    a->svg_path = val[O_SVG];
    if (a->svg_path && !a->svg_path[0])
        return weir_cli_sim_usage("--svg wants a file name, or - for stdout");

    weir_pattern *p = &a->pattern;
    p->kind = kind;
    p->window_us = c->window_us;
    p->duration_us =
        c->window_us > WEIR_MAX_WINDOW_US / 10 ? WEIR_MAX_WINDOW_US : 10 * c->window_us;
    /* 1.5 x the limit per window, exactly */
    p->rate_num = 3 * c->limit;
    p->rate_per_us = 2 * c->window_us;
    p->burst = kind == WEIR_PATTERN_BOUNDARY ? c->limit : 2 * c->limit;
    p->spacing_us = c->window_us / 100;
    p->gap_us = c->window_us;
    p->keys = 1;
    p->seed = 1;
    uint64_t milli = 0, keys = 1;
    if (!rc)
        rc = rate_option(val, &milli);
    if (!rc && milli) {
        p->rate_num = milli;
        p->rate_per_us = (int64_t)US_PER_S * MILLI;
    }
    if (!rc)
        rc = duration_option(val, O_DURATION, 1, &p->duration_us);
    if (!rc)
        rc = int_option(val, O_BURST, 1, WEIR_SIM_MAX_REQUESTS, &p->burst);
    if (!rc)
        rc = duration_option(val, O_SPACING, 0, &p->spacing_us);
    if (!rc)
        rc = duration_option(val, O_GAP, 1, &p->gap_us);
    if (!rc)
        rc = int_option(val, O_KEYS, 1, MAX_KEYS, &keys);
    p->keys = (uint32_t)keys;
    if (!rc)
        rc = int_option(val, O_SEED, 0, UINT64_MAX, &p->seed);
    return rc ? rc : -1;
}

/* ------------------------------------------------------------------------ */
/* Output                                                                   */

/* "12.3%" of @part in @whole, rounded, integer only. */
static void format_percent(uint64_t part, uint64_t whole, char *buf, size_t len)
{
    uint64_t tenths = whole ? (uint64_t)(((u128)part * 1000 + whole / 2) / whole) : 0;
    snprintf(buf, len, "%llu.%llu%%", (unsigned long long)(tenths / 10),
             (unsigned long long)(tenths % 10));
}

static void format_rate(const weir_pattern *p, char *buf, size_t len)
{
    u128 milli = ((u128)p->rate_num * US_PER_S * MILLI + (uint64_t)p->rate_per_us / 2) /
                 (uint64_t)p->rate_per_us;
    weir_sim_format_milli(milli > UINT64_MAX ? UINT64_MAX : (uint64_t)milli, "/s", buf, len);
}

/* A growing line of text in a fixed buffer; what does not fit is cut. */
typedef struct text_buf {
    char *p;
    size_t len, used;
} text_buf;

static void tb_printf(text_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void tb_printf(text_buf *b, const char *fmt, ...)
{
    if (b->used + 1 >= b->len)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->p + b->used, b->len - b->used, fmt, ap);
    va_end(ap);
    if (n > 0)
        b->used += (size_t)n < b->len - b->used ? (size_t)n : b->len - b->used - 1;
}

/* The traffic in lines separated by '\n': what it is, then how many
 * requests and keys. */
static void describe_traffic(const sim_args *a, const weir_sim_report *rep, text_buf *b)
{
    const weir_pattern *p = &a->pattern;
    uint64_t requests = rep->requests;
    const char *s = requests == 1 ? "" : "s";
    if (a->trace_path) {
        tb_printf(b, "trace %s\n%llu request%s, %u key%s", a->trace_path,
                  (unsigned long long)requests, s, rep->keys, rep->keys == 1 ? "" : "s");
        return;
    }
    char d[32], x[32], y[32], r[32];
    weir_sim_format_duration(p->duration_us, d, sizeof(d));
    switch (p->kind) {
    case WEIR_PATTERN_STEADY:
        format_rate(p, r, sizeof(r));
        tb_printf(b, "steady, requests evenly spaced at %s for %s", r, d);
        break;
    case WEIR_PATTERN_RANDOM:
        format_rate(p, r, sizeof(r));
        tb_printf(b, "random, %s on average at uniformly random times for %s", r, d);
        break;
    case WEIR_PATTERN_BURSTY:
        weir_sim_format_duration(p->spacing_us, x, sizeof(x));
        weir_sim_format_duration(p->gap_us, y, sizeof(y));
        tb_printf(b, "bursty, bursts of %llu requests %s apart, %s between bursts, for %s",
                  (unsigned long long)p->burst, x, y, d);
        break;
    case WEIR_PATTERN_BOUNDARY:
        weir_sim_format_duration(p->window_us / 10, x, sizeof(x));
        tb_printf(b,
                  "boundary, %llu requests in the last %s before every other window\n"
                  "boundary and %llu in the first %s after it, for %s",
                  (unsigned long long)p->burst, x, (unsigned long long)p->burst, x, d);
        break;
    }
    tb_printf(b, "\n%llu request%s", (unsigned long long)requests, s);
    if (p->keys == 1)
        tb_printf(b, ", 1 key");
    else if (p->kind == WEIR_PATTERN_STEADY || p->kind == WEIR_PATTERN_BURSTY)
        tb_printf(b, ", %u keys each shifted by a random offset (seed %llu)", p->keys,
                  (unsigned long long)p->seed);
    else
        tb_printf(b, ", %u keys", p->keys);
    if (p->kind == WEIR_PATTERN_RANDOM)
        tb_printf(b, " (seed %llu)", (unsigned long long)p->seed);
}

static void row_note(const weir_sim_config *cfg, const weir_sim_row *row, char *buf, size_t len)
{
    char d[32];
    buf[0] = '\0';
    switch (row->algorithm) {
    case WEIR_ALGO_TOKEN_BUCKET:
        if (cfg->warmup_us) {
            weir_sim_format_duration(cfg->warmup_us, d, sizeof(d));
            snprintf(buf, len, "burst %llu, warm-up %s from 1/%u", (unsigned long long)row->burst,
                     d, cfg->cold_factor ? cfg->cold_factor : WEIR_DEFAULT_COLD_FACTOR);
            break;
        }
        snprintf(buf, len, "burst %llu", (unsigned long long)row->burst);
        break;
    case WEIR_ALGO_GCRA:
    case WEIR_ALGO_LEAKY_BUCKET:
        snprintf(buf, len, "burst %llu", (unsigned long long)row->burst);
        break;
    case WEIR_ALGO_LEAKY_SHAPER:
        weir_sim_format_duration(row->max_delay_us, d, sizeof(d));
        snprintf(buf, len, "queue %llu, max delay %s", (unsigned long long)row->burst, d);
        break;
    case WEIR_ALGO_SLIDING_LOG:
        snprintf(buf, len, "the exact reference");
        break;
    case WEIR_ALGO_CONCURRENCY:
        weir_sim_format_duration(cfg->hold_us, d, sizeof(d));
        snprintf(buf, len, "each lease held %s", d);
        break;
    case WEIR_ALGO_FIXED_WINDOW:
    case WEIR_ALGO_SLIDING_COUNTER:
        break;
    }
}

static void print_report(FILE *f, const weir_sim_config *cfg, const weir_sim_report *rep,
                         bool costs)
{
    char w[32], h[32], col[48], pct[32], note[80];
    weir_sim_format_duration(cfg->window_us, w, sizeof(w));
    weir_sim_format_duration(cfg->hold_us, h, sizeof(h));
    snprintf(col, sizeof(col), "max in %s", w);
    int cw = (int)strlen(col) > 10 ? (int)strlen(col) : 10;

    fprintf(f, "\n%-22s %9s %9s %*s %7s %7s %7s %7s  %s\n", "algorithm", "admitted", "denied", cw,
            col, "wrong", "wrong%", "over", "under", "notes");
    for (size_t i = 0; i < WEIR_ALGORITHM_COUNT; i++) {
        const weir_sim_row *row = &rep->rows[i];
        uint64_t wrong = row->over + row->under;
        format_percent(wrong, rep->requests, pct, sizeof(pct));
        row_note(cfg, row, note, sizeof(note));
        fprintf(f, "%-22s %9llu %9llu %*llu %7llu %7s %7llu %7llu%s%s\n",
                weir_algorithm_name(row->algorithm), (unsigned long long)row->admitted,
                (unsigned long long)row->denied, cw, (unsigned long long)row->max_in_window,
                (unsigned long long)wrong, pct, (unsigned long long)row->over,
                (unsigned long long)row->under, note[0] ? "  " : "", note);
    }
    fprintf(f,
            "\n%s: the most %s in any %s window, exact (busiest key);\n"
            "  the limit is %llu.\n"
            "wrong: decisions unlike sliding_window_log's on the same request;\n"
            "  over = admitted where it denied, under = denied where it admitted.\n"
            "leaky_bucket_shaper admits with a delay; its requests count when they proceed.\n"
            "concurrency is not a rate limit: each admitted request holds one of %llu\n"
            "  lease%s for %s, then releases it.\n",
            col, costs ? "units of cost admitted" : "admitted", w, (unsigned long long)cfg->limit,
            (unsigned long long)cfg->limit, cfg->limit == 1 ? "" : "s", h);
}

/* ------------------------------------------------------------------------ */
/* The plot                                                                 */

/* The key with the most requests (the first of those): the one plotted. */
static uint32_t busiest_key(const weir_trace *t)
{
    uint32_t *count = calloc(t->n_keys ? t->n_keys : 1, sizeof(uint32_t));
    uint32_t best = 0;
    if (!count)
        return 0;
    for (size_t i = 0; i < t->n_events; i++)
        count[t->events[i].key]++;
    for (uint32_t k = 1; k < t->n_keys; k++)
        if (count[k] > count[best])
            best = k;
    free(count);
    return best;
}

static int by_time(const void *x, const void *y)
{
    const weir_sim_svg_event *a = x, *b = y;
    return (a->t_us > b->t_us) - (a->t_us < b->t_us);
}

int weir_cli_write_svg(const char *path, weir_status (*draw)(FILE *f, const void *plot),
                       const void *plot)
{
    weir_status st;
    if (strcmp(path, "-") == 0) {
        st = draw(stdout, plot);
        if (st == WEIR_OK && fflush(stdout) == 0 && !ferror(stdout))
            return 0;
        fprintf(stderr, "weir sim: cannot write the SVG to stdout: %s\n",
                st != WEIR_OK ? weir_strerror(st) : strerror(errno));
        return 1;
    }
    size_t n = strlen(path) + 48;
    char *tmp = malloc(n);
    if (!tmp) {
        fprintf(stderr, "weir sim: out of memory\n");
        return 1;
    }
    int fd = -1;
    for (unsigned i = 0; i < 100 && fd < 0; i++) {
        snprintf(tmp, n, "%s.tmp.%ld.%u", path, (long)getpid(), i);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    int err = errno;
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        err = errno;
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
        fprintf(stderr, "weir sim: cannot write %s: %s\n", path, strerror(err));
        free(tmp);
        return 1;
    }
    st = draw(f, plot);
    bool ok = st == WEIR_OK && !ferror(f);
    err = ok ? 0 : EIO;
    if (fclose(f) != 0 && ok)
        ok = false, err = errno;
    if (ok && rename(tmp, path) != 0)
        ok = false, err = errno;
    if (!ok) {
        unlink(tmp);
        fprintf(stderr, "weir sim: cannot write %s: %s\n", path,
                st != WEIR_OK ? weir_strerror(st) : strerror(err));
    }
    free(tmp);
    return ok ? 0 : 1;
}

static weir_status draw_plot(FILE *f, const void *plot)
{
    return weir_sim_svg_write(f, plot);
}

/* Draw the run from the decisions on one key: per algorithm, when its
 * admitted requests count (the shaper's after their delay) and when its
 * denied ones came. Returns 0, or 1 after the message. */
static int plot_run(const sim_args *a, const weir_sim_report *rep, const weir_trace *t,
                    const weir_sim_watch *w, const char *traffic)
{
    const weir_sim_config *cfg = &a->cfg;
    size_t n = w->n ? w->n : 1;
    weir_sim_svg_event *adm = calloc(WEIR_ALGORITHM_COUNT * n, sizeof(*adm));
    int64_t *den = calloc(WEIR_ALGORITHM_COUNT * n, sizeof(*den));
    if (!adm || !den) {
        free(adm);
        free(den);
        fprintf(stderr, "weir sim: out of memory\n");
        return 1;
    }
    weir_sim_svg_series series[WEIR_ALGORITHM_COUNT];
    char notes[WEIR_ALGORITHM_COUNT][80];
    for (size_t i = 0; i < WEIR_ALGORITHM_COUNT; i++) {
        weir_sim_svg_event *ai = adm + i * n;
        int64_t *di = den + i * n;
        size_t na = 0, nd = 0;
        bool sorted = true;
        for (size_t j = 0; j < w->n; j++) {
            const weir_sim_decision *d = &w->decisions[j];
            if (!(d->admitted & (1u << i))) {
                di[nd++] = d->time_us;
                continue;
            }
            int64_t at = d->time_us;
            if (i + 1 == WEIR_ALGO_LEAKY_SHAPER && __builtin_add_overflow(at, d->delay_us, &at))
                at = INT64_MAX;
            ai[na++] = (weir_sim_svg_event){at, d->cost};
            sorted = sorted && (na == 1 || ai[na - 2].t_us <= at);
        }
        if (!sorted)
            qsort(ai, na, sizeof(*ai), by_time);
        row_note(cfg, &rep->rows[i], notes[i], sizeof(notes[i]));
        series[i] = (weir_sim_svg_series){
            .name = weir_algorithm_name((weir_algorithm)(i + 1)),
            .note = notes[i],
            .admitted = ai,
            .n_admitted = na,
            .denied_us = di,
            .n_denied = nd,
        };
    }

    char w_text[32], title[256], sub[1024];
    weir_sim_format_duration(cfg->window_us, w_text, sizeof(w_text));
    snprintf(title, sizeof(title),
             "weir sim %s: %llu request%s per %s, the same limit for every algorithm",
             a->trace_path ? "--trace" : weir_pattern_name(a->pattern.kind),
             (unsigned long long)cfg->limit, cfg->limit == 1 ? "" : "s", w_text);
    text_buf b = {sub, sizeof(sub), 0};
    tb_printf(&b, "%s", traffic);
    if (t->n_keys > 1) {
        size_t klen = 0;
        const char *kname = weir_trace_key(t, w->key, &klen);
        if (kname)
            tb_printf(&b, "\nplotted: the key %.*s, the one with the most requests", (int)klen,
                      kname);
        else
            tb_printf(&b, "\nplotted: key %u of %u, the one with the most requests", w->key + 1,
                      t->n_keys);
    }
    weir_sim_svg_plot plot = {
        .title = title,
        .subtitle = sub,
        .limit = cfg->limit,
        .window_us = cfg->window_us,
        .series = series,
        .n_series = WEIR_ALGORITHM_COUNT,
    };
    int rc = weir_cli_write_svg(a->svg_path, draw_plot, &plot);
    free(adm);
    free(den);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Running                                                                  */

/* Fill @t from the trace file or the pattern. Returns -1 to go on, else
 * the exit code after the message. */
static int load_traffic(const sim_args *a, weir_trace *t)
{
    if (!a->trace_path) {
        uint64_t n = 0;
        if (weir_pattern_count(&a->pattern, &n) != WEIR_OK)
            return weir_cli_sim_usage("these %s parameters are out of range (a burst may last no "
                                      "longer than 100 years)",
                                      weir_pattern_name(a->pattern.kind));
        if (n == 0)
            return weir_cli_sim_usage("the traffic has no requests: boundary attacks every other "
                                      "window boundary, so --duration must be over one window");
        if (n > WEIR_SIM_MAX_REQUESTS)
            return weir_cli_sim_usage("the traffic is %llu requests, over the cap of %u: lower "
                                      "--rate, --burst, --duration or --keys",
                                      (unsigned long long)n, WEIR_SIM_MAX_REQUESTS);
        if (weir_pattern_generate(&a->pattern, t) != WEIR_OK) {
            fprintf(stderr, "weir sim: out of memory\n");
            return 1;
        }
        return -1;
    }
    char *buf = NULL;
    size_t len = 0;
    if (!weir_cli_read_file("weir sim: ", a->trace_path, WEIR_SIM_MAX_TRACE_BYTES, &buf, &len))
        return 1;
    weir_trace_error err;
    weir_status st = weir_trace_parse(t, buf, len, &err);
    free(buf);
    if (st != WEIR_OK) {
        fprintf(stderr, "%s:%llu: %s\n", a->trace_path, (unsigned long long)err.line, err.reason);
        return 1;
    }
    if (t->n_events == 0) {
        fprintf(stderr, "%s: the trace has no requests\n", a->trace_path);
        return 1;
    }
    return -1;
}

int weir_cli_sim(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--adaptive") == 0)
            return weir_cli_sim_adaptive(argc, argv);
    sim_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0)
        return rc;
    const weir_sim_config *cfg = &a.cfg;
    uint64_t per_key = weir_sim_state_bytes(cfg);
    if (!a.trace_path && (u128)per_key * a.pattern.keys > WEIR_SIM_MAX_STATE_BYTES)
        return weir_cli_sim_usage(
            "%u keys x %llu bytes of state is over the cap of %llu MiB: lower "
            "--keys or --limit",
            a.pattern.keys, (unsigned long long)per_key,
            (unsigned long long)(WEIR_SIM_MAX_STATE_BYTES >> 20));

    weir_trace t;
    weir_trace_init(&t);
    rc = load_traffic(&a, &t);
    if (rc >= 0)
        return rc;

    weir_sim_report rep;
    weir_sim_watch watch = {.key = a.svg_path ? busiest_key(&t) : 0};
    weir_status st = weir_sim_run_watched(cfg, &t, &rep, a.svg_path ? &watch : NULL);
    bool costs = false;
    for (size_t i = 0; i < t.n_events && !costs; i++)
        costs = t.events[i].cost != 1;
    char w[32];
    weir_sim_format_duration(cfg->window_us, w, sizeof(w));
    if (st != WEIR_OK) {
        uint32_t n_keys = t.n_keys;
        weir_trace_free(&t);
        if (rep.refused)
            return weir_cli_sim_usage("%s refuses a limit of %llu per %s%s: %s",
                                      weir_algorithm_name(rep.refused),
                                      (unsigned long long)cfg->limit, w,
                                      cfg->bucket_burst ? " with this --bucket-burst"
                                      : cfg->warmup_us  ? " with this --warmup"
                                                        : "",
                                      weir_strerror(st));
        if (st == WEIR_ETOOBIG)
            fprintf(stderr,
                    "weir sim: %s: %u keys x %llu bytes of state is over the cap of %llu MiB: "
                    "lower --limit\n",
                    a.trace_path, n_keys, (unsigned long long)per_key,
                    (unsigned long long)(WEIR_SIM_MAX_STATE_BYTES >> 20));
        else
            fprintf(stderr, "weir sim: %s\n", weir_strerror(st));
        return 1;
    }

    char traffic[1024];
    text_buf tb = {traffic, sizeof(traffic), 0};
    describe_traffic(&a, &rep, &tb);
    rc = a.svg_path ? plot_run(&a, &rep, &t, &watch, traffic) : 0;
    weir_sim_watch_free(&watch);
    weir_trace_free(&t);
    if (rc != 0 || (a.svg_path && strcmp(a.svg_path, "-") == 0))
        return rc;

    printf("weir sim: %llu request%s per %s, the same limit for every algorithm\n",
           (unsigned long long)cfg->limit, cfg->limit == 1 ? "" : "s", w);
    const char *line = traffic;
    for (int i = 0; line; i++) {
        const char *nl = strchr(line, '\n');
        printf("%s%.*s\n",
               i ? "          " : "traffic:  ", (int)(nl ? (size_t)(nl - line) : strlen(line)),
               line);
        line = nl ? nl + 1 : NULL;
    }
    print_report(stdout, cfg, &rep, costs);
    return 0;
}
