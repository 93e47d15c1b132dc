/*
 * usage.c - GET /admin/v1/usage/{key}[?domain=D]: a tenant's current use
 * of each of its limits, read from the store without consuming (every
 * descriptor asks with hits 0, a peek): on the memory store at once, on
 * Redis when its answer comes (the admin worker's own session).
 *
 * The scopes asked: the tenant alone ("default"), each exact descriptor
 * of the domain's tiers, and the tenant's own override scopes.
 */
#include "usage.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "call.h"
#include "quota/json.h"
#include "quota/rfc3339.h"
#include "quotas.h"
#include "worker.h"

#define USAGE_MAX_SCOPES 32u

typedef struct usage_req {
    http_answer *a;
} usage_req;

/* The scope of descriptor @d of the request: "default", or "key:value". */
static void put_scope(weir_buf *b, const weir_descriptor *d)
{
    weir_buf_putc(b, '"');
    if (d->n_entries < 2) {
        weir_buf_puts(b, "default");
    } else {
        const weir_entry *e = &d->entries[1];
        weir_buf_put_json_str(b, e->key, e->key_len);
        weir_buf_putc(b, ':');
        weir_buf_put_json_str(b, e->value, e->value_len);
    }
    weir_buf_putc(b, '"');
}

static void put_outcome(weir_buf *b, const weir_limit_outcome *o, int64_t now_us)
{
    uint64_t used = o->remaining < o->requests_per_unit ? o->requests_per_unit - o->remaining : 0;
    weir_buf_printf(b, "{\"limit\":%u,\"used\":%llu,\"remaining\":%llu", o->requests_per_unit,
                    (unsigned long long)used, (unsigned long long)o->remaining);
    if (o->limit && o->limit->calendar != WEIR_CALENDAR_NONE) {
        weir_buf_printf(b, ",\"calendar\":\"%s\",\"time_zone\":\"",
                        weir_calendar_name(o->limit->calendar));
        const char *tz = o->limit->time_zone ? o->limit->time_zone : "UTC";
        weir_buf_put_json_str(b, tz, strlen(tz));
        weir_buf_putc(b, '"');
    } else if (o->unit != WEIR_UNIT_NONE) {
        weir_buf_printf(b, ",\"unit\":\"%s\"", weir_rule_unit_name(o->unit));
    } else {
        weir_buf_printf(b, ",\"window_seconds\":%lld", (long long)(o->window_us / 1000000));
    }
    if (o->limit)
        weir_buf_printf(b, ",\"algorithm\":\"%s\"", weir_algorithm_name(o->limit->algorithm));
    if (o->reset_after_us > 0) {
        char at[QUOTA_TIME_TEXT_MAX];
        quota_time_format(now_us + o->reset_after_us, at);
        weir_buf_printf(b, ",\"resets_at\":\"%s\"", at);
    }
    if (o->failure_mode)
        weir_buf_puts(b, ",\"store_unavailable\":true");
    weir_buf_putc(b, '}');
}

static void on_decided(call *c, weir_code overall, const weir_descriptor_status *st, size_t n)
{
    (void)overall;
    usage_req *u = c->data;
    worker *w = c->conn->w;
    weir_buf *b = &w->body;
    weir_buf_clear(b);
    const weir_request *req = &c->req;
    const weir_entry *key = &req->descriptors[0].entries[0];
    weir_buf_puts(b, "{\"api_key\":\"");
    weir_buf_put_json_str(b, key->value, key->value_len);
    weir_buf_puts(b, "\",\"domain\":\"");
    weir_buf_put_json_str(b, req->domain, req->domain_len);
    weir_buf_puts(b, "\",\"usage\":{");
    bool first = true;
    for (size_t i = 0; i < n; i++) {
        if (!st[i].n_outcomes)
            continue; /* a scope with no limit */
        if (!first)
            weir_buf_putc(b, ',');
        first = false;
        put_scope(b, &req->descriptors[i]);
        weir_buf_puts(b, ":[");
        for (size_t k = 0; k < st[i].n_outcomes; k++) {
            if (k)
                weir_buf_putc(b, ',');
            put_outcome(b, &st[i].outcomes[k], c->now_us);
        }
        weir_buf_putc(b, ']');
    }
    weir_buf_puts(b, "}}");
    if (weir_buf_ok(b))
        http_answer_respond(u->a, 200, "application/json", NULL, b->p, b->len);
    else
        http_answer_problem(u->a, 500, "out of memory");
    if (!c->deciding)
        conn_kick(c->conn);
}

static void on_expired(call *c)
{
    usage_req *u = c->data;
    http_answer_problem(u->a, 504, "the store did not answer within --decision-timeout");
    if (!c->deciding)
        conn_kick(c->conn);
}

