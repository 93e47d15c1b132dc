/*
 * limits.c - the rate limit commands: CL.THROTTLE (redis-cell's contract)
 * and GCRA on counters the caller names, WEIR.CHECK, WEIR.PEEK and
 * WEIR.ACQUIRE through the rules (the commands on several counters at
 * once are counters.c's), and where a reply goes. Each decision is a call (call.h): on the
 * memory store it completes before the command returns and its reply
 * goes out with the others of the read; on a store that completes later
 * its reply takes a slot, so the replies still leave in command order.
 *
 * docs/RESP.md gives each command's contract and where it differs from
 * redis-cell's and Dragonfly's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "call.h"
#include "commands.h"
#include "lease_token.h"
#include "worker.h"

#define US_PER_S 1000000LL
#define NS_PER_US 1000LL

/* ------------------------------------------------------------ arguments */

/* Seconds as a decimal number ("60", "0.5", "1.25") into microseconds;
 * false for anything else, more than 6 decimals, or past 100 years. */
static bool parse_seconds(const weir_resp_arg *a, int64_t *us)
{
    int64_t whole = 0, frac = 0;
    size_t i = 0, digits = 0, decimals = 0;
    for (; i < a->n && a->p[i] >= '0' && a->p[i] <= '9'; i++, digits++) {
        whole = whole * 10 + (a->p[i] - '0');
        if (whole > WEIR_MAX_WINDOW_US / US_PER_S)
            return false;
    }
    if (i < a->n && a->p[i] == '.') {
        for (i++; i < a->n && a->p[i] >= '0' && a->p[i] <= '9'; i++, decimals++) {
            if (decimals == 6)
                return false;
            frac = frac * 10 + (a->p[i] - '0');
        }
    }
    if (i != a->n || digits + decimals == 0)
        return false;
    for (size_t k = decimals; k < 6; k++)
        frac *= 10;
    *us = whole * US_PER_S + frac;
    return *us > 0 && *us <= WEIR_MAX_WINDOW_US;
}

/* ------------------------------------------------------------ replies */

static bool store_inline(resp_conn *c)
{
    return (weir_store_caps(c->base.w->srv->store) & WEIR_STORE_INLINE) != 0;
}

bool resp_target_for(resp_conn *c, resp_target *t)
{
    t->conn = c;
    t->slot = NULL;
    if (store_inline(c))
        return true;
    if (!(t->slot = resp_hold(c))) {
        weir_resp_errorf(resp_out(c), "ERR out of memory");
        return false;
    }
    return true;
}

weir_buf *resp_target_buf(const resp_target *t)
{
    return t->slot ? &t->slot->slot.bytes : resp_out(t->conn);
}

void resp_target_done(const resp_target *t, uint64_t t0_ns, bool from_loop)
{
    metrics_request(t->conn->base.w->metrics, PROTO_RESP, (int64_t)(uv_hrtime() - t0_ns), 0, 0);
    if (t->slot)
        resp_slot_ready(t->slot, from_loop);
}

/* The reply of call @k is written. */
static void target_done(const resp_target *t, const call *k)
{
    resp_target_done(t, k->t0_ns, !k->deciding);
}

/* A call that took no decision: its target is answered with an error. */
static void target_fail(const resp_target *t, const char *msg)
{
    weir_resp_error(resp_target_buf(t), msg, strlen(msg));
    if (t->slot)
        resp_slot_ready(t->slot, false);
}

static void on_expired(call *k)
{
    const resp_target *t = k->data;
    const char *msg = "TIMEOUT no decision within --decision-timeout";
    weir_resp_error(resp_target_buf(t), msg, strlen(msg));
    target_done(t, k);
}

/* Starts @k, whose data starts with its target; on a refusal answers
 * that target with @why's words for it. */
static void start(call *k, void (*why)(resp_conn *, weir_status, char *))
{
    resp_target t = *(const resp_target *)k->data; /* k may go below */
    worker *w = t.conn->base.w;
    weir_status st = call_decide(k, w, server_now_us(w->srv), w->srv->opt.decision_timeout_ms);
    if (st == WEIR_OK)
        return;
    char msg[256];
    why(t.conn, st, msg);
    call_free(k);
    target_fail(&t, msg);
}

