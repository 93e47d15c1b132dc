/*
 * top.c - GET /admin/v1/top (top.h): every worker's sketches of the
 * domain's denials merged into one, on the admin worker, and its largest
 * counts as JSON. Never a metric: the keys are the requests' own values,
 * and a Prometheus label per key would grow without bound.
 */
#include "top.h"

#include <stdlib.h>
#include <string.h>

#include "quota/rfc3339.h"
#include "quotas.h"
#include "top_keys.h"
#include "worker.h"

static const char *const top_params[] = {"domain", "n"};

typedef struct entries_arg {
    weir_buf *b;
    bool first;
} entries_arg;

static void put_entry(void *arg, const char *key, size_t key_len, const char *value,
                      size_t value_len)
{
    entries_arg *e = arg;
    weir_buf_puts(e->b, e->first ? "{\"key\":\"" : ",{\"key\":\"");
    e->first = false;
    weir_buf_put_json_str(e->b, key, key_len);
    weir_buf_puts(e->b, "\",\"value\":\"");
    weir_buf_put_json_str(e->b, value, value_len);
    weir_buf_puts(e->b, "\"}");
}

void admin_render_top(weir_buf *b, const char *domain, size_t len, int64_t since_us, int64_t now_us,
                      const weir_topk *merged, const weir_topk_entry *top, size_t n_top,
                      size_t bytes)
{
    weir_topk_stats st;
    weir_topk_stats_get(merged, &st);
    char since[QUOTA_TIME_TEXT_MAX];
    quota_time_format(since_us, since);
    weir_buf_puts(b, "{\"domain\":\"");
    weir_buf_put_json_str(b, domain, len);
    weir_buf_printf(b, "\",\"window_seconds\":%lld,\"since\":\"%s\",\"denied\":",
                    (long long)((now_us - since_us) / 1000000), since);
    weir_buf_put_u64(b, st.total);
    weir_buf_puts(b, ",\"keys\":[");
    for (size_t i = 0; i < n_top; i++) {
        const weir_topk_entry *t = &top[i];
        weir_buf_puts(b, i ? ",{\"entries\":[" : "{\"entries\":[");
        entries_arg arg = {b, true};
        size_t n = t->hashed ? t->key_len - WEIR_TOPK_DIGEST_BYTES : t->key_len;
        bool whole = top_keys_decode(t->key, n, put_entry, &arg);
        weir_buf_puts(b, whole && !t->hashed ? "]" : "],\"truncated\":true");
        weir_buf_puts(b, ",\"denied\":");
        weir_buf_put_u64(b, t->count);
        weir_buf_puts(b, ",\"error\":");
        weir_buf_put_u64(b, t->error);
        weir_buf_putc(b, '}');
    }
    weir_buf_printf(b, "],\"sketch\":{\"counters\":%u,\"bytes\":%zu,\"error_bound\":", st.capacity,
                    bytes);
    weir_buf_put_u64(b, st.floor);
    weir_buf_puts(b, "}}");
}

static bool domain_in_rules(server *srv, const char *domain, size_t len)
{
    weir_rules_hold *hold;
    const weir_rules *rules = weir_engine_rules_hold(srv->engine, &hold);
    bool known = false;
    for (size_t d = 0; !known && d < weir_rules_domain_count(rules); d++) {
        const char *name = weir_rules_domain_name(weir_rules_domain_at(rules, d));
        known = strlen(name) == len && memcmp(name, domain, len) == 0;
    }
    weir_engine_rules_unhold(hold);
    return known;
}

void admin_top_get(struct admin_quotas *q, http_answer *a, const weir_http1_request *req,
                   const char *who)
{
    (void)q;
    (void)who;
    worker *w = a->conn->w;
    server *srv = w->srv;
    char domain[WEIR_RULES_MAX_STRING_BYTES + 1];
    size_t len = 0, n;
    if (!admin_params_known(a, &req->query, top_params, 2) ||
        !(n = admin_query_count(a, &req->query, "n", ADMIN_TOP_DEFAULT, ADMIN_TOP_MAX)))
        return;
    int got = admin_query_param(&req->query, "domain", domain, sizeof(domain), &len);
    if (got <= 0 || len == 0) {
        http_answer_problem(a, 400, got < 0 ? "bad domain" : "domain is required (?domain=D&n=10)");
        return;
    }
    if (!domain_in_rules(srv, domain, len)) {
        http_answer_problem(a, 404, "no such domain in the rules in force");
        return;
    }
    if (!srv->opt.top_keys) {
        http_answer_problem(a, 404, "weir keeps no top keys (--top-keys 0)");
        return;
    }
    weir_topk *merged = metrics_top_new(srv->metrics);
    weir_topk_entry *top = calloc(n, sizeof(*top));
    if (!merged || !top) {
        weir_topk_free(merged);
        free(top);
        http_answer_problem(a, 500, "out of memory");
        return;
    }
    int64_t now_us = server_now_us(srv);
    size_t bytes = metrics_top(srv->metrics, domain, len, now_us, merged);
    size_t n_top = weir_topk_top(merged, top, n);
    int64_t since_us = (now_us / TOP_KEYS_MINUTE_US - 1) * TOP_KEYS_MINUTE_US;
    weir_buf_clear(&w->body);
    admin_render_top(&w->body, domain, len, since_us, now_us, merged, top, n_top, bytes);
    free(top);
    weir_topk_free(merged);
    if (!weir_buf_ok(&w->body)) {
        http_answer_problem(a, 500, "out of memory");
        return;
    }
    http_answer_respond(a, 200, "application/json", NULL, w->body.p, w->body.len);
}
