/*
 * main.c - weir-bench-tenants: what a table of tenants holding overrides
 * costs a decision, against the same decisions without a table and
 * against rules without tenants, in one process.
 *
 *   A   rules with a `tenants:` section (tiers free and pro, each with a
 *       per-minute limit and one nested `endpoint` descriptor), no table:
 *       every key is on the default tier
 *   B   the same rules and a table of 100,000 tenants, each with a tier and
 *       two per-minute overrides (`default`, `endpoint:/orders`), numbers
 *       distinct per tenant
 *   Bs  the same, the numbers shared by the tenants of a tier
 *   C   the same limits as rule-file descriptors, no `tenants:` section:
 *       what a decision cost before tenants
 *
 * Requests are `[api_key=K]`, or `[api_key=K],[api_key=K,endpoint=/orders]`,
 * over 100,000 keys drawn uniformly (the stream of workload.h, built before
 * timing), on the memory store, the clock 1 us further each decision; every
 * key is decided once in each setting before timing. Each round runs every
 * setting on the same stream, the order rotating from round to round; the
 * figures are medians over the rounds, the ratios medians of the rounds'
 * own ratios. The table's build time and the bytes it holds (counted by
 * the context's allocator) come first.
 *
 *   weir-bench-tenants [-a ALGORITHM] [-r ROUNDS] [-n DECISIONS] [-s SETTINGS] [-t TENANTS]
 *
 * -a the limits' algorithm (token_bucket), -r rounds (11), -n decisions a
 * run (400,000), -t keys and tenants (100,000), -s the settings to run
 * (ABsC; one alone, to profile it).
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../engine/workload.h"
#include "../timing.h"
#include "weir/weir.h"

#define MAX_ROUNDS 64u
#define RULES_BYTES 2048u

enum { SET_A, SET_B, SET_BS, SET_C, SETTINGS };
enum { ONE, PAIR, VARIANTS };

static const char *const set_name[SETTINGS] = {
    "A   tiers, no table", "B   tenants, 2 overrides, distinct numbers",
    "Bs  tenants, 2 overrides, shared numbers", "C   no tenants: section"};
static const char set_letter[SETTINGS] = {'A', 'B', 's', 'C'};
static const char *const variant_name[VARIANTS] = {"[api_key]", "[api_key],[api_key,endpoint]"};

typedef struct setting {
    weir_store *store;
    weir_engine *engine;
    weir_engine_reader *reader;
    int64_t t_us;
    uint64_t over;
    double ns[VARIANTS][MAX_ROUNDS];
} setting;

/* ------------------------------------------------------------ allocator */

/* Bytes the context holds: the table's memory is what it adds. */
static size_t live_bytes;

static void *count_malloc(void *ud, size_t size)
{
    (void)ud;
    void *p = malloc(size);
    if (p)
        live_bytes += malloc_usable_size(p);
    return p;
}

static void *count_realloc(void *ud, void *ptr, size_t size)
{
    (void)ud;
    size_t old = ptr ? malloc_usable_size(ptr) : 0;
    void *p = realloc(ptr, size);
    if (p)
        live_bytes += malloc_usable_size(p) - old;
    return p;
}

static void count_free(void *ud, void *ptr)
{
    (void)ud;
    if (ptr)
        live_bytes -= malloc_usable_size(ptr);
    free(ptr);
}

/* ------------------------------------------------------------ rules */

/* The limits of a tier (or of the rule file): @rpu a minute, and as much
 * for the `endpoint: /orders` below it; @indent spaces before them. */
static size_t put_limits(char *buf, size_t cap, int indent, unsigned rpu, const char *algo)
{
    return (size_t)snprintf(buf, cap,
                            "%*srate_limit: {unit: minute, requests_per_unit: %u, algorithm: %s}\n"
                            "%*sdescriptors:\n"
                            "%*s  - key: endpoint\n"
                            "%*s    value: /orders\n"
                            "%*s    rate_limit: {unit: minute, requests_per_unit: %u, "
                            "algorithm: %s}\n",
                            indent, "", rpu, algo, indent, "", indent, "", indent, "", indent, "",
                            rpu, algo);
}

static size_t make_rules(char *buf, size_t cap, bool tenants, const char *algo)
{
    size_t n = (size_t)snprintf(buf, cap, "domain: api\n");
    if (tenants) {
        n += (size_t)snprintf(buf + n, cap - n,
                              "tenants:\n  key: api_key\n  default_tier: free\n  tiers:\n"
                              "    free:\n");
        n += put_limits(buf + n, cap - n, 6, 1000000, algo);
        n += (size_t)snprintf(buf + n, cap - n, "    pro:\n");
        n += put_limits(buf + n, cap - n, 6, 2000000, algo);
    }
    n += (size_t)snprintf(buf + n, cap - n, "descriptors:\n  - key: api_key\n");
    n += put_limits(buf + n, cap - n, 4, 1000000, algo);
    return n;
}

