/*
 * sim_adaptive_cli.c - `weir sim --adaptive`: the simulated backend
 * (adaptive_sim.c) under each adaptive concurrency controller, a table of
 * how near the knee each kept its limit and, with --svg, the runs as a
 * plot (adaptive_svg.c). The output depends only on the arguments.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adaptive_sim.h"
#include "adaptive_svg.h"
#include "cli.h"
#include "number.h"
#include "sim.h"

#define US_PER_S 1000000
#define N_KINDS 3
/* servers x milliseconds of run (servers <= 10^4, a run <= 3.6 x 10^6 ms:
 * no overflow) */
#define MAX_CLIENT_MS 100000000

static const char help_text[] =
    "usage: weir sim --adaptive [OPTIONS]\n"
    "\n"
    "Runs a simulated backend under each adaptive concurrency controller (AIMD,\n"
    "Vegas, gradient; weir/adaptive.h) and prints how near the knee each kept\n"
    "its limit. The backend: --servers servers taking --service each (+-20%),\n"
    "a queue of as many requests again (one more is dropped), and 4 clients a\n"
    "server in a closed loop (1ms between a response and the next request),\n"
    "so they offer more than it can take. From a third of the run to two\n"
    "thirds the backend slows: half the servers are gone (--slowdown servers)\n"
    "or each takes twice as long (--slowdown latency). The controllers run\n"
    "with their defaults, but AIMD's timeout is 1.5 x the service time. The\n"
    "output depends only on the arguments.\n"
    "\n"
    "  --controller NAME    aimd, vegas, gradient or all (default all)\n"
    "  --servers K          the knee, 2..10000 (default 50)\n"
    "  --slowdown KIND      servers (default) or latency\n"
    "  --service DURATION   the mean service time, 1ms..10s (default 20ms)\n"
    "  --duration DURATION  the run, 6s..1h (default 60s); servers x milliseconds\n"
    "                       at most 10^8\n"
    "  --seed S             the service times' seed (default 1)\n"
    "  --svg FILE           also draw the runs (- for stdout, then without the\n"
    "                       table): per controller its limit, the knee, and the\n"
    "                       mean latency\n"
    "\n"
    "exit status: 0 done, 1 an SVG file it cannot write or a failure, 2 bad\n"
    "arguments.\n";

typedef struct args {
    uint64_t servers, seed;
    int64_t service_us, duration_us;
    int kinds[N_KINDS];
    size_t n_kinds;
    const char *svg;
    bool latency; /* --slowdown latency */
} args;

static int duration_arg(const char *name, const char *v, int64_t min, int64_t max, int64_t *out)
{
    if (weir_duration_parse(v, out) != WEIR_OK || *out < min || *out > max)
        return weir_cli_sim_usage("--%s wants a duration in the range given by --help, not '%s'",
                                  name, v);
    return 0;
}

/* Returns -1 to go on, else the exit code. */
static int parse(int argc, char **argv, args *a)
{
    *a = (args){.servers = 50, .seed = 1, .service_us = 20000, .duration_us = 60 * US_PER_S};
    const char *controller = "all";
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (strcmp(o, "--adaptive") == 0)
            continue;
        if (strcmp(o, "-h") == 0 || strcmp(o, "--help") == 0) {
            fputs(help_text, stdout);
            return 0;
        }
        if (strncmp(o, "--", 2) != 0)
            return weir_cli_sim_usage("--adaptive takes no pattern, not '%s'", o);
        if (i + 1 >= argc)
            return weir_cli_sim_usage("%s needs a value", o);
        const char *v = argv[++i];
        int rc = 0;
        if (strcmp(o, "--controller") == 0)
            controller = v;
        else if (strcmp(o, "--servers") == 0) {
            if (!weir_cli_parse_u64(v, 10000, &a->servers) || a->servers < 2)
                rc = weir_cli_sim_usage("--servers wants an integer 2 .. 10000, not '%s'", v);
        } else if (strcmp(o, "--service") == 0)
            rc = duration_arg("service", v, 1000, 10 * US_PER_S, &a->service_us);
        else if (strcmp(o, "--duration") == 0)
            rc = duration_arg("duration", v, 6 * US_PER_S, 3600LL * US_PER_S, &a->duration_us);
        else if (strcmp(o, "--seed") == 0) {
            if (!weir_cli_parse_u64(v, UINT64_MAX, &a->seed))
                rc = weir_cli_sim_usage("--seed wants an integer, not '%s'", v);
        } else if (strcmp(o, "--slowdown") == 0) {
            if (strcmp(v, "servers") != 0 && strcmp(v, "latency") != 0)
                rc = weir_cli_sim_usage("--slowdown wants servers or latency, not '%s'", v);
            a->latency = strcmp(v, "latency") == 0;
        } else if (strcmp(o, "--svg") == 0) {
            if (!v[0])
                rc = weir_cli_sim_usage("--svg wants a file name, or - for stdout");
            a->svg = v;
        } else
            rc = weir_cli_sim_usage("unknown option '%s' with --adaptive", o);
        if (rc)
            return rc;
    }
    /* every client tries about once a millisecond: bound the work */
    if (a->servers * (uint64_t)(a->duration_us / 1000) > MAX_CLIENT_MS)
        return weir_cli_sim_usage("--servers x --duration is over the budget of 10^8 server-"
                                  "milliseconds: lower one of them");
    weir_adaptive_kind k;
    if (strcmp(controller, "all") == 0) {
        for (int i = 0; i < N_KINDS; i++)
            a->kinds[a->n_kinds++] = WEIR_ADAPTIVE_AIMD + i;
    } else if (weir_adaptive_kind_parse(controller, &k) == WEIR_OK) {
        a->kinds[a->n_kinds++] = (int)k;
    } else {
        return weir_cli_sim_usage("--controller wants aimd, vegas, gradient or all, not '%s'",
                                  controller);
    }
    return -1;
}