/* ------------------------------------------------------------ CL.THROTTLE, GCRA */

typedef struct throttle {
    resp_target t;
    int64_t limit; /* max_burst + 1 */
    bool peek;     /* quantity 0 */
    int64_t slack_us;
} throttle;

/* Whole seconds, rounded up, of @us past the rounding slack of the
 * emission interval (see rate_slack_us()). */
static int64_t seconds_up(int64_t us, int64_t slack_us)
{
    us -= slack_us;
    return us <= 0 ? 0 : (us + US_PER_S - 1) / US_PER_S;
}

/* The GCRA step keeps its emission interval in whole nanoseconds, rounded
 * up when the period does not divide by the rate (3 per second: 333333334
 * ns), so its times can pass the exact rate's by a nanosecond per
 * interval they span: at most 2 x burst + quantity of them. Rounded to
 * whole seconds as they are, an exact 1 s would read 2; that excess is
 * left out first. (The verdicts are not touched: the step never admits
 * more than the exact rate would.) */
static int64_t rate_slack_us(const weir_limit *l, int64_t hits)
{
    int64_t window_ns = l->window_us * NS_PER_US;
    if (window_ns % (int64_t)l->limit == 0)
        return 0;
    /* a quantity past the burst never fits: its times are the backlog's */
    int64_t h = hits > (int64_t)l->burst ? (int64_t)l->burst : hits;
    return ((int64_t)l->burst * 2 + h + NS_PER_US - 1) / NS_PER_US;
}

static void throttle_reply(call *k, const weir_key_outcome *o)
{
    const throttle *th = k->data;
    weir_buf *b = resp_target_buf(&th->t);
    if (o->status != WEIR_OK) {
        weir_resp_errorf(b, "ERR the store failed: %s", weir_strerror(o->status));
        target_done(&th->t, k);
        return;
    }
    const weir_result *r = &o->result;
    /* quantity 0 asks and is never limited (redis-cell's contract) */
    bool limited = !th->peek && !r->allowed;
    int64_t retry = -1;
    if (limited && r->retry_after_us != WEIR_NEVER)
        retry = seconds_up(r->retry_after_us, th->slack_us);
    weir_resp_array(b, 5);
    weir_resp_int(b, limited);
    weir_resp_int(b, th->limit);
    weir_resp_int(b, (int64_t)r->remaining);
    weir_resp_int(b, retry);
    weir_resp_int(b, seconds_up(r->reset_after_us, th->slack_us));
    target_done(&th->t, k);
}

static const call_ops throttle_ops = {NULL, on_expired, NULL, throttle_reply};

static void refusal_text(resp_conn *c, weir_status st, char *msg)
{
    (void)c;
    snprintf(msg, 256, "ERR %s",
             st == WEIR_ERANGE ? "the limit is out of the range the store can hold"
                               : weir_strerror(st));
}

/* Decides quantity @hits of GCRA (@max_burst + 1 at once, @count per
 * @period_us) on counter @key; @cell: errors in redis-cell's words. */
