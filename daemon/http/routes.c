/*
 * routes.c - the HTTP API (routes.h). A decision's answer is rendered in
 * the call's decided() hook, inside the engine's callback, where the
 * statuses and the rules they point to are valid; it may run before
 * routes_handle() returns or later, from the worker's loop.
 */
#include "routes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "adaptive_view.h"
#include "admin/admin.h"
#include "admin/quotas.h"
#include "call.h"
#include "decide.h"
#include "leases.h"
#include "log.h"
#include "quota/service.h"

struct routes_state {
    weir_api_decoder *decoder;
    const serve_options *opt;
    bool admin;           /* the admin listener's: admin/admin.c answers */
    admin_quotas *quotas; /* the admin listener's quota state */
};

typedef void (*handler)(routes_state *rs, http_answer *a, const weir_http1_request *req);

typedef struct route {
    const char *path;
    const char *allow; /* the Allow header of a 405 */
    handler get;       /* GET and HEAD */
    handler post;
} route;

static void check_get(routes_state *rs, http_answer *a, const weir_http1_request *req);
static void check_post(routes_state *rs, http_answer *a, const weir_http1_request *req);
static void batch_post(routes_state *rs, http_answer *a, const weir_http1_request *req);
static void envoy_json_post(routes_state *rs, http_answer *a, const weir_http1_request *req);
static void healthz(routes_state *rs, http_answer *a, const weir_http1_request *req);
static void healthcheck(routes_state *rs, http_answer *a, const weir_http1_request *req);
static void rules_get(routes_state *rs, http_answer *a, const weir_http1_request *req);
static void metrics_get(routes_state *rs, http_answer *a, const weir_http1_request *req);
static void rlconfig_get(routes_state *rs, http_answer *a, const weir_http1_request *req);
static void acquire_get(routes_state *rs, http_answer *a, const weir_http1_request *req);
static void acquire_post(routes_state *rs, http_answer *a, const weir_http1_request *req);
static void release_post(routes_state *rs, http_answer *a, const weir_http1_request *req);
static void settle_post(routes_state *rs, http_answer *a, const weir_http1_request *req);

static const route routes[] = {
    {"/v1/check", "GET, HEAD, POST", check_get, check_post},
    {"/v1/check/batch", "POST", NULL, batch_post},
    {"/json", "POST", NULL, envoy_json_post},
    {"/healthz", "GET, HEAD", healthz, NULL},
    {"/healthcheck", "GET, HEAD", healthcheck, NULL},
    {"/v1/rules", "GET, HEAD", rules_get, NULL},
    {"/metrics", "GET, HEAD", metrics_get, NULL},
    {"/rlconfig", "GET, HEAD", rlconfig_get, NULL},
    {"/v1/acquire", "GET, HEAD, POST", acquire_get, acquire_post},
    {"/v1/release", "POST", NULL, release_post},
    {"/v1/settle", "POST", NULL, settle_post},
};
#define N_ROUTES (sizeof(routes) / sizeof(routes[0]))

const char *const routes_names[] = {"/v1/check",    "/v1/check/batch", "/json",      "/healthz",
                                    "/healthcheck", "/v1/rules",       "/metrics",   "/rlconfig",
                                    "/v1/acquire",  "/v1/release",     "/v1/settle", "other"};
const size_t routes_count = N_ROUTES + 1;
/* a route's metrics label is its path: one name per route, and "other" */
_Static_assert(sizeof(routes_names) / sizeof(routes_names[0]) == N_ROUTES + 1,
               "routes_names names every route of routes[]");

routes_state *routes_state_new(const serve_options *o, bool admin)
{
    routes_state *rs = calloc(1, sizeof(*rs));
    if (!rs)
        return NULL;
    weir_api_limits lim = {(size_t)o->max_descriptors, WEIR_ENGINE_MAX_ENTRIES,
                           (size_t)o->max_batch};
    rs->opt = o;
    rs->admin = admin;
    if (admin && !(rs->quotas = admin_quotas_new())) {
        free(rs);
        return NULL;
    }
    if (!(rs->decoder = weir_api_decoder_new(&lim))) {
        admin_quotas_free(rs->quotas);
        free(rs);
        return NULL;
    }
    return rs;
}

