/*
 * deny_cache.c - the local over-limit cache (deny_cache.h).
 */
#include "store/redis/deny_cache.h"

#include <string.h>
#include <xxhash.h>

#include "core/context.h"

typedef struct slot {
    XXH128_hash_t key; /* keyed: a key's slot cannot be aimed at */
    int64_t until;     /* monotonic: denied before this */
    int64_t reset_at;  /* monotonic: back at rest */
    uint64_t limit;    /* the result's */
} slot;

struct deny_cache {
    size_t mask;
    uint64_t seed;
    slot slots[];
};

weir_status weir__deny_cache_new(weir_ctx *ctx, size_t slots, deny_cache **out)
{
    *out = NULL;
    if (slots == 0)
        return WEIR_OK;
    size_t n = 1;
    while (n < slots && n < ((size_t)1 << 24))
        n <<= 1;
    deny_cache *c = weir__calloc(ctx, 1, sizeof(*c) + n * sizeof(slot));
    if (!c)
        return WEIR_ENOMEM;
    c->mask = n - 1;
    if (weir__random(&c->seed, sizeof(c->seed)) != WEIR_OK) {
        weir__free(ctx, c);
        return WEIR_EIO;
    }
    *out = c;
    return WEIR_OK;
}

void weir__deny_cache_free(weir_ctx *ctx, deny_cache *c)
{
    weir__free(ctx, c);
}

/* A cost-1 look or take of an algorithm whose denial is exact, from a
 * limit that allows the cache. Not a TAKE with a reserve: its denial says
 * nothing of a plain TAKE's. */
static bool cacheable(const weir_op *op)
{
    return (op->kind == WEIR_OP_CHECK || (op->kind == WEIR_OP_TAKE && op->reserve == 0)) &&
           op->hits <= 1 && op->limit->algorithm != WEIR_ALGO_CONCURRENCY &&
           !(op->flags & WEIR_OP_NO_LOCAL_CACHE);
}

static slot *find(deny_cache *c, const weir_op *op, XXH128_hash_t *h)
{
    *h = XXH3_128bits_withSeed(op->key, op->key_len, c->seed);
    return &c->slots[(size_t)h->low64 & c->mask];
}

bool weir__deny_cache_answer(deny_cache *c, weir_op *ops, size_t n, int64_t now_mono)
{
    if (!c)
        return false;
    slot *hit[WEIR_MAX_BATCH < 64 ? WEIR_MAX_BATCH : 64];
    if (n > sizeof(hit) / sizeof(hit[0]))
        return false;
    for (size_t i = 0; i < n; i++) {
        XXH128_hash_t h;
        if (!cacheable(&ops[i]))
            return false;
        slot *s = find(c, &ops[i], &h);
        /* the key names the limit too (weir:2:...:oRPU/WINDOW for overrides) */
        if (!XXH128_isEqual(s->key, h) || s->until <= now_mono)
            return false;
        hit[i] = s;
    }
    for (size_t i = 0; i < n; i++) {
        weir_result *r = &ops[i].result;
        memset(r, 0, sizeof(*r));
        r->allowed = false;
        r->limit = hit[i]->limit;
        r->remaining = 0;
        r->retry_after_us = hit[i]->until - now_mono;
        r->reset_after_us = hit[i]->reset_at > now_mono ? hit[i]->reset_at - now_mono : 0;
        ops[i].status = WEIR_OK;
    }
    return true;
}

void weir__deny_cache_note(deny_cache *c, const weir_op *ops, size_t n, int64_t asked_mono)
{
    if (!c)
        return;
    for (size_t i = 0; i < n; i++) {
        const weir_op *op = &ops[i];
        const weir_result *r = &op->result;
        if (op->kind == WEIR_OP_REFUND && op->status == WEIR_OK && r->allowed) {
            /* capacity given back: the key's denial may no longer hold */
            XXH128_hash_t h;
            slot *s = find(c, op, &h);
            if (XXH128_isEqual(s->key, h))
                s->until = 0;
            continue;
        }
        if (op->status != WEIR_OK || r->allowed || r->retry_after_us <= 0 || !cacheable(op))
            continue;
        XXH128_hash_t h;
        slot *s = find(c, op, &h);
        s->key = h;
        s->until = asked_mono + r->retry_after_us;
        s->reset_at = asked_mono + r->reset_after_us;
        s->limit = r->limit;
    }
}
