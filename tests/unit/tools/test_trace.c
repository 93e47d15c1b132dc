/*
 * test_trace.c - the CSV trace codec: what it accepts, every error with its
 * line number, and each cap at its edge (the last value in, the first out).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "trace.h"

/* Parse a NUL-terminated text; the trace must be freed by the caller. */
static weir_status parse(weir_trace *t, const char *text, weir_trace_error *err)
{
    weir_trace_init(t);
    return weir_trace_parse(t, text, strlen(text), err);
}

/* Expect @text to fail at @line with a reason containing @what. */
static void expect_error(const char *text, uint64_t line, const char *what)
{
    weir_trace t;
    weir_trace_error err;
    weir_status st = parse(&t, text, &err);
    if (st != WEIR_EPARSE || err.line != line || !strstr(err.reason, what))
        fail_msg("'%.60s': got status %d, line %llu, '%s'; want line %llu, '%s'", text, st,
                 (unsigned long long)err.line, err.reason, (unsigned long long)line, what);
    /* a failed parse leaves nothing behind */
    assert_null(t.events);
    assert_int_equal(t.n_events, 0);
    assert_int_equal(t.n_keys, 0);
    weir_trace_free(&t);
}

static void key_is(const weir_trace *t, uint32_t key, const char *want)
{
    size_t len;
    const char *k = weir_trace_key(t, key, &len);
    assert_non_null(k);
    assert_int_equal(len, strlen(want));
    assert_memory_equal(k, want, len);
}

static void accepts_the_documented_forms(void **unused)
{
    (void)unused;
    weir_trace t;
    weir_trace_error err;
    const char *text = "\xEF\xBB\xBF"
                       "# a comment\n"
                       "\n"
                       "   \t \n"
                       "time_us,key,cost\n"
                       "0,alice\n"
                       "  # an indented comment\n"
                       "10, bob ,3\r\n"
                       "10,alice,1\n"
                       "0000020,user:42 x\n"
                       "25,bob"; /* no newline at the end */
    assert_int_equal(parse(&t, text, &err), WEIR_OK);
    assert_int_equal(t.n_events, 5);
    assert_int_equal(t.n_keys, 3);
    key_is(&t, 0, "alice");
    key_is(&t, 1, "bob");
    key_is(&t, 2, "user:42 x");

    const weir_trace_event want[] = {
        {0, 1, 0, 5}, {10, 3, 1, 7}, {10, 1, 0, 8}, {20, 1, 2, 9}, {25, 1, 1, 10}};
    for (size_t i = 0; i < 5; i++) {
        assert_int_equal(t.events[i].time_us, want[i].time_us);
        assert_int_equal(t.events[i].cost, want[i].cost);
        assert_int_equal(t.events[i].key, want[i].key);
        assert_int_equal(t.events[i].line, want[i].line);
    }
    size_t len;
    assert_null(weir_trace_key(&t, 3, &len));
    assert_int_equal(len, 0);
    weir_trace_free(&t);
    weir_trace_free(&t); /* freeing twice is harmless: free leaves it empty */
    weir_trace_free(NULL);
}

static void empty_inputs(void **unused)
{
    (void)unused;
    weir_trace t;
    const char *texts[] = {"", "\n", "# only a comment\n", "time_us,key\n", "\r\n\r\n"};
    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
        assert_int_equal(parse(&t, texts[i], NULL), WEIR_OK);
        assert_int_equal(t.n_events, 0);
        weir_trace_free(&t);
    }
    weir_trace_init(&t);
    assert_int_equal(weir_trace_parse(&t, NULL, 0, NULL), WEIR_OK);
    assert_int_equal(weir_trace_parse(&t, NULL, 1, NULL), WEIR_EINVAL);
    assert_int_equal(weir_trace_parse(NULL, "", 0, NULL), WEIR_EINVAL);
}

static void refuses_a_trace_that_is_not_empty(void **unused)
{
    (void)unused;
    weir_trace t;
    assert_int_equal(parse(&t, "1,a\n", NULL), WEIR_OK);
    assert_int_equal(weir_trace_parse(&t, "2,b\n", 4, NULL), WEIR_EINVAL);
    assert_int_equal(t.n_events, 1); /* untouched */
    weir_trace_free(&t);
}

static void malformed_lines_name_line_and_reason(void **unused)
{
    (void)unused;
    expect_error("0,a\n1\n", 2, "no comma");
    expect_error("0,a,1,2\n", 1, "too many fields");
    expect_error(",a\n", 1, "time is empty");
    expect_error("-1,a\n", 1, "negative");
    expect_error("1.5,a\n", 1, "not a non-negative integer");
    expect_error("0x10,a\n", 1, "not a non-negative integer");
    expect_error("1 0,a\n", 1, "not a non-negative integer");
    expect_error("0,\n", 1, "key is empty");
    expect_error("0,   ,1\n", 1, "key is empty");
    expect_error("0,a\x01z\n", 1, "control character (byte 0x01)");
    expect_error("0,a\x7f\n", 1, "control character (byte 0x7f)");
    expect_error("0,a\rb\n", 1, "control character (byte 0x0d)");
    expect_error("0,a,\n", 1, "cost is empty");
    expect_error("0,a,-2\n", 1, "cost is not a positive integer");
    expect_error("0,a,x\n", 1, "cost is not a positive integer");
    expect_error("0,a,0\n", 1, "cost is 0");
    expect_error("# c\n\n5,a\n4,a\n", 4, "before the previous request's 5");
    /* a header is allowed once, before the first request */
    expect_error("0,a\ntime_us,key,cost\n", 2, "time is not");
    expect_error("time_us,key\ntime_us,key\n", 2, "time is not");
    expect_error("time_us,key,weight\n", 1, "time is not");
}