void routes_state_free(routes_state *rs)
{
    if (!rs)
        return;
    weir_api_decoder_free(rs->decoder);
    admin_quotas_free(rs->quotas);
    free(rs);
}

void routes_handle(routes_state *rs, http_answer *a, const weir_http1_request *req)
{
    worker *w = a->conn->w;
    weir_http1_str prio = weir_http1_header_get(req, "Weir-Priority");
    a->priority = prio.p ? shed_priority_named(&w->srv->opt.shed, prio.p, prio.n) : -1;
    if (rs->admin) {
        admin_handle(rs->quotas, a, req);
        return;
    }
    for (size_t i = 0; i < N_ROUTES; i++) {
        const route *r = &routes[i];
        if (req->path.n != strlen(r->path) || memcmp(req->path.p, r->path, req->path.n) != 0)
            continue;
        a->route = i;
        bool get = req->method == WEIR_HTTP1_GET || req->method == WEIR_HTTP1_HEAD;
        handler h = get ? r->get : req->method == WEIR_HTTP1_POST ? r->post : NULL;
        if (h) {
            h(rs, a, req);
            return;
        }
        char detail[256];
        snprintf(detail, sizeof(detail), "method %.*s is not allowed on %s (allowed: %s)",
                 (int)(req->method_name.n > 32 ? 32 : req->method_name.n), req->method_name.p,
                 r->path, r->allow);
        weir_headers_clear(&w->headers);
        weir_headers_add(&w->headers, "Allow", 5, r->allow, strlen(r->allow));
        weir_buf_clear(&w->body);
        weir_api_render_error(&w->body, 405, detail);
        http_answer_respond(a, 405, "application/problem+json", &w->headers, w->body.p,
                            w->body.len);
        return;
    }
    char detail[160];
    snprintf(detail, sizeof(detail), "no such path: %.*s",
             (int)(req->path.n > 100 ? 100 : req->path.n), req->path.p);
    http_answer_problem(a, 404, detail);
}

/* ------------------------------------------------------------ deciding */

static void answer_check(http_answer *a, const weir_request *req, const weir_api_decision *dec,
                         int64_t now_us)
{
    worker *w = a->conn->w;
    if (http_refuse_unknown_domain(a, req, dec))
        return;
    http_render_headers(w, dec, now_us);
    weir_buf_clear(&w->body);
    weir_api_render_decision(&w->body, dec);
    http_answer_respond(a, dec->overall == WEIR_CODE_OK ? 200 : 429, "application/json",
                        &w->headers, w->body.p, w->body.len);
}

typedef struct explained {
    http_answer *a;
    const weir_request *req;
    const weir_api_decision *dec;
} explained;

static void render_explained(void *arg, const weir_match_trace *traces, size_t n)
{
    (void)n;
    explained *x = arg;
    worker *w = x->a->conn->w;
    weir_api_render_decision_explained(&w->body, x->dec, x->req, traces);
}

/* POST /v1/check?explain=1: the decision, and how each descriptor walked
 * the rules to its limits. */
static void answer_check_explained(http_answer *a, const weir_request *req,
                                   const weir_api_decision *dec, int64_t now_us)
{
    worker *w = a->conn->w;
    if (http_refuse_unknown_domain(a, req, dec))
        return;
    http_render_headers(w, dec, now_us);
    weir_buf_clear(&w->body);
    explained x = {a, req, dec};
    if (weir_engine_explain(w->reader, req, render_explained, &x) != WEIR_OK) {
        http_answer_problem(a, 503, "out of memory");
        return;
    }
    http_answer_respond(a, dec->overall == WEIR_CODE_OK ? 200 : 429, "application/json",
                        &w->headers, w->body.p, w->body.len);
}

