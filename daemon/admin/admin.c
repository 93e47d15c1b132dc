/*
 * admin.c - the admin API's front door (admin.h): the token check, then
 * the route.
 */
#include "admin.h"

#include <stdio.h>
#include <string.h>

#include "quotas.h"
#include "sim.h"
#include "static.h"
#include "stats.h"
#include "tokens.h"
#include "top.h"
#include "usage.h"
#include "worker.h"

typedef void (*admin_fn)(admin_quotas *q, http_answer *a, const weir_http1_request *req,
                         const char *who);

typedef struct admin_route {
    const char *path; /* exact, or a prefix when it ends in '/' */
    weir_http1_method method;
    admin_fn fn;
} admin_route;

static void tiers_get(admin_quotas *q, http_answer *a, const weir_http1_request *req,
                      const char *who)
{
    (void)q;
    (void)req;
    (void)who;
    worker *w = a->conn->w;
    weir_buf_clear(&w->body);
    server_tiers_json(w->srv, &w->body);
    if (!weir_buf_ok(&w->body)) {
        http_answer_problem(a, 500, "out of memory");
        return;
    }
    http_answer_respond(a, 200, "application/json", NULL, w->body.p, w->body.len);
}

/* POST /admin/v1/sim (sim.h). */
static void sim_post(admin_quotas *q, http_answer *a, const weir_http1_request *req)
{
    worker *w = a->conn->w;
    sim_error err;
    weir_buf_clear(&w->body);
    if (!sim_answer(admin_quotas_parser(q), req->body.p, req->body.n, &w->body, &err)) {
        weir_buf_clear(&w->body);
        sim_render_problem(&w->body, &err);
        http_answer_respond(a, err.status, "application/problem+json", NULL, w->body.p,
                            w->body.len);
        return;
    }
    http_answer_respond(a, 200, "application/json", NULL, w->body.p, w->body.len);
}

/* The routes that take no token: the pages of web/ hold no data
 * (static.h), and the simulator decides a trace of its body on fresh
 * states, reading and writing nothing shared (sim.h). True when
 * answered. */
static bool open_route(admin_quotas *q, http_answer *a, const weir_http1_request *req)
{
    if (admin_static_handle(a, req))
        return true;
    if (req->path.n != strlen(SIM_PATH) || memcmp(req->path.p, SIM_PATH, req->path.n) != 0)
        return false;
    if (req->method == WEIR_HTTP1_POST) {
        sim_post(q, a, req);
        return true;
    }
    worker *w = a->conn->w;
    weir_headers_clear(&w->headers);
    weir_headers_add(&w->headers, "Allow", 5, "POST", 4);
    weir_buf_clear(&w->body);
    weir_api_render_error(&w->body, 405, "method not allowed: " SIM_PATH " takes POST");
    http_answer_respond(a, 405, "application/problem+json", &w->headers, w->body.p, w->body.len);
    return true;
}

static void stats_get(admin_quotas *q, http_answer *a, const weir_http1_request *req,
                      const char *who);

static const admin_route admin_routes[] = {
    {"/admin/v1/stats", WEIR_HTTP1_GET, stats_get},
    {"/admin/v1/tiers", WEIR_HTTP1_GET, tiers_get},
    {"/admin/v1/quotas", WEIR_HTTP1_GET, admin_quota_list},
    {ADMIN_QUOTAS_PREFIX, WEIR_HTTP1_GET, admin_quota_get},
    {ADMIN_QUOTAS_PREFIX, WEIR_HTTP1_PUT, admin_quota_put},
    {ADMIN_QUOTAS_PREFIX, WEIR_HTTP1_DELETE, admin_quota_delete},
    {"/admin/v1/audit", WEIR_HTTP1_GET, admin_audit_list},
    {ADMIN_USAGE_PREFIX, WEIR_HTTP1_GET, admin_usage_get},
    {"/admin/v1/top", WEIR_HTTP1_GET, admin_top_get},
};
#define N_ADMIN_ROUTES (sizeof(admin_routes) / sizeof(admin_routes[0]))

