/*
 * decide.c - an HTTP route's decision through a call (decide.h).
 */
#include "decide.h"

#include <stdio.h>
#include <string.h>

typedef struct route_call {
    http_answer *a;
    http_answer_fn answer;
} route_call;

/* An answer made after the route returned goes out with this loop
 * iteration's others; one made inside it goes out with the read's. */
static void kick(const call *c)
{
    if (!c->deciding)
        conn_kick(c->conn);
}

/* 503, "overloaded": ask again in @retry_s seconds. */
static void answer_overloaded(http_answer *a, const char *msg, int64_t retry_s)
{
    worker *w = a->conn->w;
    char secs[24];
    int len = snprintf(secs, sizeof(secs), "%lld", (long long)(retry_s < 1 ? 1 : retry_s));
    weir_headers_clear(&w->headers);
    weir_headers_add(&w->headers, "Retry-After", 11, secs, (size_t)len);
    weir_buf_clear(&w->body);
    weir_api_render_error(&w->body, 503, msg);
    http_answer_respond(a, 503, "application/problem+json", &w->headers, w->body.p, w->body.len);
}

bool http_shed_by_share(call *c, const weir_api_decision *dec, char *msg, size_t cap)
{
    worker *w = c->conn->w;
    if (!shed_by_share(&w->srv->opt.shed, &c->req, dec->overall, dec->statuses, dec->n, msg, cap))
        return false;
    metrics_shed(w->metrics, PROTO_HTTP, c->req.priority - 1, SHED_CAUSE_SHARE);
    return true;
}

static void on_decided(call *c, weir_code overall, const weir_descriptor_status *st, size_t n)
{
    route_call *rc = c->data;
    weir_api_decision dec = {overall, st, n};
    char msg[192];
    if (http_shed_by_share(c, &dec, msg, sizeof(msg))) {
        /* not a decision's denial: answered as weir's own shedding is */
        answer_overloaded(rc->a, msg, weir_api_retry_after_s(&dec));
        kick(c);
        return;
    }
    metrics_decision(c->conn->w->metrics, &c->req, st, n, c->now_us);
    rc->answer(rc->a, &c->req, &dec, c->now_us);
    kick(c);
}

static void on_expired(call *c)
{
    route_call *rc = c->data;
    http_answer_problem(rc->a, 504, "no decision within --decision-timeout");
    kick(c);
}

static const call_ops route_call_ops = {on_decided, on_expired, NULL, NULL};

/* A settlement is no decision: it is not counted among them. */
static void on_settled(call *c, weir_code overall, const weir_descriptor_status *st, size_t n)
{
    route_call *rc = c->data;
    weir_api_decision dec = {overall, st, n};
    rc->answer(rc->a, &c->req, &dec, c->now_us);
    kick(c);
}

static const call_ops settle_call_ops = {on_settled, on_expired, NULL, NULL};

/* The HTTP status of a request the engine refused, its reason in @msg. */
static int refusal(worker *w, weir_status st, char *msg, size_t cap)
{
    weir_refusal why = weir_engine_refusal(w->reader);
    if (st == WEIR_ENOMEM || why.code == WEIR_REFUSAL_NO_MEMORY) {
        snprintf(msg, cap, "out of memory");
        return 503;
    }
    metrics_refused(w->metrics, PROTO_HTTP, why.code);
    weir_refusal_text(why, msg, cap);
    return why.code == WEIR_REFUSAL_OVERRIDE_REFUSED ? 403 : 400;
}

/* Whether a request of priority @p is shed (shed.h): then @msg says why
 * (the status is 503). */
static bool shed(http_answer *a, unsigned p, char *msg, size_t cap)
{
    worker *w = a->conn->w;
    const shed_config *sc = &w->srv->opt.shed;
    if (!shed_now(sc, &w->lag, p))
        return false;
    metrics_shed(w->metrics, PROTO_HTTP, p, SHED_CAUSE_OVERLOAD);
    snprintf(msg, cap,
             "weir is overloaded: %s requests are shed (its event loop runs %lld ms behind)",
             sc->names[p], (long long)(w->lag.lag_us / 1000));
    return true;
}

/* A decision, or with @settle a settlement to @cost. */
static int start(http_answer *a, const weir_request *req, const call_ops *ops, const void *data,
                 size_t data_bytes, bool settle, uint64_t cost, char *msg, size_t cap)
{
    worker *w = a->conn->w;
    unsigned p = shed_priority_of(&w->srv->opt.shed, req, a->priority);
    if (shed(a, p, msg, cap))
        return 503;
    call *c = call_new(a->conn, ops, req, data_bytes, a->t0_ns);
    if (!c)
        return refusal(w, WEIR_ENOMEM, msg, cap);
    c->req.priority = p + 1; /* the limits' shares (shed:) */
    memcpy(c->data, data, data_bytes);
    c->settle = settle;
    c->cost = cost;
    weir_status st = call_decide(c, w, server_now_us(w->srv), w->srv->opt.decision_timeout_ms);
    if (st != WEIR_OK) {
        call_free(c);
        return refusal(w, st, msg, cap);
    }
    return 0;
}

int http_decide_call(http_answer *a, const weir_request *req, const call_ops *ops, const void *data,
                     size_t data_bytes, char *msg, size_t cap)
{
    return start(a, req, ops, data, data_bytes, false, 0, msg, cap);
}

/* http_decide(), or with @settle http_settle() */
static void decide_or_settle(http_answer *a, const weir_request *req, http_answer_fn answer,
                             bool settle, uint64_t cost)
{
    char msg[192];
    route_call rc = {a, answer};
    int status = start(a, req, settle ? &settle_call_ops : &route_call_ops, &rc, sizeof(rc), settle,
                       cost, msg, sizeof(msg));
    if (status == 503) {
        /* overloaded (or out of memory): ask again in a second */
        answer_overloaded(a, msg, 1);
    } else if (status) {
        http_answer_problem(a, status, msg);
    }
}

void http_decide(http_answer *a, const weir_request *req, http_answer_fn answer)
{
    decide_or_settle(a, req, answer, false, 0);
}

void http_settle(http_answer *a, const weir_request *req, uint64_t cost, http_answer_fn answer)
{
    decide_or_settle(a, req, answer, true, cost);
}

void http_render_headers(worker *w, const weir_api_decision *dec, int64_t now_us)
{
    weir_headers_clear(&w->headers);
    weir_api_render_headers(&w->headers, dec, &w->srv->opt.headers, now_us, worker_jitter(w));
}

void http_unknown_domain_text(const weir_request *req, char *msg, size_t cap)
{
    snprintf(msg, cap, "unknown domain '%.*s'",
             (int)(req->domain_len > 120 ? 120 : req->domain_len), req->domain);
}

bool http_refuse_unknown_domain(http_answer *a, const weir_request *req,
                                const weir_api_decision *dec)
{
    if (!dec->n || !dec->statuses[0].domain_not_found)
        return false;
    char msg[192];
    http_unknown_domain_text(req, msg, sizeof(msg));
    http_answer_problem(a, 404, msg);
    return true;
}
