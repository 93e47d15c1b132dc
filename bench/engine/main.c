/*
 * main.c - weir-bench-engine: what a whole decision costs (matching, three
 * limits checked and charged atomically in the memory store) and what
 * loading a large rule file costs.
 *
 *   engine   ns per request with 3 descriptors, each matching one limit,
 *            over 1M distinct users (random), single thread
 *   load     ms to parse and compile a 10,000-descriptor rule file
 *
 * Each figure is the median of 5 runs. Requests are generated before
 * timing and read in order, as a server reads what it has just parsed (the
 * user names of the stream are laid out one after another, so the timed
 * loop does not pay a cache miss to read its own input); the store is
 * warmed with every user first. The user limit (1000 per hour) keeps every
 * user's counter alive for the whole run, as under steady traffic: the
 * timed path is match + lookup + charge, not key creation.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "weir/weir.h"

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

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return v[n / 2];
}

static uint64_t rng(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static const char *rules_yaml = "domain: api\n"
                                "descriptors:\n"
                                "  - key: user\n"
                                "    rate_limit: {unit: hour, requests_per_unit: 1000,\n"
                                "                 algorithm: token_bucket}\n"
                                "  - key: path\n"
                                "    value: /v1/*\n"
                                "    rate_limit: {unit: second, requests_per_unit: 4000000000,\n"
                                "                 algorithm: sliding_window_counter}\n"
                                "  - key: plan\n"
                                "    value: pro\n"
                                "    rate_limit: {unit: second, requests_per_unit: 4000000000,\n"
                                "                 algorithm: gcra, burst: 4000000000}\n";

static void on_decided(void *arg, weir_code overall, weir_descriptor_status *st, size_t n)
{
    (void)st;
    (void)n;
    *(weir_code *)arg = overall;
}

static int bench_engine(weir_ctx *ctx)
{
    weir_rules *rules;
    if (weir_rules_parse(ctx, "bench.yaml", rules_yaml, strlen(rules_yaml), NULL, &rules, NULL, 0,
                         NULL) != WEIR_OK)
        return 1;
    weir_store *store;
    weir_memstore_new(ctx, NULL, &store);
    weir_engine_options eo = {.size = sizeof(eo), .store = store};
    weir_engine *engine;
    weir_engine_reader *reader;
    if (weir_engine_new(ctx, &eo, rules, &engine) != WEIR_OK ||
        weir_engine_reader_new(engine, &reader) != WEIR_OK)
        return 1;

    char(*users)[16] = malloc(USERS * sizeof(*users));
    char(*stream)[16] = malloc(OPS * sizeof(*stream));
    uint8_t *users_len = malloc(USERS), *stream_len = malloc(OPS);
    if (!users || !stream || !users_len || !stream_len)
        return 1;
    uint64_t seed = 42;
    for (uint32_t i = 0; i < USERS; i++)
        users_len[i] = (uint8_t)snprintf(users[i], sizeof(users[i]), "u%u", i);
    for (uint32_t i = 0; i < OPS; i++) {
        uint32_t u = (uint32_t)(rng(&seed) % USERS);
        memcpy(stream[i], users[u], sizeof(stream[i]));
        stream_len[i] = users_len[u];
    }

    weir_entry path[] = {{"path", 4, "/v1/items", 9}};
    weir_entry plan[] = {{"plan", 4, "pro", 3}};
    weir_descriptor_status st[3];
    weir_code overall = WEIR_CODE_OK;
    int64_t t_us = 1700000000LL * 1000000;
    uint64_t over = 0;

    for (int pass = -1; pass < REPS; pass++) {
        double t0 = now_s();
        uint32_t n = pass < 0 ? USERS : OPS;
        for (uint32_t i = 0; i < n; i++) {
            const char *u = pass < 0 ? users[i] : stream[i];
            size_t ulen = pass < 0 ? users_len[i] : stream_len[i];
            weir_entry user[] = {{"user", 4, u, ulen}};
            weir_descriptor d[3] = {
                {user, 1, false, 0, NULL}, {path, 1, false, 0, NULL}, {plan, 1, false, 0, NULL}};
            weir_request req = {"api", 3, d, 3, 1};
            weir_engine_decide(reader, &req, t_us++, st, on_decided, &overall);
            over += overall != WEIR_CODE_OK;
        }
        double dt = now_s() - t0;
        static double v[REPS];
        if (pass >= 0) {
            v[pass] = dt * 1e9 / n;
            if (pass == REPS - 1)
                printf("engine    3 descriptors, 3 limits, %u random users: %.1f ns per request "
                       "(median of %d), %llu over limit\n",
                       USERS, median(v, REPS), REPS, (unsigned long long)over);
        }
    }
    weir_store_stats ss;
    weir_store_stats_get(store, &ss);
    printf("          store: %llu keys, %.1f bytes per key\n", (unsigned long long)ss.keys,
           ss.keys ? (double)ss.bytes / (double)ss.keys : 0.0);
    free(users);
    free(stream);
    free(users_len);
    free(stream_len);
    weir_engine_reader_free(reader);
    weir_engine_free(engine);
    weir_store_free(store);
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
        double t0 = now_s();
        weir_rules *rules;
        weir_store *store;
        weir_memstore_new(ctx, NULL, &store);
        if (weir_rules_parse(ctx, "big.yaml", yaml, len, NULL, &rules, NULL, 0, NULL) != WEIR_OK)
            return 1;
        weir_engine_options eo = {.size = sizeof(eo), .store = store};
        weir_engine *engine;
        if (weir_engine_new(ctx, &eo, rules, &engine) != WEIR_OK)
            return 1;
        v[r] = (now_s() - t0) * 1e3;
        weir_engine_free(engine);
        weir_store_free(store);
    }
    printf("load      %u descriptors (%u limits, %zu bytes of YAML), parsed and compiled: "
           "%.1f ms (median of %d)\n",
           2 * LOAD_RULES, LOAD_RULES, len, median(v, REPS), REPS);
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
    int rc = bench_load(ctx) || bench_engine(ctx);
    weir_ctx_free(ctx);
    return rc;
}