/* The dashboard's snapshot; "routes" lists the paths above once each, so
 * the page knows which routes this build has. */
static void stats_get(admin_quotas *q, http_answer *a, const weir_http1_request *req,
                      const char *who)
{
    (void)q;
    (void)req;
    (void)who;
    const char *paths[N_ADMIN_ROUTES];
    size_t n = 0;
    for (size_t i = 0; i < N_ADMIN_ROUTES; i++) {
        size_t j = 0;
        while (j < n && strcmp(paths[j], admin_routes[i].path) != 0)
            j++;
        if (j == n)
            paths[n++] = admin_routes[i].path;
    }
    worker *w = a->conn->w;
    weir_buf_clear(&w->body);
    if (!admin_stats_render(w->srv, paths, n, &w->body)) {
        http_answer_problem(a, 500, "out of memory");
        return;
    }
    static const char no_store[] = "no-store";
    weir_headers_clear(&w->headers);
    weir_headers_add(&w->headers, "Cache-Control", 13, no_store, sizeof(no_store) - 1);
    http_answer_respond(a, 200, "application/json", &w->headers, w->body.p, w->body.len);
}

static bool path_matches(const char *route, const weir_http1_str *path)
{
    size_t n = strlen(route);
    if (route[n - 1] == '/')
        return path->n > n && memcmp(path->p, route, n) == 0;
    return path->n == n && memcmp(path->p, route, n) == 0;
}

static void unauthorized(http_answer *a, const char *detail)
{
    worker *w = a->conn->w;
    static const char challenge[] = "Bearer realm=\"weir-admin\"";
    weir_headers_clear(&w->headers);
    weir_headers_add(&w->headers, "WWW-Authenticate", 16, challenge, sizeof(challenge) - 1);
    weir_buf_clear(&w->body);
    weir_api_render_error(&w->body, 401, detail);
    http_answer_respond(a, 401, "application/problem+json", &w->headers, w->body.p, w->body.len);
}

void admin_handle(admin_quotas *q, http_answer *a, const weir_http1_request *req)
{
    server *srv = a->conn->w->srv;
    if (open_route(q, a, req))
        return;
    if (!srv->admin_tokens) {
        unauthorized(a, "the admin API has no tokens: start weir with --admin-token-file");
        return;
    }
    weir_http1_str auth = weir_http1_header_get(req, "Authorization");
    const char *who = auth.p ? admin_tokens_check(srv->admin_tokens, auth.p, auth.n) : NULL;
    if (!who) {
        unauthorized(a, auth.p ? "the bearer token is not one of --admin-token-file's"
                               : "an Authorization: Bearer token is required");
        return;
    }
    bool path_known = false;
    weir_http1_method m = req->method == WEIR_HTTP1_HEAD ? WEIR_HTTP1_GET : req->method;
    for (size_t i = 0; i < N_ADMIN_ROUTES; i++) {
        const admin_route *r = &admin_routes[i];
        if (!path_matches(r->path, &req->path))
            continue;
        path_known = true;
        if (r->method == m) {
            r->fn(q, a, req, who);
            return;
        }
    }
    char detail[160];
    snprintf(detail, sizeof(detail), "%s: %.*s", path_known ? "method not allowed" : "no such path",
             (int)(req->path.n > 100 ? 100 : req->path.n), req->path.p);
    http_answer_problem(a, path_known ? 405 : 404, detail);
}

bool admin_addr_is_loopback(const char *addr)
{
    if (strncmp(addr, "localhost:", 10) == 0 || strncmp(addr, "[::1]:", 6) == 0)
        return true;
    if (strncmp(addr, "127.", 4) != 0)
        return false;
    const char *colon = strrchr(addr, ':');
    if (!colon)
        return false;
    for (const char *c = addr + 4; c < colon; c++)
        if (!((*c >= '0' && *c <= '9') || *c == '.'))
            return false;
    return true;
}
