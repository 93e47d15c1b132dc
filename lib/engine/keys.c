/*
 * keys.c - stable counter keys (keys.h):
 *
 *   weir:2:TAG:ID[:LEN:VALUE | :#HASH]...[:oRPU/WINDOW_US]
 *
 * TAG is the domain, or "#" and its hash when it is longer than 64 bytes
 * or holds a brace. ID is the limit's identity in 32 lower-case hex
 * digits. Each request value at a level that counts values apart follows
 * as its decimal length and bytes, or as "#" and 32 hex digits of its
 * XXH3-128 when longer than 64 bytes or holding a brace. So no key holds
 * a brace: a Redis Cluster hashes the whole key, and counters spread over
 * every shard (a request's keys may then live on several: the cluster
 * store keeps its check-all-then-charge-all across them). The length
 * prefixes make the form injective whatever bytes a value holds (a value
 * with ':' in it never meets another key). A key that would still pass
 * WEIR__STABLE_KEY_MAX has its values as one hash ("*" and 32 hex). An
 * override of the limit ends the key.
 *
 * Every hash here is unkeyed (XXH3's default secret): the same in every
 * process, which is the point, and why the engine's memory-store keys,
 * keyed by a per-process secret against hash flooding, are never these.
 */
#include "engine/keys.h"

#include <stdio.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

/* Longest value written as itself. */
#define VALUE_MAX 64u

typedef struct out {
    char *p;
    size_t len;
} out;

static void put(out *o, const void *s, size_t n)
{
    if (o->len + n <= WEIR__STABLE_KEY_MAX)
        memcpy(o->p + o->len, s, n);
    o->len += n;
}

static void put_hex128(out *o, uint64_t hi, uint64_t lo)
{
    char hex[33];
    snprintf(hex, sizeof(hex), "%016llx%016llx", (unsigned long long)hi, (unsigned long long)lo);
    put(o, hex, 32);
}

static void put_hash(out *o, char mark, const void *s, size_t n)
{
    XXH128_hash_t h = XXH3_128bits(s, n);
    put(o, &mark, 1);
    put_hex128(o, h.high64, h.low64);
}

static void put_num(out *o, unsigned long long v)
{
    char d[24];
    int n = snprintf(d, sizeof(d), "%llu", v);
    put(o, d, (size_t)n);
}

/* Written as itself: short, and no brace (a hash tag to a Redis Cluster). */
static bool plain_tag(const char *s, size_t n)
{
    return n <= VALUE_MAX && !memchr(s, '{', n) && !memchr(s, '}', n);
}

/* The values part, from @o->len on. */
static void put_values(out *o, const weir__counter_name *n)
{
    for (size_t lv = 0; lv < n->m->depth; lv++) {
        if (!n->m->levels[lv].value_in_key)
            continue;
        const weir_entry *e = &n->entries[lv];
        const char *v = e->value ? e->value : "";
        put(o, ":", 1);
        if (!plain_tag(v, e->value_len)) {
            put_hash(o, '#', v, e->value_len);
        } else {
            put_num(o, e->value_len);
            put(o, ":", 1);
            put(o, v, e->value_len);
        }
    }
}

size_t weir__stable_key(const weir__counter_name *n, char *p)
{
    out o = {p, 0};
    put(&o, "weir:2:", 7);
    if (plain_tag(n->domain, n->domain_len))
        put(&o, n->domain, n->domain_len);
    else
        put_hash(&o, '#', n->domain, n->domain_len);
    put(&o, ":", 1);
    put_hex128(&o, n->id_hi, n->id_lo);
    /* the override's part is at most 2 + 10 + 1 + 20 bytes */
    const size_t room = WEIR__STABLE_KEY_MAX - 34;
    size_t head = o.len;
    put_values(&o, n);
    if (o.len > room) {
        /* too long as it is: the values again, hashed as one */
        char values[WEIR__STABLE_KEY_MAX];
        XXH3_state_t st;
        XXH3_128bits_reset(&st);
        for (size_t lv = 0; lv < n->m->depth; lv++) {
            if (!n->m->levels[lv].value_in_key)
                continue;
            const weir_entry *e = &n->entries[lv];
            uint64_t len = e->value_len;
            XXH3_128bits_update(&st, &len, sizeof(len));
            XXH3_128bits_update(&st, e->value ? e->value : "", e->value_len);
        }
        XXH128_hash_t h = XXH3_128bits_digest(&st);
        o.len = head;
        snprintf(values, sizeof(values), ":*%016llx%016llx", (unsigned long long)h.high64,
                 (unsigned long long)h.low64);
        put(&o, values, 34);
    }
    if (n->override) {
        put(&o, ":o", 2);
        put_num(&o, n->rpu);
        put(&o, "/", 1);
        put_num(&o, (unsigned long long)(n->window_us > 0 ? n->window_us : 0));
    }
    return o.len;
}