static int setting_make(weir_ctx *ctx, setting *s, bool tenants, const char *algo)
{
    char yaml[RULES_BYTES];
    size_t len = make_rules(yaml, sizeof(yaml), tenants, algo);
    weir_rules *rules;
    weir_rules_error err;
    size_t n_err = 0;
    if (weir_rules_parse(ctx, "tenants.yaml", yaml, len, NULL, &rules, &err, 1, &n_err) !=
        WEIR_OK) {
        if (n_err)
            fprintf(stderr, "%s:%u:%u: %s\n", err.file, err.line, err.column, err.message);
        return 1;
    }
    weir_engine_options eo = {.size = sizeof(eo)};
    if (weir_memstore_new(ctx, NULL, &s->store) != WEIR_OK)
        return 1;
    eo.store = s->store;
    if (weir_engine_new(ctx, &eo, rules, &s->engine) != WEIR_OK ||
        weir_engine_reader_new(s->engine, &s->reader) != WEIR_OK)
        return 1;
    s->t_us = 1700000000LL * 1000000;
    return 0;
}

/* ------------------------------------------------------------ the table */

typedef struct table_cost {
    double build_ms, hand_ms;
    size_t bytes;
} table_cost;

/* 100,000 tenants named as the workload's users, tiers alternating, two
 * overrides each; numbers distinct per tenant unless @shared. */
static int table_make(weir_ctx *ctx, const workload *names, bool shared, weir_engine *engine,
                      table_cost *cost)
{
    size_t before = live_bytes;
    double t0 = bench_now_s();
    weir_tenants *t;
    if (weir_tenants_new(ctx, &t) != WEIR_OK)
        return 1;
    for (uint32_t i = 0; i < names->n_users; i++) {
        bool pro = i % 2;
        uint32_t base = shared ? (pro ? 4000000u : 3000000u) : 3000000u + i;
        weir_tenant_limit l[2] = {
            {"default", 7, base, WEIR_UNIT_MINUTE, WEIR_CALENDAR_NONE, NULL, 0},
            {"endpoint:/orders", 16, base / 2, WEIR_UNIT_MINUTE, WEIR_CALENDAR_NONE, NULL, 0}};
        weir_tenant rec = {
            names->users[i], names->users_len[i], pro ? "pro" : "free", INT64_MIN, INT64_MAX, l, 2};
        if (weir_tenants_add(t, &rec) != WEIR_OK)
            return 1;
    }
    double t1 = bench_now_s();
    cost->bytes = live_bytes - before;
    if (weir_engine_set_tenants(engine, t) != WEIR_OK)
        return 1;
    cost->build_ms = (t1 - t0) * 1e3;
    cost->hand_ms = (bench_now_s() - t1) * 1e3;
    return 0;
}

/* ------------------------------------------------------------ decisions */

/* Requests [from, from + n) of @names: one descriptor, or the pair. */
static void decide(setting *s, workload_name *names, const uint8_t *lens, uint32_t from, uint32_t n,
                   int variant)
{
    weir_descriptor_status st[2];
    weir_code overall = WEIR_CODE_OK;
    for (uint32_t i = from; i < from + n; i++) {
        weir_entry e[2] = {{"api_key", 7, names[i], lens[i]}, {"endpoint", 8, "/orders", 7}};
        weir_descriptor d[2] = {{e, 1, false, 0, NULL}, {e, 2, false, 0, NULL}};
        weir_request req = {"api", 3, d, variant == PAIR ? 2 : 1, 1, 0};
        weir_engine_decide(s->reader, &req, s->t_us++, st, workload_on_decided, &overall);
        s->over += overall != WEIR_CODE_OK;
    }
}

static double median_of(const double *v, unsigned n)
{
    double c[MAX_ROUNDS];
    memcpy(c, v, n * sizeof(*c));
    return bench_median(c, n);
}

/* The median of the rounds' own ratios a / b. */
static double ratio_of(const double *a, const double *b, unsigned n)
{
    double r[MAX_ROUNDS];
    for (unsigned i = 0; i < n; i++)
        r[i] = a[i] / b[i];
    return bench_median(r, n);
}

