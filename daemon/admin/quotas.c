/*
 * quotas.c - /admin/v1/quotas, /admin/v1/quotas/{key} and
 * /admin/v1/audit: tenants' records in the quota database, on the admin
 * worker (its own database handle, opened on first use and again after a
 * failure), each change audited under the token's name and put in force
 * here at once (the quota service reads the database again).
 */
#include "quotas.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quota/db.h"
#include "quota/json.h"
#include "quota/service.h"
#include "tiers.h"
#include "worker.h"

#define PAGE_DEFAULT 100u
/* How long a change waits for its table to be in force before answering
 * (a database that answered the commit answers the read at once). */
#define QUOTA_SYNC_MS 2000
#define PAGE_MAX 1000u

struct admin_quotas {
    quota_db *db;
    weir_json json;
    quota_tenant *page; /* PAGE_MAX records */
    quota_tenant one, before;
};

admin_quotas *admin_quotas_new(void)
{
    admin_quotas *q = calloc(1, sizeof(*q));
    if (q && !(q->page = calloc(PAGE_MAX, sizeof(*q->page)))) {
        free(q);
        q = NULL;
    }
    return q;
}

void admin_quotas_free(admin_quotas *q)
{
    if (!q)
        return;
    quota_db_close(q->db);
    weir_json_release(&q->json);
    free(q->page);
    free(q);
}

weir_json *admin_quotas_parser(admin_quotas *q)
{
    return &q->json;
}

static void problem(http_answer *a, int status, const char *detail)
{
    http_answer_problem(a, status, detail);
}

/* Opens the database if it is not; false (@why says why) when it cannot
 * be. */
static bool open_db(admin_quotas *q, server *srv, char *why, size_t cap)
{
    quota_db_options o = {srv->opt.quota_db, quota_json_tenant, 0};
    return q->db || (q->db = quota_db_open(&o, why, cap)) != NULL;
}

/* The database, opened now if it is not; NULL (answered) when it cannot
 * be. */
static quota_db *db_of(admin_quotas *q, http_answer *a)
{
    server *srv = a->conn->w->srv;
    if (!srv->opt.quota_db[0]) {
        problem(a, 503, "weir runs without a quota database (--quota-db)");
        return NULL;
    }
    char why[256];
    if (!open_db(q, srv, why, sizeof(why))) {
        char detail[320];
        snprintf(detail, sizeof(detail), "the quota database is unavailable: %s", why);
        problem(a, 503, detail);
        return NULL;
    }
    return q->db;
}

/* Answers a failed database call. */
static void db_failed(admin_quotas *q, http_answer *a, quota_db_status st)
{
    char detail[320];
    switch (st) {
    case QDB_NOT_FOUND:
        problem(a, 404, "no such tenant");
        return;
    case QDB_CONFLICT:
        problem(a, 412, "the record changed since that version (If-Match): read it again");
        return;
    case QDB_UNAVAILABLE:
        snprintf(detail, sizeof(detail), "the quota database is unavailable: %s",
                 quota_db_error(q->db));
        problem(a, 503, detail);
        return;
    case QDB_INVALID: /* the request's text, not the server: a key that is not UTF-8 */
        problem(a, 400, quota_db_error(q->db));
        return;
    default:
        snprintf(detail, sizeof(detail), "the quota database failed: %s", quota_db_error(q->db));
        problem(a, 500, detail);
        return;
    }
}

/* The key of /admin/v1/quotas/{key} (or usage), percent-decoded into
 * @key; false when answered (bad or missing). */