static weir_adaptive_sim_config backend(const args *a)
{
    uint32_t k = (uint32_t)a->servers;
    int64_t d = a->duration_us;
    return (weir_adaptive_sim_config){
        .servers = k,
        .service_us = a->service_us,
        .jitter_pct = 20,
        .queue_cap = k,
        .clients = 4 * k,
        .think_us = 1000,
        /* a hundredth of the service time, and at most 10^7 steps */
        .tick_us = a->service_us / 100 > d / 10000000 ? a->service_us / 100 : d / 10000000 + 1,
        .duration_us = d,
        .slow_from_us = d / 3,
        .slow_until_us = d / 3 * 2,
        .slow_servers = a->latency ? k : k / 2,
        .slow_service_us = a->latency ? 2 * a->service_us : 0,
        .record_us = d / 600,
        .seed = a->seed,
    };
}

typedef struct outcome {
    weir_adaptive_sim_result r;
    uint64_t settled, slow, recovered; /* mean limits, thousandths */
    int64_t latency_us;                /* mean over the settled phase */
} outcome;

static weir_status run_one(const args *a, weir_adaptive_kind kind, const weir_ctx *ctx,
                           outcome *out)
{
    weir_adaptive_options o = {sizeof(o), .kind = kind, .aimd_timeout_us = a->service_us * 3 / 2};
    weir_adaptive *ctl = NULL;
    weir_status st = weir_adaptive_new(ctx, &o, &ctl);
    if (st != WEIR_OK)
        return st;
    weir_adaptive_sim_config c = backend(a);
    st = weir_adaptive_sim_run(&c, ctl, &out->r);
    weir_adaptive_free(ctl);
    if (st != WEIR_OK)
        return st;
    int64_t d = c.duration_us;
    /* each phase's second half, after the controller has settled */
    out->settled = weir_adaptive_sim_mean_limit(&out->r, d / 6, d / 3);
    out->slow = weir_adaptive_sim_mean_limit(&out->r, d / 2, d / 3 * 2);
    out->recovered = weir_adaptive_sim_mean_limit(&out->r, d / 6 * 5, d + 1);
    uint64_t sum = 0, n = 0;
    for (size_t i = 0; i < out->r.n_points; i++) {
        const weir_adaptive_sim_point *p = &out->r.points[i];
        if (p->t_us >= d / 6 && p->t_us < d / 3 && p->completed) {
            sum += (uint64_t)p->rtt_us * p->completed;
            n += p->completed;
        }
    }
    out->latency_us = n ? (int64_t)(sum / n) : 0;
    return WEIR_OK;
}

/* "56.7 (1.13x)" */
static void format_mean(uint64_t milli, uint64_t knee, char *buf, size_t len)
{
    snprintf(buf, len, "%llu.%llu (%llu.%02llux)", (unsigned long long)(milli / 1000),
             (unsigned long long)(milli % 1000 / 100), (unsigned long long)(milli / knee / 1000),
             (unsigned long long)((milli * 100 / knee + 500) / 1000 % 100));
}

