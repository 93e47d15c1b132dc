/*
 * metrics_upstream.c - envoyproxy/ratelimit's per-descriptor counters
 * (total_hits, over_limit, near_limit, within_limit, shadow_mode, counted
 * as upstream's base_limiter.go counts them), their Prometheus series as
 * upstream's statsd mapping labels them, and the deltas the statsd sink
 * sends under upstream's stat names.
 *
 * A descriptor is counted once, under the stat key of the limit it
 * reported (stat_key.c), whatever number of limits it tested. Series live
 * in each shard's `stats` table by raw key; names and labels are
 * sanitised when written out, and series whose labels come out equal are
 * summed, as the statsd exporter sums them.
 */
#include "metrics_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Distinct stat keys kept per shard, and how many of them may hold
 * request values (detailed_metric, value_to_metric, a request's own
 * limit); later ones are counted under their domain's "_overflow" key. */
#define MAX_STAT_SERIES 65536u
#define MAX_VALUE_SERIES 4096u

static const char *const up_names[UP_N] = {"total_hits", "over_limit", "near_limit", "within_limit",
                                           "shadow_mode"};

/* The series of upstream stat key @k, or past a cap its domain's overflow
 * key (@k is then rewritten); NULL when out of memory. Under the lock. */
static stat_series *stat_series_of(metrics_shard *s, stat_key *k)
{
    bool made;
    stat_series *e = NULL;
    if (!k->from_request || s->value_series < MAX_VALUE_SERIES)
        e = metrics_table_get(&s->stats, k->text, k->len, sizeof(*e), MAX_STAT_SERIES, &made);
    else if ((e = metrics_table_get(&s->stats, k->text, k->len, sizeof(*e), 0, &made)) != NULL)
        return e; /* a request's key seen before the cap was reached */
    if (!e) {
        char domain[STAT_KEY_MAX_BYTES];
        memcpy(domain, k->text, strlen(k->text) + 1);
        stat_key_overflow(k, domain);
        e = metrics_table_get(&s->stats, k->text, k->len, sizeof(*e), SIZE_MAX, &made);
    }
    if (e && made) {
        e->n_levels = k->n_levels;
        e->from_request = k->from_request;
        s->value_series += k->from_request;
    }
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

/* Upstream's counting of @hits decided by outcome @o (base_limiter.go):
 * the limit's use before and after the hits, from what the limit has
 * left; the hits past the limit are over_limit (and shadow_mode in shadow
 * mode), the hits past the near threshold and within the limit are
 * near_limit. A failure mode's decision has no use to go by: its hits
 * are over or within the limit as decided, none near. */
static void count_upstream(uint64_t c[UP_N], const weir_limit_outcome *o, uint64_t hits,
                           uint32_t near_ppm)
{
    c[UP_TOTAL] += hits;
    if (o->failure_mode) {
        c[o->denied ? UP_OVER : UP_WITHIN] += hits;
        return;
    }
    uint64_t lim = o->requests_per_unit;
    uint64_t near = lim * near_ppm / 1000000u; /* lim < 2^32: no overflow */
    uint64_t used = o->remaining < lim ? lim - o->remaining : 0;
    if (!o->denied) {
        c[UP_WITHIN] += hits;
        uint64_t before = used > hits ? used - hits : 0;
        if (used > near)
            c[UP_NEAR] += before >= near ? hits : used - near;
        return;
    }
    /* denied: @used is the use the hits did not fit in */
    uint64_t after = used + hits, over = hits;
    if (used < lim && after > lim) {
        over = after - lim;
        c[UP_NEAR] += lim - (near > used ? near : used);
    }
    c[UP_OVER] += over;
    if (o->shadow)
        c[UP_SHADOW] += over;
}

void metrics_count_upstream(metrics_shard *s, const weir_request *req, size_t i,
                            const weir_limit_outcome *o)
{
    stat_key_build(&s->scratch, o->limit, &req->descriptors[i]);
    stat_series *e = stat_series_of(s, &s->scratch);
    if (e)
        count_upstream(e->counts, o, hits_of(req, i), s->near_ppm);
}

/* ------------------------------------------------------------ reading */

/* One series as read: the first components of its key (the domain, then
 * levels, each NUL-ended, @len bytes) and its counts. */
typedef struct up_row {
    char *key;
    size_t len;
    uint64_t c[UP_N];
} up_row;

static int cmp_row(const void *a, const void *b)
{
    const up_row *x = a, *y = b;
    int c = memcmp(x->key, y->key, x->len < y->len ? x->len : y->len);
    return c ? c : (x->len > y->len) - (x->len < y->len);
}

/* Sorts @rows and sums those with equal keys; the number left. */
static size_t merge(up_row *rows, size_t n)
{
    qsort(rows, n, sizeof(*rows), cmp_row);
    size_t out = 0;
    for (size_t i = 0; i < n; i++) {
        if (out && cmp_row(&rows[out - 1], &rows[i]) == 0) {
            for (int u = 0; u < UP_N; u++)
                rows[out - 1].c[u] += rows[i].c[u];
            free(rows[i].key);
        } else {
            rows[out++] = rows[i];
        }
    }
    return out;
}

static void free_rows(up_row *rows, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(rows[i].key);
    free(rows);
}

/* The length of the first @parts components of key @k (@len bytes). */
static size_t prefix_len(const char *k, size_t len, unsigned parts)
{
    size_t at = 0;
    for (unsigned p = 0; p < parts && at < len; p++)
        at += strlen(k + at) + 1;
    return at < len ? at : len;
}

/* Every shard's series, unsorted, *n of them: for a scrape (!@take) the
 * first @parts components of each key and its counts; for the statsd
 * sink (@take) whole keys and what each counter grew by since the last
 * take, which is then marked given (series that did not grow are left
 * out). NULL and *n = 0 when out of memory; a take stops at the first
 * series it cannot copy, leaving it and the rest for the next one. */
static up_row *gather(metrics *m, unsigned parts, bool take, size_t *n)
{
    size_t room = 0, k = 0;
    for (unsigned i = 0; i < m->n_shards; i++) {
        pthread_mutex_lock(&m->shards[i].lock);
        room += m->shards[i].stats.used;
        pthread_mutex_unlock(&m->shards[i].lock);
    }
    room += (size_t)m->n_shards * 64 + 1; /* series made meanwhile */
    up_row *rows = calloc(room, sizeof(*rows));
    *n = 0;
    if (!rows)
        return NULL;
    bool failed = false;
    for (unsigned i = 0; i < m->n_shards && !failed; i++) {
        metrics_shard *s = &m->shards[i];
        pthread_mutex_lock(&s->lock);
        for (size_t j = 0; j < s->stats.cap && k < room; j++) {
            stat_series *e = (stat_series *)s->stats.slots[j];
            if (!e)
                continue;
            up_row *r = &rows[k];
            bool grew = false;
            for (int u = 0; u < UP_N; u++) {
                r->c[u] = take ? e->counts[u] - e->sent[u] : e->counts[u];
                grew |= r->c[u] != 0;
            }
            if (take && !grew)
                continue;
            r->len = take ? e->h.len : prefix_len(e->h.key, e->h.len, parts);
            if (!(r->key = malloc(r->len ? r->len : 1))) {
                failed = true;
                break;
            }
            memcpy(r->key, e->h.key, r->len);
            if (take)
                memcpy(e->sent, e->counts, sizeof(e->sent));
            k++;
        }
        pthread_mutex_unlock(&s->lock);
    }
    if (failed && !take) {
        free_rows(rows, k);
        return NULL;
    }
    *n = k;
    return rows;
}

/* ------------------------------------------------------------ Prometheus */

/* Upstream's Prometheus names, as its statsd exporter mapping makes them
 * from the stat names: domain, key1 the first level, key2 the second
 * (deeper levels are dropped, their series summed). The label split comes
 * from the levels, never from dots: a value with dots keeps them. */
void metrics_render_upstream(metrics *m, weir_buf *b)
{
    size_t n;
    up_row *rows = gather(m, 3, false, &n);
    if (!rows) {
        b->failed = true;
        return;
    }
    for (size_t i = 0; i < n; i++)
        for (size_t at = 0; at < rows[i].len;) { /* each label alone */
            size_t len = strlen(rows[i].key + at);
            stat_sanitize(rows[i].key + at, len);
            at += len + 1;
        }
    n = merge(rows, n);
    for (int u = 0; u < UP_N; u++) {
        char name[96];
        snprintf(name, sizeof(name), "ratelimit_service_rate_limit_%s", up_names[u]);
        metrics_header(b, name, "counter", "envoyproxy/ratelimit-compatible hit counter.");
        for (size_t i = 0; i < n; i++) {
            static const char *const labels[] = {"domain", "key1", "key2"};
            weir_buf_printf(b, "%s{", name);
            size_t at = 0;
            for (int p = 0; p < 3 && at < rows[i].len; p++) {
                const char *v = rows[i].key + at;
                at += strlen(v) + 1;
                if (p == 2 && !v[0])
                    break; /* an empty label is no label */
                weir_buf_printf(b, "%s%s=\"", p ? "," : "", labels[p]);
                metrics_put_label(b, v);
                weir_buf_putc(b, '"');
            }
            weir_buf_puts(b, "} ");
            weir_buf_put_u64(b, rows[i].c[u]);
            weir_buf_putc(b, '\n');
        }
    }
    free_rows(rows, n);
}

/* ------------------------------------------------------------ statsd */

void metrics_deltas(metrics *m, metrics_emit_fn *emit, void *arg)
{
    size_t n;
    up_row *rows = gather(m, 0, true, &n);
    if (rows) {
        /* the stat name: the levels joined by dots, sanitised whole as
         * upstream sanitises its key */
        for (size_t i = 0; i < n; i++) {
            for (size_t j = 0; j + 1 < rows[i].len; j++)
                if (!rows[i].key[j])
                    rows[i].key[j] = '.';
            stat_sanitize(rows[i].key, rows[i].len > 0 ? rows[i].len - 1 : 0);
        }
        n = merge(rows, n);
        for (size_t i = 0; i < n; i++)
            for (int u = 0; u < UP_N; u++)
                if (rows[i].c[u])
                    emit(arg, "ratelimit.service.rate_limit.", rows[i].key, up_names[u],
                         rows[i].c[u]);
        free_rows(rows, n);
    }
    uint64_t ok = atomic_load_explicit(&m->reload_ok, memory_order_relaxed);
    uint64_t failed = atomic_load_explicit(&m->reload_failed, memory_order_relaxed);
    if (ok != m->sent_ok)
        emit(arg, "ratelimit.service.", "config_load_success", NULL, ok - m->sent_ok);
    if (failed != m->sent_failed)
        emit(arg, "ratelimit.service.", "config_load_error", NULL, failed - m->sent_failed);
    m->sent_ok = ok;
    m->sent_failed = failed;
}