static const call_ops usage_ops = {on_decided, on_expired, NULL, NULL};

/* The request's scopes: entries[0] the tenant's, then one scope each. */
typedef struct scopes {
    weir_entry tenant[USAGE_MAX_SCOPES][2];
    weir_descriptor d[USAGE_MAX_SCOPES];
    size_t n;
} scopes;

static void add_scope(scopes *s, const char *tkey, const char *key, size_t key_len, const char *k,
                      size_t kl, const char *v, size_t vl)
{
    if (s->n == USAGE_MAX_SCOPES)
        return;
    for (size_t i = 0; k && i < s->n; i++) {
        const weir_entry *e = &s->tenant[i][1];
        if (s->d[i].n_entries == 2 && e->key_len == kl && memcmp(e->key, k, kl) == 0 &&
            e->value_len == vl && memcmp(e->value, v, vl) == 0)
            return; /* asked already */
    }
    weir_entry *e = s->tenant[s->n];
    e[0] = (weir_entry){tkey, strlen(tkey), key, key_len};
    if (k)
        e[1] = (weir_entry){k, kl, v, vl};
    s->d[s->n] = (weir_descriptor){e, k ? 2u : 1u, true, 0, NULL};
    s->n++;
}

void admin_usage_get(admin_quotas *q, http_answer *a, const weir_http1_request *req,
                     const char *who)
{
    (void)who;
    worker *w = a->conn->w;
    char key[QUOTA_MAX_KEY_BYTES + 1];
    size_t len;
    if (!admin_path_key(a, &req->path, sizeof(ADMIN_USAGE_PREFIX) - 1, key, &len))
        return;
    char domain[WEIR_RULES_MAX_STRING_BYTES + 1];
    size_t domain_len = 0;
    int has_domain = admin_query_param(&req->query, "domain", domain, sizeof(domain), &domain_len);
    if (has_domain < 0) {
        http_answer_problem(a, 400, "bad domain");
        return;
    }
    /* the scopes of the domain's tiers and of the tenant's overrides */
    static __thread scopes s;
    memset(&s, 0, sizeof(s));
    weir_rules_hold *hold;
    const weir_rules *rules = weir_engine_rules_hold(w->srv->engine, &hold);
    const weir_rules_domain *dom = NULL;
    for (size_t d = 0; !dom && d < weir_rules_domain_count(rules); d++) {
        const weir_rules_domain *x = weir_rules_domain_at(rules, d);
        const char *name = weir_rules_domain_name(x);
        if (weir_rules_domain_tenant_key(x) &&
            (has_domain == 0 ||
             (strlen(name) == domain_len && memcmp(name, domain, domain_len) == 0)))
            dom = x;
    }
    if (!dom) {
        weir_engine_rules_unhold(hold);
        http_answer_problem(a, 404,
                            has_domain > 0 ? "no such domain with a tenants section"
                                           : "no domain of the rules has a tenants section");
        return;
    }
    const char *tkey = weir_rules_domain_tenant_key(dom);
    add_scope(&s, tkey, key, len, NULL, 0, NULL, 0);
    for (size_t t = 0; t < weir_rules_domain_tier_count(dom); t++) {
        const weir_rule *root = weir_rules_domain_tier(dom, t);
        for (size_t c = 0; c < weir_rule_child_count(root); c++) {
            const weir_rule *ch = weir_rule_child(root, c);
            const char *v = weir_rule_value(ch);
            if (v && !weir_rule_is_wildcard(ch))
                add_scope(&s, tkey, key, len, weir_rule_key(ch), strlen(weir_rule_key(ch)), v,
                          strlen(v));
        }
    }
    const quota_tenant *rec = admin_quota_record(q, a, key, len);
    for (size_t i = 0; rec && i < rec->n_overrides; i++) {
        const char *sc = rec->overrides[i].descriptor;
        const char *colon = strchr(sc, ':');
        if (colon)
            add_scope(&s, tkey, key, len, sc, (size_t)(colon - sc), colon + 1, strlen(colon + 1));
    }
    const char *dname = weir_rules_domain_name(dom);
    weir_request r = {dname, strlen(dname), s.d, s.n, 0, 0};
    usage_req u = {a};
    /* the call copies the request: the rules may go now */
    call *c = call_new(a->conn, &usage_ops, &r, sizeof(u), a->t0_ns);
    weir_engine_rules_unhold(hold);
    if (!c) {
        http_answer_problem(a, 503, "out of memory");
        return;
    }
    memcpy(c->data, &u, sizeof(u));
    if (call_decide(c, w, server_now_us(w->srv), w->srv->opt.decision_timeout_ms) != WEIR_OK) {
        call_free(c);
        http_answer_problem(a, 503, "the engine refused the request");
    }
}
