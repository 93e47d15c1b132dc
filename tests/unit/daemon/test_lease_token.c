/*
 * test_lease_token.c - a decision's leases as a token and back
 * (daemon/lease_token.c): the leases of every descriptor in order, none
 * for outcomes without one, names in hex; what the reader refuses.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "lease_token.h"

static lease_token tok;

static void written_and_read_back(void **unused)
{
    (void)unused;
    weir_limit_outcome a[2] = {
        {.requests_per_unit = 100, .window_us = 60000000, .key = "x", .key_len = 1},
        {.requests_per_unit = 2,
         .window_us = 60000000,
         .lease = 7,
         .key = "\x01\xab",
         .key_len = 2},
    };
    weir_limit_outcome b[1] = {
        {.requests_per_unit = 5,
         .remaining = 3,
         .window_us = 1000000,
         .lease = 1ull << 60,
         .key = "k",
         .key_len = 1,
         .adaptive = 42,
         .adaptive_limit = 4},
    };
    weir_descriptor_status st[2] = {{.outcomes = a, .n_outcomes = 2},
                                    {.outcomes = b, .n_outcomes = 1}};
    weir_buf buf;
    weir_buf_init(&buf, 4096);
    assert_int_equal(lease_token_put(&buf, st, 2, 1700000000000000), 2);
    /* the adaptive limit's lease: its id, when, and 5 - 3 in flight */
    const char want[] =
        "1;2,60000000,7,01ab;5,1000000,1152921504606846976,6b,42,1700000000000000,2";
    assert_int_equal(buf.len, strlen(want));
    assert_memory_equal(buf.p, want, buf.len);
    assert_true(lease_token_parse(buf.p, buf.len, &tok));
    assert_int_equal(tok.n, 2);
    assert_int_equal(tok.leases[0].lease, 7);
    assert_int_equal(tok.leases[0].limit, 2);
    assert_int_equal(tok.leases[0].window_us, 60000000);
    assert_int_equal(tok.leases[0].key_len, 2);
    assert_memory_equal(tok.leases[0].key, "\x01\xab", 2);
    assert_int_equal(tok.leases[0].adaptive, 0);
    assert_int_equal(tok.leases[1].lease, 1ull << 60);
    assert_memory_equal(tok.leases[1].key, "k", 1);
    assert_int_equal(tok.leases[1].adaptive, 42);
    assert_int_equal(tok.leases[1].acquired_us, 1700000000000000);
    assert_int_equal(tok.leases[1].in_flight, 2);
    assert_false(tok.leases[1].dropped);
    lease_token_set_dropped(&tok);
    assert_true(tok.leases[0].dropped && tok.leases[1].dropped);
    /* an adaptive lease followed by another */
    assert_true(lease_token_parse("1;1,1,1,ab,9,8,7;1,1,1,cd", 25, &tok));
    assert_int_equal(tok.n, 2);
    assert_int_equal(tok.leases[0].in_flight, 7);
    assert_int_equal(tok.leases[1].adaptive, 0);
    /* no lease: "1" */
    weir_buf_clear(&buf);
    assert_int_equal(lease_token_put(&buf, st, 0, 1), 0);
    assert_true(buf.len == 1 && buf.p[0] == '1');
    assert_true(lease_token_parse("1", 1, &tok));
    assert_int_equal(tok.n, 0);
    weir_buf_free(&buf);
}

static void refused(void **unused)
{
    (void)unused;
    static const char *const bad[] = {
        "",
        "0",
        "2;1,1,1,ab",
        "1;",
        "1;1,1,1,",
        "1;1,1,1,a",
        "1;1,1,1,AB",
        "1;1,1,1,g0",
        "1;0,1,1,ab",
        "1;1,0,1,ab",
        "1;1,1,0,ab",
        "1;01,1,1,ab",
        "1;65537,1,1,ab",
        "1;1,3155760000000001,1,ab",
        "1;1,1,18446744073709551616,ab",
        "1;1,1,1,ab;",
        "1;1,1,1,ab,",
        "1;1,1,1,ab,1",
        "1;1,1,1,ab,1,1",
        "1;1,1,1,ab,1,1,",
        "1;1,1,1,ab,1,1,0",
        "1;1,1,1,ab,0,1,1",
        "1;1,1,1,ab,1,0,1",
        "1;1,1,1,ab,1,1,65537",
        "1;1,1,1,ab,1,1,1,",
        "1;1,1,1,ab,1,1,1,1",
        "1;1,1,1,ab,1,1,1;",
        "1;1,1,1,ab,1,9223372036854775808,1",
        "1;1,1,1,ab,1,1,x",
        "1;-1,1,1,ab",
        "11",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        tok.n = 99;
        if (lease_token_parse(bad[i], strlen(bad[i]), &tok))
            fail_msg("accepted %s", bad[i]);
        assert_int_equal(tok.n, 0);
    }
    assert_false(lease_token_parse(NULL, 0, &tok));
    /* the caps: a name past WEIR_MAX_KEY_BYTES, more leases than a
     * decision holds */
    static char big[LEASE_TOKEN_MAX_BYTES + 2];
    memcpy(big, "1;1,1,1,", 8);
    memset(big + 8, 'a', 2 * WEIR_MAX_KEY_BYTES + 2);
    assert_false(lease_token_parse(big, 8 + 2 * WEIR_MAX_KEY_BYTES + 2, &tok));
    assert_true(lease_token_parse(big, 8 + 2 * WEIR_MAX_KEY_BYTES, &tok));
    size_t n = 1;
    big[0] = '1';
    for (size_t i = 0; i <= LEASE_TOKEN_MAX_LEASES; i++) {
        memcpy(big + n, ";1,1,1,ab", 9);
        n += 9;
    }
    assert_false(lease_token_parse(big, n, &tok));
    assert_true(lease_token_parse(big, n - 9, &tok));
    assert_int_equal(tok.n, LEASE_TOKEN_MAX_LEASES);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(written_and_read_back),
        cmocka_unit_test(refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