/* The knee while the backend is slow: the servers serving. */
static uint64_t slow_knee(const args *a)
{
    return a->latency ? a->servers : a->servers / 2;
}

static void describe(const args *a, char *buf, size_t len)
{
    char s[32], d[32];
    weir_sim_format_duration(a->service_us, s, sizeof(s));
    weir_sim_format_duration(a->duration_us, d, sizeof(d));
    snprintf(buf, len,
             "%llu servers, %s each (+-20%%), a queue of %llu, %llu clients in a closed loop, "
             "for %s;\n%s in the middle third; AIMD's timeout 1.5 x the "
             "service time, all else the defaults (seed %llu)",
             (unsigned long long)a->servers, s, (unsigned long long)a->servers,
             (unsigned long long)a->servers * 4, d,
             a->latency ? "each server twice as slow" : "half the servers gone",
             (unsigned long long)a->seed);
}

static weir_status draw(FILE *f, const void *plot)
{
    return weir_adaptive_svg_write(f, plot);
}

static int plot(const args *a, const outcome *o, const char *sub)
{
    weir_adaptive_svg_series series[N_KINDS];
    char notes[N_KINDS][160];
    for (size_t i = 0; i < a->n_kinds; i++) {
        char m1[64], m2[64];
        format_mean(o[i].settled, a->servers, m1, sizeof(m1));
        format_mean(o[i].slow, slow_knee(a), m2, sizeof(m2));
        snprintf(notes[i], sizeof(notes[i]), "mean limit settled %s, slow %s", m1, m2);
        series[i] = (weir_adaptive_svg_series){
            .name = weir_adaptive_kind_name((weir_adaptive_kind)a->kinds[i]),
            .note = notes[i],
            .points = o[i].r.points,
            .n_points = o[i].r.n_points,
        };
    }
    weir_adaptive_svg_plot p = {
        .title = "weir sim --adaptive: each controller's limit against the knee",
        .subtitle = sub,
        .series = series,
        .n_series = a->n_kinds,
    };
    return weir_cli_write_svg(a->svg, draw, &p);
}

int weir_cli_sim_adaptive(int argc, char **argv)
{
    args a;
    int rc = parse(argc, argv, &a);
    if (rc >= 0)
        return rc;
    weir_ctx *ctx = NULL;
    if (weir_ctx_new(NULL, &ctx) != WEIR_OK) {
        fprintf(stderr, "weir sim: out of memory\n");
        return 1;
    }
    outcome o[N_KINDS];
    memset(o, 0, sizeof(o));
    weir_status st = WEIR_OK;
    for (size_t i = 0; i < a.n_kinds && st == WEIR_OK; i++)
        st = run_one(&a, (weir_adaptive_kind)a.kinds[i], ctx, &o[i]);
    weir_ctx_free(ctx);
    char sub[512];
    describe(&a, sub, sizeof(sub));
    if (st != WEIR_OK) {
        fprintf(stderr, "weir sim: %s\n", weir_strerror(st));
        rc = 1;
    } else {
        rc = a.svg ? plot(&a, o, sub) : 0;
    }
    if (rc == 0 && !(a.svg && strcmp(a.svg, "-") == 0)) {
        printf("weir sim --adaptive: %s\n\n", sub);
        printf("%-10s %-20s %-20s %-20s %-12s %10s %10s %8s\n", "controller", "settled", "slow",
               "recovered", "latency", "completed", "rejected", "dropped");
        for (size_t i = 0; i < a.n_kinds; i++) {
            char m1[64], m2[64], m3[64];
            format_mean(o[i].settled, a.servers, m1, sizeof(m1));
            format_mean(o[i].slow, slow_knee(&a), m2, sizeof(m2));
            format_mean(o[i].recovered, a.servers, m3, sizeof(m3));
            printf("%-10s %-20s %-20s %-20s %-12.1f %10llu %10llu %8llu\n",
                   weir_adaptive_kind_name((weir_adaptive_kind)a.kinds[i]), m1, m2, m3,
                   (double)o[i].latency_us / 1000, (unsigned long long)o[i].r.completed,
                   (unsigned long long)o[i].r.rejected, (unsigned long long)o[i].r.dropped);
        }
        printf("\nsettled, slow, recovered: the mean limit over the second half of each phase\n"
               "  (the backend as it was, slowed, as it was again), and as a multiple\n"
               "  of that phase's knee. latency: the mean, in ms, of the settled phase.\n");
    }
    for (size_t i = 0; i < N_KINDS; i++)
        weir_adaptive_sim_result_free(&o[i].r);
    return rc;
}