/* Whether POST /v1/check's query asks for an explanation: explain=1 or
 * true (0, false or no explain: no). -1 for any other query. */
static int wants_explain(const weir_http1_str *q)
{
    static const char *const yes[] = {"explain=1", "explain=true"};
    static const char *const no[] = {"", "explain=0", "explain=false"};
    for (size_t i = 0; i < 2; i++)
        if (q->n == strlen(yes[i]) && memcmp(q->p, yes[i], q->n) == 0)
            return 1;
    for (size_t i = 0; i < 3; i++)
        if (q->n == strlen(no[i]) && (q->n == 0 || memcmp(q->p, no[i], q->n) == 0))
            return 0;
    return -1;
}

static void check_post(routes_state *rs, http_answer *a, const weir_http1_request *req)
{
    weir_api_error err;
    int explain = wants_explain(&req->query);
    if (explain < 0) {
        http_answer_problem(a, 400,
                            "POST /v1/check takes one query parameter: explain=1 (or explain=0)");
        return;
    }
    if (!weir_api_decode_check(rs->decoder, req->body.p, req->body.n, &err)) {
        http_answer_problem(a, err.status, err.message);
        return;
    }
    http_decide(a, weir_api_request(rs->decoder, 0),
                explain ? answer_check_explained : answer_check);
}

/* What GET /v1/check's --check-header entries read: a request header,
 * and for X-Forwarded-For and X-Real-IP the client's address they lead
 * to through --trusted-proxies, masked to --address-prefix. */
typedef struct header_source {
    const weir_http1_request *req;
    const conn *c;
    const serve_options *o;
    size_t n_addr; /* each --check-header read once: a buffer each */
    char addr[SERVE_MAX_CHECK_HEADERS][WEIR_ADDR_TEXT_BYTES];
} header_source;

static const char *find_header(void *arg, const char *name, size_t *len)
{
    header_source *hs = arg;
    weir_http1_str v = weir_http1_header_get(hs->req, name);
    *len = v.n;
    if (!v.p || (strcasecmp(name, "X-Forwarded-For") != 0 && strcasecmp(name, "X-Real-IP") != 0))
        return v.p;
    const serve_options *o = hs->o;
    if (hs->n_addr == SERVE_MAX_CHECK_HEADERS)
        return NULL;
    char *out = hs->addr[hs->n_addr++];
    weir_addr peer = conn_peer(hs->c);
    weir_addr client = weir_addr_client(&peer, v.p, v.n, &o->trusted_proxies);
    *len = weir_addr_key(&client, o->address_prefix[0], o->address_prefix[1], out);
    return out;
}

static void answer_check_get(http_answer *a, const weir_request *req, const weir_api_decision *dec,
                             int64_t now_us)
{
    worker *w = a->conn->w;
    if (http_refuse_unknown_domain(a, req, dec))
        return;
    http_render_headers(w, dec, now_us);
    if (dec->overall == WEIR_CODE_OK) {
        http_answer_respond(a, 200, NULL, &w->headers, "", 0);
        return;
    }
    weir_buf_clear(&w->body);
    weir_api_render_problem(&w->body, dec, weir_api_retry_after_s(dec));
    http_answer_respond(a, (int)w->srv->opt.check_deny_status, "application/problem+json",
                        &w->headers, w->body.p, w->body.len);
}

/* GET /v1/check and /v1/acquire: the query (and --check-header), decided
 * and answered by @answer. */
static void decide_query(routes_state *rs, http_answer *a, const weir_http1_request *req,
                         http_answer_fn answer)
{
    const serve_options *o = rs->opt;
    weir_api_error err;
    header_source hs = {req, a->conn, o, 0, {{0}}};
    if (!weir_api_decode_query(rs->decoder, req->query.p, req->query.n, o->check_headers,
                               o->n_check_headers, find_header, &hs, &err)) {
        http_answer_problem(a, err.status, err.message);
        return;
    }
    http_decide(a, weir_api_request(rs->decoder, 0), answer);
}

