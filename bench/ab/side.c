/*
 * side.c - one side of the in-process A/B comparison (see ab.sh): the
 * engine bench's workload on one build of the library. ab.sh compiles this
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

/* The store, the rules and the warm-up; 0 on success. */
int CAT(ab_setup_, SIDE)(void)
{
    weir_ctx *ctx;
    return weir_ctx_new(NULL, &ctx) != WEIR_OK || workload_make(ctx, &w, USERS, STREAM) != 0;
}

/* n requests of the random stream from request `from` (mod its length). */
void CAT(ab_run_, SIDE)(uint32_t from, uint32_t n)
{
    from %= STREAM;
    if (n > STREAM - from)
        from = 0;
    workload_run(&w, from, n);
}
