/*
 * routes.c - the HTTP API: which path and method does what. Each handler
 * decodes with frontends/api, decides with the engine and renders the
 * answer; all protocol detail lives in the codecs.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "http.h"
#include "log.h"

typedef void (*handler)(http_conn *c, const weir_http1_request *req);

typedef struct route {
    const char *path;
    const char *allow; /* the Allow header of a 405 */
    handler get;       /* GET and HEAD */
    handler post;
} route;

static void check_get(http_conn *c, const weir_http1_request *req);
static void check_post(http_conn *c, const weir_http1_request *req);
static void batch_post(http_conn *c, const weir_http1_request *req);
static void envoy_json_post(http_conn *c, const weir_http1_request *req);
static void healthz(http_conn *c, const weir_http1_request *req);
static void healthcheck(http_conn *c, const weir_http1_request *req);
static void rules_get(http_conn *c, const weir_http1_request *req);
static void metrics_get(http_conn *c, const weir_http1_request *req);

static const route routes[] = {
    {"/v1/check", "GET, HEAD, POST", check_get, check_post},
    {"/v1/check/batch", "POST", NULL, batch_post},
    {"/json", "POST", NULL, envoy_json_post},
    {"/healthz", "GET, HEAD", healthz, NULL},
    {"/healthcheck", "GET, HEAD", healthcheck, NULL},
    {"/v1/rules", "GET, HEAD", rules_get, NULL},
    {"/metrics", "GET, HEAD", metrics_get, NULL},
};
#define N_ROUTES (sizeof(routes) / sizeof(routes[0]))

const char *const routes_names[] = {"/v1/check",    "/v1/check/batch", "/json",    "/healthz",
                                    "/healthcheck", "/v1/rules",       "/metrics", "other"};
const size_t routes_count = N_ROUTES + 1;

void routes_handle(http_conn *c, const weir_http1_request *req)
{
    worker *w = http_worker(c);
    for (size_t i = 0; i < N_ROUTES; i++) {
        const route *r = &routes[i];
        if (req->path.n != strlen(r->path) || memcmp(req->path.p, r->path, req->path.n) != 0)
            continue;
        http_set_route(c, i);
        bool get = req->method == WEIR_HTTP1_GET || req->method == WEIR_HTTP1_HEAD;
        handler h = get ? r->get : req->method == WEIR_HTTP1_POST ? r->post : NULL;
        if (h) {
            h(c, req);
            return;
        }
        weir_buf_clear(&w->headers);
        weir_buf_printf(&w->headers, "Allow: %s\r\n", r->allow);
        weir_buf_clear(&w->body);
        weir_buf_printf(&w->body, "method %.*s is not allowed on %s (allowed: %s)",
                        (int)req->method_name.n, req->method_name.p, r->path, r->allow);
        char detail[256];
        snprintf(detail, sizeof(detail), "%.*s", (int)w->body.len, w->body.p);
        weir_buf_clear(&w->body);
        weir_api_render_error(&w->body, 405, detail);
        http_respond(c, 405, "application/problem+json", &w->headers, w->body.p, w->body.len);
        return;
    }
    char detail[160];
    snprintf(detail, sizeof(detail), "no such path: %.*s",
             (int)(req->path.n > 100 ? 100 : req->path.n), req->path.p);
    weir_buf_clear(&w->body);
    weir_api_render_error(&w->body, 404, detail);
    http_respond(c, 404, "application/problem+json", NULL, w->body.p, w->body.len);
}

static void respond_problem(http_conn *c, int status, const char *detail)
{
    worker *w = http_worker(c);
    weir_buf_clear(&w->body);
    weir_api_render_error(&w->body, status, detail);
    http_respond(c, status, "application/problem+json", NULL, w->body.p, w->body.len);
}

/* ------------------------------------------------------------ deciding */

/* What answers a decision. It runs inside the engine's callback: the
 * statuses point into the rules in force for the decision, which a reload
 * may free as soon as the callback returns. */
typedef void (*answer_fn)(http_conn *c, const weir_request *req, const weir_api_decision *dec,
                          int64_t now_us);

typedef struct decided {
    bool done;
    http_conn *c;
    const weir_request *req;
    int64_t now_us;
    answer_fn answer;
} decided;

static void on_decided(void *arg, weir_code overall, weir_descriptor_status *st, size_t n)
{
    decided *d = arg;
    worker *w = http_worker(d->c);
    d->done = true;
    metrics_decision(w->metrics, d->req, st, n);
    weir_api_decision dec = {overall, st, n};
    d->answer(d->c, d->req, &dec, d->now_us);
}