static void check_get(routes_state *rs, http_answer *a, const weir_http1_request *req)
{
    decide_query(rs, a, req, answer_check_get);
}

/* ------------------------------------------------------------ leases */

static void acquire_get(routes_state *rs, http_answer *a, const weir_http1_request *req)
{
    decide_query(rs, a, req, leases_answer_get);
}

static void acquire_post(routes_state *rs, http_answer *a, const weir_http1_request *req)
{
    weir_api_error err;
    if (req->query.n) {
        http_answer_problem(a, 400, "POST /v1/acquire takes no query parameters");
        return;
    }
    if (!weir_api_decode_check(rs->decoder, req->body.p, req->body.n, &err)) {
        http_answer_problem(a, err.status, err.message);
        return;
    }
    http_decide(a, weir_api_request(rs->decoder, 0), leases_answer_post);
}

static void release_post(routes_state *rs, http_answer *a, const weir_http1_request *req)
{
    (void)rs;
    leases_release(a, req);
}

/* ------------------------------------------------------------ costs known afterwards */

/* The true cost of POST /v1/settle?cost=N: N, 0 .. 10^18. False when the
 * query is anything else. */
static bool settle_cost(const weir_http1_str *q, uint64_t *out)
{
    static const char pre[] = "cost=";
    size_t n = sizeof(pre) - 1;
    if (q->n <= n || q->n > n + 19 || memcmp(q->p, pre, n) != 0)
        return false;
    uint64_t v = 0;
    for (size_t i = n; i < q->n; i++) {
        if (q->p[i] < '0' || q->p[i] > '9')
            return false;
        v = v * 10 + (uint64_t)(q->p[i] - '0');
    }
    if (v > 1000000000000000000ull)
        return false;
    *out = v;
    return true;
}

static void settle_post(routes_state *rs, http_answer *a, const weir_http1_request *req)
{
    weir_api_error err;
    uint64_t cost;
    if (!settle_cost(&req->query, &cost)) {
        http_answer_problem(a, 400,
                            "POST /v1/settle takes the true cost as its one query parameter: "
                            "?cost=N (0 to 10^18)");
        return;
    }
    if (!weir_api_decode_check(rs->decoder, req->body.p, req->body.n, &err)) {
        http_answer_problem(a, err.status, err.message);
        return;
    }
    http_settle(a, weir_api_request(rs->decoder, 0), cost, answer_check);
}

static void answer_envoy_json(http_answer *a, const weir_request *req, const weir_api_decision *dec,
                              int64_t now_us)
{
    (void)req;
    worker *w = a->conn->w;
    http_render_headers(w, dec, now_us);
    weir_buf_clear(&w->body);
    weir_api_render_envoy_json(&w->body, dec);
    http_answer_respond(a, dec->overall == WEIR_CODE_OK ? 200 : 429, "application/json",
                        &w->headers, w->body.p, w->body.len);
}

static void envoy_json_post(routes_state *rs, http_answer *a, const weir_http1_request *req)
{
    weir_api_error err;
    if (!weir_api_decode_envoy_json(rs->decoder, req->body.p, req->body.n, &err)) {
        http_answer_problem(a, err.status, err.message);
        return;
    }
    http_decide(a, weir_api_request(rs->decoder, 0), answer_envoy_json);
}

/* ------------------------------------------------------------ batches */

/* A batch's decisions complete in any order; each renders its element into
 * a buffer of its own and the last one done answers with them all, in
 * request order. */
typedef struct batch {
    http_answer *a;
    size_t n, left;
    weir_buf items[];
} batch;

typedef struct batch_call {
    batch *b;
    size_t i;
} batch_call;

static void item_error(weir_buf *out, int status, const char *msg)
{
    weir_buf_printf(out, "{\"error\":{\"status\":%d,\"detail\":\"", status);
    weir_buf_put_json_str(out, msg, strlen(msg));
    weir_buf_puts(out, "\"}}");
}