bool admin_path_key(http_answer *a, const weir_http1_str *path, size_t prefix, char *key,
                    size_t *len)
{
    size_t n = path->n - prefix;
    if (n == 0 || n > 3 * QUOTA_MAX_KEY_BYTES) {
        problem(a, n ? 414 : 404, n ? "the key is longer than 256 bytes" : "no key in the path");
        return false;
    }
    char buf[3 * QUOTA_MAX_KEY_BYTES];
    size_t k = weir_api_percent_decode(path->p + prefix, n, buf, false);
    if (k == SIZE_MAX || k == 0 || k > QUOTA_MAX_KEY_BYTES || memchr(buf, '\0', k)) {
        problem(a, 400,
                k == SIZE_MAX             ? "bad percent-escape in the key"
                : k > QUOTA_MAX_KEY_BYTES ? "the key is longer than 256 bytes"
                                          : "a key is 1 to 256 bytes, none of them NUL");
        return false;
    }
    memcpy(key, buf, k);
    key[k] = '\0';
    *len = k;
    return true;
}

/* ETag and If-Match: a record's version as a strong entity tag, "N". */
static void etag_header(worker *w, int64_t version)
{
    char v[32];
    int n = snprintf(v, sizeof(v), "\"%lld\"", (long long)version);
    weir_headers_add(&w->headers, "ETag", 4, v, (size_t)n);
}

/* If-Match: *: any version of a record that exists. */
#define IF_MATCH_ANY (-3)

/* -1: no condition; 0: If-None-Match: *; N: If-Match: "N"; IF_MATCH_ANY: If-Match: *. -2 when
 * answered (a condition that cannot be a version of ours). */
static int64_t condition(http_answer *a, const weir_http1_request *req)
{
    weir_http1_str m = weir_http1_header_get(req, "If-Match");
    weir_http1_str none = weir_http1_header_get(req, "If-None-Match");
    if (none.p && none.n == 1 && none.p[0] == '*' && !m.p)
        return 0;
    if (none.p) {
        problem(a, 400, "If-None-Match takes '*' alone (create only)");
        return -2;
    }
    if (!m.p)
        return -1;
    if (m.n == 1 && m.p[0] == '*')
        return IF_MATCH_ANY;
    int64_t v = 0;
    size_t i = 1;
    if (m.n < 3 || m.n > 21 || m.p[0] != '"' || m.p[m.n - 1] != '"')
        i = m.n; /* not a quoted tag */
    for (; i + 1 < m.n; i++) {
        if (m.p[i] < '0' || m.p[i] > '9') {
            v = 0;
            break;
        }
        v = v * 10 + (m.p[i] - '0');
    }
    if (v <= 0) {
        problem(a, 412, "If-Match names no version of this record (an ETag is \"N\")");
        return -2;
    }
    return v;
}

typedef struct checks_arg {
    server *srv;
} checks_arg;

static bool tier_known(void *arg, const char *tier)
{
    checks_arg *c = arg;
    weir_rules_hold *hold;
    const weir_rules *rules = weir_engine_rules_hold(c->srv->engine, &hold);
    bool known = false;
    for (size_t d = 0; !known && d < weir_rules_domain_count(rules); d++)
        known = weir_rules_domain_find_tier(weir_rules_domain_at(rules, d), tier) != NULL;
    weir_engine_rules_unhold(hold);
    return known;
}

static bool zone_known(void *arg, const char *name)
{
    (void)arg;
    if (strcmp(name, "UTC") == 0)
        return true;
    weir_ctx *ctx;
    if (weir_ctx_new(NULL, &ctx) != WEIR_OK)
        return false;
    weir_tz *tz = NULL;
    bool ok = weir_tz_load(ctx, name, &tz) == WEIR_OK;
    weir_tz_free(tz);
    weir_ctx_free(ctx);
    return ok;
}

/* The key of a change and its condition; false when answered. */
static bool key_and_condition(http_answer *a, const weir_http1_request *req, char *key, size_t *len,
                              int64_t *cond)
{
    if (!admin_path_key(a, &req->path, sizeof(ADMIN_QUOTAS_PREFIX) - 1, key, len))
        return false;
    *cond = condition(a, req);
    return *cond != -2;
}

