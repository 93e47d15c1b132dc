/*
 * side.c - one side of the in-process A/B comparison (see ab.sh): the
 * engine bench's workload on one build of the library, or with TAKE
 * defined the store's own single call. ab.sh compiles this
 * file twice, with SIDE=A and SIDE=B, links each with its own libweir.a
 * into one relocatable object and hides every symbol but the two below, so
 * both builds live in one process without meeting.
 */
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

static void take(workload_name *names, const uint8_t *lens, uint32_t from, uint32_t n)
{
    for (uint32_t i = from; i < from + n; i++) {
        weir_result r;
        if (weir_memstore_take(w.store, names[i], lens[i], &take_limit, w.t_us++, 1, &r) !=
                WEIR_OK ||
            !r.allowed)
            w.over++;
    }
}
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
    take(w.users, w.users_len, 0, USERS);
    return 0;
#else
    return workload_make(ctx, &w, USERS, STREAM) != 0;
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
