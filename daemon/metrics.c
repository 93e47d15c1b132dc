/*
 * metrics.c - per-worker counter shards and the Prometheus exposition.
 *
 * A shard is written by its worker and read by a scrape, both under the
 * shard's mutex, which is uncontended except during a scrape. Per-rule
 * counters live in a small open-addressing table keyed by (domain, rule);
 * entries are never removed, and their number is capped so a stream of
 * reloads with ever-new rule names cannot grow it without bound.
 */
#include "metrics.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

/* Distinct (domain, rule) pairs kept per shard; later ones are counted
 * under rule="_overflow". */
#define MAX_RULE_SERIES 65536u

enum { RES_ALLOWED, RES_DENIED, RES_SHADOW, RES_FAILURE, RES_N };
static const char *const result_names[RES_N] = {"allowed", "denied", "shadow_would_deny",
                                                "failure_mode"};

/* Upstream's per-rule counters (in hits, like upstream). */
enum { UP_TOTAL, UP_OVER, UP_NEAR, UP_WITHIN, UP_SHADOW, UP_N };
static const char *const up_names[UP_N] = {"total_hits", "over_limit", "near_limit", "within_limit",
                                           "shadow_mode"};

/* Descriptor decisions a failure mode made, by the mode. */
enum { FM_ALLOW, FM_DENY, FM_LOCAL, FM_N };
static const char *const fm_names[FM_N] = {"allow", "deny", "local"};

static const char *const proto_names[PROTO_N] = {"http", "grpc", "resp"};

/* Latency buckets, in nanoseconds, and as Prometheus writes them. */
static const int64_t bucket_ns[] = {50000,   100000,  250000,   500000,   1000000,
                                    2500000, 5000000, 10000000, 25000000, 100000000};
static const char *const bucket_text[] = {"5e-05",  "0.0001", "0.00025", "0.0005", "0.001",
                                          "0.0025", "0.005",  "0.01",    "0.025",  "0.1"};
#define N_BUCKETS (sizeof(bucket_ns) / sizeof(bucket_ns[0]))

/* HTTP status codes counted by code; any other is counted as "other". */
static const int codes[] = {200, 400, 404, 405, 408, 413, 414, 429, 431, 500, 501, 503, 505};
#define N_CODES (sizeof(codes) / sizeof(codes[0]))

typedef struct rule_series {
    uint64_t hash;
    char *domain; /* NULL: empty slot */
    char *rule;
    char *path;
    uint64_t results[RES_N];
    uint64_t upstream[UP_N];
    uint64_t failure[FM_N];
} rule_series;

struct metrics_shard {
    pthread_mutex_t lock;
    rule_series *slots;
    size_t cap, used;
    uint64_t latency[PROTO_N][N_BUCKETS + 1];
    uint64_t latency_count[PROTO_N];
    uint64_t latency_sum_ns[PROTO_N];
    uint64_t *http; /* [route][code index or N_CODES] */
    _Atomic int64_t connections[PROTO_N];
    _Atomic uint64_t accepted[PROTO_N];
    _Atomic uint64_t rejected[PROTO_N];
};

struct metrics {
    unsigned n_shards;
    metrics_shard *shards;
    const char *const *routes;
    size_t n_routes;
    _Atomic uint64_t reload_ok, reload_failed;
};

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
    for (unsigned i = 0; i < n_shards; i++) {
        metrics_shard *s = &m->shards[i];
        pthread_mutex_init(&s->lock, NULL);
        s->http = calloc(n_routes * (N_CODES + 1), sizeof(*s->http));
        if (!s->http) {
            metrics_free(m);
            return NULL;
        }
    }
    return m;
}

void metrics_free(metrics *m)
{
    if (!m)
        return;
    for (unsigned i = 0; i < m->n_shards; i++) {
        metrics_shard *s = &m->shards[i];
        for (size_t j = 0; j < s->cap; j++) {
            free(s->slots[j].domain);
            free(s->slots[j].rule);
            free(s->slots[j].path);
        }
        free(s->slots);
        free(s->http);
        pthread_mutex_destroy(&s->lock);
    }
    free(m->shards);
    free(m);
}