static void decide_gcra(resp_conn *c, const weir_resp_arg *key, int64_t max_burst, int64_t count,
                        int64_t period_us, int64_t hits, bool cell)
{
    const char *pre = cell ? "Cell error: " : "ERR ";
    weir_buf *out = resp_out(c);
    if (count == 0 || period_us == 0) {
        weir_resp_errorf(out, "%sZero rates are not supported", pre);
        return;
    }
    if (max_burst < 0 || count < 0 || period_us < 0 || hits < 0) {
        weir_resp_errorf(out, "%s%s must not be negative", pre,
                         max_burst < 0 ? "max_burst"
                         : count < 0   ? "the count"
                         : hits < 0    ? "the quantity"
                                       : "the period");
        return;
    }
    if (key->n == 0 || key->n > WEIR_ENGINE_MAX_KEY_NAME) {
        weir_resp_errorf(out, "%sthe key must be 1 to %u bytes", pre, WEIR_ENGINE_MAX_KEY_NAME);
        return;
    }
    weir_limit_spec spec = {.algorithm = WEIR_ALGO_GCRA,
                            .limit = (uint64_t)count,
                            .window_us = period_us,
                            .burst = (uint64_t)max_burst + 1};
    weir_limit lim;
    if (max_burst >= (int64_t)WEIR_MAX_LIMIT || count > (int64_t)WEIR_MAX_LIMIT ||
        period_us > WEIR_MAX_WINDOW_US || weir_limit_compile(&spec, &lim) != WEIR_OK) {
        weir_resp_errorf(out,
                         "%sthe rate is out of range (max_burst below %u, count up to %u, "
                         "period up to 100 years, at least a nanosecond per request)",
                         pre, WEIR_MAX_LIMIT, WEIR_MAX_LIMIT);
        return;
    }
    throttle th = {{c, NULL}, max_burst + 1, hits == 0, rate_slack_us(&lim, hits)};
    if (!resp_target_for(c, &th.t))
        return;
    weir_key_op op = {key->p, key->n,         WEIR_OP_TAKE,
                      &lim,   (uint64_t)hits, c->base.w->srv->opt.failure_mode};
    call *k = call_new_key(&c->base, &throttle_ops, &op, sizeof(th), uv_hrtime());
    if (!k) {
        target_fail(&th.t, "ERR out of memory");
        return;
    }
    memcpy(k->data, &th, sizeof(th));
    start(k, refusal_text);
}

void resp_cl_throttle(resp_conn *c, const weir_resp_arg *argv, size_t argc)
{
    if (argc != 5 && argc != 6) {
        weir_resp_errorf(resp_out(c), "Cell error: Usage: cl.throttle <key> <max_burst> <count "
                                      "per period> <period> [<quantity>]");
        return;
    }
    int64_t v[4] = {0, 0, 0, 1};
    for (size_t i = 2; i < argc; i++)
        if (!resp_arg_i64(&argv[i], &v[i - 2])) {
            weir_resp_errorf(resp_out(c), "Cell error: Couldn't parse as integer: %.*s",
                             (int)(argv[i].n > 128 ? 128 : argv[i].n), argv[i].p);
            return;
        }
    if (v[2] > WEIR_MAX_WINDOW_US / US_PER_S) {
        weir_resp_errorf(resp_out(c), "Cell error: the period is past 100 years");
        return;
    }
    /* a negative period is refused below, whatever its size */
    decide_gcra(c, &argv[1], v[0], v[1], v[2] < 0 ? -1 : v[2] * US_PER_S, v[3], true);
}

void resp_gcra(resp_conn *c, const weir_resp_arg *argv, size_t argc)
{
    int64_t burst, rate, period_us, tokens = 1;
    if (!resp_arg_i64(&argv[2], &burst) || !resp_arg_i64(&argv[3], &rate)) {
        weir_resp_errorf(resp_out(c), "ERR max_burst and tokens_per_period must be integers");
        return;
    }
    if (!parse_seconds(&argv[4], &period_us)) {
        weir_resp_errorf(resp_out(c), "ERR the period must be a positive number of seconds, at "
                                      "most 6 decimals, up to 100 years");
        return;
    }
    if (argc == 7 && resp_arg_is(&argv[5], "TOKENS")) {
        if (!resp_arg_i64(&argv[6], &tokens)) {
            weir_resp_errorf(resp_out(c), "ERR TOKENS must be an integer");
            return;
        }
    } else if (argc != 5) {
        weir_resp_errorf(resp_out(c), "ERR syntax error");
        return;
    }
    decide_gcra(c, &argv[1], burst, rate, period_us, tokens, false);
}

/* ------------------------------------------------------------ WEIR.CHECK, WEIR.PEEK */

typedef struct check_call {
    resp_target t;
    bool acquire; /* WEIR.ACQUIRE: the lease token first */
    bool settle;  /* WEIR.SETTLE: no decision, not counted as one */
} check_call;

