/*
 * adaptive_limits.h - the controllers of a ruleset's `adaptive:` limits
 * (private to lib/engine): one per limit, made with the ruleset's plans,
 * carried over a reload to the limit of the same identity and options
 * (what it learnt stays), and found by the limit's id when a lease comes
 * back, on this instance or any other with the same rules.
 *
 * A decision reads the limit (one atomic load) and asks the store for a
 * TAKE keeping a reserve of requests_per_unit - limit; a release feeds
 * the controller the lease's time in flight.
 */
#ifndef WEIR_ENGINE_ADAPTIVE_LIMITS_H
#define WEIR_ENGINE_ADAPTIVE_LIMITS_H

#include <stdatomic.h>
#include <stdint.h>

#include "weir/adaptive.h"
#include "weir/rules.h"

/* A controller shared by the rulesets that hold it (a reload keeps it). */
typedef struct adaptive_ctl {
    _Atomic int refs;
    weir_ctx *ctx;
    weir_adaptive *a;
    uint64_t id;                /* the limit's: weir_limit_outcome.adaptive */
    weir_adaptive_options opts; /* as made: a reload keeps it if equal */
} adaptive_ctl;

/* The adaptive limits of a set of plans, sorted by id. */
typedef struct adaptive_entry {
    uint64_t id;
    const weir_rule_limit *limit;
    adaptive_ctl **slot; /* the plan's pointer to it */
} adaptive_entry;

typedef struct adaptive_table {
    adaptive_entry *v;
    size_t n, cap;
} adaptive_table;

/* A controller for @l (its options with @seed for the probes' jitter)
 * with one reference, entered in @t for @slot (set to it). WEIR_ENOMEM;
 * WEIR_ERANGE for options the loader let through but the controller
 * refuses. */
weir_status weir__adaptive_add(weir_ctx *ctx, adaptive_table *t, const weir_rule_limit *l,
                               uint64_t id, uint64_t seed, adaptive_ctl **slot);
/* Sorts the table once every limit is in. */
void weir__adaptive_seal(adaptive_table *t);
/* Drops the table's references and frees it. */
void weir__adaptive_table_free(weir_ctx *ctx, adaptive_table *t);

/* The controller of limit @id, with a reference taken; NULL if none. */
adaptive_ctl *weir__adaptive_find(const adaptive_table *t, uint64_t id);
void weir__adaptive_hold(adaptive_ctl *c);
void weir__adaptive_release(adaptive_ctl *c);

/* A reload: each limit of @next whose identity and options a limit of
 * @old has takes over @old's controller. Returns how many did. */
size_t weir__adaptive_adopt(adaptive_table *next, const adaptive_table *old);

/* The lease's sample for @c: its time in flight (@acquired_us to
 * @now_us), how many it was among, and whether the request failed (the
 * caller said so, or the lease outlived its timeout @timeout_us). */
void weir__adaptive_feed(adaptive_ctl *c, int64_t now_us, int64_t acquired_us, uint32_t in_flight,
                         bool dropped, int64_t timeout_us);

#endif /* WEIR_ENGINE_ADAPTIVE_LIMITS_H */
