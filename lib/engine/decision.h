/*
 * decision.h - what decide.c (the decision's life: its batches, its
 * store callbacks, its answer) and plan.c (matching each descriptor and
 * listing the limits to charge, with their counters' names) share: a
 * decision's memory and the few helpers both use. Private to lib/engine.
 */
#ifndef WEIR_ENGINE_DECISION_H
#define WEIR_ENGINE_DECISION_H

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "core/context.h"
#include "core/snapshot.h"
#include "engine/engine_internal.h"
#include "engine/keys.h"
#include "engine/match.h"
#include "engine/ruleset.h"
#include "engine/tenants.h"
#include "rules/loader.h"
#include "store/store.h"
#include "weir/cms.h"
#include "weir/engine.h"

_Static_assert(sizeof(weir_entry) == sizeof(weir__entry), "weir_entry mirrors weir__entry");
_Static_assert(offsetof(weir_entry, value_len) == offsetof(weir__entry, value_len),
               "weir_entry mirrors weir__entry");
_Static_assert(WEIR_ENGINE_MAX_DESCRIPTORS <= 64, "quota_desc has a bit per descriptor");
_Static_assert(WEIR_ENGINE_MAX_ENTRIES <= WEIR__MATCH_MAX_ENTRIES,
               "every descriptor check_descriptor() accepts can be matched");

#define US_PER_S 1000000LL

/* One limit of the request to decide. */
typedef struct pending {
    uint32_t desc;
    bool enforcing; /* in the atomic batch */
    bool shadow;
    bool quota;
    bool dropped; /* replaced by another matched limit */
    bool local;   /* decided on the fallback store (failure_mode local) */
    bool tenant_override;
    const char *tier; /* the tenant's tier (plan_ctx.tier) */
    weir_cms *cms;    /* `sketch:`: counted there, not in the store */
    /* `adaptive:`: its controller, the limit it published for this
     * decision, and the units kept free above it (requests_per_unit -
     * that limit), the TAKE's reserve */
    struct adaptive_ctl *adaptive;
    uint32_t adaptive_limit;
    uint64_t adaptive_reserve;
    const weir_rule_limit *limit;
    const weir_limit *lim; /* &limit->compiled, or &eff for an override */
    weir_limit eff;
    uint64_t hits;
    weir_op_kind kind;
    uint32_t rpu;
    weir_rule_unit unit;
    int64_t window_us;
    size_t op; /* index in ops[] */
    /* units a TAKE must leave free (weir_op.reserve), summed over its
     * sources; `share` of them the request's priority's `shed:` share */
    uint64_t reserve;
    uint64_t share;
} pending;

struct decision {
    weir_engine *engine;
    weir_engine_reader *reader;
    ruleset *rs;
    weir_descriptor_status *st;
    size_t n;
    weir_decide_cb cb;
    void *arg;
    size_t n_pending;
    pending p[WEIR_ENGINE_MAX_LIMITS];
    weir_limit_outcome outcomes[WEIR_ENGINE_MAX_LIMITS];
    weir_op ops[WEIR_ENGINE_MAX_LIMITS];
    /* charges of count_rejected limits after a denial (not reported) */
    weir_op extra[WEIR_ENGINE_MAX_LIMITS];
    int64_t now_us;
    size_t n_enforcing; /* ops[0, n_enforcing) atomic, the rest independent */
    size_t n_ops;       /* the store's; the sketches' ops follow, not sent */
    size_t n_sketch;    /* limits counted in a sketch */
    bool settling;      /* weir_engine_settle(): every limit brought to `cost` */
    uint64_t cost;
    bool sketch_after; /* enforcing sketches to charge once the store admits */
    bool owned;        /* reader->own, holding no reference on rs */
    _Atomic int outstanding;
    uint64_t quota_desc; /* bit d: descriptor d is in quota mode */
    unsigned char keys[WEIR_ENGINE_MAX_LIMITS][DIGEST_BYTES];
    /* The limits of descriptors that name no rule and give one of their
     * own (plan_orphan()), by descriptor; made on first use and kept with
     * the decision's memory. */
    weir_rule_limit *orphans;
    /* The limits tenant overrides put in force, by pending index; made on
     * first use and kept with the decision's memory. */
    weir_rule_limit *tlimits;
    limit_plan *tplans;
    /* A store shared between processes: stable keys, limit i's at
     * kbuf + koff[i], kept with the decision's memory for the next one. */
    char *kbuf;
    size_t kcap, kused;
    uint32_t koff[WEIR_ENGINE_MAX_LIMITS];
    uint32_t klen[WEIR_ENGINE_MAX_LIMITS];
};

/* Records why the reader's decision is refused (descriptor @d, or -1 for
 * the request) and returns the status that goes with it. */
static inline weir_status weir__refuse(weir_engine_reader *rd, weir_refusal_code code, long d)
{
    rd->refusal.code = code;
    rd->refusal.descriptor = (int32_t)d;
    return code == WEIR_REFUSAL_BAD_OVERRIDE ? WEIR_ERANGE
           : code == WEIR_REFUSAL_NO_MEMORY  ? WEIR_ENOMEM
                                             : WEIR_EINVAL;
}

/* Field by field: a whole-struct copy or memset of this size compiles to
 * `rep stos` on x86-64, whose start-up cost was a seventh of the planning's
 * time (perf); these compile to a few moves. A field added to the struct
 * must be added here too (the assertion is a reminder, not a proof: a new
 * bool may fit in padding). */
_Static_assert(sizeof(weir_descriptor_status) == 88 || sizeof(void *) != 8,
               "weir__set_unmatched() sets every field of weir_descriptor_status");
static inline void weir__set_unmatched(weir_descriptor_status *s)
{
    s->code = WEIR_CODE_OK;
    s->limit = NULL;
    s->requests_per_unit = 0;
    s->unit = WEIR_UNIT_NONE;
    s->window_us = 0;
    s->remaining = 0;
    s->reset_after_us = 0;
    s->retry_after_us = 0;
    s->delay_us = 0;
    s->shadow = false;
    s->would_deny = false;
    s->failure_mode = false;
    s->local = false;
    s->unlimited = false;
    s->domain_not_found = false;
    s->shed = false;
    s->outcomes = NULL;
    s->n_outcomes = 0;
}

/* Matches every descriptor of @req and lists the limits to charge
 * (plan.c); *domain_found false when the domain has no rules. Returns
 * WEIR_OK or the refusal (weir__refuse()). */
weir_status weir__plan(decision *dc, weir_engine_reader *rd, const weir_request *req,
                       bool *domain_found);

/* Puts pending limit @i's op in slot @slot of dc->ops. */
void weir__place_op(decision *dc, size_t i, size_t slot);

#endif /* WEIR_ENGINE_DECISION_H */
