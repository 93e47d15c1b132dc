/*
 * test_keys.c - stable counter keys: the exact bytes operators see in a
 * shared store, injective whatever bytes the values hold, bounded in
 * length (long values hashed, never cut), the domain as the hash tag.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "engine/keys.h"

/* A match of @n levels, the ones in @in_key counting values apart. */
static weir__match_result match_of(size_t n, unsigned in_key)
{
    weir__match_result m;
    memset(&m, 0, sizeof(m));
    m.depth = n;
    for (size_t i = 0; i < n; i++)
        m.levels[i].value_in_key = (in_key >> i) & 1u;
    return m;
}

static size_t key_of(const char *domain, const weir__match_result *m, const weir_entry *e,
                     char *out)
{
    weir__counter_name n = {domain, strlen(domain), 0x1111, 0x2222, m, e, false, 0, 0};
    return weir__stable_key(&n, out);
}

#define ID             \
    "0000000000002222" \
    "0000000000001111"

static void format_as_documented(void **unused)
{
    (void)unused;
    char k[WEIR__STABLE_KEY_MAX];
    weir_entry e[2] = {{"path", 4, "/pay", 4}, {"user", 4, "alice", 5}};
    weir__match_result m = match_of(2, 2u); /* the path exact, the user counted */
    size_t n = key_of("api", &m, e, k);
    const char want[] = "weir:2:api:" ID ":5:alice";
    assert_int_equal(n, sizeof(want) - 1);
    assert_memory_equal(k, want, n);

    /* no value counted apart: the limit's identity alone */
    m = match_of(2, 0);
    n = key_of("api", &m, e, k);
    assert_int_equal(n, sizeof("weir:2:api:" ID) - 1);

    /* an override of the limit ends the key */
    m = match_of(2, 2u);
    weir__counter_name o = {"api", 3, 0x1111, 0x2222, &m, e, true, 10, 60000000};
    n = weir__stable_key(&o, k);
    const char over[] = "weir:2:api:" ID ":5:alice:o10/60000000";
    assert_int_equal(n, sizeof(over) - 1);
    assert_memory_equal(k, over, n);
}

/* Values holding the separator never meet: ("a:1", "b") and ("a", "1:b")
 * are two counters, and so are an empty value and none. */
static void values_are_length_prefixed(void **unused)
{
    (void)unused;
    char k1[WEIR__STABLE_KEY_MAX], k2[WEIR__STABLE_KEY_MAX];
    weir__match_result m = match_of(2, 3u);
    weir_entry a[2] = {{"k", 1, "a:1", 3}, {"k", 1, "b", 1}};
    weir_entry b[2] = {{"k", 1, "a", 1}, {"k", 1, "1:b", 3}};
    size_t n1 = key_of("d", &m, a, k1), n2 = key_of("d", &m, b, k2);
    assert_true(n1 != n2 || memcmp(k1, k2, n1) != 0);
    weir_entry empty[2] = {{"k", 1, "", 0}, {"k", 1, "x", 1}};
    weir__match_result one = match_of(2, 2u);
    n1 = key_of("d", &m, empty, k1);
    n2 = key_of("d", &one, empty, k2);
    assert_true(n1 != n2 || memcmp(k1, k2, n1) != 0);
    /* bytes outside ASCII, NUL included, are kept as they are */
    weir_entry bin[1] = {{"k", 1, "\0\xff", 2}};
    weir__match_result m1 = match_of(1, 1u);
    n1 = key_of("d", &m1, bin, k1);
    assert_memory_equal(k1 + n1 - 5, ":2:\0\xff", 5);
}

static void long_values_are_hashed_not_cut(void **unused)
{
    (void)unused;
    char k1[WEIR__STABLE_KEY_MAX], k2[WEIR__STABLE_KEY_MAX];
    char v[200];
    memset(v, 'v', sizeof(v));
    weir__match_result m = match_of(1, 1u);
    weir_entry e64[1] = {{"k", 1, v, 64}}, e65[1] = {{"k", 1, v, 65}};
    size_t n = key_of("d", &m, e64, k1);
    assert_int_equal(n, sizeof("weir:2:d:" ID ":64:") - 1 + 64);
    n = key_of("d", &m, e65, k1);
    assert_int_equal(n, sizeof("weir:2:d:" ID ":#") - 1 + 32);
    /* two long values differing in their last byte differ */
    char w[200];
    memcpy(w, v, sizeof(w));
    w[199] = 'w';
    weir_entry ev[1] = {{"k", 1, v, 200}}, ew[1] = {{"k", 1, w, 200}};
    size_t n1 = key_of("d", &m, ev, k1), n2 = key_of("d", &m, ew, k2);
    assert_int_equal(n1, n2);
    assert_memory_not_equal(k1, k2, n1);

    /* 20 levels of 60 bytes: too long as it is, hashed as one, bounded */
    weir__match_result deep = match_of(20, 0xfffffu);
    weir_entry many[20];
    for (size_t i = 0; i < 20; i++)
        many[i] = (weir_entry){"k", 1, v, 60};
    n1 = key_of("d", &deep, many, k1);
    assert_true(n1 <= WEIR__STABLE_KEY_MAX);
    assert_int_equal(n1, sizeof("weir:2:d:" ID ":*") - 1 + 32);
    many[19].value = w + 140; /* one byte of one value changes */
    n2 = key_of("d", &deep, many, k2);
    assert_memory_not_equal(k1, k2, n1);
}

/* No key holds a brace, so a Redis Cluster hashes the whole key: a domain
 * or a value with one is written as its hash. */
static void no_key_holds_a_brace(void **unused)
{
    (void)unused;
    char k[WEIR__STABLE_KEY_MAX];
    weir__match_result m = match_of(0, 0);
    size_t n = key_of("a}b", &m, NULL, k);
    assert_memory_equal(k, "weir:2:#", 8);
    assert_int_equal(k[8 + 32], ':');
    assert_int_equal(n, 8 + 32 + 1 + 32);
    char big[100];
    memset(big, 'd', sizeof(big) - 1);
    big[99] = '\0';
    n = key_of(big, &m, NULL, k);
    assert_memory_equal(k, "weir:2:#", 8);
    weir__match_result m1 = match_of(1, 1u);
    weir_entry e[1] = {{"k", 1, "{user}", 6}};
    n = key_of("api", &m1, e, k);
    assert_int_equal(n, sizeof("weir:2:api:" ID ":#") - 1 + 32);
    assert_null(memchr(k, '{', n));
    assert_null(memchr(k, '}', n));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(format_as_documented),
        cmocka_unit_test(values_are_length_prefixed),
        cmocka_unit_test(long_values_are_hashed_not_cut),
        cmocka_unit_test(no_key_holds_a_brace),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