static void check_reply(call *k, weir_code overall, const weir_descriptor_status *st, size_t n)
{
    const check_call *cc = k->data;
    weir_buf *b = resp_target_buf(&cc->t);
    worker *w = k->conn->w;
    char msg[192];
    if (!cc->settle &&
        shed_by_share(&w->srv->opt.shed, &k->req, overall, st, n, msg, sizeof(msg))) {
        /* as weir's own shedding answers: no lease, no decision counted */
        metrics_shed(w->metrics, PROTO_RESP, k->req.priority - 1, SHED_CAUSE_SHARE);
        weir_resp_errorf(b, "BUSY %s", msg);
        target_done(&cc->t, k);
        return;
    }
    if (!cc->settle)
        metrics_decision(w->metrics, &k->req, st, n, k->now_us);
    if (n > 0 && st[0].domain_not_found) {
        weir_resp_errorf(b, "ERR unknown domain '%.*s'",
                         (int)(k->req.domain_len > 120 ? 120 : k->req.domain_len), k->req.domain);
        target_done(&cc->t, k);
        return;
    }
    bool resp3 = cc->t.conn->resp3;
    if (cc->acquire) {
        weir_resp_array(b, 2);
        if (overall == WEIR_CODE_OK) {
            weir_buf *tok = &k->conn->w->body;
            weir_buf_clear(tok);
            lease_token_put(tok, st, n, k->now_us);
            weir_resp_bulk(b, tok->p, tok->len);
        } else {
            weir_resp_null(b, resp3);
        }
    }
    weir_resp_array(b, n);
    for (size_t i = 0; i < n; i++) {
        const weir_descriptor_status *s = &st[i];
        weir_resp_array(b, 6);
        weir_resp_bulk_str(b, s->code == WEIR_CODE_OVER_LIMIT ? "OVER_LIMIT" : "OK");
        weir_resp_int(b, s->requests_per_unit);
        weir_resp_int(b, (int64_t)s->remaining);
        weir_resp_int(b, (s->reset_after_us + 999) / 1000);
        weir_resp_int(b, s->retry_after_us == WEIR_NEVER   ? -1
                         : s->code == WEIR_CODE_OVER_LIMIT ? (s->retry_after_us + 999) / 1000
                                                           : 0);
        if (s->limit)
            weir_resp_bulk_str(b, s->limit->name ? s->limit->name : s->limit->path);
        else
            weir_resp_null(b, resp3);
    }
    target_done(&cc->t, k);
}

static const call_ops check_ops = {check_reply, on_expired, NULL, NULL};

static void engine_refusal(resp_conn *c, weir_status st, char *msg)
{
    weir_refusal why = weir_engine_refusal(c->base.w->reader);
    if (st == WEIR_ENOMEM || why.code == WEIR_REFUSAL_NO_MEMORY) {
        snprintf(msg, 256, "ERR out of memory");
        return;
    }
    memcpy(msg, "ERR ", 4);
    weir_refusal_text(why, msg + 4, 252);
}

/* The request of WEIR.CHECK's arguments into the worker's scratch; NULL
 * (an error written) when they do not make one. */
