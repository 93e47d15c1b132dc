/*
 * main.c - weir-bench-engine: what a whole decision costs (matching, three
 * limits checked and charged atomically in the memory store) and what
 * loading a large rule file costs.
 *
 *   engine   ns per request with 3 descriptors, each matching one limit,
 *            over 1M distinct users (random), single thread; then the
 *            same with the user's limit overridden by every request
 *   load     ms to parse and compile a 10,000-descriptor rule file
 *
 * Each figure is the median of 5 runs. The workload (rules, users, the
 * random stream, the warm-up) is in workload.h, shared with bench/ab/.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../timing.h"
#include "weir/weir.h"
#include "workload.h"

#ifndef REPS
#define REPS 5
#endif
#ifndef USERS
#define USERS 1000000u
#endif
#ifndef OPS
#define OPS 1000000u
#endif
#define LOAD_RULES 10000u

static int bench_engine(weir_ctx *ctx, const weir_limit_override *user_override)
{
    workload w;
    if (workload_make(ctx, &w, USERS, OPS, user_override) != 0)
        return 1;
    double v[REPS];
    for (int pass = 0; pass < REPS; pass++) {
        double t0 = bench_now_s();
        workload_run(&w, 0, OPS);
        v[pass] = (bench_now_s() - t0) * 1e9 / OPS;
    }
    printf("engine    3 descriptors, 3 limits, %u random users%s: %.1f ns per request "
           "(median of %d), %llu over limit\n",
           USERS, user_override ? ", the user's limit overridden" : "", bench_median(v, REPS), REPS,
           (unsigned long long)w.over);
    weir_store_stats ss;
    weir_store_stats_get(w.store, &ss);
    printf("          store: %llu keys, %.1f bytes per key\n", (unsigned long long)ss.keys,
           ss.keys ? (double)ss.bytes / (double)ss.keys : 0.0);
    workload_free(&w);
    return 0;
}

static int bench_load(weir_ctx *ctx)
{
    size_t cap = LOAD_RULES * 160u + 64u, len = 0;
    char *yaml = malloc(cap);
    len += (size_t)snprintf(yaml + len, cap - len, "domain: big\ndescriptors:\n");
    for (unsigned i = 0; i < LOAD_RULES; i++)
        len += (size_t)snprintf(yaml + len, cap - len,
                                "  - key: tenant\n    value: t%u\n    descriptors:\n"
                                "      - key: user\n        rate_limit: {unit: minute, "
                                "requests_per_unit: %u}\n",
                                i, 10 + i % 1000);
    double v[REPS];
    for (int r = 0; r < REPS; r++) {
        double t0 = bench_now_s();
        weir_rules *rules;
        weir_store *store;
        weir_memstore_new(ctx, NULL, &store);
        if (weir_rules_parse(ctx, "big.yaml", yaml, len, NULL, &rules, NULL, 0, NULL) != WEIR_OK)
            return 1;
        weir_engine_options eo = {.size = sizeof(eo), .store = store};
        weir_engine *engine;
        if (weir_engine_new(ctx, &eo, rules, &engine) != WEIR_OK)
            return 1;
        v[r] = (bench_now_s() - t0) * 1e3;
        weir_engine_free(engine);
        weir_store_free(store);
    }
    printf("load      %u descriptors (%u limits, %zu bytes of YAML), parsed and compiled: "
           "%.1f ms (median of %d)\n",
           2 * LOAD_RULES, LOAD_RULES, len, bench_median(v, REPS), REPS);
    free(yaml);
    return 0;
}

int main(void)
{
    weir_ctx *ctx;
    if (weir_ctx_new(NULL, &ctx) != WEIR_OK)
        return 1;
    time_t now = time(NULL);
    char date[64];
    strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    printf("weir-bench-engine %s, %s\n", weir_version(), date);
    int rc = bench_load(ctx) || bench_engine(ctx, NULL) || bench_engine(ctx, &workload_override);
    weir_ctx_free(ctx);
    return rc;
}