metrics_shard *metrics_shard_at(metrics *m, unsigned i)
{
    return &m->shards[i % m->n_shards];
}

static uint64_t series_hash(const char *domain, const char *rule)
{
    return XXH3_64bits_withSeed(rule, strlen(rule), XXH3_64bits(domain, strlen(domain)));
}

static bool grow(metrics_shard *s)
{
    size_t cap = s->cap ? s->cap * 2 : 64;
    rule_series *slots = calloc(cap, sizeof(*slots));
    if (!slots)
        return false;
    for (size_t i = 0; i < s->cap; i++) {
        if (!s->slots[i].domain)
            continue;
        size_t j = (size_t)s->slots[i].hash & (cap - 1);
        while (slots[j].domain)
            j = (j + 1) & (cap - 1);
        slots[j] = s->slots[i];
    }
    free(s->slots);
    s->slots = slots;
    s->cap = cap;
    return true;
}

static char *dup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

/* The series of (domain, rule); NULL when out of memory. Under the lock. */
static rule_series *series(metrics_shard *s, const char *domain, const char *rule, const char *path)
{
    if (s->used >= MAX_RULE_SERIES) {
        rule = "_overflow";
        path = "_overflow";
    }
    uint64_t h = series_hash(domain, rule);
    if (s->cap) {
        for (size_t j = (size_t)h & (s->cap - 1);; j = (j + 1) & (s->cap - 1)) {
            rule_series *e = &s->slots[j];
            if (!e->domain)
                break;
            if (e->hash == h && strcmp(e->domain, domain) == 0 && strcmp(e->rule, rule) == 0)
                return e;
        }
    }
    if ((s->used + 1) * 4 > s->cap * 3 && !grow(s))
        return NULL;
    size_t j = (size_t)h & (s->cap - 1);
    while (s->slots[j].domain)
        j = (j + 1) & (s->cap - 1);
    rule_series *e = &s->slots[j];
    e->domain = dup(domain);
    e->rule = dup(rule);
    e->path = dup(path);
    if (!e->domain || !e->rule || !e->path) {
        free(e->domain);
        free(e->rule);
        free(e->path);
        memset(e, 0, sizeof(*e));
        return NULL;
    }
    e->hash = h;
    s->used++;
    return e;
}

/* The hits a descriptor was charged, by upstream's rules. */
static uint64_t hits_of(const weir_request *req, size_t i)
{
    const weir_descriptor *d = &req->descriptors[i];
    if (d->has_hits)
        return d->hits;
    return req->hits ? req->hits : 1;
}

/* Counts one limit's outcome under its (domain, rule) series. */
static void count_outcome(metrics_shard *s, const weir_limit_outcome *o, uint64_t hits)
{
    const weir_rule_limit *l = o->limit;
    if (!l || !l->domain || !l->path)
        return;
    rule_series *e = series(s, l->domain, l->name ? l->name : l->path, l->path);
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
    e->upstream[UP_TOTAL] += hits;
    if (o->denied) {
        e->upstream[UP_OVER] += hits;
        if (o->shadow)
            e->upstream[UP_SHADOW] += hits;
    } else {
        e->upstream[UP_WITHIN] += hits;
        /* near: more than 80% of the limit used after this request */
        uint64_t lim = o->requests_per_unit;
        uint64_t used = o->remaining < lim ? lim - o->remaining : 0;
        if (lim && used * 5 > lim * 4)
            e->upstream[UP_NEAR] += hits;
    }
}

void metrics_decision(metrics_shard *s, const weir_request *req,
                      const weir_descriptor_status *statuses, size_t n)
{
    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < statuses[i].n_outcomes; k++)
            count_outcome(s, &statuses[i].outcomes[k], hits_of(req, i));
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
    while (b < N_BUCKETS && ns > bucket_ns[b])
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

void metrics_reload(metrics *m, bool ok)
{
    atomic_fetch_add_explicit(ok ? &m->reload_ok : &m->reload_failed, 1, memory_order_relaxed);
}

/* ------------------------------------------------------------ rendering */

static void put_label(weir_buf *b, const char *v)
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