static void batch_item_done(batch *b)
{
    if (--b->left > 0)
        return;
    http_answer *a = b->a;
    if (!a->conn->closed) {
        worker *w = a->conn->w;
        weir_buf_clear(&w->body);
        weir_buf_puts(&w->body, "{\"decisions\":[");
        for (size_t i = 0; i < b->n; i++) {
            if (i)
                weir_buf_putc(&w->body, ',');
            weir_buf_put(&w->body, b->items[i].p, b->items[i].len);
            if (!weir_buf_ok(&b->items[i]))
                w->body.failed = true;
        }
        weir_buf_puts(&w->body, "]}");
        if (weir_buf_ok(&w->body))
            http_answer_respond(a, 200, "application/json", NULL, w->body.p, w->body.len);
        else
            http_answer_problem(a, 500, "out of memory");
    }
    for (size_t i = 0; i < b->n; i++)
        weir_buf_free(&b->items[i]);
    free(b);
}

static void on_item_decided(call *c, weir_code overall, const weir_descriptor_status *st, size_t n)
{
    batch_call *bc = c->data;
    weir_api_decision dec = {overall, st, n};
    weir_buf *out = &bc->b->items[bc->i];
    char msg[192];
    if (http_shed_by_share(c, &dec, msg, sizeof(msg))) {
        item_error(out, 503, msg);
        return;
    }
    metrics_decision(c->conn->w->metrics, &c->req, st, n, c->now_us);
    if (n && st[0].domain_not_found) {
        http_unknown_domain_text(&c->req, msg, sizeof(msg));
        item_error(out, 404, msg);
    } else {
        weir_api_render_decision(out, &dec);
    }
}

static void on_item_expired(call *c)
{
    batch_call *bc = c->data;
    item_error(&bc->b->items[bc->i], 504, "no decision within --decision-timeout");
}

/* Every item's call ends here, answered or not (its connection gone). */
static void on_item_done(call *c)
{
    batch_call *bc = c->data;
    conn *cn = c->conn;
    bool last = bc->b->left == 1;
    batch_item_done(bc->b);
    if (last)
        conn_kick(cn);
}

static const call_ops item_call_ops = {on_item_decided, on_item_expired, on_item_done, NULL};

static void batch_post(routes_state *rs, http_answer *a, const weir_http1_request *req)
{
    weir_api_error err;
    if (!weir_api_decode_batch(rs->decoder, req->body.p, req->body.n, &err)) {
        http_answer_problem(a, err.status, err.message);
        return;
    }
    size_t n = weir_api_count(rs->decoder);
    batch *b = calloc(1, sizeof(*b) + n * sizeof(weir_buf));
    if (!b) {
        http_answer_problem(a, 503, "out of memory");
        return;
    }
    b->a = a;
    b->n = n;
    b->left = n + 1; /* one more, dropped below: no item answers while they start */
    for (size_t i = 0; i < n; i++) {
        weir_buf_init(&b->items[i], SIZE_MAX);
        char msg[192];
        batch_call bc = {b, i};
        int status = http_decide_call(a, weir_api_request(rs->decoder, i), &item_call_ops, &bc,
                                      sizeof(bc), msg, sizeof(msg));
        if (status) {
            item_error(&b->items[i], status, msg);
            batch_item_done(b);
        }
    }
    batch_item_done(b);
}

/* ------------------------------------------------------------ admin */

/* 200 while serving (with Redis down too: decisions follow their failure
 * mode, and the details say so), 503 while draining. */

/* A Redis Cluster's masters and their breakers: "nodes":{"host:port":"closed",...}
 * (those a slot map names now, at most 64 of them). */
