/*
 * top_keys.c - a worker's sketches of denied keys by domain (top_keys.h).
 *
 * A domain's two sketches are named by the minute the newer one counts
 * (Unix time / 60 s): a denial in the next minute turns them over (the
 * newer becomes the older, the older is cleared to count the new
 * minute), one later clears both. A query reads them at its own time the
 * same way, without turning them, so what it merges is always the
 * minute under way and the one before it.
 */
#include "top_keys.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

typedef struct top_domain {
    size_t len;
    int64_t minute; /* what `now` counts */
    weir_topk *now, *before;
    char name[WEIR_RULES_MAX_STRING_BYTES];
} top_domain;

struct top_keys {
    const weir_ctx *ctx;
    uint32_t counters;
    unsigned n;
    top_domain *domains[TOP_KEYS_MAX_DOMAINS];
    XXH3_state_t *xs; /* the digest of an encoding past TOP_KEYS_ENCODED_BYTES */
    unsigned char key[TOP_KEYS_ENCODED_BYTES];
};

top_keys *top_keys_new(const weir_ctx *ctx, uint32_t counters)
{
    top_keys *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    t->ctx = ctx;
    t->counters = counters;
    if (!(t->xs = XXH3_createState())) {
        free(t);
        return NULL;
    }
    return t;
}

void top_keys_free(top_keys *t)
{
    if (!t)
        return;
    for (unsigned i = 0; i < t->n; i++) {
        weir_topk_free(t->domains[i]->now);
        weir_topk_free(t->domains[i]->before);
        free(t->domains[i]);
    }
    XXH3_freeState(t->xs);
    free(t);
}

static int64_t minute_of(int64_t now_us)
{
    return (now_us < 0 ? 0 : now_us) / TOP_KEYS_MINUTE_US;
}

/* @domain's sketches, made at its first denial; else a domain's that
 * counted nothing this minute or the one before; else NULL. */
static top_domain *domain_of(top_keys *t, const char *domain, size_t len, int64_t minute)
{
    top_domain *idle = NULL;
    for (unsigned i = 0; i < t->n; i++) {
        top_domain *d = t->domains[i];
        if (d->len == len && memcmp(d->name, domain, len) == 0)
            return d;
        if (!idle && d->minute < minute - 1)
            idle = d;
    }
    if (len > WEIR_RULES_MAX_STRING_BYTES)
        return NULL;
    if (!idle && t->n < TOP_KEYS_MAX_DOMAINS) {
        weir_topk_options o = {sizeof(o), t->counters, 0};
        top_domain *d = calloc(1, sizeof(*d));
        if (!d)
            return NULL;
        if (weir_topk_new(t->ctx, &o, &d->now) != WEIR_OK ||
            weir_topk_new(t->ctx, &o, &d->before) != WEIR_OK) {
            weir_topk_free(d->now);
            free(d);
            return NULL;
        }
        t->domains[t->n++] = idle = d;
    }
    if (!idle)
        return NULL;
    memcpy(idle->name, domain, len);
    idle->len = len;
    idle->minute = minute - 2; /* turned over below: both cleared */
    return idle;
}

/* Appends @n bytes to the key under way (*@at of them written): as many
 * as there is room for before the digest, and every one to the digest
 * when it is being taken. */
static void put(top_keys *t, size_t *at, const void *p, size_t n, bool digest)
{
    size_t room = TOP_KEYS_ENCODED_BYTES - WEIR_TOPK_DIGEST_BYTES;
    size_t k = *at < room ? room - *at : 0;
    if (!digest)
        k = n; /* the whole key fits: measured first */
    else if (k > n)
        k = n;
    memcpy(t->key + *at, p, k);
    *at += k;
    if (digest)
        XXH3_128bits_update(t->xs, p, n);
}

static void put_len(top_keys *t, size_t *at, size_t n, bool digest)
{
    unsigned char b[10];
    size_t k = 0;
    do {
        b[k++] = (unsigned char)((n & 0x7f) | (n > 0x7f ? 0x80 : 0));
        n >>= 7;
    } while (n);
    put(t, at, b, k, digest);
}

