/*
 * stats.c - GET /admin/v1/stats's snapshot (stats.h).
 */
#include "stats.h"

#include <stdlib.h>
#include <string.h>

#include "adaptive_view.h"
#include "quota/service.h"
#include "weir/redis.h"

/* Cluster nodes listed at most (the store follows at most this many). */
#define MAX_NODES 512

static const char *const proto_names[PROTO_N] = {"http", "grpc", "resp"};

static void put_str(weir_buf *b, const char *s)
{
    weir_buf_putc(b, '"');
    weir_buf_put_json_str(b, s, strlen(s));
    weir_buf_putc(b, '"');
}

/* ,"name":N */
static void put_u64(weir_buf *b, const char *name, uint64_t v)
{
    weir_buf_printf(b, ",\"%s\":", name);
    weir_buf_put_u64(b, v);
}

/* A time of the service's clock in milliseconds, or null for 0 (never). */
static void put_ms(weir_buf *b, const char *name, int64_t us)
{
    if (us)
        weir_buf_printf(b, ",\"%s\":%lld", name, (long long)(us / 1000));
    else
        weir_buf_printf(b, ",\"%s\":null", name);
}

static int by_name(const void *a, const void *b)
{
    const metrics_rule_counts *x = a, *y = b;
    int c = strcmp(x->domain, y->domain);
    return c ? c : strcmp(x->rule, y->rule);
}

static int by_denied(const void *a, const void *b)
{
    const metrics_rule_counts *x = a, *y = b;
    if (x->denied != y->denied)
        return x->denied > y->denied ? -1 : 1;
    uint64_t tx = x->allowed + x->denied, ty = y->allowed + y->denied;
    if (tx != ty)
        return tx > ty ? -1 : 1;
    return by_name(a, b);
}

/* [{"domain":..., "<what>":..., "allowed":N, ...}, ...] */
static void put_rows(weir_buf *b, const metrics_rule_counts *rows, size_t n, const char *what)
{
    weir_buf_putc(b, '[');
    for (size_t i = 0; i < n; i++) {
        const metrics_rule_counts *r = &rows[i];
        weir_buf_puts(b, i ? ",{\"domain\":" : "{\"domain\":");
        put_str(b, r->domain);
        weir_buf_printf(b, ",\"%s\":", what);
        put_str(b, r->rule);
        put_u64(b, "allowed", r->allowed);
        put_u64(b, "denied", r->denied);
        put_u64(b, "shadow_would_deny", r->shadow_would_deny);
        put_u64(b, "failure_mode", r->failure_mode);
        weir_buf_putc(b, '}');
    }
    weir_buf_putc(b, ']');
}

static void put_decisions(weir_buf *b, metrics_snapshot *s)
{
    uint64_t t[4] = {0};
    for (size_t i = 0; i < s->n_rules; i++) {
        t[0] += s->rules[i].allowed;
        t[1] += s->rules[i].denied;
        t[2] += s->rules[i].shadow_would_deny;
        t[3] += s->rules[i].failure_mode;
    }
    weir_buf_puts(b, ",\"decisions\":{\"totals\":{\"allowed\":");
    weir_buf_put_u64(b, t[0]);
    put_u64(b, "denied", t[1]);
    put_u64(b, "shadow_would_deny", t[2]);
    put_u64(b, "failure_mode", t[3]);
    weir_buf_putc(b, '}');
    put_u64(b, "rows_total", s->n_rules);
    size_t n = s->n_rules;
    if (n > ADMIN_STATS_MAX_ROWS) {
        qsort(s->rules, n, sizeof(*s->rules), by_denied);
        n = ADMIN_STATS_MAX_ROWS;
        qsort(s->rules, n, sizeof(*s->rules), by_name);
    }
    weir_buf_puts(b, ",\"rows\":");
    put_rows(b, s->rules, n, "rule");
    weir_buf_putc(b, '}');
}

/* Tenants' descriptors by tier (a tier's name comes from the rules: at
 * most WEIR_RULES_MAX_TIERS a domain). */
static void put_tiers(weir_buf *b, const metrics_snapshot *s)
{
    weir_buf_puts(b, ",\"tiers\":");
    put_rows(b, s->tiers, s->n_tiers < ADMIN_STATS_MAX_ROWS ? s->n_tiers : ADMIN_STATS_MAX_ROWS,
             "tier");
}