static void health_nodes(weir_store *store, weir_buf *b)
{
    weir_redis_node nodes[64];
    size_t n = weir_redis_nodes_get(store, nodes, 64);
    weir_buf_puts(b, ",\"nodes\":{");
    bool first = true;
    for (size_t i = 0; i < n && i < 64; i++) {
        if (!nodes[i].in_map)
            continue;
        weir_buf_printf(b, "%s\"%s\":\"%s\"", first ? "" : ",", nodes[i].address,
                        weir_redis_breaker_name(nodes[i].breaker));
        first = false;
    }
    weir_buf_putc(b, '}');
}

static void healthz(routes_state *rs, http_answer *a, const weir_http1_request *req)
{
    (void)rs;
    (void)req;
    worker *w = a->conn->w;
    bool draining = atomic_load(&w->srv->draining);
    bool healthy = server_healthy(w->srv);
    weir_redis_stats r;
    bool redis = weir_redis_stats_get(w->srv->store, &r) == WEIR_OK;
    bool degraded = redis && (r.breaker != WEIR_REDIS_CLOSED || r.connections == 0);
    weir_buf_clear(&w->body);
    weir_buf_printf(&w->body, "{\"status\":\"%s\"",
                    draining   ? "draining"
                    : !healthy ? "no_rules"
                    : degraded ? "degraded"
                               : "ok");
    if (redis) {
        weir_redis_cluster_stats c = {.size = sizeof(c)};
        bool cluster = weir_redis_cluster_stats_get(w->srv->store, &c) == WEIR_OK;
        weir_buf_printf(&w->body,
                        ",\"store\":{\"type\":\"%s\",\"breaker\":\"%s\","
                        "\"connections\":%llu",
                        cluster ? "redis_cluster" : "redis", weir_redis_breaker_name(r.breaker),
                        (unsigned long long)r.connections);
        if (cluster)
            health_nodes(w->srv->store, &w->body);
        weir_buf_putc(&w->body, '}');
    }
    quota_service_health(w->srv->quotas, &w->body, server_now_us(w->srv));
    weir_buf_putc(&w->body, '}');
    if (!weir_buf_ok(&w->body)) {
        http_answer_problem(a, 500, "out of memory");
        return;
    }
    http_answer_respond(a, healthy ? 200 : 503, "application/json", NULL, w->body.p, w->body.len);
}

static void healthcheck(routes_state *rs, http_answer *a, const weir_http1_request *req)
{
    (void)rs;
    (void)req;
    server *srv = a->conn->w->srv;
    bool healthy = server_healthy(srv);
    const char *body = atomic_load(&srv->draining) ? "draining" : healthy ? "OK" : "no rules";
    http_answer_respond(a, healthy ? 200 : 503, "text/plain", NULL, body, strlen(body));
}

static void rules_text(http_answer *a, bool upstream)
{
    worker *w = a->conn->w;
    weir_buf_clear(&w->body);
    server_rules_text(w->srv, &w->body, upstream);
    http_answer_respond(a, 200, "text/plain; charset=utf-8", NULL, w->body.p, w->body.len);
}

static void rules_get(routes_state *rs, http_answer *a, const weir_http1_request *req)
{
    (void)rs;
    (void)req;
    rules_text(a, false);
}

/* envoyproxy/ratelimit's debug page, in its form, for the tools that read
 * it */
static void rlconfig_get(routes_state *rs, http_answer *a, const weir_http1_request *req)
{
    (void)rs;
    (void)req;
    rules_text(a, true);
}

static void metrics_get(routes_state *rs, http_answer *a, const weir_http1_request *req)
{
    (void)rs;
    (void)req;
    worker *w = a->conn->w;
    weir_buf_clear(&w->body);
    metrics_render(w->srv->metrics, w->srv->store, &w->body);
    adaptive_view_metrics(w->srv->engine, &w->body);
    quota_service_metrics(w->srv->quotas, &w->body, server_now_us(w->srv));
    if (!weir_buf_ok(&w->body)) {
        http_answer_problem(a, 500, "out of memory");
        return;
    }
    http_answer_respond(a, 200, "text/plain; version=0.0.4; charset=utf-8", NULL, w->body.p,
                        w->body.len);
}