/*
 * Decides @req into w->statuses and has @answer answer it. Returns 0, or
 * the HTTP status of a refusal with @msg filled (nothing answered then).
 * Decisions complete inline with the memory store; a store that completes
 * later needs a per-connection decoder and status array, and is refused
 * here until then.
 */
static int decide(http_conn *c, const weir_request *req, answer_fn answer, char *msg, size_t cap)
{
    worker *w = http_worker(c);
    const char *why = weir_api_refusal(req, msg, cap);
    if (why) {
        if (why != msg)
            snprintf(msg, cap, "%s", why);
        return 400;
    }
    decided d = {false, c, req, server_now_us(w->srv), answer};
    weir_status st = weir_engine_decide(w->reader, req, d.now_us, w->statuses, on_decided, &d);
    if (st == WEIR_EINVAL || st == WEIR_ERANGE) {
        snprintf(msg, cap, "invalid request: %s", weir_strerror(st));
        return 400;
    }
    if (st != WEIR_OK || !d.done) {
        snprintf(msg, cap, "cannot decide: %s", weir_strerror(st));
        return 500;
    }
    return 0;
}

/* Decides the decoder's one request, answering a refusal itself. */
static void decide_decoded(http_conn *c, answer_fn answer)
{
    worker *w = http_worker(c);
    char msg[192];
    int status = decide(c, weir_api_request(w->decoder, 0), answer, msg, sizeof(msg));
    if (status)
        respond_problem(c, status, msg);
}

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

static void render_headers(worker *w, const weir_api_decision *dec, int64_t now_us)
{
    weir_buf_clear(&w->headers);
    weir_api_render_headers(&w->headers, dec, &w->srv->opt.headers, now_us, jitter(w));
}

/* Writes "unknown domain 'x'" into @msg. */
static void unknown_domain_text(const weir_request *req, char *msg, size_t cap)
{
    snprintf(msg, cap, "unknown domain '%.*s'",
             (int)(req->domain_len > 120 ? 120 : req->domain_len), req->domain);
}

/* weir's own API answers an unknown domain with 404 (upstream's /json
 * answers OK); true when it did. */
static bool refuse_unknown_domain(http_conn *c, const weir_request *req,
                                  const weir_api_decision *dec)
{
    if (!dec->n || !dec->statuses[0].domain_not_found)
        return false;
    char msg[192];
    unknown_domain_text(req, msg, sizeof(msg));
    respond_problem(c, 404, msg);
    return true;
}

static void answer_check(http_conn *c, const weir_request *req, const weir_api_decision *dec,
                         int64_t now_us)
{
    worker *w = http_worker(c);
    if (refuse_unknown_domain(c, req, dec))
        return;
    render_headers(w, dec, now_us);
    weir_buf_clear(&w->body);
    weir_api_render_decision(&w->body, dec);
    http_respond(c, dec->overall == WEIR_CODE_OK ? 200 : 429, "application/json", &w->headers,
                 w->body.p, w->body.len);
}

static void check_post(http_conn *c, const weir_http1_request *req)
{
    worker *w = http_worker(c);
    weir_api_error err;
    if (!weir_api_decode_check(w->decoder, req->body.p, req->body.n, &err)) {
        respond_problem(c, err.status, err.message);
        return;
    }
    decide_decoded(c, answer_check);
}

static const char *find_header(void *arg, const char *name, size_t *len)
{
    weir_http1_str v = weir_http1_header_get(arg, name);
    *len = v.n;
    return v.p;
}

static void answer_check_get(http_conn *c, const weir_request *req, const weir_api_decision *dec,
                             int64_t now_us)
{
    worker *w = http_worker(c);
    if (refuse_unknown_domain(c, req, dec))
        return;
    render_headers(w, dec, now_us);
    if (dec->overall == WEIR_CODE_OK) {
        http_respond(c, 200, NULL, &w->headers, "", 0);
        return;
    }
    weir_buf_clear(&w->body);
    weir_api_render_problem(&w->body, dec, weir_api_retry_after_s(dec));
    http_respond(c, 429, "application/problem+json", &w->headers, w->body.p, w->body.len);
}

