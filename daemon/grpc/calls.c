/*
 * calls.c - the gRPC methods (calls.h). A decision's answer is encoded in
 * the call's decided() hook, inside the engine's callback, where the
 * statuses and the rules they point to are valid.
 */
#include "calls.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "call.h"
#include "grpc/rls.h"
#include "lease_release.h"

#define SHOULD_RATE_LIMIT "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"
#define HEALTH_CHECK "/grpc.health.v1.Health/Check"
#define LEASES_ACQUIRE "/weir.leases.v1.Leases/Acquire"
#define LEASES_RELEASE "/weir.leases.v1.Leases/Release"
#define COSTS_SETTLE "/weir.leases.v1.Costs/Settle"

struct grpc_calls {
    weir_rls_decoder *rls; /* ShouldRateLimit and Acquire requests */
    weir_buf msg;          /* scratch: a response message */
    weir_buf inner;        /* scratch: Acquire's RateLimitResponse */
};

grpc_calls *grpc_calls_new(const serve_options *o)
{
    grpc_calls *gc = calloc(1, sizeof(*gc));
    if (!gc)
        return NULL;
    weir_api_limits lim = {(size_t)o->max_descriptors, WEIR_ENGINE_MAX_ENTRIES,
                           (size_t)o->max_batch};
    weir_buf_init(&gc->msg, SIZE_MAX);
    weir_buf_init(&gc->inner, SIZE_MAX);
    if (!(gc->rls = weir_rls_decoder_new(&lim))) {
        free(gc);
        return NULL;
    }
    return gc;
}

void grpc_calls_free(grpc_calls *gc)
{
    if (!gc)
        return;
    weir_rls_decoder_free(gc->rls);
    weir_buf_free(&gc->msg);
    weir_buf_free(&gc->inner);
    free(gc);
}

/* Where an answer goes, and since when it is awaited. */
typedef struct stream {
    conn *cn;
    weir_grpc_h2 *h2;
    int32_t id;
    uint64_t t0_ns;
} stream;

static void answer(const stream *s, int code, const char *message, const weir_buf *m)
{
    if (m && !weir_buf_ok(m)) {
        code = WEIR_GRPC_INTERNAL;
        message = "out of memory";
        m = NULL;
    }
    weir_grpc_h2_respond(s->h2, s->id, code, message, m ? (const uint8_t *)m->p : NULL,
                         m ? m->len : 0);
    metrics_request(s->cn->w->metrics, PROTO_GRPC, (int64_t)(uv_hrtime() - s->t0_ns), 0, 0);
}

/* ------------------------------------------------------------ ShouldRateLimit */

typedef struct rls_call {
    stream s;
    grpc_calls *gc;
    bool acquire; /* Leases/Acquire: the response and the lease token */
    bool settle;  /* Costs/Settle: no decision, not counted as one */
} rls_call;

/* The decision as a RateLimitResponse into @out. */
static void encode_decision(call *c, const weir_api_decision *dec, weir_buf *out)
{
    worker *w = c->conn->w;
    const serve_options *o = &w->srv->opt;
    const weir_headers *headers = NULL;
    if (o->grpc_response_headers) {
        weir_headers_clear(&w->headers);
        weir_api_render_headers(&w->headers, dec, &o->headers, c->now_us, worker_jitter(w));
        headers = &w->headers;
    }
    const char *raw = NULL;
    size_t raw_len = 0;
    if (o->grpc_raw_body && dec->overall == WEIR_CODE_OVER_LIMIT) {
        weir_buf_clear(&w->body);
        weir_api_render_problem(&w->body, dec, weir_api_retry_after_s(dec));
        raw = w->body.p ? w->body.p : "";
        raw_len = w->body.len;
    }
    weir_buf_clear(out);
    weir_rls_encode_response(out, dec, headers, raw, raw_len);
    if ((headers && !weir_headers_ok(headers)) || (raw && !weir_buf_ok(&w->body)))
        out->failed = true;
}

