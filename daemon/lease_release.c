/*
 * lease_release.c - a token's leases given back, one call each
 * (lease_release.h). The count is kept in done(), which runs for every
 * call the engine took, answered or not, so a release whose connection
 * closed is freed too.
 */
#include "lease_release.h"

#include <stdlib.h>
#include <string.h>

#include "call.h"

typedef struct release {
    conn *c;
    lease_release_done done;
    lease_counts n;
    size_t pending;
    bool later; /* lease_release_all() has returned */
    _Alignas(max_align_t) unsigned char arg[LEASE_RELEASE_ARG_BYTES];
} release;

typedef struct member {
    release *r;
} member;

static void release_end(release *r)
{
    if (--r->pending > 0)
        return;
    if (!r->c->closed)
        r->done(r->c, r->arg, &r->n, r->later);
    free(r);
}

static void member_decided(call *k, const weir_key_outcome *o)
{
    release *r = ((member *)k->data)->r;
    if (o->status == WEIR_OK)
        r->n.released++;
    else if (o->status != WEIR_ENOLEASE) /* not held: given back or timed out */
        r->n.failed++;
}

static void member_expired(call *k)
{
    ((member *)k->data)->r->n.failed++;
}

static void member_done(call *k)
{
    release_end(((member *)k->data)->r);
}

static const call_ops member_ops = {NULL, member_expired, member_done, member_decided};

bool lease_release_all(conn *c, const lease_token *tok, uint64_t t0_ns, lease_release_done done,
                       const void *arg, size_t arg_bytes)
{
    release *r = arg_bytes <= LEASE_RELEASE_ARG_BYTES ? calloc(1, sizeof(*r)) : NULL;
    if (!r)
        return false;
    r->c = c;
    r->done = done;
    memcpy(r->arg, arg, arg_bytes);
    r->n.leases = tok->n;
    r->pending = 1; /* this function's own, dropped below */
    worker *w = c->w;
    for (size_t i = 0; i < tok->n; i++) {
        call *k = call_new_release(c, &member_ops, &tok->leases[i], sizeof(member), t0_ns);
        if (!k) {
            r->n.failed++;
            continue;
        }
        member m = {r};
        memcpy(k->data, &m, sizeof(m));
        r->pending++;
        weir_status st = call_decide(k, w, server_now_us(w->srv), w->srv->opt.decision_timeout_ms);
        if (st != WEIR_OK) {
            call_free(k); /* done() does not run for it */
            /* EINVAL: a counter this store cannot hold, so no lease of it
             * is held (not a failure) */
            r->n.failed += st != WEIR_EINVAL;
            r->pending--;
        }
    }
    r->later = r->pending > 1; /* what is still pending completes from the loop */
    release_end(r);
    return true;
}