static void nul_bytes_are_data_not_terminators(void **unused)
{
    (void)unused;
    weir_trace t;
    weir_trace_error err;
    weir_trace_init(&t);
    const char text[] = "0,a\n1\0,b\n";
    assert_int_equal(weir_trace_parse(&t, text, sizeof(text) - 1, &err), WEIR_EPARSE);
    assert_int_equal(err.line, 2);
    const char key[] = "0,a\0b\n";
    assert_int_equal(weir_trace_parse(&t, key, sizeof(key) - 1, &err), WEIR_EPARSE);
    assert_non_null(strstr(err.reason, "byte 0x00"));
}

static void equal_times_are_in_order(void **unused)
{
    (void)unused;
    weir_trace t;
    assert_int_equal(parse(&t, "7,a\n7,b\n7,a,2\n", NULL), WEIR_OK);
    assert_int_equal(t.n_events, 3);
    weir_trace_free(&t);
}

/* ------------------------------------------------------------------------ */
/* Caps at their edges                                                      */

static char *repeat(char c, size_t n)
{
    char *s = malloc(n + 1);
    assert_non_null(s);
    memset(s, c, n);
    s[n] = '\0';
    return s;
}

static void cap_time(void **unused)
{
    (void)unused;
    weir_trace t;
    char line[64];
    snprintf(line, sizeof(line), "%lld,a\n", (long long)WEIR_TRACE_MAX_TIME_US);
    assert_int_equal(parse(&t, line, NULL), WEIR_OK);
    assert_int_equal(t.events[0].time_us, WEIR_TRACE_MAX_TIME_US);
    weir_trace_free(&t);
    snprintf(line, sizeof(line), "%lld,a\n", (long long)WEIR_TRACE_MAX_TIME_US + 1);
    expect_error(line, 1, "time is over the cap");
    expect_error("99999999999999999999999999999,a\n", 1, "time is over the cap");
    /* past the cap, a later non-digit is still called out as such */
    expect_error("99999999999999999999999999999x,a\n", 1, "not a non-negative");
}

static void cap_cost(void **unused)
{
    (void)unused;
    weir_trace t;
    char line[64];
    snprintf(line, sizeof(line), "0,a,%u\n", WEIR_TRACE_MAX_COST);
    assert_int_equal(parse(&t, line, NULL), WEIR_OK);
    assert_int_equal(t.events[0].cost, WEIR_TRACE_MAX_COST);
    weir_trace_free(&t);
    snprintf(line, sizeof(line), "0,a,%u\n", WEIR_TRACE_MAX_COST + 1);
    expect_error(line, 1, "cost is over the cap of 65536");
}

static void cap_key_bytes(void **unused)
{
    (void)unused;
    weir_trace t;
    char *key = repeat('k', WEIR_TRACE_MAX_KEY_BYTES + 1);
    char *line = malloc(WEIR_TRACE_MAX_KEY_BYTES + 16);
    assert_non_null(line);

    snprintf(line, WEIR_TRACE_MAX_KEY_BYTES + 16, "0,%.*s\n", (int)WEIR_TRACE_MAX_KEY_BYTES, key);
    assert_int_equal(parse(&t, line, NULL), WEIR_OK);
    size_t len;
    assert_non_null(weir_trace_key(&t, 0, &len));
    assert_int_equal(len, WEIR_TRACE_MAX_KEY_BYTES);
    weir_trace_free(&t);

    snprintf(line, WEIR_TRACE_MAX_KEY_BYTES + 16, "0,%s\n", key);
    expect_error(line, 1, "key is 4097 bytes, over the cap of 4096");
    free(key);
    free(line);
}

static void cap_line_bytes(void **unused)
{
    (void)unused;
    weir_trace t;
    /* "0,k" padded with blanks to exactly the cap, then one byte more */
    char *line = repeat(' ', WEIR_TRACE_MAX_LINE_BYTES + 3);
    memcpy(line, "0,k", 3);
    line[WEIR_TRACE_MAX_LINE_BYTES] = '\r'; /* the terminator does not count */
    line[WEIR_TRACE_MAX_LINE_BYTES + 1] = '\n';
    line[WEIR_TRACE_MAX_LINE_BYTES + 2] = '\0';
    assert_int_equal(parse(&t, line, NULL), WEIR_OK);
    assert_int_equal(t.n_events, 1);
    key_is(&t, 0, "k");
    weir_trace_free(&t);

    line[WEIR_TRACE_MAX_LINE_BYTES] = ' ';
    expect_error(line, 1, "longer than the cap of 8192 bytes");
    free(line);
}