static void put_latency(weir_buf *b, const metrics_snapshot *s)
{
    weir_buf_puts(b, ",\"latency\":{\"bounds_seconds\":[");
    for (size_t k = 0; k < METRICS_N_BUCKETS; k++)
        weir_buf_printf(b, "%s%g", k ? "," : "", (double)metrics_bucket_ns[k] / 1e9);
    weir_buf_puts(b, "],\"protocols\":{");
    for (int p = 0; p < PROTO_N; p++) {
        weir_buf_printf(b, "%s\"%s\":{\"buckets\":[", p ? "," : "", proto_names[p]);
        uint64_t cum = 0;
        for (size_t k = 0; k <= METRICS_N_BUCKETS; k++) {
            cum += s->latency[p][k];
            if (k)
                weir_buf_putc(b, ',');
            weir_buf_put_u64(b, cum);
        }
        weir_buf_puts(b, "]");
        put_u64(b, "count", s->latency_count[p]);
        weir_buf_printf(b, ",\"sum_seconds\":%.6f}", (double)s->latency_sum_ns[p] / 1e9);
    }
    weir_buf_puts(b, "}}");
}

static void put_redis(weir_buf *b, weir_store *store, const weir_redis_stats *r)
{
    weir_redis_cluster_stats c = {.size = sizeof(c)};
    weir_redis_sentinel_stats st = {.size = sizeof(st)};
    bool cluster = weir_redis_cluster_stats_get(store, &c) == WEIR_OK;
    bool sentinel = !cluster && weir_redis_sentinel_stats_get(store, &st) == WEIR_OK;
    weir_buf_printf(b, ",\"store\":{\"type\":\"%s\",\"breaker\":\"%s\"",
                    cluster    ? "redis_cluster"
                    : sentinel ? "redis_sentinel"
                               : "redis",
                    weir_redis_breaker_name(r->breaker));
    put_u64(b, "connections", r->connections);
    put_u64(b, "breaker_opened", r->breaker_opened);
    put_u64(b, "connect_errors", r->connect_errors);
    put_u64(b, "calls", r->calls);
    put_u64(b, "batches", r->batches);
    put_u64(b, "timeouts", r->timeouts);
    put_u64(b, "errors", r->errors);
    put_u64(b, "rejected", r->rejected);
    put_u64(b, "cached", r->cached);
    if (sentinel) {
        weir_buf_puts(b, ",\"master\":");
        if (st.master[0])
            put_str(b, st.master);
        else
            weir_buf_puts(b, "null");
        put_u64(b, "failovers", st.failovers);
    }
    if (cluster) {
        weir_redis_node *nodes = malloc(MAX_NODES * sizeof(*nodes));
        size_t n = nodes ? weir_redis_nodes_get(store, nodes, MAX_NODES) : 0;
        if (!nodes)
            b->failed = true;
        weir_buf_puts(b, ",\"nodes\":[");
        bool first = true;
        for (size_t i = 0; i < n && i < MAX_NODES; i++) {
            if (!nodes[i].in_map)
                continue;
            weir_buf_puts(b, first ? "{\"address\":" : ",{\"address\":");
            first = false;
            put_str(b, nodes[i].address);
            weir_buf_printf(b, ",\"breaker\":\"%s\"", weir_redis_breaker_name(nodes[i].breaker));
            put_u64(b, "breaker_opened", nodes[i].breaker_opened);
            weir_buf_putc(b, '}');
        }
        weir_buf_putc(b, ']');
        free(nodes);
    }
    weir_buf_putc(b, '}');
}

static void put_store(weir_buf *b, weir_store *store)
{
    weir_redis_stats r;
    if (weir_redis_stats_get(store, &r) == WEIR_OK) {
        put_redis(b, store, &r);
        return;
    }
    weir_store_stats m;
    if (weir_store_stats_get(store, &m) != WEIR_OK) {
        weir_buf_puts(b, ",\"store\":{\"type\":\"other\"}");
        return;
    }
    weir_buf_puts(b, ",\"store\":{\"type\":\"memory\"");
    put_u64(b, "keys", m.keys);
    put_u64(b, "bytes", m.bytes);
    put_u64(b, "max_bytes", m.max_bytes);
    put_u64(b, "evictions", m.evictions);
    put_u64(b, "expirations", m.expirations);
    weir_buf_putc(b, '}');
}