static size_t len_bytes(size_t n)
{
    size_t k = 1;
    while (n > 0x7f) {
        n >>= 7;
        k++;
    }
    return k;
}

/* The key of @d into t->key; its length. */
static size_t encode(top_keys *t, const weir_descriptor *d)
{
    size_t total = 0;
    for (size_t i = 0; i < d->n_entries; i++) {
        const weir_entry *e = &d->entries[i];
        total += len_bytes(e->key_len) + e->key_len + len_bytes(e->value_len) + e->value_len;
    }
    bool digest = total > TOP_KEYS_ENCODED_BYTES;
    if (digest)
        XXH3_128bits_reset(t->xs);
    size_t at = 0;
    for (size_t i = 0; i < d->n_entries; i++) {
        const weir_entry *e = &d->entries[i];
        put_len(t, &at, e->key_len, digest);
        if (e->key_len)
            put(t, &at, e->key, e->key_len, digest);
        put_len(t, &at, e->value_len, digest);
        if (e->value_len)
            put(t, &at, e->value, e->value_len, digest);
    }
    if (!digest)
        return at;
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits_digest(t->xs));
    memcpy(t->key + TOP_KEYS_ENCODED_BYTES - WEIR_TOPK_DIGEST_BYTES, c.digest,
           WEIR_TOPK_DIGEST_BYTES);
    return TOP_KEYS_ENCODED_BYTES;
}

void top_keys_denied(top_keys *t, const char *domain, size_t len, const weir_descriptor *d,
                     int64_t now_us)
{
    int64_t minute = minute_of(now_us);
    top_domain *dom = domain_of(t, domain, len, minute);
    if (!dom)
        return;
    if (minute == dom->minute + 1) {
        weir_topk *older = dom->before;
        dom->before = dom->now;
        dom->now = older;
        weir_topk_clear(dom->now);
        dom->minute = minute;
    } else if (minute > dom->minute) {
        weir_topk_clear(dom->now);
        weir_topk_clear(dom->before);
        dom->minute = minute;
    } /* an earlier minute (another worker's clock, a moment behind): this one */
    weir_topk_add(dom->now, t->key, encode(t, d), 1);
}

void top_keys_merge(const top_keys *t, const char *domain, size_t len, int64_t now_us,
                    weir_topk *into, size_t *bytes)
{
    int64_t minute = minute_of(now_us);
    for (unsigned i = 0; i < t->n; i++) {
        const top_domain *d = t->domains[i];
        if (d->len != len || memcmp(d->name, domain, len) != 0)
            continue;
        weir_topk_stats st;
        weir_topk_stats_get(d->now, &st);
        *bytes += 2 * st.bytes;
        if (d->minute >= minute) {
            weir_topk_merge(into, d->now);
            weir_topk_merge(into, d->before);
        } else if (d->minute == minute - 1) {
            weir_topk_merge(into, d->now);
        }
        return;
    }
}

/* A LEB128 length at *@at of @n bytes; false past the end. */
static bool get_len(const unsigned char *p, size_t n, size_t *at, size_t *len)
{
    size_t v = 0;
    for (unsigned shift = 0; *at < n && shift < 64; shift += 7) {
        unsigned char b = p[(*at)++];
        v |= (size_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *len = v;
            return true;
        }
    }
    return false;
}

bool top_keys_decode(const void *key, size_t n, top_keys_entry_fn *fn, void *arg)
{
    const unsigned char *p = key;
    size_t at = 0;
    while (at < n) {
        size_t kl, vl;
        if (!get_len(p, n, &at, &kl) || kl > n - at)
            return false;
        size_t k = at;
        at += kl;
        if (!get_len(p, n, &at, &vl) || vl > n - at)
            return false;
        fn(arg, (const char *)p + k, kl, (const char *)p + at, vl);
        at += vl;
    }
    return true;
}
