/*
 * metrics.c - per-worker counter shards, weir's own series and the
 * Prometheus exposition (upstream's series: metrics_upstream.c), and each
 * shard's record of the keys its worker denied most (top_keys.c), fed and
 * merged here under the same lock but never exposed as a series.
 *
 * A shard is written by its worker and read by a scrape, both under the
 * shard's mutex, which is uncontended except during a scrape. Per-rule
 * counters live in a small open-addressing table keyed by (domain, rule);
 * entries are never removed, and their number is capped so a stream of
 * reloads with ever-new rule names cannot grow it without bound.
 */
#include "metrics_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

/* Distinct (domain, rule) pairs kept per shard; later ones are counted
 * under rule="_overflow". */
#define MAX_RULE_SERIES 65536u

static const char *const result_names[RES_N] = {"allowed", "denied", "shadow_would_deny",
                                                "failure_mode"};
static const char *const fm_names[FM_N] = {"allow", "deny", "local"};

static const char *const proto_names[PROTO_N] = {"http", "grpc", "resp"};

/* Latency buckets, in nanoseconds, and as Prometheus writes them. */
const int64_t metrics_bucket_ns[METRICS_N_BUCKETS] = {
    50000, 100000, 250000, 500000, 1000000, 2500000, 5000000, 10000000, 25000000, 100000000};
static const char *const bucket_text[METRICS_N_BUCKETS] = {
    "5e-05", "0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025", "0.1"};
#define N_BUCKETS METRICS_N_BUCKETS

/* HTTP status codes counted by code; any other is counted as "other". */
static const int codes[METRICS_N_CODES] = {200, 400, 404, 405, 408, 413, 414,
                                           429, 431, 500, 501, 503, 505};
#define N_CODES METRICS_N_CODES

metrics *metrics_new(unsigned n_shards, const char *const *routes, size_t n_routes)
{
    metrics *m = calloc(1, sizeof(*m));
    if (!m)
        return NULL;
    m->shards = calloc(n_shards, sizeof(*m->shards));
    if (!m->shards) {
        free(m);
        return NULL;
    }
    m->n_shards = n_shards;
    m->routes = routes;
    m->n_routes = n_routes;
    pthread_mutex_init(&m->reload_lock, NULL);
    for (unsigned i = 0; i < n_shards; i++) {
        metrics_shard *s = &m->shards[i];
        pthread_mutex_init(&s->lock, NULL);
        s->near_ppm = METRICS_NEAR_PPM_DEFAULT;
        s->http = calloc(n_routes * (N_CODES + 1), sizeof(*s->http));
        if (!s->http) {
            metrics_free(m);
            return NULL;
        }
    }
    return m;
}

static void table_free(series_table *t)
{
    for (size_t j = 0; j < t->cap; j++)
        if (t->slots[j]) {
            free(t->slots[j]->key);
            free(t->slots[j]);
        }
    free(t->slots);
}

void metrics_free(metrics *m)
{
    if (!m)
        return;
    for (unsigned i = 0; i < m->n_shards; i++) {
        metrics_shard *s = &m->shards[i];
        table_free(&s->rules);
        table_free(&s->tiers);
        table_free(&s->stats);
        top_keys_free(s->top);
        free(s->http);
        pthread_mutex_destroy(&s->lock);
    }
    pthread_mutex_destroy(&m->reload_lock);
    free(m->shards);
    weir_ctx_free(m->top_ctx);
    free(m);
}

metrics_shard *metrics_shard_at(metrics *m, unsigned i)
{
    return &m->shards[i % m->n_shards];
}

void metrics_set_near_ratio(metrics *m, uint32_t ppm)
{
    for (unsigned i = 0; i < m->n_shards; i++)
        m->shards[i].near_ppm = ppm;
}

bool metrics_set_top_keys(metrics *m, uint32_t counters)
{
    if (!counters)
        return true;
    if (weir_ctx_new(NULL, &m->top_ctx) != WEIR_OK)
        return false;
    m->top_counters = counters;
    for (unsigned i = 0; i < m->n_shards; i++)
        if (!(m->shards[i].top = top_keys_new(m->top_ctx, counters)))
            return false;
    return true;
}

