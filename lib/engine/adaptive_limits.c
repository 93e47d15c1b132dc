/*
 * adaptive_limits.c - the controllers of a ruleset's `adaptive:` limits
 * (adaptive_limits.h).
 */
#include "engine/adaptive_limits.h"

#include <stdlib.h>
#include <string.h>

#include "core/context.h"

weir_status weir__adaptive_add(weir_ctx *ctx, adaptive_table *t, const weir_rule_limit *l,
                               uint64_t id, uint64_t seed, adaptive_ctl **slot)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 8;
        adaptive_entry *v = weir__malloc(ctx, cap * sizeof(*v));
        if (!v)
            return WEIR_ENOMEM;
        if (t->n)
            memcpy(v, t->v, t->n * sizeof(*v));
        weir__free(ctx, t->v);
        t->v = v;
        t->cap = cap;
    }
    adaptive_ctl *c = weir__calloc(ctx, 1, sizeof(*c));
    if (!c)
        return WEIR_ENOMEM;
    /* copied byte for byte, padding included, so that two limits' options
     * compare with memcmp() */
    memcpy(&c->opts, l->adaptive, sizeof(c->opts));
    c->opts.seed = seed;
    weir_status st = weir_adaptive_new(ctx, &c->opts, &c->a);
    if (st != WEIR_OK) {
        weir__free(ctx, c);
        return st;
    }
    atomic_init(&c->refs, 1);
    c->ctx = ctx;
    c->id = id;
    *slot = c;
    t->v[t->n++] = (adaptive_entry){id, l, slot};
    return WEIR_OK;
}

static int cmp_entry(const void *a, const void *b)
{
    uint64_t x = ((const adaptive_entry *)a)->id, y = ((const adaptive_entry *)b)->id;
    return (x > y) - (x < y);
}

void weir__adaptive_seal(adaptive_table *t)
{
    if (t->n > 1)
        qsort(t->v, t->n, sizeof(*t->v), cmp_entry);
}

void weir__adaptive_table_free(weir_ctx *ctx, adaptive_table *t)
{
    for (size_t i = 0; i < t->n; i++)
        weir__adaptive_release(*t->v[i].slot);
    weir__free(ctx, t->v);
    memset(t, 0, sizeof(*t));
}

static const adaptive_entry *lookup(const adaptive_table *t, uint64_t id)
{
    size_t lo = 0, hi = t->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->v[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < t->n && t->v[lo].id == id ? &t->v[lo] : NULL;
}

adaptive_ctl *weir__adaptive_find(const adaptive_table *t, uint64_t id)
{
    const adaptive_entry *e = lookup(t, id);
    if (!e)
        return NULL;
    weir__adaptive_hold(*e->slot);
    return *e->slot;
}

void weir__adaptive_hold(adaptive_ctl *c)
{
    atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
}

void weir__adaptive_release(adaptive_ctl *c)
{
    if (c && atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) == 1) {
        weir_adaptive_free(c->a);
        weir__free(c->ctx, c);
    }
}

size_t weir__adaptive_adopt(adaptive_table *next, const adaptive_table *old)
{
    size_t n = 0;
    for (size_t i = 0; i < next->n; i++) {
        const adaptive_entry *e = lookup(old, next->v[i].id);
        adaptive_ctl **slot = next->v[i].slot;
        if (!e || memcmp(&(*e->slot)->opts, &(*slot)->opts, sizeof((*slot)->opts)) != 0)
            continue;
        weir__adaptive_hold(*e->slot);
        weir__adaptive_release(*slot);
        *slot = *e->slot;
        n++;
    }
    return n;
}

void weir__adaptive_feed(adaptive_ctl *c, int64_t now_us, int64_t acquired_us, uint32_t in_flight,
                         bool dropped, int64_t timeout_us)
{
    int64_t rtt = now_us > acquired_us ? now_us - acquired_us : 0;
    if (timeout_us > 0 && rtt >= timeout_us)
        dropped = true; /* it outlived its lease */
    if (rtt > WEIR_ADAPTIVE_MAX_US)
        rtt = WEIR_ADAPTIVE_MAX_US;
    weir_adaptive_sample(c->a, now_us, rtt, in_flight ? in_flight : 1, dropped);
}
