/*
 * side.c - one side of the in-process A/B comparison (see ab.sh): the
 * engine bench's workload on one build of the library, or with TAKE
 * defined the store's own single call (and with BATCH as well, its batch
 * call, 64 independent ops at a time); the single call may run on several
 * threads at once. ab.sh compiles this
 * file twice, with SIDE=A and SIDE=B, links each with its own libweir.a
 * into one relocatable object and hides every symbol but the two below, so
 * both builds live in one process without meeting.
 */
#include <stdatomic.h>

#include "../engine/workload.h"

#ifndef SIDE
#error "compile with -DSIDE=A or -DSIDE=B"
#endif
#ifndef USERS
#define USERS 1000000u
#endif
#define STREAM 4000000u

#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)

int CAT(ab_setup_, SIDE)(void);
void CAT(ab_run_, SIDE)(uint32_t from, uint32_t n);

static workload w;

#ifdef TAKE
/* The store's own call: a token bucket of 100 per second per user, decided
 * by weir_memstore_take() with no engine, as weir-bench's single column. */
static weir_limit take_limit;

#ifdef BATCH
#define BATCH_OPS 64u

static void take(workload_name *names, const uint8_t *lens, uint32_t from, uint32_t n)
{
    weir_op ops[BATCH_OPS];
    for (uint32_t i = from; i < from + n; i += BATCH_OPS) {
        uint32_t k = from + n - i < BATCH_OPS ? from + n - i : BATCH_OPS;
        for (uint32_t j = 0; j < k; j++)
            ops[j] = (weir_op){.key = names[i + j],
                               .key_len = lens[i + j],
                               .limit = &take_limit,
                               .hits = 1,
                               .kind = WEIR_OP_TAKE};
        if (weir_memstore_run(w.store, ops, k, w.t_us++, 0) != WEIR_OK) {
            w.over += k;
            continue;
        }
        for (uint32_t j = 0; j < k; j++)
            w.over += ops[j].status != WEIR_OK || !ops[j].result.allowed;
    }
}
#else
/* Callable from several threads at once (ab's -T): the clock is taken a
 * block at a time from a shared counter, the denials counted locally. */
static _Atomic int64_t take_clock;
static _Atomic uint64_t take_over;

static void take(workload_name *names, const uint8_t *lens, uint32_t from, uint32_t n)
{
    int64_t t = atomic_fetch_add(&take_clock, (int64_t)n);
    uint64_t over = 0;
    for (uint32_t i = from; i < from + n; i++) {
        weir_result r;
        if (weir_memstore_take(w.store, names[i], lens[i], &take_limit, t++, 1, &r) != WEIR_OK ||
            !r.allowed)
            over++;
    }
    atomic_fetch_add(&take_over, over);
}
#endif
#endif

/* The store, the rules and the warm-up; 0 on success. */
int CAT(ab_setup_, SIDE)(void)
{
    weir_ctx *ctx;
    if (weir_ctx_new(NULL, &ctx) != WEIR_OK)
        return 1;
#ifdef TAKE
    weir_limit_spec spec = {
        .algorithm = WEIR_ALGO_TOKEN_BUCKET, .limit = 100, .window_us = 1000000};
    if (weir_limit_compile(&spec, &take_limit) != WEIR_OK ||
        weir_memstore_new(ctx, NULL, &w.store) != WEIR_OK || workload_names(&w, USERS, STREAM) != 0)
        return 1;
    /* Every user once, at one instant (as weir-bench's warm-up): with the
     * clock moving on by a microsecond a call, the first users would be
     * back at rest (after 10 ms) and swept by later inserts, and the
     * store would hold a fraction of them. No key is inserted after. */
    for (uint32_t i = 0; i < USERS; i++) {
        weir_result r;
        if (weir_memstore_take(w.store, w.users[i], w.users_len[i], &take_limit, w.t_us, 1, &r) !=
            WEIR_OK)
            return 1;
    }
    weir_store_stats stats;
    if (weir_store_stats_get(w.store, &stats) != WEIR_OK || stats.keys != USERS)
        return 1;
    w.t_us++;
#ifndef BATCH
    atomic_store(&take_clock, w.t_us);
#endif
    return 0;
#else
#ifdef OVERRIDE
    return workload_make(ctx, &w, USERS, STREAM, &workload_override) != 0;
#else
    return workload_make(ctx, &w, USERS, STREAM, NULL) != 0;
#endif
#endif
}

/* n requests of the random stream from request `from` (mod its length). */
void CAT(ab_run_, SIDE)(uint32_t from, uint32_t n)
{
    from %= STREAM;
    if (n > STREAM - from)
        from = 0;
#ifdef TAKE
    take(w.stream, w.stream_len, from, n);
#else
    workload_run(&w, from, n);
#endif
}