weir_topk *metrics_top_new(metrics *m)
{
    weir_topk_options o = {sizeof(o), m->top_counters, 0};
    weir_topk *t = NULL;
    return m->top_ctx && weir_topk_new(m->top_ctx, &o, &t) == WEIR_OK ? t : NULL;
}

size_t metrics_top(metrics *m, const char *domain, size_t len, int64_t now_us, weir_topk *into)
{
    size_t bytes = 0;
    for (unsigned i = 0; i < m->n_shards; i++) {
        metrics_shard *s = &m->shards[i];
        pthread_mutex_lock(&s->lock);
        if (s->top)
            top_keys_merge(s->top, domain, len, now_us, into, &bytes);
        pthread_mutex_unlock(&s->lock);
    }
    return bytes;
}

static bool grow(series_table *t)
{
    size_t cap = t->cap ? t->cap * 2 : 64;
    series_head **slots = calloc(cap, sizeof(*slots));
    if (!slots)
        return false;
    for (size_t i = 0; i < t->cap; i++) {
        if (!t->slots[i])
            continue;
        size_t j = (size_t)t->slots[i]->hash & (cap - 1);
        while (slots[j])
            j = (j + 1) & (cap - 1);
        slots[j] = t->slots[i];
    }
    free(t->slots);
    t->slots = slots;
    t->cap = cap;
    return true;
}

void *metrics_table_get(series_table *t, const char *key, size_t len, size_t size, size_t cap,
                        bool *made)
{
    uint64_t h = XXH3_64bits(key, len);
    *made = false;
    if (t->cap) {
        for (size_t j = (size_t)h & (t->cap - 1);; j = (j + 1) & (t->cap - 1)) {
            series_head *e = t->slots[j];
            if (!e)
                break;
            if (e->hash == h && e->len == len && memcmp(e->key, key, len) == 0)
                return e;
        }
    }
    if (t->used >= cap || ((t->used + 1) * 4 > t->cap * 3 && !grow(t)))
        return NULL;
    series_head *e = calloc(1, size);
    char *copy = malloc(len ? len : 1);
    if (!e || !copy) {
        free(e);
        free(copy);
        return NULL;
    }
    memcpy(copy, key, len);
    e->hash = h;
    e->key = copy;
    e->len = len;
    size_t j = (size_t)h & (t->cap - 1);
    while (t->slots[j])
        j = (j + 1) & (t->cap - 1);
    t->slots[j] = e;
    t->used++;
    *made = true;
    return e;
}

/* The series of (domain, name) in @t (the rules or the tiers), or past
 * the cap (domain, "_overflow"); NULL when out of memory. Under the
 * lock. */
static rule_series *rule_series_of(series_table *t, const char *domain, const char *rule)
{
    char key[2 * WEIR_RULES_MAX_STRING_BYTES + 16];
    size_t dn = strlen(domain), rn = strlen(rule);
    if (dn + 11 > sizeof(key))
        return NULL;
    bool made;
    rule_series *e = NULL;
    if (dn + rn + 2 <= sizeof(key)) {
        memcpy(key, domain, dn + 1);
        memcpy(key + dn + 1, rule, rn + 1);
        e = metrics_table_get(t, key, dn + rn + 2, sizeof(*e), MAX_RULE_SERIES, &made);
    }
    if (!e) {
        memcpy(key, domain, dn + 1);
        memcpy(key + dn + 1, "_overflow", 10);
        e = metrics_table_get(t, key, dn + 11, sizeof(*e), SIZE_MAX, &made);
    }
    return e;
}

/* Counts one limit's outcome under weir's (domain, rule) series. */
static void count_rule(metrics_shard *s, const weir_limit_outcome *o)
{
    const weir_rule_limit *l = o->limit;
    if (!l || !l->domain || !l->path)
        return;
    rule_series *e = rule_series_of(&s->rules, l->domain, l->name ? l->name : l->path);
    if (!e)
        return;
    int res = o->failure_mode          ? RES_FAILURE
              : o->shadow && o->denied ? RES_SHADOW
              : o->denied              ? RES_DENIED
                                       : RES_ALLOWED;
    e->results[res]++;
    if (o->failure_mode)
        e->failure[o->local                               ? FM_LOCAL
                   : l->failure_mode == WEIR_FAILURE_DENY ? FM_DENY
                                                          : FM_ALLOW]++;
}