static weir_request *parse_check(resp_conn *c, const weir_resp_arg *argv, size_t argc, bool peek,
                                 resp_scratch *s, weir_request *req)
{
    weir_buf *out = resp_out(c);
    memset(req, 0, sizeof(*req));
    req->domain = argv[1].p;
    req->domain_len = argv[1].n;
    req->descriptors = s->descs;
    size_t ne = 0, nd = 1;
    weir_descriptor *d = &s->descs[0];
    memset(d, 0, sizeof(*d));
    d->entries = s->entries;
    for (size_t i = 2; i < argc;) {
        if (resp_arg_is(&argv[i], "HITS") && i + 1 < argc) {
            int64_t hits;
            if (!resp_arg_i64(&argv[i + 1], &hits) || hits < 0) {
                weir_resp_errorf(out, "ERR HITS must be a whole number of 0 or more");
                return NULL;
            }
            /* HITS 0 asks without charging, as WEIR.PEEK does */
            if (hits == 0)
                s->peek_all = true;
            else
                req->hits = (uint64_t)hits;
            i += 2;
            continue;
        }
        if (resp_arg_is(&argv[i], "DESCRIPTOR")) {
            if (d->n_entries == 0 || nd == RESP_MAX_DESCRIPTORS) {
                weir_resp_errorf(out,
                                 d->n_entries ? "ERR more than %u descriptors"
                                              : "ERR a descriptor has no entries",
                                 RESP_MAX_DESCRIPTORS);
                return NULL;
            }
            d = &s->descs[nd++];
            memset(d, 0, sizeof(*d));
            d->entries = s->entries + ne;
            i++;
            continue;
        }
        if (i + 1 >= argc) {
            weir_resp_errorf(out, "ERR syntax error: entry '%.*s' has no value",
                             (int)(argv[i].n > 64 ? 64 : argv[i].n), argv[i].p);
            return NULL;
        }
        if (ne == RESP_MAX_ENTRIES || d->n_entries == WEIR_ENGINE_MAX_ENTRIES) {
            weir_resp_errorf(out, "ERR more than %u entries in a descriptor",
                             WEIR_ENGINE_MAX_ENTRIES);
            return NULL;
        }
        weir_entry *e = &s->entries[ne++];
        e->key = argv[i].p;
        e->key_len = argv[i].n;
        e->value = argv[i + 1].p;
        e->value_len = argv[i + 1].n;
        d->n_entries++;
        i += 2;
    }
    if (d->n_entries == 0) {
        weir_resp_errorf(out, "ERR a descriptor has no entries");
        return NULL;
    }
    req->n_descriptors = nd;
    if (peek || s->peek_all)
        for (size_t k = 0; k < nd; k++) {
            s->descs[k].has_hits = true;
            s->descs[k].hits = 0;
        }
    return req;
}

/* WEIR.CHECK, WEIR.PEEK, WEIR.ACQUIRE; with @settle, WEIR.SETTLE's
 * request (after its cost) settled to @cost. */
static void check(resp_conn *c, const weir_resp_arg *argv, size_t argc, bool peek, bool acquire,
                  bool settle, uint64_t cost)
{
    resp_scratch *s = c->base.l->state;
    s->peek_all = false;
    weir_request req;
    if (!parse_check(c, argv, argc, peek, s, &req))
        return;
    worker *w = c->base.w;
    const shed_config *sc = &w->srv->opt.shed;
    unsigned prio = shed_priority_of(sc, &req, -1);
    if (shed_now(sc, &w->lag, prio)) {
        metrics_shed(w->metrics, PROTO_RESP, prio, SHED_CAUSE_OVERLOAD);
        weir_resp_errorf(resp_out(c), "BUSY weir is overloaded: %s requests are shed",
                         sc->names[prio]);
        return;
    }
    check_call cc = {{c, NULL}, acquire, settle};
    if (!resp_target_for(c, &cc.t))
        return;
    call *k = call_new(&c->base, &check_ops, &req, sizeof(cc), uv_hrtime());
    if (!k) {
        target_fail(&cc.t, "ERR out of memory");
        return;
    }
    memcpy(k->data, &cc, sizeof(cc));
    k->req.priority = prio + 1; /* the limits' shares (shed:) */
    k->settle = settle;
    k->cost = cost;
    start(k, engine_refusal);
}

void resp_weir_check(resp_conn *c, const weir_resp_arg *argv, size_t argc)
{
    check(c, argv, argc, false, false, false, 0);
}

void resp_weir_peek(resp_conn *c, const weir_resp_arg *argv, size_t argc)
{
    check(c, argv, argc, true, false, false, 0);
}

void resp_weir_acquire(resp_conn *c, const weir_resp_arg *argv, size_t argc)
{
    check(c, argv, argc, false, true, false, 0);
}

void resp_weir_settle(resp_conn *c, const weir_resp_arg *argv, size_t argc)
{
    int64_t cost;
    if (!resp_arg_i64(&argv[1], &cost) || cost < 0 || cost > 1000000000000000000LL) {
        weir_resp_errorf(resp_out(c), "ERR the cost must be a whole number from 0 to 10^18");
        return;
    }
    /* the rest is WEIR.CHECK's request, its HITS the estimate */
    check(c, argv + 1, argc - 1, false, false, true, (uint64_t)cost);
}