static void put_rules(weir_buf *b, const metrics_snapshot *s)
{
    weir_buf_puts(b, ",\"rules\":{\"reloads_ok\":");
    weir_buf_put_u64(b, s->reload_ok);
    put_u64(b, "reloads_failed", s->reload_failed);
    put_ms(b, "last_ok_ms", s->last_ok_us);
    put_ms(b, "last_failed_ms", s->last_failed_us);
    weir_buf_puts(b, ",\"last_error\":");
    if (s->last_failed_us)
        put_str(b, s->last_error);
    else
        weir_buf_puts(b, "null");
    weir_buf_putc(b, '}');
}

static void put_quotas(weir_buf *b, server *srv, int64_t now_us)
{
    if (!srv->quotas) {
        weir_buf_puts(b, ",\"quotas\":{\"configured\":false}");
        return;
    }
    quota_stats q;
    quota_service_stats(srv->quotas, &q);
    weir_buf_puts(b, ",\"quotas\":{\"configured\":true,\"db\":");
    put_str(b, q.kind ? q.kind : "unknown");
    weir_buf_printf(b, ",\"up\":%s", q.up ? "true" : "false");
    put_u64(b, "tenants", q.tenants);
    if (q.loaded_us)
        weir_buf_printf(b, ",\"age_seconds\":%.3f",
                        now_us > q.loaded_us ? (double)(now_us - q.loaded_us) / 1e6 : 0.0);
    else
        weir_buf_puts(b, ",\"age_seconds\":null");
    put_u64(b, "loads", q.loads);
    put_u64(b, "errors", q.errors);
    put_u64(b, "skipped", q.skipped);
    weir_buf_putc(b, '}');
}

static void put_connections(weir_buf *b, const metrics_snapshot *s)
{
    weir_buf_puts(b, ",\"connections\":{");
    for (int p = 0; p < PROTO_N; p++) {
        weir_buf_printf(b, "%s\"%s\":{\"open\":%lld", p ? "," : "", proto_names[p],
                        (long long)s->connections[p]);
        put_u64(b, "accepted", s->accepted[p]);
        put_u64(b, "rejected", s->rejected[p]);
        put_u64(b, "evicted", s->evicted[p]);
        weir_buf_putc(b, '}');
    }
    weir_buf_putc(b, '}');
}

/* As /healthz says it. */
static const char *status_of(server *srv)
{
    if (atomic_load(&srv->draining))
        return "draining";
    if (!server_healthy(srv))
        return "no_rules";
    weir_redis_stats r;
    if (weir_redis_stats_get(srv->store, &r) == WEIR_OK &&
        (r.breaker != WEIR_REDIS_CLOSED || r.connections == 0))
        return "degraded";
    return "ok";
}

bool admin_stats_render(server *srv, const char *const *routes, size_t n_routes, weir_buf *b)
{
    metrics_snapshot s;
    if (!metrics_snapshot_take(srv->metrics, srv->n_workers, &s))
        return false;
    int64_t now_us = server_now_us(srv);
    weir_buf_puts(b, "{\"version\":");
    put_str(b, weir_version());
    weir_buf_printf(b, ",\"time_ms\":%lld,\"status\":\"%s\"", (long long)(now_us / 1000),
                    status_of(srv));
    put_u64(b, "workers", srv->n_workers);
    weir_buf_puts(b, ",\"routes\":[");
    for (size_t i = 0; i < n_routes; i++) {
        if (i)
            weir_buf_putc(b, ',');
        put_str(b, routes[i]);
    }
    weir_buf_putc(b, ']');
    put_decisions(b, &s);
    put_latency(b, &s);
    put_store(b, srv->store);
    put_rules(b, &s);
    put_quotas(b, srv, now_us);
    put_tiers(b, &s);
    put_connections(b, &s);
    adaptive_view_json(srv->engine, b);
    weir_buf_putc(b, '}');
    metrics_snapshot_free(&s);
    return weir_buf_ok(b);
}