/* The outcome a descriptor reported: upstream's counters follow it. */
static const weir_limit_outcome *reported(const weir_descriptor_status *st)
{
    for (size_t k = 0; k < st->n_outcomes; k++)
        if (st->outcomes[k].limit == st->limit)
            return &st->outcomes[k];
    return st->n_outcomes ? &st->outcomes[0] : NULL;
}

/* Counts a tenant's descriptor once under its tier's series (a tier's
 * name comes from the rules, so their number is bounded). */
static void count_tier(metrics_shard *s, const weir_descriptor_status *st)
{
    const weir_limit_outcome *o = st->n_outcomes ? &st->outcomes[0] : NULL;
    if (!o || !o->tier || !o->limit || !o->limit->domain)
        return;
    rule_series *e = rule_series_of(&s->tiers, o->limit->domain, o->tier);
    if (e)
        e->results[st->failure_mode                   ? RES_FAILURE
                   : st->code == WEIR_CODE_OVER_LIMIT ? RES_DENIED
                   : st->would_deny                   ? RES_SHADOW
                                                      : RES_ALLOWED]++;
}

void metrics_decision(metrics_shard *s, const weir_request *req,
                      const weir_descriptor_status *statuses, size_t n, int64_t now_us)
{
    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < n; i++) {
        const weir_descriptor_status *st = &statuses[i];
        for (size_t k = 0; k < st->n_outcomes; k++)
            count_rule(s, &st->outcomes[k]);
        count_tier(s, st);
        /* a denial by a limit, not by a store's failure: a key to rank */
        if (st->code == WEIR_CODE_OVER_LIMIT && !st->failure_mode && s->top &&
            i < req->n_descriptors)
            top_keys_denied(s->top, req->domain, req->domain_len, &req->descriptors[i], now_us);
        const weir_limit_outcome *o = reported(st);
        if (!o || !o->limit || !o->limit->domain || i >= req->n_descriptors)
            continue;
        metrics_count_upstream(s, req, i, o);
    }
    pthread_mutex_unlock(&s->lock);
}

static size_t code_index(int status)
{
    for (size_t i = 0; i < N_CODES; i++)
        if (codes[i] == status)
            return i;
    return N_CODES;
}

void metrics_request(metrics_shard *s, metrics_proto proto, int64_t ns, size_t route, int status)
{
    size_t b = 0;
    while (b < N_BUCKETS && ns > metrics_bucket_ns[b])
        b++;
    pthread_mutex_lock(&s->lock);
    s->latency[proto][b]++;
    s->latency_count[proto]++;
    s->latency_sum_ns[proto] += ns > 0 ? (uint64_t)ns : 0;
    if (proto == PROTO_HTTP && status)
        s->http[route * (N_CODES + 1) + code_index(status)]++;
    pthread_mutex_unlock(&s->lock);
}

void metrics_connection(metrics_shard *s, metrics_proto proto, int delta)
{
    atomic_fetch_add_explicit(&s->connections[proto], delta, memory_order_relaxed);
    if (delta > 0)
        atomic_fetch_add_explicit(&s->accepted[proto], 1, memory_order_relaxed);
}

void metrics_connection_rejected(metrics_shard *s, metrics_proto proto)
{
    atomic_fetch_add_explicit(&s->rejected[proto], 1, memory_order_relaxed);
}

void metrics_connection_evicted(metrics_shard *s, metrics_proto proto)
{
    atomic_fetch_add_explicit(&s->evicted[proto], 1, memory_order_relaxed);
}

void metrics_shed(metrics_shard *s, metrics_proto proto, unsigned prio, metrics_shed_cause cause)
{
    if (prio < SHED_MAX_PRIORITIES && (unsigned)cause < SHED_CAUSE_N)
        atomic_fetch_add_explicit(&s->shed[proto][cause][prio], 1, memory_order_relaxed);
}