static void check_get(http_conn *c, const weir_http1_request *req)
{
    worker *w = http_worker(c);
    const serve_options *o = &w->srv->opt;
    weir_api_error err;
    if (!weir_api_decode_query(w->decoder, req->query.p, req->query.n, o->check_headers,
                               o->n_check_headers, find_header, (void *)req, &err)) {
        respond_problem(c, err.status, err.message);
        return;
    }
    decide_decoded(c, answer_check_get);
}

static void answer_envoy_json(http_conn *c, const weir_request *req, const weir_api_decision *dec,
                              int64_t now_us)
{
    (void)req;
    worker *w = http_worker(c);
    render_headers(w, dec, now_us);
    weir_buf_clear(&w->body);
    weir_api_render_envoy_json(&w->body, dec);
    http_respond(c, dec->overall == WEIR_CODE_OK ? 200 : 429, "application/json", &w->headers,
                 w->body.p, w->body.len);
}

static void envoy_json_post(http_conn *c, const weir_http1_request *req)
{
    worker *w = http_worker(c);
    weir_api_error err;
    if (!weir_api_decode_envoy_json(w->decoder, req->body.p, req->body.n, &err)) {
        respond_problem(c, err.status, err.message);
        return;
    }
    decide_decoded(c, answer_envoy_json);
}

/* Appends one batch element: the decision, or its own error. */
static void answer_batch_item(http_conn *c, const weir_request *req, const weir_api_decision *dec,
                              int64_t now_us)
{
    (void)now_us;
    worker *w = http_worker(c);
    if (dec->n && dec->statuses[0].domain_not_found) {
        char msg[192];
        unknown_domain_text(req, msg, sizeof(msg));
        weir_buf_puts(&w->body, "{\"error\":{\"status\":404,\"detail\":\"");
        weir_buf_put_json_str(&w->body, msg, strlen(msg));
        weir_buf_puts(&w->body, "\"}}");
        return;
    }
    weir_api_render_decision(&w->body, dec);
}

static void batch_post(http_conn *c, const weir_http1_request *req)
{
    worker *w = http_worker(c);
    weir_api_error err;
    if (!weir_api_decode_batch(w->decoder, req->body.p, req->body.n, &err)) {
        respond_problem(c, err.status, err.message);
        return;
    }
    weir_buf_clear(&w->body);
    weir_buf_puts(&w->body, "{\"decisions\":[");
    for (size_t i = 0; i < weir_api_count(w->decoder); i++) {
        if (i)
            weir_buf_putc(&w->body, ',');
        char msg[192];
        int status =
            decide(c, weir_api_request(w->decoder, i), answer_batch_item, msg, sizeof(msg));
        if (status) {
            weir_buf_printf(&w->body, "{\"error\":{\"status\":%d,\"detail\":\"", status);
            weir_buf_put_json_str(&w->body, msg, strlen(msg));
            weir_buf_puts(&w->body, "\"}}");
        }
    }
    weir_buf_puts(&w->body, "]}");
    http_respond(c, 200, "application/json", NULL, w->body.p, w->body.len);
}

/* ------------------------------------------------------------ admin */

static void healthz(http_conn *c, const weir_http1_request *req)
{
    (void)req;
    bool draining = atomic_load(&http_worker(c)->srv->draining);
    const char *body = draining ? "{\"status\":\"draining\"}" : "{\"status\":\"ok\"}";
    http_respond(c, draining ? 503 : 200, "application/json", NULL, body, strlen(body));
}

static void healthcheck(http_conn *c, const weir_http1_request *req)
{
    (void)req;
    bool draining = atomic_load(&http_worker(c)->srv->draining);
    const char *body = draining ? "draining" : "OK";
    http_respond(c, draining ? 503 : 200, "text/plain", NULL, body, strlen(body));
}

static void rules_get(http_conn *c, const weir_http1_request *req)
{
    (void)req;
    worker *w = http_worker(c);
    weir_buf_clear(&w->body);
    server_rules_text(w->srv, &w->body);
    http_respond(c, 200, "text/plain; charset=utf-8", NULL, w->body.p, w->body.len);
}

static void metrics_get(http_conn *c, const weir_http1_request *req)
{
    (void)req;
    worker *w = http_worker(c);
    weir_buf_clear(&w->body);
    metrics_render(w->srv->metrics, w->srv->store, &w->body);
    if (!weir_buf_ok(&w->body)) {
        respond_problem(c, 500, "out of memory");
        return;
    }
    http_respond(c, 200, "text/plain; version=0.0.4; charset=utf-8", NULL, w->body.p, w->body.len);
}
