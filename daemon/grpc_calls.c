/*
 * grpc_calls.c - the gRPC methods: Envoy's ShouldRateLimit and the
 * standard health check. Each decodes with frontends/grpc, decides with
 * the engine and encodes the answer; the transport is grpc_conn.c's.
 */
#include <stdio.h>
#include <string.h>

#include "grpc.h"

#define SHOULD_RATE_LIMIT "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"
#define HEALTH_CHECK "/grpc.health.v1.Health/Check"

typedef struct call_ctx {
    worker *w;
    weir_grpc_h2 *h2;
    int32_t stream_id;
} call_ctx;

static void fail(const call_ctx *cc, int code, const char *message)
{
    weir_grpc_h2_respond(cc->h2, cc->stream_id, code, message, NULL, 0);
}

/* Sends the message in w->grpc_msg, or INTERNAL when it did not fit. */
static void reply(const call_ctx *cc)
{
    weir_buf *m = &cc->w->grpc_msg;
    if (!weir_buf_ok(m)) {
        fail(cc, WEIR_GRPC_INTERNAL, "out of memory");
        return;
    }
    weir_grpc_h2_respond(cc->h2, cc->stream_id, WEIR_GRPC_OK, NULL, (const uint8_t *)m->p, m->len);
}

/* ------------------------------------------------------------ ShouldRateLimit */

typedef struct decided {
    bool done;
    const call_ctx *cc;
    const weir_request *req;
    int64_t now_us;
} decided;

static int64_t jitter(worker *w)
{
    int64_t max = w->srv->opt.retry_jitter_s;
    if (max <= 0)
        return 0;
    /* xorshift64: spreading retries needs no cryptographic randomness */
    w->rng ^= w->rng << 13;
    w->rng ^= w->rng >> 7;
    w->rng ^= w->rng << 17;
    return (int64_t)(w->rng % (uint64_t)(max + 1));
}

/* Encodes the answer here, inside the engine's callback: the statuses
 * point into the rules in force for this decision, which a reload may
 * free as soon as the callback returns. */
static void on_decided(void *arg, weir_code overall, weir_descriptor_status *st, size_t n)
{
    decided *d = arg;
    worker *w = d->cc->w;
    const serve_options *o = &w->srv->opt;
    d->done = true;
    metrics_decision(w->metrics, d->req, st, n);
    weir_api_decision dec = {overall, st, n};
    const weir_buf *headers = NULL;
    if (o->grpc_response_headers) {
        weir_buf_clear(&w->headers);
        weir_api_render_headers(&w->headers, &dec, &o->headers, d->now_us, jitter(w));
        headers = &w->headers;
    }
    const char *raw = NULL;
    size_t raw_len = 0;
    if (o->grpc_raw_body && overall == WEIR_CODE_OVER_LIMIT) {
        weir_buf_clear(&w->body);
        weir_api_render_problem(&w->body, &dec, weir_api_retry_after_s(&dec));
        raw = w->body.p ? w->body.p : "";
        raw_len = w->body.len;
    }
    weir_buf_clear(&w->grpc_msg);
    weir_rls_encode_response(&w->grpc_msg, &dec, headers, raw, raw_len);
    if ((headers && !weir_buf_ok(headers)) || (raw && !weir_buf_ok(&w->body)))
        w->grpc_msg.failed = true;
    reply(d->cc);
}

static void should_rate_limit(const call_ctx *cc, const weir_grpc_call *call)
{
    worker *w = cc->w;
    weir_grpc_error err;
    if (!weir_rls_decode(w->rls, call->msg, call->msg_len, &err)) {
        fail(cc, err.code, err.message);
        return;
    }
    const weir_request *req = weir_rls_request(w->rls);
    char msg[192];
    const char *why = weir_api_refusal(req, msg, sizeof(msg));
    if (why) {
        fail(cc, WEIR_GRPC_INVALID_ARGUMENT, why);
        return;
    }
    decided d = {false, cc, req, server_now_us(w->srv)};
    weir_status st = weir_engine_decide(w->reader, req, d.now_us, w->statuses, on_decided, &d);
    if (st == WEIR_EINVAL || st == WEIR_ERANGE) {
        snprintf(msg, sizeof(msg), "invalid request: %s", weir_strerror(st));
        fail(cc, WEIR_GRPC_INVALID_ARGUMENT, msg);
    } else if (st != WEIR_OK || !d.done) {
        /* Decisions complete inline with the memory store; a store that
         * completes later needs per-call statuses, refused until then. */
        snprintf(msg, sizeof(msg), "cannot decide: %s", weir_strerror(st));
        fail(cc, WEIR_GRPC_INTERNAL, msg);
    }
}

/* ------------------------------------------------------------ health */

static void health_check(const call_ctx *cc, const weir_grpc_call *call)
{
    worker *w = cc->w;
    char service[256];
    weir_grpc_error err;
    if (!weir_health_decode(call->msg, call->msg_len, service, sizeof(service), &err)) {
        fail(cc, err.code, err.message);
        return;
    }
    if (service[0] && strcmp(service, "ratelimit") != 0) {
        fail(cc, WEIR_GRPC_NOT_FOUND, "unknown service");
        return;
    }
    bool draining = atomic_load(&w->srv->draining);
    weir_buf_clear(&w->grpc_msg);
    weir_health_encode(&w->grpc_msg, draining ? WEIR_HEALTH_NOT_SERVING : WEIR_HEALTH_SERVING);
    reply(cc);
}

/* ------------------------------------------------------------ dispatch */

typedef void (*method_fn)(const call_ctx *cc, const weir_grpc_call *call);

static const struct {
    const char *path;
    method_fn fn;
} methods[] = {
    {SHOULD_RATE_LIMIT, should_rate_limit},
    {HEALTH_CHECK, health_check},
};

void grpc_calls_handle(worker *w, weir_grpc_h2 *h2, const weir_grpc_call *call)
{
    uint64_t t0 = uv_hrtime();
    call_ctx cc = {w, h2, call->stream_id};
    method_fn fn = NULL;
    for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
        if (call->path_len == strlen(methods[i].path) &&
            memcmp(call->path, methods[i].path, call->path_len) == 0)
            fn = methods[i].fn;
    if (fn) {
        fn(&cc, call);
    } else {
        char msg[160];
        snprintf(msg, sizeof(msg), "unknown method %.*s",
                 (int)(call->path_len > 100 ? 100 : call->path_len), call->path);
        fail(&cc, WEIR_GRPC_UNIMPLEMENTED, msg);
    }
    metrics_request(w->metrics, PROTO_GRPC, (int64_t)(uv_hrtime() - t0), 0, 0);
}