static void on_decided(call *c, weir_code overall, const weir_descriptor_status *st, size_t n)
{
    rls_call *rc = c->data;
    worker *w = c->conn->w;
    grpc_calls *gc = rc->gc;
    char msg[192];
    if (!rc->settle &&
        shed_by_share(&w->srv->opt.shed, &c->req, overall, st, n, msg, sizeof(msg))) {
        /* as weir's own shedding answers: no lease, no decision counted */
        metrics_shed(w->metrics, PROTO_GRPC, c->req.priority - 1, SHED_CAUSE_SHARE);
        answer(&rc->s, WEIR_GRPC_UNAVAILABLE, msg, NULL);
        if (!c->deciding)
            conn_kick(c->conn);
        return;
    }
    if (!rc->settle)
        metrics_decision(w->metrics, &c->req, st, n, c->now_us);
    weir_api_decision dec = {overall, st, n};
    if (!rc->acquire) {
        encode_decision(c, &dec, &gc->msg);
    } else {
        encode_decision(c, &dec, &gc->inner);
        weir_buf_clear(&w->body);
        if (overall == WEIR_CODE_OK)
            lease_token_put(&w->body, st, n, c->now_us);
        weir_buf_clear(&gc->msg);
        weir_leases_encode_acquire(&gc->msg, &gc->inner, w->body.p, w->body.len);
        if (!weir_buf_ok(&gc->inner) || !weir_buf_ok(&w->body))
            gc->msg.failed = true;
    }
    answer(&rc->s, WEIR_GRPC_OK, NULL, &gc->msg);
    if (!c->deciding) /* inline, the connection sends it after its read */
        conn_kick(c->conn);
}

static void on_expired(call *c)
{
    rls_call *rc = c->data;
    answer(&rc->s, WEIR_GRPC_DEADLINE_EXCEEDED, "no decision before the deadline", NULL);
    conn_kick(c->conn);
}

static const call_ops rls_call_ops = {on_decided, on_expired, NULL, NULL};

/* Milliseconds until the call's answer is due: its grpc-timeout or
 * --decision-timeout, whichever comes first; at least 1. */
static int64_t timeout_ms(const serve_options *o, const weir_grpc_call *gcall, uint64_t now_ns)
{
    int64_t ms = o->decision_timeout_ms > 0 ? o->decision_timeout_ms : INT64_MAX;
    if (gcall->deadline_ns != INT64_MAX) {
        int64_t left = gcall->deadline_ns - (int64_t)now_ns;
        int64_t left_ms = left <= 0 ? 1 : (left + 999999) / 1000000;
        if (left_ms < ms)
            ms = left_ms;
    }
    return ms == INT64_MAX ? 0 : ms;
}

/* ShouldRateLimit; Leases/Acquire when @acquire; Costs/Settle when
 * @settle (its SettleRequest decoded already, the cost in @cost). */
static void decide(grpc_calls *gc, const stream *s, const weir_grpc_call *gcall, bool acquire,
                   bool settle, uint64_t cost)
{
    worker *w = s->cn->w;
    weir_grpc_error err;
    if (!settle && !weir_rls_decode(gc->rls, gcall->msg, gcall->msg_len, &err)) {
        answer(s, err.code, err.message, NULL);
        return;
    }
    /* the deadline again, at the time of deciding: a call may have waited
     * behind others of the same read, and one whose client gave up is not
     * charged */
    if (gcall->deadline_ns != INT64_MAX && (int64_t)s->t0_ns >= gcall->deadline_ns) {
        answer(s, WEIR_GRPC_DEADLINE_EXCEEDED, "deadline exceeded", NULL);
        return;
    }
    const weir_request *req = weir_rls_request(gc->rls);
    const shed_config *sc = &w->srv->opt.shed;
    unsigned prio = shed_priority_of(sc, req, -1);
    if (shed_now(sc, &w->lag, prio)) {
        char msg[160];
        metrics_shed(w->metrics, PROTO_GRPC, prio, SHED_CAUSE_OVERLOAD);
        snprintf(msg, sizeof(msg), "weir is overloaded: %s requests are shed", sc->names[prio]);
        answer(s, WEIR_GRPC_UNAVAILABLE, msg, NULL);
        return;
    }
    call *c = call_new(s->cn, &rls_call_ops, req, sizeof(rls_call), s->t0_ns);
    if (!c) {
        answer(s, WEIR_GRPC_RESOURCE_EXHAUSTED, "out of memory", NULL);
        return;
    }
    c->req.priority = prio + 1; /* the limits' shares (shed:) */
    rls_call *rc = c->data;
    rc->s = *s;
    rc->gc = gc;
    rc->acquire = acquire;
    rc->settle = settle;
    c->settle = settle;
    c->cost = cost;
    weir_status st =
        call_decide(c, w, server_now_us(w->srv), timeout_ms(&w->srv->opt, gcall, s->t0_ns));
    if (st == WEIR_OK)
        return;
    call_free(c);
    weir_refusal why = weir_engine_refusal(w->reader);
    if (st == WEIR_ENOMEM || why.code == WEIR_REFUSAL_NO_MEMORY) {
        answer(s, WEIR_GRPC_RESOURCE_EXHAUSTED, "out of memory", NULL);
        return;
    }
    char msg[192];
    metrics_refused(w->metrics, PROTO_GRPC, why.code);
    weir_refusal_text(why, msg, sizeof(msg));
    answer(s,
           why.code == WEIR_REFUSAL_OVERRIDE_REFUSED ? WEIR_GRPC_PERMISSION_DENIED
                                                     : WEIR_GRPC_INVALID_ARGUMENT,
           msg, NULL);
}