void metrics_set_shed(metrics *m, const shed_config *c)
{
    m->shed = c;
}

static void render_shed(metrics *m, weir_buf *b)
{
    if (!m->shed)
        return;
    static const char *const causes[SHED_CAUSE_N] = {"overload", "share"};
    metrics_header(b, "weir_shed_total", "counter",
                   "Requests weir answered overloaded, by protocol, cause and priority: weir "
                   "shedding its own load (overload, --shed-lag), or a limit keeping its share "
                   "for more important priorities (share, a rule's shed:).");
    for (int p = 0; p < PROTO_N; p++)
        for (int c = 0; c < SHED_CAUSE_N; c++)
            for (unsigned i = 0; i < m->shed->n; i++) {
                uint64_t v = 0;
                for (unsigned k = 0; k < m->n_shards; k++)
                    v += atomic_load_explicit(&m->shards[k].shed[p][c][i], memory_order_relaxed);
                weir_buf_printf(b, "weir_shed_total{protocol=\"%s\",cause=\"%s\",priority=\"",
                                proto_names[p], causes[c]);
                metrics_put_label(b, m->shed->names[i]);
                weir_buf_puts(b, "\"} ");
                weir_buf_put_u64(b, v);
                weir_buf_putc(b, '\n');
            }
}

void metrics_refused(metrics_shard *s, metrics_proto proto, weir_refusal_code why)
{
    if ((unsigned)why < METRICS_REFUSALS)
        atomic_fetch_add_explicit(&s->refused[proto][why], 1, memory_order_relaxed);
}

void metrics_reload(metrics *m, bool ok, int64_t now_us, const char *error)
{
    atomic_fetch_add_explicit(ok ? &m->reload_ok : &m->reload_failed, 1, memory_order_relaxed);
    pthread_mutex_lock(&m->reload_lock);
    if (ok) {
        m->last_ok_us = now_us;
    } else {
        m->last_failed_us = now_us;
        snprintf(m->last_error, sizeof(m->last_error), "%s",
                 error && *error ? error : "the rules were refused (see the log)");
    }
    pthread_mutex_unlock(&m->reload_lock);
}

/* ------------------------------------------------------------ rendering */

void metrics_put_label(weir_buf *b, const char *v)
{
    for (const char *p = v; *p; p++) {
        if (*p == '\\' || *p == '"')
            weir_buf_putc(b, '\\'), weir_buf_putc(b, *p);
        else if (*p == '\n')
            weir_buf_puts(b, "\\n");
        else
            weir_buf_putc(b, *p);
    }
}

