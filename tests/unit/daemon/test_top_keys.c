/*
 * test_top_keys.c - a worker's sketches of denied keys (daemon/top_keys.c)
 * on a clock moved by hand: the minute under way and the one before,
 * turned over and cleared as minutes pass; the cap on domains and an
 * idle domain's sketches reused; keys encoded so that no value passes for
 * two entries, and decoded back, whole or as the beginning of a long one.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "top_keys.h"

#define MIN TOP_KEYS_MINUTE_US

static weir_ctx *ctx;

static int setup(void **unused)
{
    (void)unused;
    return weir_ctx_new(NULL, &ctx) == WEIR_OK ? 0 : -1;
}

static int teardown(void **unused)
{
    (void)unused;
    weir_ctx_free(ctx);
    return 0;
}

/* One denial of {k=v} in domain @dom at @now. */
static void deny(top_keys *t, const char *dom, const char *k, const char *v, int64_t now)
{
    weir_entry e = {k, strlen(k), v, strlen(v)};
    weir_descriptor d = {&e, 1, false, 0, NULL};
    top_keys_denied(t, dom, strlen(dom), &d, now);
}

/* What a query at @now sees of @dom: the total, and *@first the largest
 * key's count (0 with none); *@bytes the sketches' bytes. */
static uint64_t seen(top_keys *t, const char *dom, int64_t now, uint64_t *first, size_t *bytes)
{
    weir_topk_options o = {sizeof(o), 64, 0};
    weir_topk *m;
    assert_int_equal(weir_topk_new(ctx, &o, &m), WEIR_OK);
    size_t b = 0;
    top_keys_merge(t, dom, strlen(dom), now, m, &b);
    weir_topk_entry e;
    *first = weir_topk_top(m, &e, 1) ? e.count : 0;
    if (bytes)
        *bytes = b;
    weir_topk_stats st;
    weir_topk_stats_get(m, &st);
    weir_topk_free(m);
    return st.total;
}

static void minutes_turn_over(void **unused)
{
    (void)unused;
    top_keys *t = top_keys_new(ctx, 64);
    assert_non_null(t);
    int64_t t0 = 1000 * MIN; /* a minute's start */
    uint64_t first;
    size_t bytes;
    assert_int_equal(seen(t, "api", t0, &first, &bytes), 0);
    assert_int_equal(bytes, 0); /* nothing made before a denial */
    for (int i = 0; i < 5; i++)
        deny(t, "api", "ip", "a", t0 + i);
    assert_int_equal(seen(t, "api", t0 + 10, &first, &bytes), 5);
    assert_int_equal(first, 5);
    assert_true(bytes > 0);
    assert_int_equal(seen(t, "other", t0 + 10, &first, NULL), 0);
    /* the next minute: this one's and the last */
    for (int i = 0; i < 3; i++)
        deny(t, "api", "ip", "a", t0 + MIN + i);
    assert_int_equal(seen(t, "api", t0 + MIN + 10, &first, NULL), 8);
    assert_int_equal(first, 8);
    /* a query a minute on, with no denial since: the last minute only */
    assert_int_equal(seen(t, "api", t0 + 2 * MIN, &first, NULL), 3);
    /* two minutes on: nothing */
    assert_int_equal(seen(t, "api", t0 + 3 * MIN, &first, NULL), 0);
    /* a denial then: both cleared */
    deny(t, "api", "ip", "b", t0 + 3 * MIN + 1);
    assert_int_equal(seen(t, "api", t0 + 3 * MIN + 2, &first, NULL), 1);
    /* one a moment behind (another worker's clock): counted now */
    deny(t, "api", "ip", "b", t0 + 3 * MIN - 1);
    assert_int_equal(seen(t, "api", t0 + 3 * MIN + 2, &first, NULL), 2);
    /* the minute turned over once more: the older one goes */
    deny(t, "api", "ip", "c", t0 + 4 * MIN);
    deny(t, "api", "ip", "c", t0 + 5 * MIN);
    assert_int_equal(seen(t, "api", t0 + 5 * MIN, &first, NULL), 2);
    top_keys_free(t);
    top_keys_free(NULL);
}

static void domains_capped_and_reused(void **unused)
{
    (void)unused;
    top_keys *t = top_keys_new(ctx, 64);
    int64_t t0 = 500 * MIN;
    char name[32];
    uint64_t first;
    for (unsigned i = 0; i < TOP_KEYS_MAX_DOMAINS; i++) {
        snprintf(name, sizeof(name), "d%u", i);
        deny(t, name, "k", "v", t0);
    }
    deny(t, "late", "k", "v", t0); /* past the cap */
    assert_int_equal(seen(t, "late", t0, &first, NULL), 0);
    assert_int_equal(seen(t, "d63", t0, &first, NULL), 1);
    /* a minute on, every domain still counts (its last minute) */
    deny(t, "late", "k", "v", t0 + MIN);
    assert_int_equal(seen(t, "late", t0 + MIN, &first, NULL), 0);
    /* two on, the idle ones give way: d0's sketches, cleared, are late's */
    deny(t, "late", "k", "v", t0 + 2 * MIN);
    deny(t, "late", "k", "w", t0 + 2 * MIN);
    assert_int_equal(seen(t, "late", t0 + 2 * MIN, &first, NULL), 2);
    assert_int_equal(seen(t, "d0", t0 + 2 * MIN, &first, NULL), 0);
    /* a domain name longer than any of the rules: not kept */
    char huge[WEIR_RULES_MAX_STRING_BYTES + 2];
    memset(huge, 'x', sizeof(huge) - 1);
    huge[sizeof(huge) - 1] = '\0';
    deny(t, huge, "k", "v", t0 + 2 * MIN);
    assert_int_equal(seen(t, huge, t0 + 2 * MIN, &first, NULL), 0);
    top_keys_free(t);
}

