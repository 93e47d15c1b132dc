/*
 * test_buf.c - the response buffer: the cap holds however the bytes come,
 * numbers, and JSON string escaping.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/buf.h"

static void cap_holds(void **unused)
{
    (void)unused;
    weir_buf b;
    weir_buf_init(&b, 16);
    for (int i = 0; i < 40; i++)
        weir_buf_puts(&b, "abcdefg");
    assert_false(weir_buf_ok(&b));
    assert_true(b.len <= 16);
    assert_true(b.cap <= 16);
    weir_buf_clear(&b);
    assert_true(weir_buf_ok(&b));
    weir_buf_puts(&b, "0123456789abcdef"); /* exactly the cap */
    assert_true(weir_buf_ok(&b));
    weir_buf_putc(&b, 'x');
    assert_false(weir_buf_ok(&b));
    assert_int_equal(b.len, 16);
    weir_buf_free(&b);

    weir_buf_init(&b, 1000);
    for (int i = 0; i < 1000; i++)
        weir_buf_putc(&b, 'a');
    assert_true(weir_buf_ok(&b));
    weir_buf_putc(&b, 'a');
    assert_false(weir_buf_ok(&b));
    assert_int_equal(b.len, 1000);
    weir_buf_free(&b);
}

static void numbers_and_printf(void **unused)
{
    (void)unused;
    weir_buf b;
    weir_buf_init(&b, 4096);
    weir_buf_put_u64(&b, 0);
    weir_buf_putc(&b, ' ');
    weir_buf_put_u64(&b, UINT64_MAX);
    weir_buf_putc(&b, ' ');
    weir_buf_put_i64(&b, INT64_MIN);
    weir_buf_putc(&b, ' ');
    weir_buf_printf(&b, "%s=%d", "x", 42);
    weir_buf_putc(&b, '\0');
    assert_string_equal(b.p, "0 18446744073709551615 -9223372036854775808 x=42");
    weir_buf_free(&b);
}

/* Every digit count, at both edges, against snprintf. */
static void u64_every_width(void **unused)
{
    (void)unused;
    uint64_t p = 1;
    for (int digits = 1; digits <= 20; digits++) {
        uint64_t lo = p, hi = digits == 20 ? UINT64_MAX : p * 10 - 1;
        uint64_t cases[] = {lo, lo + 1, hi - 1, hi, lo + (hi - lo) / 3};
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
            weir_buf b;
            weir_buf_init(&b, 64);
            weir_buf_put_u64(&b, cases[i]);
            weir_buf_putc(&b, '\0');
            char want[32];
            snprintf(want, sizeof(want), "%llu", (unsigned long long)cases[i]);
            assert_string_equal(b.p, want);
            weir_buf_free(&b);
        }
        if (digits < 20)
            p *= 10;
    }
    weir_buf b;
    weir_buf_init(&b, 4);
    weir_buf_put_u64(&b, 12345); /* past the cap: nothing written, failed */
    assert_false(weir_buf_ok(&b));
    assert_int_equal(b.len, 0);
    weir_buf_free(&b);
}

static void json_strings(void **unused)
{
    (void)unused;
    static const struct {
        const char *in;
        size_t n;
        const char *out;
    } rows[] = {
        {"plain", 5, "plain"},
        {"q\"b\\s", 5, "q\\\"b\\\\s"},
        {"\n\r\t\x01", 4, "\\n\\r\\t\\u0001"},
        {"a\0b", 3, "a\\u0000b"},
        {"caf\xc3\xa9", 5, "caf\xc3\xa9"},                           /* valid UTF-8 stays */
        {"\xff", 1, "\xef\xbf\xbd"},                                 /* a bad byte */
        {"\xc3", 1, "\xef\xbf\xbd"},                                 /* a cut sequence */
        {"\xed\xa0\x80", 3, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"}, /* a surrogate */
        {"\xf0\x9f\x98\x80", 4, "\xf0\x9f\x98\x80"},                 /* 4-byte emoji */
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        weir_buf b;
        weir_buf_init(&b, 256);
        weir_buf_put_json_str(&b, rows[i].in, rows[i].n);
        weir_buf_putc(&b, '\0');
        assert_string_equal(b.p, rows[i].out);
        weir_buf_free(&b);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cap_holds),
        cmocka_unit_test(numbers_and_printf),
        cmocka_unit_test(u64_every_width),
        cmocka_unit_test(json_strings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