/* The record as the answer's body, with its ETag. */
static void answer_record(http_answer *a, int status, const quota_tenant *t)
{
    worker *w = a->conn->w;
    weir_buf_clear(&w->body);
    weir_headers_clear(&w->headers);
    etag_header(w, t->version);
    /* "quotas":{"default": the tier's own limits, as seed 004 shows them} */
    weir_buf tier;
    weir_buf_init(&tier, 1u << 20);
    weir_rules_hold *hold;
    const weir_rules *rules = weir_engine_rules_hold(w->srv->engine, &hold);
    bool has = admin_render_tier_default(&tier, rules, t->tier);
    weir_engine_rules_unhold(hold);
    weir_buf_putc(&tier, '\0');
    quota_json_render_tenant(&w->body, t, has && weir_buf_ok(&tier) ? tier.p : NULL);
    weir_buf_free(&tier);
    if (!weir_buf_ok(&w->body)) {
        problem(a, 500, "out of memory");
        return;
    }
    http_answer_respond(a, status, "application/json", &w->headers, w->body.p, w->body.len);
}

const quota_tenant *admin_quota_record(admin_quotas *q, http_answer *a, const char *key, size_t len)
{
    server *srv = a->conn->w->srv;
    char why[256];
    if (!srv->opt.quota_db[0] || !open_db(q, srv, why, sizeof(why)))
        return NULL;
    return quota_db_get(q->db, key, len, &q->one) == QDB_OK ? &q->one : NULL;
}

void admin_quota_get(admin_quotas *q, http_answer *a, const weir_http1_request *req,
                     const char *who)
{
    (void)who;
    char key[QUOTA_MAX_KEY_BYTES + 1];
    size_t len;
    quota_db *db;
    if (!admin_path_key(a, &req->path, sizeof(ADMIN_QUOTAS_PREFIX) - 1, key, &len) ||
        !(db = db_of(q, a)))
        return;
    quota_db_status st = quota_db_get(db, key, len, &q->one);
    if (st != QDB_OK) {
        db_failed(q, a, st);
        return;
    }
    answer_record(a, 200, &q->one);
}

void admin_quota_put(admin_quotas *q, http_answer *a, const weir_http1_request *req,
                     const char *who)
{
    worker *w = a->conn->w;
    char key[QUOTA_MAX_KEY_BYTES + 1];
    size_t len;
    int64_t cond;
    quota_db *db;
    if (!key_and_condition(a, req, key, &len, &cond))
        return;
    checks_arg ca = {w->srv};
    quota_json_checks checks = {tier_known, zone_known, &ca};
    quota_json_error err;
    memset(&q->one, 0, sizeof(q->one));
    if (!quota_json_parse_put(&q->json, req->body.p, req->body.n, &checks, &q->one, &err)) {
        weir_buf_clear(&w->body);
        quota_json_render_problem(&w->body, &err);
        http_answer_respond(a, err.status, "application/problem+json", NULL, w->body.p,
                            w->body.len);
        return;
    }
    if (!(db = db_of(q, a)))
        return;
    if (cond == IF_MATCH_ANY) { /* any version, but one must exist */
        quota_db_status st = quota_db_get(db, key, len, &q->before);
        if (st == QDB_NOT_FOUND) {
            problem(a, 412, "If-Match: * and no record to match");
            return;
        }
        if (st != QDB_OK) {
            db_failed(q, a, st);
            return;
        }
        cond = -1;
    }
    memcpy(q->one.key, key, len + 1);
    q->one.key_len = len;
    bool created = false, changed = false;
    quota_db_status st =
        quota_db_put(db, &q->one, cond, who, server_now_us(w->srv), &q->before, &created, &changed);
    if (st != QDB_OK) {
        db_failed(q, a, st);
        return;
    }
    if (changed) /* in force here when the answer comes */
        quota_service_sync(w->srv->quotas, QUOTA_SYNC_MS);
    answer_record(a, created ? 201 : 200, &q->before);
}