typedef struct collected {
    char text[4096];
    size_t n;
} collected;

static void collect(void *arg, const char *key, size_t key_len, const char *value, size_t value_len)
{
    collected *c = arg;
    c->n += (size_t)snprintf(c->text + c->n, sizeof(c->text) - c->n, "[%.*s|%.*s]", (int)key_len,
                             key, (int)value_len, value);
}

/* The one key @t holds for domain "api" at minute 0, as the sketch keeps it. */
static weir_topk_entry only_key(top_keys *t, weir_topk **m)
{
    weir_topk_options o = {sizeof(o), 64, 0};
    assert_int_equal(weir_topk_new(ctx, &o, m), WEIR_OK);
    size_t b = 0;
    top_keys_merge(t, "api", 3, 0, *m, &b);
    weir_topk_entry e;
    assert_int_equal(weir_topk_top(*m, &e, 1), 1);
    return e;
}

static void keys_encoded(void **unused)
{
    (void)unused;
    top_keys *t = top_keys_new(ctx, 64);
    /* "a=b,c" as one value and "a"="b","c"... as two entries differ */
    weir_entry one[] = {{"k", 1, "a=b,c=d", 7}};
    weir_entry two[] = {{"k", 1, "a", 1}, {"b,c", 3, "d", 1}};
    weir_descriptor d1 = {one, 1, false, 0, NULL}, d2 = {two, 2, false, 0, NULL};
    top_keys_denied(t, "api", 3, &d1, 0);
    top_keys_denied(t, "api", 3, &d2, 0);
    top_keys_denied(t, "api", 3, &d2, 0);
    weir_topk *m;
    weir_topk_entry e = only_key(t, &m);
    assert_int_equal(e.count, 2);
    collected c = {{0}, 0};
    assert_true(top_keys_decode(e.key, e.key_len, collect, &c));
    assert_string_equal(c.text, "[k|a][b,c|d]");
    weir_topk_free(m);
    top_keys_free(t);

    /* empty keys and values; a value past the bytes kept */
    t = top_keys_new(ctx, 64);
    char v200[200];
    memset(v200, 'v', sizeof(v200));
    weir_entry odd[] = {{"", 0, "", 0}, {"x", 1, v200, 130}};
    weir_descriptor d3 = {odd, 2, false, 0, NULL};
    top_keys_denied(t, "api", 3, &d3, 0);
    e = only_key(t, &m);
    assert_true(e.hashed);
    c.n = 0;
    assert_false(top_keys_decode(e.key, e.key_len - WEIR_TOPK_DIGEST_BYTES, collect, &c));
    assert_string_equal(c.text, "[|]");
    weir_topk_free(m);
    top_keys_free(t);
    /* a length of two LEB128 bytes */
    unsigned char two_bytes[4 + 130];
    memcpy(two_bytes, "\x01k\x82\x01", 4);
    memset(two_bytes + 4, 'v', 130);
    c.n = 0;
    assert_true(top_keys_decode(two_bytes, sizeof(two_bytes), collect, &c));
    assert_int_equal(c.n, strlen("[k|]") + 130);

    /* a long key: its beginning, then a digest; two that share the
     * beginning stay apart, even past TOP_KEYS_ENCODED_BYTES */
    t = top_keys_new(ctx, 64);
    static char big[5000], big2[5000];
    memset(big, 'p', sizeof(big));
    memcpy(big2, big, sizeof(big2));
    big2[4999] = 'q';
    weir_entry l1[] = {{"user", 4, "bob", 3}, {"path", 4, big, sizeof(big)}};
    weir_entry l2[] = {{"user", 4, "bob", 3}, {"path", 4, big2, sizeof(big2)}};
    weir_descriptor d4 = {l1, 2, false, 0, NULL}, d5 = {l2, 2, false, 0, NULL};
    top_keys_denied(t, "api", 3, &d4, 0);
    top_keys_denied(t, "api", 3, &d4, 0);
    top_keys_denied(t, "api", 3, &d5, 0);
    e = only_key(t, &m);
    assert_int_equal(e.count, 2);
    assert_true(e.hashed);
    c.n = 0;
    assert_false(top_keys_decode(e.key, e.key_len - WEIR_TOPK_DIGEST_BYTES, collect, &c));
    assert_string_equal(c.text, "[user|bob]");
    weir_topk_stats st;
    weir_topk_stats_get(m, &st);
    assert_int_equal(st.used, 2);
    weir_topk_free(m);
    top_keys_free(t);

    /* what decoding refuses: a length past the end, an endless LEB128 */
    static const unsigned char past[] = {1, 'k', 5, 'v'};
    static const unsigned char endless[] = {0x80, 0x80, 0x80};
    c.n = 0;
    assert_false(top_keys_decode(past, sizeof(past), collect, &c));
    assert_false(top_keys_decode(endless, sizeof(endless), collect, &c));
    assert_true(top_keys_decode(past, 0, collect, &c));
    assert_int_equal(c.n, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(minutes_turn_over),
        cmocka_unit_test(domains_capped_and_reused),
        cmocka_unit_test(keys_encoded),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