void metrics_header(weir_buf *b, const char *name, const char *type, const char *help)
{
    weir_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* One merged row of the per-rule table. */
typedef struct merged {
    const char *domain, *rule;
    uint64_t results[RES_N];
    uint64_t failure[FM_N];
} merged;

static int cmp_merged(const void *a, const void *b)
{
    const merged *x = a, *y = b;
    int c = strcmp(x->domain, y->domain);
    return c ? c : strcmp(x->rule, y->rule);
}

typedef enum { TABLE_RULES, TABLE_TIERS } table_id;

static series_table *table_of(metrics_shard *s, table_id id)
{
    return id == TABLE_TIERS ? &s->tiers : &s->rules;
}

/* Collects every shard's rows of one table, sorted and summed; *n rows.
 * The strings stay owned by the shards (entries are never removed). */
static merged *collect(metrics *m, unsigned n_shards, table_id table, size_t *n)
{
    size_t total = 0;
    for (unsigned i = 0; i < n_shards; i++) {
        pthread_mutex_lock(&m->shards[i].lock);
        total += table_of(&m->shards[i], table)->used;
        pthread_mutex_unlock(&m->shards[i].lock);
    }
    size_t room = total + n_shards * 64 + 1, k = 0;
    merged *rows = calloc(room, sizeof(*rows));
    if (!rows)
        return NULL;
    for (unsigned i = 0; i < n_shards; i++) {
        metrics_shard *s = &m->shards[i];
        const series_table *t = table_of(s, table);
        pthread_mutex_lock(&s->lock);
        for (size_t j = 0; j < t->cap && k < room; j++) {
            const rule_series *e = (const rule_series *)t->slots[j];
            if (!e)
                continue;
            rows[k].domain = e->h.key;
            rows[k].rule = e->h.key + strlen(e->h.key) + 1;
            memcpy(rows[k].results, e->results, sizeof(e->results));
            memcpy(rows[k].failure, e->failure, sizeof(e->failure));
            k++;
        }
        pthread_mutex_unlock(&s->lock);
    }
    qsort(rows, k, sizeof(*rows), cmp_merged);
    size_t out = 0;
    for (size_t i = 0; i < k; i++) {
        if (out && cmp_merged(&rows[out - 1], &rows[i]) == 0) {
            for (int r = 0; r < RES_N; r++)
                rows[out - 1].results[r] += rows[i].results[r];
            for (int f = 0; f < FM_N; f++)
                rows[out - 1].failure[f] += rows[i].failure[f];
        } else {
            rows[out++] = rows[i];
        }
    }
    *n = out;
    return rows;
}

static void render_rules(metrics *m, weir_buf *b)
{
    size_t n = 0;
    merged *rows = collect(m, m->n_shards, TABLE_RULES, &n);
    if (!rows) {
        b->failed = true;
        return;
    }
    metrics_header(b, "weir_decisions_total", "counter",
                   "Descriptor decisions by domain, rule (name, else path) and result.");
    for (size_t i = 0; i < n; i++)
        for (int r = 0; r < RES_N; r++) {
            weir_buf_puts(b, "weir_decisions_total{domain=\"");
            metrics_put_label(b, rows[i].domain);
            weir_buf_puts(b, "\",rule=\"");
            metrics_put_label(b, rows[i].rule);
            weir_buf_printf(b, "\",result=\"%s\"} ", result_names[r]);
            weir_buf_put_u64(b, rows[i].results[r]);
            weir_buf_putc(b, '\n');
        }
    metrics_header(b, "weir_failure_mode_total", "counter",
                   "Descriptor decisions made by a failure mode while the store failed, by mode.");
    for (size_t i = 0; i < n; i++)
        for (int f = 0; f < FM_N; f++) {
            weir_buf_puts(b, "weir_failure_mode_total{domain=\"");
            metrics_put_label(b, rows[i].domain);
            weir_buf_puts(b, "\",rule=\"");
            metrics_put_label(b, rows[i].rule);
            weir_buf_printf(b, "\",mode=\"%s\"} ", fm_names[f]);
            weir_buf_put_u64(b, rows[i].failure[f]);
            weir_buf_putc(b, '\n');
        }
    metrics_header(b, "weir_failopen_total", "counter",
                   "Descriptor decisions allowed because the store failed (failure_mode allow).");
    for (size_t i = 0; i < n; i++) {
        weir_buf_puts(b, "weir_failopen_total{domain=\"");
        metrics_put_label(b, rows[i].domain);
        weir_buf_puts(b, "\",rule=\"");
        metrics_put_label(b, rows[i].rule);
        weir_buf_puts(b, "\"} ");
        weir_buf_put_u64(b, rows[i].failure[FM_ALLOW]);
        weir_buf_putc(b, '\n');
    }
    free(rows);
    metrics_render_upstream(m, b);
}

/* Tenants' descriptors by tier: series only for tiers that decided. */
static void render_tiers(metrics *m, weir_buf *b)
{
    size_t n = 0;
    merged *rows = collect(m, m->n_shards, TABLE_TIERS, &n);
    if (!rows) {
        b->failed = true;
        return;
    }
    metrics_header(b, "weir_tier_decisions_total", "counter",
                   "Decisions of descriptors carrying a tenant's key, by domain, the tenant's "
                   "tier and result.");
    for (size_t i = 0; i < n; i++)
        for (int r = 0; r < RES_N; r++) {
            weir_buf_puts(b, "weir_tier_decisions_total{domain=\"");
            metrics_put_label(b, rows[i].domain);
            weir_buf_puts(b, "\",tier=\"");
            metrics_put_label(b, rows[i].rule);
            weir_buf_printf(b, "\",result=\"%s\"} ", result_names[r]);
            weir_buf_put_u64(b, rows[i].results[r]);
            weir_buf_putc(b, '\n');
        }
    free(rows);
}

static void render_latency(metrics *m, weir_buf *b)
{
    metrics_header(b, "weir_request_duration_seconds", "histogram",
                   "Time from a whole request to its answer, by protocol.");
    for (int p = 0; p < PROTO_N; p++) {
        uint64_t buckets[N_BUCKETS + 1] = {0}, count = 0, sum_ns = 0;
        for (unsigned i = 0; i < m->n_shards; i++) {
            metrics_shard *s = &m->shards[i];
            pthread_mutex_lock(&s->lock);
            for (size_t k = 0; k <= N_BUCKETS; k++)
                buckets[k] += s->latency[p][k];
            count += s->latency_count[p];
            sum_ns += s->latency_sum_ns[p];
            pthread_mutex_unlock(&s->lock);
        }
        uint64_t cum = 0;
        for (size_t k = 0; k < N_BUCKETS; k++) {
            cum += buckets[k];
            weir_buf_printf(b, "weir_request_duration_seconds_bucket{protocol=\"%s\",le=\"%s\"} ",
                            proto_names[p], bucket_text[k]);
            weir_buf_put_u64(b, cum);
            weir_buf_putc(b, '\n');
        }
        weir_buf_printf(b,
                        "weir_request_duration_seconds_bucket{protocol=\"%s\",le=\"+Inf\"} %llu\n"
                        "weir_request_duration_seconds_sum{protocol=\"%s\"} %llu.%09llu\n"
                        "weir_request_duration_seconds_count{protocol=\"%s\"} %llu\n",
                        proto_names[p], (unsigned long long)count, proto_names[p],
                        (unsigned long long)(sum_ns / 1000000000u),
                        (unsigned long long)(sum_ns % 1000000000u), proto_names[p],
                        (unsigned long long)count);
    }
}

static void render_http(metrics *m, weir_buf *b)
{
    metrics_header(b, "weir_http_requests_total", "counter",
                   "HTTP requests by route and status code.");
    for (size_t r = 0; r < m->n_routes; r++)
        for (size_t c = 0; c <= N_CODES; c++) {
            uint64_t v = 0;
            for (unsigned i = 0; i < m->n_shards; i++) {
                metrics_shard *s = &m->shards[i];
                pthread_mutex_lock(&s->lock);
                v += s->http[r * (N_CODES + 1) + c];
                pthread_mutex_unlock(&s->lock);
            }
            if (!v)
                continue;
            weir_buf_puts(b, "weir_http_requests_total{route=\"");
            metrics_put_label(b, m->routes[r]);
            if (c < N_CODES)
                weir_buf_printf(b, "\",code=\"%d\"} ", codes[c]);
            else
                weir_buf_puts(b, "\",code=\"other\"} ");
            weir_buf_put_u64(b, v);
            weir_buf_putc(b, '\n');
        }
}

static void render_connections(metrics *m, weir_buf *b)
{
    int64_t open[PROTO_N] = {0};
    uint64_t acc[PROTO_N] = {0}, rej[PROTO_N] = {0}, ev[PROTO_N] = {0};
    for (unsigned i = 0; i < m->n_shards; i++)
        for (int p = 0; p < PROTO_N; p++) {
            open[p] += atomic_load_explicit(&m->shards[i].connections[p], memory_order_relaxed);
            acc[p] += atomic_load_explicit(&m->shards[i].accepted[p], memory_order_relaxed);
            rej[p] += atomic_load_explicit(&m->shards[i].rejected[p], memory_order_relaxed);
            ev[p] += atomic_load_explicit(&m->shards[i].evicted[p], memory_order_relaxed);
        }
    metrics_header(b, "weir_connections", "gauge", "Open client connections by protocol.");
    for (int p = 0; p < PROTO_N; p++)
        weir_buf_printf(b, "weir_connections{protocol=\"%s\"} %lld\n", proto_names[p],
                        (long long)open[p]);
    metrics_header(b, "weir_connections_accepted_total", "counter",
                   "Accepted connections by protocol.");
    for (int p = 0; p < PROTO_N; p++)
        weir_buf_printf(b, "weir_connections_accepted_total{protocol=\"%s\"} %llu\n",
                        proto_names[p], (unsigned long long)acc[p]);
    metrics_header(b, "weir_connections_rejected_total", "counter",
                   "Connections closed at once because --max-connections were open.");
    for (int p = 0; p < PROTO_N; p++)
        weir_buf_printf(b, "weir_connections_rejected_total{protocol=\"%s\"} %llu\n",
                        proto_names[p], (unsigned long long)rej[p]);
    metrics_header(b, "weir_connections_evicted_total", "counter",
                   "Idle connections closed to admit a new one at --max-connections.");
    for (int p = 0; p < PROTO_N; p++)
        weir_buf_printf(b, "weir_connections_evicted_total{protocol=\"%s\"} %llu\n", proto_names[p],
                        (unsigned long long)ev[p]);
}

/* Refusals by reason, named after weir_refusal_code in lower case. */
static void render_refusals(metrics *m, weir_buf *b)
{
    static const char *const names[METRICS_REFUSALS] = {
#define REFUSAL_NAME(name, num, text) [num] = #name,
        WEIR_REFUSAL_MAP(REFUSAL_NAME)
#undef REFUSAL_NAME
    };
    metrics_header(b, "weir_requests_refused_total", "counter",
                   "Requests the engine refused (HTTP 400/403, gRPC INVALID_ARGUMENT/"
                   "PERMISSION_DENIED), by protocol and reason.");
    for (int p = 0; p < PROTO_N; p++)
        for (unsigned r = 1; r < METRICS_REFUSALS; r++) {
            uint64_t v = 0;
            for (unsigned i = 0; i < m->n_shards; i++)
                v += atomic_load_explicit(&m->shards[i].refused[p][r], memory_order_relaxed);
            if (!v || !names[r])
                continue;
            weir_buf_printf(b, "weir_requests_refused_total{protocol=\"%s\",reason=\"",
                            proto_names[p]);
            for (const char *c = names[r]; *c; c++)
                weir_buf_putc(b, (char)(*c >= 'A' && *c <= 'Z' ? *c - 'A' + 'a' : *c));
            weir_buf_printf(b, "\"} %llu\n", (unsigned long long)v);
        }
}

void metrics_render(metrics *m, weir_store *store, weir_buf *b)
{
    weir_buf_printf(b,
                    "# HELP weir_build_info The running version.\n"
                    "# TYPE weir_build_info gauge\nweir_build_info{version=\"%s\"} 1\n",
                    weir_version());
    render_rules(m, b);
    render_tiers(m, b);
    render_shed(m, b);
    render_latency(m, b);
    render_http(m, b);
    render_connections(m, b);
    render_refusals(m, b);
    uint64_t ok = atomic_load_explicit(&m->reload_ok, memory_order_relaxed);
    uint64_t failed = atomic_load_explicit(&m->reload_failed, memory_order_relaxed);
    metrics_header(b, "weir_rules_reloads_total", "counter", "Rule loads by result.");
    weir_buf_printf(b,
                    "weir_rules_reloads_total{result=\"ok\"} %llu\n"
                    "weir_rules_reloads_total{result=\"failed\"} %llu\n",
                    (unsigned long long)ok, (unsigned long long)failed);
    metrics_header(b, "ratelimit_service_config_load_success", "counter",
                   "envoyproxy/ratelimit-compatible: successful rule loads.");
    weir_buf_printf(b, "ratelimit_service_config_load_success %llu\n", (unsigned long long)ok);
    metrics_header(b, "ratelimit_service_config_load_error", "counter",
                   "envoyproxy/ratelimit-compatible: failed rule loads.");
    weir_buf_printf(b, "ratelimit_service_config_load_error %llu\n", (unsigned long long)failed);
    weir_store_stats st;
    if (weir_store_stats_get(store, &st) == WEIR_OK) {
        metrics_header(b, "weir_store_keys", "gauge", "Keys held by the store.");
        weir_buf_printf(b, "weir_store_keys %llu\n", (unsigned long long)st.keys);
        metrics_header(b, "weir_store_bytes", "gauge", "Bytes held by the store.");
        weir_buf_printf(b, "weir_store_bytes %llu\n", (unsigned long long)st.bytes);
        metrics_header(b, "weir_store_max_bytes", "gauge", "The store's memory cap (0: none).");
        weir_buf_printf(b, "weir_store_max_bytes %llu\n", (unsigned long long)st.max_bytes);
        metrics_header(b, "weir_store_evictions_total", "counter",
                       "Active keys removed under the memory cap.");
        weir_buf_printf(b, "weir_store_evictions_total %llu\n", (unsigned long long)st.evictions);
        metrics_header(b, "weir_store_expirations_total", "counter", "Keys removed back at rest.");
        weir_buf_printf(b, "weir_store_expirations_total %llu\n",
                        (unsigned long long)st.expirations);
    }
    metrics_render_redis(store, b);
}

/* ------------------------------------------------------------ snapshots */

/* The rows of a table summed over @n_shards, as counts; *n of them. */
static metrics_rule_counts *snapshot_rows(metrics *m, unsigned n_shards, table_id table, size_t *n)
{
    merged *rows = collect(m, n_shards, table, n);
    if (!rows)
        return NULL;
    metrics_rule_counts *out = calloc(*n ? *n : 1, sizeof(*out));
    for (size_t i = 0; out && i < *n; i++) {
        metrics_rule_counts *r = &out[i];
        r->domain = rows[i].domain;
        r->rule = rows[i].rule;
        r->allowed = rows[i].results[RES_ALLOWED];
        r->denied = rows[i].results[RES_DENIED];
        r->shadow_would_deny = rows[i].results[RES_SHADOW];
        r->failure_mode = rows[i].results[RES_FAILURE];
    }
    free(rows);
    return out;
}

bool metrics_snapshot_take(metrics *m, unsigned n_shards, metrics_snapshot *out)
{
    memset(out, 0, sizeof(*out));
    if (n_shards > m->n_shards || n_shards == 0)
        n_shards = m->n_shards;
    out->rules = snapshot_rows(m, n_shards, TABLE_RULES, &out->n_rules);
    out->tiers = snapshot_rows(m, n_shards, TABLE_TIERS, &out->n_tiers);
    if (!out->rules || !out->tiers) {
        metrics_snapshot_free(out);
        return false;
    }
    for (unsigned i = 0; i < n_shards; i++) {
        metrics_shard *s = &m->shards[i];
        pthread_mutex_lock(&s->lock);
        for (int p = 0; p < PROTO_N; p++) {
            for (size_t k = 0; k <= N_BUCKETS; k++)
                out->latency[p][k] += s->latency[p][k];
            out->latency_count[p] += s->latency_count[p];
            out->latency_sum_ns[p] += s->latency_sum_ns[p];
        }
        pthread_mutex_unlock(&s->lock);
        for (int p = 0; p < PROTO_N; p++) {
            out->connections[p] += atomic_load_explicit(&s->connections[p], memory_order_relaxed);
            out->accepted[p] += atomic_load_explicit(&s->accepted[p], memory_order_relaxed);
            out->rejected[p] += atomic_load_explicit(&s->rejected[p], memory_order_relaxed);
            out->evicted[p] += atomic_load_explicit(&s->evicted[p], memory_order_relaxed);
        }
    }
    out->reload_ok = atomic_load_explicit(&m->reload_ok, memory_order_relaxed);
    out->reload_failed = atomic_load_explicit(&m->reload_failed, memory_order_relaxed);
    pthread_mutex_lock(&m->reload_lock);
    out->last_ok_us = m->last_ok_us;
    out->last_failed_us = m->last_failed_us;
    memcpy(out->last_error, m->last_error, sizeof(out->last_error));
    pthread_mutex_unlock(&m->reload_lock);
    return true;
}

void metrics_snapshot_free(metrics_snapshot *s)
{
    free(s->rules);
    free(s->tiers);
    s->rules = s->tiers = NULL;
    s->n_rules = s->n_tiers = 0;
}
