/*
 * workload.h - the engine bench's workload, shared by weir-bench-engine and
 * the in-process A/B comparison (bench/ab/): three descriptors per request,
 * each matching one limit (a token bucket per user, a sliding window
 * counter per path under a `/v1/` wildcard, a GCRA for the plan), over
 * USERS distinct users drawn at random.
 *
 * The users of a stream are laid out one after another, so the timed loop
 * does not pay a cache miss to read its own input, as a server reads what
 * it has just parsed. The user limit (1000 per hour) keeps every user's
 * counter alive for a whole run: after the warm-up (every user once), the
 * timed path is match + lookup + charge, not key creation.
 */
#ifndef WEIR_BENCH_ENGINE_WORKLOAD_H
#define WEIR_BENCH_ENGINE_WORKLOAD_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weir/weir.h"

static const char *const workload_rules = "domain: api\n"
                                          "descriptors:\n"
                                          "  - key: user\n"
                                          "    rate_limit: {unit: hour, requests_per_unit: 1000,\n"
                                          "                 algorithm: token_bucket}\n"
                                          "  - key: path\n"
                                          "    value: /v1/*\n"
                                          "    rate_limit: {unit: second, requests_per_unit: "
                                          "4000000000,\n"
                                          "                 algorithm: sliding_window_counter}\n"
                                          "  - key: plan\n"
                                          "    value: pro\n"
                                          "    rate_limit: {unit: second, requests_per_unit: "
                                          "4000000000,\n"
                                          "                 algorithm: gcra, burst: 4000000000}\n";

typedef char workload_name[16];

typedef struct workload {
    weir_store *store;
    weir_engine *engine;
    weir_engine_reader *reader;
    uint32_t n_users, n_stream;
    workload_name *users, *stream;
    uint8_t *users_len, *stream_len;
    int64_t t_us; /* +1 us per request */
    uint64_t over;
    const weir_limit_override *user_override; /* NULL: the configured limit */
} workload;

/* The user's limit as a request may override it (Envoy's descriptor
 * `limit`): twice the configured one, so no user goes over it either. */
static const weir_limit_override workload_override = {2000, WEIR_UNIT_HOUR};

static inline uint64_t workload_rng(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline void workload_on_decided(void *arg, weir_code overall, weir_descriptor_status *st,
                                       size_t n)
{
    (void)st;
    (void)n;
    *(weir_code *)arg = overall;
}

/* Requests [from, from + n) of the names given, one decision each. */
static inline void workload_decide(workload *w, workload_name *names, const uint8_t *lens,
                                   uint32_t from, uint32_t n)
{
    weir_entry path[] = {{"path", 4, "/v1/items", 9}};
    weir_entry plan[] = {{"plan", 4, "pro", 3}};
    weir_descriptor_status st[3];
    weir_code overall = WEIR_CODE_OK;
    for (uint32_t i = from; i < from + n; i++) {
        weir_entry user[] = {{"user", 4, names[i], lens[i]}};
        weir_descriptor d[3] = {{user, 1, false, 0, w->user_override},
                                {path, 1, false, 0, NULL},
                                {plan, 1, false, 0, NULL}};
        weir_request req = {"api", 3, d, 3, 1, 0};
        weir_engine_decide(w->reader, &req, w->t_us++, st, workload_on_decided, &overall);
        w->over += overall != WEIR_CODE_OK;
    }
}

/* Requests [from, from + n) of the random stream (n_stream - from >= n). */
static inline void workload_run(workload *w, uint32_t from, uint32_t n)
{
    workload_decide(w, w->stream, w->stream_len, from, n);
}

/* The users and a stream of n_stream of them drawn at random (seed 42).
 * 0 on success. */
static inline int workload_names(workload *w, uint32_t n_users, uint32_t n_stream)
{
    w->n_users = n_users;
    w->n_stream = n_stream;
    w->users = malloc(n_users * sizeof(*w->users));
    w->stream = malloc(n_stream * sizeof(*w->stream));
    w->users_len = malloc(n_users);
    w->stream_len = malloc(n_stream);
    if (!w->users || !w->stream || !w->users_len || !w->stream_len)
        return 1;
    uint64_t seed = 42;
    for (uint32_t i = 0; i < n_users; i++)
        w->users_len[i] = (uint8_t)snprintf(w->users[i], sizeof(w->users[i]), "u%u", i);
    for (uint32_t i = 0; i < n_stream; i++) {
        uint32_t u = (uint32_t)(workload_rng(&seed) % n_users);
        memcpy(w->stream[i], w->users[u], sizeof(w->stream[i]));
        w->stream_len[i] = w->users_len[u];
    }
    w->t_us = 1700000000LL * 1000000;
    return 0;
}

/* Rules, memory store, engine, the names (workload_names()), and the
 * warm-up: every user decided once. With `user_override`, every request
 * overrides the user's limit. 0 on success. */
static inline int workload_make(weir_ctx *ctx, workload *w, uint32_t n_users, uint32_t n_stream,
                                const weir_limit_override *user_override)
{
    memset(w, 0, sizeof(*w));
    w->user_override = user_override;
    weir_rules *rules;
    if (weir_rules_parse(ctx, "bench.yaml", workload_rules, strlen(workload_rules), NULL, &rules,
                         NULL, 0, NULL) != WEIR_OK ||
        weir_memstore_new(ctx, NULL, &w->store) != WEIR_OK)
        return 1;
    weir_engine_options eo = {.size = sizeof(eo), .store = w->store};
    if (weir_engine_new(ctx, &eo, rules, &w->engine) != WEIR_OK ||
        weir_engine_reader_new(w->engine, &w->reader) != WEIR_OK ||
        workload_names(w, n_users, n_stream) != 0)
        return 1;
    workload_decide(w, w->users, w->users_len, 0, n_users);
    w->over = 0;
    return 0;
}

static inline void workload_free(workload *w)
{
    free(w->users);
    free(w->stream);
    free(w->users_len);
    free(w->stream_len);
    weir_engine_reader_free(w->reader);
    weir_engine_free(w->engine);
    weir_store_free(w->store);
}

#endif /* WEIR_BENCH_ENGINE_WORKLOAD_H */