/* The cap counts every line, so blank ones make a cheap edge. */
static void cap_lines(void **unused)
{
    (void)unused;
    weir_trace t;
    size_t n = WEIR_TRACE_MAX_LINES;
    char *text = malloc(4 * (size_t)n + 8);
    assert_non_null(text);
    /* a full trace of requests... */
    for (size_t i = 0; i < n; i++)
        memcpy(text + 4 * i, "1,a\n", 4);
    weir_trace_init(&t);
    assert_int_equal(weir_trace_parse(&t, text, 4 * n, NULL), WEIR_OK);
    assert_int_equal(t.n_events, n);
    weir_trace_free(&t);
    /* ...then one line more, blank */
    text[4 * n] = '\n';
    weir_trace_error err;
    weir_trace_init(&t);
    assert_int_equal(weir_trace_parse(&t, text, 4 * n + 1, &err), WEIR_EPARSE);
    assert_int_equal(err.line, n + 1);
    assert_non_null(strstr(err.reason, "more than 1000000 lines"));
    assert_null(t.events);
    free(text);
}

static void cap_keys(void **unused)
{
    (void)unused;
    weir_trace t;
    size_t n = WEIR_TRACE_MAX_KEYS;
    size_t cap = 16 * (n + 2);
    char *text = malloc(cap);
    assert_non_null(text);
    size_t len = 0;
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(text + len, cap - len, "0,k%zu\n", i);
    /* a key seen before is not a new one */
    len += (size_t)snprintf(text + len, cap - len, "0,k0\n");
    weir_trace_init(&t);
    assert_int_equal(weir_trace_parse(&t, text, len, NULL), WEIR_OK);
    assert_int_equal(t.n_keys, n);
    assert_int_equal(t.n_events, n + 1);
    assert_int_equal(t.events[n].key, 0);
    key_is(&t, (uint32_t)(n - 1), "k99999");
    weir_trace_free(&t);

    len += (size_t)snprintf(text + len, cap - len, "0,one-too-many\n");
    weir_trace_error err;
    weir_trace_init(&t);
    assert_int_equal(weir_trace_parse(&t, text, len, &err), WEIR_EPARSE);
    assert_int_equal(err.line, n + 2);
    assert_non_null(strstr(err.reason, "more than 100000 distinct keys"));
    free(text);
}

/* ------------------------------------------------------------------------ */
/* Generated traces                                                         */

static void push_and_sort(void **unused)
{
    (void)unused;
    weir_trace t;
    weir_trace_init(&t);
    assert_int_equal(weir_trace_push(&t, 5, 2, 1), WEIR_OK);
    assert_int_equal(weir_trace_push(&t, 1, 0, 1), WEIR_OK);
    assert_int_equal(weir_trace_push(&t, 5, 1, 1), WEIR_OK);
    assert_int_equal(t.n_keys, 3);
    weir_trace_sort(&t);
    assert_int_equal(t.events[0].time_us, 1);
    assert_int_equal(t.events[1].key, 1);
    assert_int_equal(t.events[2].key, 2);
    size_t len;
    assert_null(weir_trace_key(&t, 0, &len)); /* generated keys have no names */

    assert_int_equal(weir_trace_push(&t, -1, 0, 1), WEIR_ERANGE);
    assert_int_equal(weir_trace_push(&t, WEIR_TRACE_MAX_TIME_US + 1, 0, 1), WEIR_ERANGE);
    assert_int_equal(weir_trace_push(&t, 0, 0, 0), WEIR_ERANGE);
    assert_int_equal(weir_trace_push(&t, 0, 0, WEIR_TRACE_MAX_COST + 1), WEIR_ERANGE);
    assert_int_equal(weir_trace_push(&t, 0, WEIR_TRACE_MAX_KEYS, 1), WEIR_ERANGE);
    assert_int_equal(weir_trace_push(&t, 0, WEIR_TRACE_MAX_KEYS - 1, 1), WEIR_OK);
    assert_int_equal(t.n_keys, WEIR_TRACE_MAX_KEYS);
    weir_trace_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(accepts_the_documented_forms),
        cmocka_unit_test(empty_inputs),
        cmocka_unit_test(refuses_a_trace_that_is_not_empty),
        cmocka_unit_test(malformed_lines_name_line_and_reason),
        cmocka_unit_test(nul_bytes_are_data_not_terminators),
        cmocka_unit_test(equal_times_are_in_order),
        cmocka_unit_test(cap_time),
        cmocka_unit_test(cap_cost),
        cmocka_unit_test(cap_key_bytes),
        cmocka_unit_test(cap_line_bytes),
        cmocka_unit_test(cap_lines),
        cmocka_unit_test(cap_keys),
        cmocka_unit_test(push_and_sort),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