void admin_quota_delete(admin_quotas *q, http_answer *a, const weir_http1_request *req,
                        const char *who)
{
    worker *w = a->conn->w;
    char key[QUOTA_MAX_KEY_BYTES + 1];
    size_t len;
    int64_t cond;
    quota_db *db;
    if (!key_and_condition(a, req, key, &len, &cond))
        return;
    if (cond == IF_MATCH_ANY)
        cond = -1; /* a missing record is 404 anyway */
    if (cond == 0) {
        problem(a, 400, "If-None-Match: * asks to create; DELETE takes If-Match");
        return;
    }
    if (!(db = db_of(q, a)))
        return;
    quota_db_status st =
        quota_db_delete(db, key, len, cond, who, server_now_us(w->srv), &q->before);
    if (st != QDB_OK) {
        db_failed(q, a, st);
        return;
    }
    quota_service_sync(w->srv->quotas, QUOTA_SYNC_MS);
    http_answer_respond(a, 204, NULL, NULL, "", 0);
}

int admin_query_param(const weir_http1_str *q, const char *name, char *out, size_t cap, size_t *len)
{
    size_t nl = strlen(name);
    for (size_t at = 0; at < q->n;) {
        const char *amp = memchr(q->p + at, '&', q->n - at);
        size_t end = amp ? (size_t)(amp - q->p) : q->n;
        const char *pair = q->p + at;
        size_t pn = end - at;
        at = end + 1;
        if (pn <= nl || memcmp(pair, name, nl) != 0 || pair[nl] != '=')
            continue;
        if (pn - nl - 1 >= cap)
            return -1;
        size_t k = weir_api_percent_decode(pair + nl + 1, pn - nl - 1, out, true);
        if (k == SIZE_MAX || memchr(out, '\0', k))
            return -1;
        out[k] = '\0';
        *len = k;
        return 1;
    }
    return 0;
}

size_t admin_query_count(http_answer *a, const weir_http1_str *q, const char *name, size_t dflt,
                         size_t max)
{
    char v[16];
    size_t len;
    int got = admin_query_param(q, name, v, sizeof(v), &len);
    if (got == 0)
        return dflt;
    char *end = v;
    unsigned long n = got > 0 && v[0] >= '0' && v[0] <= '9' ? strtoul(v, &end, 10) : 0;
    if (*end || n < 1 || n > max) {
        char detail[80];
        snprintf(detail, sizeof(detail), "%s is 1 to %zu", name, max);
        problem(a, 400, detail);
        return 0;
    }
    return n;
}

static const char *const list_params[] = {"tier", "limit", "cursor"};
static const char *const audit_params[] = {"key", "limit", "cursor"};

bool admin_params_known(http_answer *a, const weir_http1_str *q, const char *const *names, size_t n)
{
    for (size_t at = 0; at < q->n;) {
        const char *amp = memchr(q->p + at, '&', q->n - at);
        size_t end = amp ? (size_t)(amp - q->p) : q->n;
        const char *eq = memchr(q->p + at, '=', end - at);
        size_t kl = (eq ? (size_t)(eq - q->p) : end) - at;
        bool known = false;
        for (size_t i = 0; i < n; i++)
            known |= strlen(names[i]) == kl && memcmp(names[i], q->p + at, kl) == 0;
        if (!known && kl) {
            char detail[200];
            int w = snprintf(detail, sizeof(detail), "unknown query parameter '%.*s' (takes",
                             (int)(kl > 40 ? 40 : kl), q->p + at);
            for (size_t i = 0; i < n && w > 0 && (size_t)w < sizeof(detail); i++)
                w += snprintf(detail + w, sizeof(detail) - (size_t)w, "%s %s", i ? "," : "",
                              names[i]);
            if (w > 0 && (size_t)w < sizeof(detail))
                snprintf(detail + w, sizeof(detail) - (size_t)w, ")");
            problem(a, 400, detail);
            return false;
        }
        at = end + 1;
    }
    return true;
}