static void should_rate_limit(grpc_calls *gc, const stream *s, const weir_grpc_call *gcall)
{
    decide(gc, s, gcall, false, false, 0);
}

/* ------------------------------------------------------------ leases */

static void leases_acquire(grpc_calls *gc, const stream *s, const weir_grpc_call *gcall)
{
    decide(gc, s, gcall, true, false, 0);
}

static void costs_settle(grpc_calls *gc, const stream *s, const weir_grpc_call *gcall)
{
    weir_grpc_error err;
    uint64_t cost = 0;
    if (!weir_costs_decode_settle(gc->rls, gcall->msg, gcall->msg_len, &cost, &err)) {
        answer(s, err.code, err.message, NULL);
        return;
    }
    decide(gc, s, gcall, false, true, cost);
}

static void released(conn *c, void *arg, const lease_counts *n, bool later)
{
    const stream *s = arg;
    weir_buf *m = &c->w->body;
    weir_buf_clear(m);
    weir_leases_encode_release(m, (uint32_t)n->leases, (uint32_t)n->released, (uint32_t)n->failed);
    answer(s, WEIR_GRPC_OK, NULL, m);
    if (later)
        conn_kick(c);
}

static void leases_release(grpc_calls *gc, const stream *s, const weir_grpc_call *gcall)
{
    weir_grpc_error err;
    lease_token *tok = lease_token_scratch();
    /* the token's text in the worker's scratch (Acquire's, idle here):
     * no allocation a release once it has grown */
    weir_buf *text = &gc->inner;
    weir_buf_clear(text);
    size_t len = 0;
    bool dropped = false;
    if (!weir_buf_reserve(text, LEASE_TOKEN_MAX_BYTES)) {
        answer(s, WEIR_GRPC_RESOURCE_EXHAUSTED, "out of memory", NULL);
    } else if (!weir_leases_decode_release(gcall->msg, gcall->msg_len, text->p,
                                           LEASE_TOKEN_MAX_BYTES, &len, &dropped, &err)) {
        answer(s, err.code, err.message, NULL);
    } else if (!lease_token_parse(text->p, len, tok)) {
        answer(s, WEIR_GRPC_INVALID_ARGUMENT, "lease: not a lease token of Leases/Acquire", NULL);
    } else {
        if (dropped)
            lease_token_set_dropped(tok);
        if (!lease_release_all(s->cn, tok, s->t0_ns, released, s, sizeof(*s)))
            answer(s, WEIR_GRPC_RESOURCE_EXHAUSTED, "out of memory", NULL);
    }
}

/* ------------------------------------------------------------ health */

static void health_check(grpc_calls *gc, const stream *s, const weir_grpc_call *gcall)
{
    char service[256];
    weir_grpc_error err;
    if (!weir_health_decode(gcall->msg, gcall->msg_len, service, sizeof(service), &err)) {
        answer(s, err.code, err.message, NULL);
        return;
    }
    if (service[0] && strcmp(service, "ratelimit") != 0) {
        answer(s, WEIR_GRPC_NOT_FOUND, "unknown service", NULL);
        return;
    }
    bool healthy = server_healthy(s->cn->w->srv);
    weir_buf_clear(&gc->msg);
    weir_health_encode(&gc->msg, healthy ? WEIR_HEALTH_SERVING : WEIR_HEALTH_NOT_SERVING);
    answer(s, WEIR_GRPC_OK, NULL, &gc->msg);
}

/* ------------------------------------------------------------ dispatch */

typedef void (*method_fn)(grpc_calls *gc, const stream *s, const weir_grpc_call *gcall);

static const struct {
    const char *path;
    method_fn fn;
} methods[] = {
    {SHOULD_RATE_LIMIT, should_rate_limit}, {HEALTH_CHECK, health_check},
    {LEASES_ACQUIRE, leases_acquire},       {LEASES_RELEASE, leases_release},
    {COSTS_SETTLE, costs_settle},
};

void grpc_calls_handle(grpc_calls *gc, conn *cn, weir_grpc_h2 *h2, const weir_grpc_call *gcall)
{
    stream s = {cn, h2, gcall->stream_id, uv_hrtime()};
    for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
        if (gcall->path_len == strlen(methods[i].path) &&
            memcmp(gcall->path, methods[i].path, gcall->path_len) == 0) {
            methods[i].fn(gc, &s, gcall);
            return;
        }
    char msg[160];
    snprintf(msg, sizeof(msg), "unknown method %.*s",
             (int)(gcall->path_len > 100 ? 100 : gcall->path_len), gcall->path);
    answer(&s, WEIR_GRPC_UNIMPLEMENTED, msg, NULL);
}
