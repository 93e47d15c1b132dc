/*
 * counters.c - the commands that act on several counters at once and
 * reply once: WEIR.RESET and DEL (forget CL.THROTTLE/GCRA keys) and
 * WEIR.RELEASE (give back the leases of a WEIR.ACQUIRE's token). Each
 * counter is a call of its own; the reply counts the ones that took
 * effect, or names the first failure, once the last call is done.
 */
#include <stdlib.h>
#include <string.h>

#include "call.h"
#include "commands.h"
#include "lease_token.h"
#include "worker.h"

/* Calls with one reply. The count is kept in done(), which runs for every
 * call the engine took, answered or not, so a group whose connection
 * closed is freed too. */
typedef struct group {
    resp_target t;
    size_t pending; /* calls not done, and one for the command itself */
    int64_t counted;
    weir_status failed;
    bool release; /* a lease not held is no failure, only not counted */
    uint64_t t0_ns;
} group;

typedef struct member {
    group *g;
} member;

static void group_end(group *g, bool from_loop)
{
    if (--g->pending > 0)
        return;
    if (!g->t.conn->base.closed) {
        weir_buf *b = resp_target_buf(&g->t);
        if (g->failed != WEIR_OK)
            weir_resp_errorf(b, "ERR the store failed: %s", weir_strerror(g->failed));
        else
            weir_resp_int(b, g->counted);
        resp_target_done(&g->t, g->t0_ns, from_loop);
    }
    free(g);
}

static void member_reply(call *k, const weir_key_outcome *o)
{
    group *g = ((member *)k->data)->g;
    if (o->status == WEIR_OK)
        g->counted += g->release || o->result.allowed;
    else if (!(g->release && o->status == WEIR_ENOLEASE) && g->failed == WEIR_OK)
        g->failed = o->status;
}

static void member_expired(call *k)
{
    group *g = ((member *)k->data)->g;
    if (g->failed == WEIR_OK)
        g->failed = WEIR_ETIMEDOUT;
}

static void member_done(call *k)
{
    group_end(((member *)k->data)->g, true);
}

static const call_ops member_ops = {NULL, member_expired, member_done, member_reply};

/* A group for @c's reply; NULL (an error written) when out of memory. The
 * command's own count is taken: group_end() it once every member went. */
static group *group_new(resp_conn *c, bool release)
{
    group *g = calloc(1, sizeof(*g));
    if (!g) {
        weir_resp_errorf(resp_out(c), "ERR out of memory");
        return NULL;
    }
    if (!resp_target_for(c, &g->t)) {
        free(g);
        return NULL;
    }
    g->pending = 1;
    g->release = release;
    g->t0_ns = uv_hrtime();
    return g;
}

/* Starts member call @k of @g (NULL: out of memory). */
static void group_start(group *g, call *k)
{
    if (!k) {
        g->failed = WEIR_ENOMEM;
        return;
    }
    member m = {g};
    memcpy(k->data, &m, sizeof(m));
    g->pending++;
    worker *w = k->conn->w;
    weir_status st = call_decide(k, w, server_now_us(w->srv), w->srv->opt.decision_timeout_ms);
    if (st != WEIR_OK) {
        call_free(k); /* done() does not run for it */
        g->failed = st;
        g->pending--;
    }
}

/* ------------------------------------------------------------ WEIR.RESET, DEL */

void resp_weir_reset(resp_conn *c, const weir_resp_arg *argv, size_t argc)
{
    for (size_t i = 1; i < argc; i++)
        if (argv[i].n == 0 || argv[i].n > WEIR_ENGINE_MAX_KEY_NAME) {
            weir_resp_errorf(resp_out(c), "ERR a key must be 1 to %u bytes",
                             WEIR_ENGINE_MAX_KEY_NAME);
            return;
        }
    group *g = group_new(c, false);
    if (!g)
        return;
    for (size_t i = 1; i < argc; i++) {
        weir_key_op op = {argv[i].p, argv[i].n, WEIR_OP_RESET, NULL, 0, WEIR_FAILURE_ALLOW};
        group_start(g, call_new_key(&c->base, &member_ops, &op, sizeof(member), uv_hrtime()));
    }
    group_end(g, false);
}

void resp_del(resp_conn *c, const weir_resp_arg *argv, size_t argc)
{
    resp_weir_reset(c, argv, argc);
}

/* ------------------------------------------------------------ WEIR.RELEASE */

void resp_weir_release(resp_conn *c, const weir_resp_arg *argv, size_t argc)
{
    lease_token *tok = lease_token_scratch();
    bool dropped = argc == 3 && argv[2].n == 7 && strncasecmp(argv[2].p, "dropped", 7) == 0;
    if (argc > 3 || (argc == 3 && !dropped)) {
        weir_resp_errorf(resp_out(c), "ERR syntax error: WEIR.RELEASE token [DROPPED]");
        return;
    }
    bool ok = lease_token_parse(argv[1].p, argv[1].n, tok);
    group *g = ok ? group_new(c, true) : NULL;
    if (!ok)
        weir_resp_errorf(resp_out(c), "ERR not a lease token of WEIR.ACQUIRE");
    if (dropped)
        lease_token_set_dropped(tok);
    for (size_t i = 0; g && i < tok->n; i++)
        group_start(g, call_new_release(&c->base, &member_ops, &tok->leases[i], sizeof(member),
                                        uv_hrtime()));
    if (g)
        group_end(g, false);
}