void admin_quota_list(admin_quotas *q, http_answer *a, const weir_http1_request *req,
                      const char *who)
{
    (void)who;
    worker *w = a->conn->w;
    char tier[QUOTA_MAX_TIER_BYTES + 1], cursor[QUOTA_JSON_CURSOR_MAX + 1];
    char after[QUOTA_MAX_KEY_BYTES + 1];
    size_t tier_len = 0, cursor_len = 0, after_len = 0;
    size_t limit;
    if (!admin_params_known(a, &req->query, list_params, 3) ||
        !(limit = admin_query_count(a, &req->query, "limit", PAGE_DEFAULT, PAGE_MAX)))
        return;
    int has_tier = admin_query_param(&req->query, "tier", tier, sizeof(tier), &tier_len);
    int has_cursor = admin_query_param(&req->query, "cursor", cursor, sizeof(cursor), &cursor_len);
    if (has_tier < 0 || has_cursor < 0 ||
        (has_cursor > 0 && !quota_json_cursor_decode(cursor, cursor_len, after, &after_len))) {
        problem(a, 400, has_tier < 0 ? "bad tier" : "bad cursor (give back the 'next' of a page)");
        return;
    }
    quota_db *db = db_of(q, a);
    if (!db)
        return;
    size_t n = 0;
    bool more = false;
    quota_db_status st =
        quota_db_list(db, has_tier > 0 ? tier : NULL, has_cursor > 0 ? after : NULL, after_len,
                      limit, q->page, &n, &more);
    if (st != QDB_OK) {
        db_failed(q, a, st);
        return;
    }
    char next[QUOTA_JSON_CURSOR_MAX + 1];
    bool has_next =
        more && n > 0 &&
        quota_json_cursor_encode(q->page[n - 1].key, q->page[n - 1].key_len, next, sizeof(next));
    weir_buf_clear(&w->body);
    quota_json_render_list(&w->body, q->page, n, has_next ? next : NULL);
    http_answer_respond(a, 200, "application/json", NULL, w->body.p, w->body.len);
}

void admin_audit_list(admin_quotas *q, http_answer *a, const weir_http1_request *req,
                      const char *who)
{
    (void)who;
    worker *w = a->conn->w;
    char key[QUOTA_MAX_KEY_BYTES + 1], cursor[QUOTA_JSON_AUDIT_CURSOR_MAX + 1];
    size_t key_len = 0, cursor_len = 0, limit;
    if (!admin_params_known(a, &req->query, audit_params, 3) ||
        !(limit = admin_query_count(a, &req->query, "limit", PAGE_DEFAULT, PAGE_MAX)))
        return;
    int has_key = admin_query_param(&req->query, "key", key, sizeof(key), &key_len);
    int has_cursor = admin_query_param(&req->query, "cursor", cursor, sizeof(cursor), &cursor_len);
    int64_t before = 0;
    if (has_key < 0 || (has_key > 0 && key_len == 0) || has_cursor < 0 ||
        (has_cursor > 0 && !quota_json_audit_cursor_decode(cursor, cursor_len, &before))) {
        problem(a, 400, has_cursor ? "bad cursor (give back the 'next' of a page)" : "bad key");
        return;
    }
    quota_db *db = db_of(q, a);
    if (!db)
        return;
    quota_audit *entries = calloc(limit, sizeof(*entries));
    if (!entries) {
        problem(a, 500, "out of memory");
        return;
    }
    size_t n = 0;
    bool more = false;
    quota_db_status st =
        quota_db_audit(db, has_key > 0 ? key : NULL, key_len, before, limit, entries, &n, &more);
    if (st != QDB_OK) {
        free(entries);
        db_failed(q, a, st);
        return;
    }
    char next[QUOTA_JSON_AUDIT_CURSOR_MAX];
    bool has_next = more && n > 0;
    if (has_next)
        quota_json_audit_cursor_encode(entries[n - 1].id, next);
    weir_buf_clear(&w->body);
    quota_json_render_audit(&w->body, entries, n, has_next ? next : NULL);
    for (size_t i = 0; i < n; i++)
        quota_audit_free(&entries[i]);
    free(entries);
    http_answer_respond(a, 200, "application/json", NULL, w->body.p, w->body.len);
}