int main(int argc, char **argv)
{
    const char *algo = "token_bucket";
    unsigned rounds = 11;
    uint32_t ops = 400000, tenants = 100000;
    const char *only = "ABsC";
    int c;
    while ((c = getopt(argc, argv, "a:r:n:s:t:")) != -1) {
        if (c == 's')
            only = optarg;
        else if (c == 'a')
            algo = optarg;
        else if (c == 'r')
            rounds = (unsigned)atoi(optarg);
        else if (c == 'n')
            ops = (uint32_t)atoi(optarg);
        else if (c == 't')
            tenants = (uint32_t)atoi(optarg);
        else
            return 2;
    }
    if (rounds == 0 || rounds > MAX_ROUNDS || ops == 0 || tenants == 0 ||
        tenants > WEIR_TENANTS_MAX) {
        fprintf(stderr,
                "usage: weir-bench-tenants [-a ALGORITHM] [-r 1..%u] [-n DECISIONS] "
                "[-s SETTINGS] [-t TENANTS]\n",
                MAX_ROUNDS);
        return 2;
    }
    weir_allocator alloc = {count_malloc, count_realloc, count_free, NULL};
    weir_ctx_options co = {.size = sizeof(co), .allocator = &alloc};
    weir_ctx *ctx;
    if (weir_ctx_new(&co, &ctx) != WEIR_OK)
        return 1;
    time_t now = time(NULL);
    char date[64];
    strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    printf("weir-bench-tenants %s, %s: %u keys, %s, %u decisions a run, %u rounds\n",
           weir_version(), date, tenants, algo, ops, rounds);

    workload names;
    memset(&names, 0, sizeof(names));
    setting set[SETTINGS];
    memset(set, 0, sizeof(set));
    table_cost cost[2];
    int rc = 1;
    if (workload_names(&names, tenants, ops) != 0)
        goto out;
    bool on[SETTINGS];
    for (int k = 0; k < SETTINGS; k++)
        if ((on[k] = strchr(only, set_letter[k]) != NULL) &&
            setting_make(ctx, &set[k], k != SET_C, algo) != 0)
            goto out;
    if ((on[SET_B] && table_make(ctx, &names, false, set[SET_B].engine, &cost[0]) != 0) ||
        (on[SET_BS] && table_make(ctx, &names, true, set[SET_BS].engine, &cost[1]) != 0))
        goto out;
    for (int k = 0; k < 2; k++)
        if (on[k ? SET_BS : SET_B])
            printf(
                "table     %u tenants, 2 overrides each, %s numbers: built in %.1f ms, handed to "
                "the engine in %.1f ms; %zu bytes (%.0f a tenant)\n",
                tenants, k ? "shared" : "distinct", cost[k].build_ms, cost[k].hand_ms,
                cost[k].bytes, (double)cost[k].bytes / tenants);
    /* the warm-up: every key's counters made in every setting */
    for (int k = 0; k < SETTINGS; k++) {
        if (!on[k])
            continue;
        decide(&set[k], names.users, names.users_len, 0, tenants, PAIR);
        set[k].over = 0;
    }
    for (unsigned r = 0; r < rounds; r++) {
        for (int v = 0; v < VARIANTS; v++) {
            for (int j = 0; j < SETTINGS; j++) {
                int k = (int)((r + (unsigned)j) % SETTINGS);
                if (!on[k])
                    continue;
                double t0 = bench_now_s();
                decide(&set[k], names.stream, names.stream_len, 0, ops, v);
                set[k].ns[v][r] = (bench_now_s() - t0) * 1e9 / ops;
            }
        }
    }
    printf("\n%-48s %14s %30s\n", "ns per decision (median)", variant_name[ONE],
           variant_name[PAIR]);
    for (int k = 0; k < SETTINGS; k++)
        if (on[k])
            printf("%-48s %14.1f %30.1f\n", set_name[k], median_of(set[k].ns[ONE], rounds),
                   median_of(set[k].ns[PAIR], rounds));
    static const int ratio[][2] = {
        {SET_B, SET_A}, {SET_B, SET_C}, {SET_BS, SET_A}, {SET_BS, SET_C}, {SET_A, SET_C}};
    static const char *const ratio_name[] = {"B / A", "B / C", "Bs / A", "Bs / C", "A / C"};
    for (size_t i = 0; i < sizeof(ratio) / sizeof(ratio[0]); i++)
        if (on[ratio[i][0]] && on[ratio[i][1]])
            printf("%-48s %14.3f %30.3f\n", ratio_name[i],
                   ratio_of(set[ratio[i][0]].ns[ONE], set[ratio[i][1]].ns[ONE], rounds),
                   ratio_of(set[ratio[i][0]].ns[PAIR], set[ratio[i][1]].ns[PAIR], rounds));
    uint64_t over = 0;
    for (int k = 0; k < SETTINGS; k++)
        over += set[k].over;
    printf("(ratios: medians of the rounds' own ratios; %llu decisions over limit)\n",
           (unsigned long long)over);
    rc = 0;
out:
    for (int k = 0; k < SETTINGS; k++) {
        weir_engine_reader_free(set[k].reader);
        weir_engine_free(set[k].engine);
        weir_store_free(set[k].store);
    }
    workload_free(&names);
    weir_ctx_free(ctx);
    if (rc)
        fprintf(stderr, "weir-bench-tenants: setting up failed\n");
    return rc;
}