static void header(weir_buf *b, const char *name, const char *type, const char *help)
{
    weir_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* One merged row of the per-rule table. */
typedef struct merged {
    const char *domain, *rule, *path;
    uint64_t results[RES_N];
    uint64_t upstream[UP_N];
    uint64_t failure[FM_N];
} merged;

static int cmp_merged(const void *a, const void *b)
{
    const merged *x = a, *y = b;
    int c = strcmp(x->domain, y->domain);
    return c ? c : strcmp(x->rule, y->rule);
}

static int cmp_path(const void *a, const void *b)
{
    const merged *x = a, *y = b;
    int c = strcmp(x->domain, y->domain);
    return c ? c : strcmp(x->path, y->path);
}

/* Collects every shard's per-rule rows, sorted and summed; *n rows. The
 * strings stay owned by the shards (entries are never removed). */
static merged *collect(metrics *m, size_t *n)
{
    size_t total = 0;
    for (unsigned i = 0; i < m->n_shards; i++) {
        pthread_mutex_lock(&m->shards[i].lock);
        total += m->shards[i].used;
        pthread_mutex_unlock(&m->shards[i].lock);
    }
    merged *rows = calloc(total + m->n_shards * 64 + 1, sizeof(*rows));
    if (!rows)
        return NULL;
    size_t k = 0, room = total + m->n_shards * 64 + 1;
    for (unsigned i = 0; i < m->n_shards; i++) {
        metrics_shard *s = &m->shards[i];
        pthread_mutex_lock(&s->lock);
        for (size_t j = 0; j < s->cap && k < room; j++) {
            rule_series *e = &s->slots[j];
            if (!e->domain)
                continue;
            rows[k].domain = e->domain;
            rows[k].rule = e->rule;
            rows[k].path = e->path;
            memcpy(rows[k].results, e->results, sizeof(e->results));
            memcpy(rows[k].upstream, e->upstream, sizeof(e->upstream));
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
            for (int u = 0; u < UP_N; u++)
                rows[out - 1].upstream[u] += rows[i].upstream[u];
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
    merged *rows = collect(m, &n);
    if (!rows) {
        b->failed = true;
        return;
    }
    header(b, "weir_decisions_total", "counter",
           "Descriptor decisions by domain, rule (name, else path) and result.");
    for (size_t i = 0; i < n; i++)
        for (int r = 0; r < RES_N; r++) {
            weir_buf_puts(b, "weir_decisions_total{domain=\"");
            put_label(b, rows[i].domain);
            weir_buf_puts(b, "\",rule=\"");
            put_label(b, rows[i].rule);
            weir_buf_printf(b, "\",result=\"%s\"} ", result_names[r]);
            weir_buf_put_u64(b, rows[i].results[r]);
            weir_buf_putc(b, '\n');
        }
    header(b, "weir_failure_mode_total", "counter",
           "Descriptor decisions made by a failure mode while the store failed, by mode.");
    for (size_t i = 0; i < n; i++)
        for (int f = 0; f < FM_N; f++) {
            weir_buf_puts(b, "weir_failure_mode_total{domain=\"");
            put_label(b, rows[i].domain);
            weir_buf_puts(b, "\",rule=\"");
            put_label(b, rows[i].rule);
            weir_buf_printf(b, "\",mode=\"%s\"} ", fm_names[f]);
            weir_buf_put_u64(b, rows[i].failure[f]);
            weir_buf_putc(b, '\n');
        }
    header(b, "weir_failopen_total", "counter",
           "Descriptor decisions allowed because the store failed (failure_mode allow).");
    for (size_t i = 0; i < n; i++) {
        weir_buf_puts(b, "weir_failopen_total{domain=\"");
        put_label(b, rows[i].domain);
        weir_buf_puts(b, "\",rule=\"");
        put_label(b, rows[i].rule);
        weir_buf_puts(b, "\"} ");
        weir_buf_put_u64(b, rows[i].failure[FM_ALLOW]);
        weir_buf_putc(b, '\n');
    }
    /* Upstream's names: key1 is the first level of the descriptor path,
     * key2 the rest (as upstream's statsd mapping splits them). Upstream
     * has one limit per path; weir's several limits on one path are summed
     * into that path's series. */
    qsort(rows, n, sizeof(*rows), cmp_path);
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        if (kept && cmp_path(&rows[kept - 1], &rows[i]) == 0) {
            for (int u = 0; u < UP_N; u++)
                rows[kept - 1].upstream[u] += rows[i].upstream[u];
        } else {
            rows[kept++] = rows[i];
        }
    }
    n = kept;
    for (int u = 0; u < UP_N; u++) {
        char name[96];
        snprintf(name, sizeof(name), "ratelimit_service_rate_limit_%s", up_names[u]);
        header(b, name, "counter", "envoyproxy/ratelimit-compatible hit counter.");
        for (size_t i = 0; i < n; i++) {
            const char *path = rows[i].path, *dot = strchr(path, '.');
            weir_buf_printf(b, "%s{domain=\"", name);
            put_label(b, rows[i].domain);
            weir_buf_puts(b, "\",key1=\"");
            char key1[256];
            size_t k1 = dot ? (size_t)(dot - path) : strlen(path);
            if (k1 >= sizeof(key1))
                k1 = sizeof(key1) - 1;
            memcpy(key1, path, k1);
            key1[k1] = '\0';
            put_label(b, key1);
            if (dot) {
                weir_buf_puts(b, "\",key2=\"");
                put_label(b, dot + 1);
            }
            weir_buf_puts(b, "\"} ");
            weir_buf_put_u64(b, rows[i].upstream[u]);
            weir_buf_putc(b, '\n');
        }
    }
    free(rows);
}

static void render_latency(metrics *m, weir_buf *b)
{
    header(b, "weir_request_duration_seconds", "histogram",
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
    header(b, "weir_http_requests_total", "counter", "HTTP requests by route and status code.");
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
            put_label(b, m->routes[r]);
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
    uint64_t acc[PROTO_N] = {0}, rej[PROTO_N] = {0};
    for (unsigned i = 0; i < m->n_shards; i++)
        for (int p = 0; p < PROTO_N; p++) {
            open[p] += atomic_load_explicit(&m->shards[i].connections[p], memory_order_relaxed);
            acc[p] += atomic_load_explicit(&m->shards[i].accepted[p], memory_order_relaxed);
            rej[p] += atomic_load_explicit(&m->shards[i].rejected[p], memory_order_relaxed);
        }
    header(b, "weir_connections", "gauge", "Open client connections by protocol.");
    for (int p = 0; p < PROTO_N; p++)
        weir_buf_printf(b, "weir_connections{protocol=\"%s\"} %lld\n", proto_names[p],
                        (long long)open[p]);
    header(b, "weir_connections_accepted_total", "counter", "Accepted connections by protocol.");
    for (int p = 0; p < PROTO_N; p++)
        weir_buf_printf(b, "weir_connections_accepted_total{protocol=\"%s\"} %llu\n",
                        proto_names[p], (unsigned long long)acc[p]);
    header(b, "weir_connections_rejected_total", "counter",
           "Connections closed at once because --max-connections were open.");
    for (int p = 0; p < PROTO_N; p++)
        weir_buf_printf(b, "weir_connections_rejected_total{protocol=\"%s\"} %llu\n",
                        proto_names[p], (unsigned long long)rej[p]);
}

/* The Redis store's state and counters, when the store is one. */
static void render_redis(weir_store *store, weir_buf *b)
{
    weir_redis_stats r;
    if (weir_redis_stats_get(store, &r) != WEIR_OK)
        return;
    header(b, "weir_redis_breaker_state", "gauge",
           "The Redis circuit breaker: 0 closed, 1 open, 2 half-open.");
    weir_buf_printf(b, "weir_redis_breaker_state %d\n", (int)r.breaker);
    header(b, "weir_redis_connections", "gauge", "Connections to Redis up now (one per worker).");
    weir_buf_printf(b, "weir_redis_connections %llu\n", (unsigned long long)r.connections);
    static const struct {
        const char *name, *help;
        size_t off;
    } counters[] = {
        {"weir_redis_breaker_opened_total", "Times the Redis circuit breaker opened.",
         offsetof(weir_redis_stats, breaker_opened)},
        {"weir_redis_connects_total", "Connections to Redis made.",
         offsetof(weir_redis_stats, connects)},
        {"weir_redis_connect_errors_total", "Connections to Redis that failed or were lost.",
         offsetof(weir_redis_stats, connect_errors)},
        {"weir_redis_calls_total", "Script calls Redis answered.",
         offsetof(weir_redis_stats, calls)},
        {"weir_redis_batches_total", "Decision batches those calls carried.",
         offsetof(weir_redis_stats, batches)},
        {"weir_redis_timeouts_total", "Decision batches Redis did not answer in time.",
         offsetof(weir_redis_stats, timeouts)},
        {"weir_redis_errors_total", "Decision batches failed by an error or a lost connection.",
         offsetof(weir_redis_stats, errors)},
        {"weir_redis_rejected_total", "Decision batches failed at once by the open breaker.",
         offsetof(weir_redis_stats, rejected)},
        {"weir_redis_script_reloads_total", "Script calls sent again after NOSCRIPT.",
         offsetof(weir_redis_stats, script_reloads)},
        {"weir_redis_cached_total",
         "Decision batches denied by the local over-limit cache, without a call to Redis.",
         offsetof(weir_redis_stats, cached)},
    };
    for (size_t i = 0; i < sizeof(counters) / sizeof(counters[0]); i++) {
        uint64_t v;
        memcpy(&v, (const char *)&r + counters[i].off, sizeof(v));
        header(b, counters[i].name, "counter", counters[i].help);
        weir_buf_printf(b, "%s %llu\n", counters[i].name, (unsigned long long)v);
    }
}

void metrics_render(metrics *m, weir_store *store, weir_buf *b)
{
    weir_buf_printf(b,
                    "# HELP weir_build_info The running version.\n"
                    "# TYPE weir_build_info gauge\nweir_build_info{version=\"%s\"} 1\n",
                    weir_version());
    render_rules(m, b);
    render_latency(m, b);
    render_http(m, b);
    render_connections(m, b);
    uint64_t ok = atomic_load_explicit(&m->reload_ok, memory_order_relaxed);
    uint64_t failed = atomic_load_explicit(&m->reload_failed, memory_order_relaxed);
    header(b, "weir_rules_reloads_total", "counter", "Rule loads by result.");
    weir_buf_printf(b,
                    "weir_rules_reloads_total{result=\"ok\"} %llu\n"
                    "weir_rules_reloads_total{result=\"failed\"} %llu\n",
                    (unsigned long long)ok, (unsigned long long)failed);
    header(b, "ratelimit_service_config_load_success", "counter",
           "envoyproxy/ratelimit-compatible: successful rule loads.");
    weir_buf_printf(b, "ratelimit_service_config_load_success %llu\n", (unsigned long long)ok);
    header(b, "ratelimit_service_config_load_error", "counter",
           "envoyproxy/ratelimit-compatible: failed rule loads.");
    weir_buf_printf(b, "ratelimit_service_config_load_error %llu\n", (unsigned long long)failed);
    weir_store_stats st;
    if (weir_store_stats_get(store, &st) == WEIR_OK) {
        header(b, "weir_store_keys", "gauge", "Keys held by the store.");
        weir_buf_printf(b, "weir_store_keys %llu\n", (unsigned long long)st.keys);
        header(b, "weir_store_bytes", "gauge", "Bytes held by the store.");
        weir_buf_printf(b, "weir_store_bytes %llu\n", (unsigned long long)st.bytes);
        header(b, "weir_store_max_bytes", "gauge", "The store's memory cap (0: none).");
        weir_buf_printf(b, "weir_store_max_bytes %llu\n", (unsigned long long)st.max_bytes);
        header(b, "weir_store_evictions_total", "counter",
               "Active keys removed under the memory cap.");
        weir_buf_printf(b, "weir_store_evictions_total %llu\n", (unsigned long long)st.evictions);
        header(b, "weir_store_expirations_total", "counter", "Keys removed back at rest.");
        weir_buf_printf(b, "weir_store_expirations_total %llu\n",
                        (unsigned long long)st.expirations);
    }
    render_redis(store, b);
}
