/*
 * main.c - weir-bench-api: what decoding one API request costs, without
 * HTTP or the engine.
 *
 *   check   POST /v1/check body with 3 descriptors (user, path, ip; the
 *           body bench/http/random_post.lua sends), plus a hits field
 *   json    POST /json body (proto3 JSON, camelCase, 3 descriptors, a
 *           limit override and quoted integers)
 *   query   GET /v1/check?domain=..&user=..&path=..&hits=1 with one
 *           configured header entry
 *
 * Each figure is ns per decode, the median of 5 runs of N decodes over
 * bodies that differ only in the user (so nothing is cached by content).
 * The decoder is reused, as the daemon reuses one per thread. An argument
 * (check, json or query) runs that one alone.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../timing.h"
#include "api/api.h"

#define REPS 5
#define N 500000u
#define VARIANTS 64u

typedef struct body {
    char text[512];
    size_t len;
} body;

static const char *get_header(void *arg, const char *name, size_t *len)
{
    (void)arg;
    (void)name;
    *len = 8;
    return "10.0.0.7";
}

enum { CHECK, JSON, QUERY };

static const weir_api_header_entry headers[] = {{"X-Real-IP", "remote_address"}};

static bool decode(weir_api_decoder *d, int kind, const body *b, weir_api_error *err)
{
    switch (kind) {
    case CHECK:
        return weir_api_decode_check(d, b->text, b->len, err);
    case JSON:
        return weir_api_decode_envoy_json(d, b->text, b->len, err);
    default:
        return weir_api_decode_query(d, b->text, b->len, headers, 1, get_header, NULL, err);
    }
}

static void make(int kind, unsigned i, body *b)
{
    int n;
    switch (kind) {
    case CHECK:
        n = snprintf(b->text, sizeof(b->text),
                     "{\"domain\":\"bench\",\"descriptors\":["
                     "{\"entries\":[{\"key\":\"user\",\"value\":\"u%u\"}]},"
                     "{\"entries\":[{\"key\":\"path\",\"value\":\"/p%u\"}]},"
                     "{\"entries\":[{\"key\":\"ip\",\"value\":\"10.0.%u.%u\"}]}],\"hits\":1}",
                     1000 + i, i % 100, i % 256, i % 251);
        break;
    case JSON:
        n = snprintf(b->text, sizeof(b->text),
                     "{\"domain\":\"envoy\",\"descriptors\":["
                     "{\"entries\":[{\"key\":\"user\",\"value\":\"u%u\"}]},"
                     "{\"entries\":[{\"key\":\"path\",\"value\":\"/p%u\"}],"
                     "\"limit\":{\"requestsPerUnit\":\"100\",\"unit\":\"MINUTE\"}},"
                     "{\"entries\":[{\"key\":\"remote_address\",\"value\":\"10.0.%u.%u\"}],"
                     "\"hitsAddend\":\"2\"}],\"hitsAddend\":1}",
                     1000 + i, i % 100, i % 256, i % 251);
        break;
    default:
        n = snprintf(b->text, sizeof(b->text), "domain=bench&user=u%u&path=%%2Fp%u&hits=1",
                     1000 + i, i % 100);
        break;
    }
    b->len = n > 0 ? (size_t)n : 0;
}

static int bench(weir_api_decoder *d, int kind, const char *what)
{
    static body bodies[VARIANTS];
    for (unsigned i = 0; i < VARIANTS; i++)
        make(kind, i, &bodies[i]);
    weir_api_error err;
    double v[REPS];
    size_t entries = 0;
    for (int pass = -1; pass < REPS; pass++) {
        double t0 = bench_now_s();
        unsigned n = pass < 0 ? N / 10 : N;
        for (unsigned i = 0; i < n; i++) {
            if (!decode(d, kind, &bodies[i % VARIANTS], &err)) {
                fprintf(stderr, "%s: %s\n", what, err.message);
                return 1;
            }
            const weir_request *r = weir_api_request(d, 0);
            entries += r->descriptors[r->n_descriptors - 1].n_entries;
        }
        if (pass >= 0)
            v[pass] = (bench_now_s() - t0) * 1e9 / n;
    }
    printf("%-6s %-52s %7.1f ns per decode (median of %d, %zu bytes)\n", what,
           kind == CHECK  ? "POST /v1/check, 3 descriptors"
           : kind == JSON ? "POST /json, 3 descriptors, limit, quoted ints"
                          : "GET /v1/check, 2 entries + 1 header",
           bench_median(v, REPS), REPS, bodies[0].len);
    return entries == 0;
}

int main(int argc, char **argv)
{
    const char *only = argc > 1 ? argv[1] : NULL; /* check, json or query */
    weir_api_decoder *d = weir_api_decoder_new(NULL);
    if (!d)
        return 1;
    time_t now = time(NULL);
    char date[64];
    strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    printf("weir-bench-api %s, %u decodes per run\n", date, N);
    int rc = 0;
    static const char *const names[] = {"check", "json", "query"};
    for (int k = CHECK; k <= QUERY && !rc; k++) {
        if (!only || strcmp(only, names[k]) == 0)
            rc = bench(d, k, names[k]);
    }
    weir_api_decoder_free(d);
    return rc;
}
