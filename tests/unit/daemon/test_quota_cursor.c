/*
 * test_quota_cursor.c - the page cursors of the quota admin API
 * (daemon/quota/cursor.c): RFC 4648's vectors in base64url, keys of every
 * byte value and every length round trip, and each way a cursor can be
 * bent (padding, the standard alphabet, stray bits, lengths) is refused;
 * audit cursors as plain decimal ids.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "quota/json.h"

static void round_trip(const char *key, size_t len)
{
    char cursor[QUOTA_JSON_CURSOR_MAX];
    assert_true(quota_json_cursor_encode(key, len, cursor, sizeof(cursor)));
    assert_int_equal(strlen(cursor), (len * 4 + 2) / 3);
    char back[QUOTA_MAX_KEY_BYTES + 1];
    size_t back_len = 0;
    assert_true(quota_json_cursor_decode(cursor, strlen(cursor), back, &back_len));
    assert_int_equal(back_len, len);
    assert_memory_equal(back, key, len);
    assert_int_equal(back[len], '\0');
}

static void vectors(void **unused)
{
    (void)unused;
    static const struct {
        const char *key;
        const char *cursor;
    } cases[] = {
        {"f", "Zg"},
        {"fo", "Zm8"},
        {"foo", "Zm9v"},
        {"foob", "Zm9vYg"},
        {"fooba", "Zm9vYmE"},
        {"foobar", "Zm9vYmFy"},
        {"abc123", "YWJjMTIz"},
        {"\xfb\xff", "-_8"},
        {"\xff\xfe\xfd", "__79"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char cursor[QUOTA_JSON_CURSOR_MAX];
        assert_true(
            quota_json_cursor_encode(cases[i].key, strlen(cases[i].key), cursor, sizeof(cursor)));
        assert_string_equal(cursor, cases[i].cursor);
        round_trip(cases[i].key, strlen(cases[i].key));
    }
}

static void every_byte_and_length(void **unused)
{
    (void)unused;
    char key[QUOTA_MAX_KEY_BYTES];
    for (unsigned v = 0; v < 256; v++) {
        key[0] = (char)v;
        round_trip(key, 1);
        key[1] = (char)(255 - v);
        round_trip(key, 2);
    }
    for (size_t i = 0; i < sizeof(key); i++)
        key[i] = (char)(i * 7 + 3);
    for (size_t len = 1; len <= QUOTA_MAX_KEY_BYTES; len++)
        round_trip(key, len);
    for (size_t i = 0; i < sizeof(key); i++)
        key[i] = (char)i;
    round_trip(key, sizeof(key));
}

static void encode_refusals(void **unused)
{
    (void)unused;
    char key[QUOTA_MAX_KEY_BYTES + 1] = {0};
    char cursor[QUOTA_JSON_CURSOR_MAX];
    memset(cursor, 'x', sizeof(cursor));
    assert_false(quota_json_cursor_encode(key, 0, cursor, sizeof(cursor)));
    assert_false(quota_json_cursor_encode(key, QUOTA_MAX_KEY_BYTES + 1, cursor, sizeof(cursor)));
    assert_false(quota_json_cursor_encode("foo", 3, cursor, 4)); /* no room for the NUL */
    assert_int_equal(cursor[0], 'x');
    assert_true(quota_json_cursor_encode("foo", 3, cursor, 5));
}

static void decode_refusals(void **unused)
{
    (void)unused;
    static const char *const bad[] = {
        "",                        /* no key */
        "Z",                       /* six bits: not a byte */
        "Zm9vY",                   /* the same after a group */
        "Zg==",                    /* padding */
        "Zg=",   "Zm9v====", "Zh", /* stray bits after the byte (Zg is "f") */
        "Zm9",                     /* Zm8 is "fo" */
        "+_8",                     /* the standard alphabet's + and / */
        "-/8",   "Zm 9v",    "Zm9v\n", "Zm9v.", "Zm\x80v", "%5A",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char key[QUOTA_MAX_KEY_BYTES + 1] = "untouched";
        size_t len = 99;
        if (quota_json_cursor_decode(bad[i], strlen(bad[i]), key, &len))
            print_error("accepted '%s'\n", bad[i]);
        assert_int_equal(len, 99);
        assert_string_equal(key, "untouched");
    }
    /* a NUL inside the cursor */
    char key[QUOTA_MAX_KEY_BYTES + 1];
    size_t len;
    assert_false(quota_json_cursor_decode("Zm\0v", 4, key, &len));
    /* 256 bytes of key, then one more */
    char longest[QUOTA_JSON_CURSOR_MAX + 8];
    memset(longest, 'A', sizeof(longest));
    assert_true(quota_json_cursor_decode(longest, 340, key, &len)); /* 255 bytes */
    assert_int_equal(len, 255);
    longest[341] = 'A';
    assert_true(quota_json_cursor_decode(longest, 342, key, &len)); /* 256, 4 bits to spare */
    assert_int_equal(len, QUOTA_MAX_KEY_BYTES);
    assert_false(quota_json_cursor_decode(longest, 343, key, &len));
    assert_false(quota_json_cursor_decode(longest, 344, key, &len));
    assert_false(quota_json_cursor_decode(longest, sizeof(longest), key, &len));
}

static void audit_cursors(void **unused)
{
    (void)unused;
    char out[QUOTA_JSON_AUDIT_CURSOR_MAX];
    assert_int_equal(quota_json_audit_cursor_encode(7, out), 1);
    assert_string_equal(out, "7");
    assert_int_equal(quota_json_audit_cursor_encode(INT64_MAX, out), 19);
    assert_string_equal(out, "9223372036854775807");
    int64_t id = 0;
    assert_true(quota_json_audit_cursor_decode("7", 1, &id));
    assert_true(id == 7);
    assert_true(quota_json_audit_cursor_decode("9223372036854775807", 19, &id));
    assert_true(id == INT64_MAX);
    static const char *const bad[] = {"",
                                      "0",
                                      "007",
                                      "-1",
                                      "+1",
                                      "1a",
                                      " 1",
                                      "1 ",
                                      "1.0",
                                      "1e3",
                                      "9223372036854775808",
                                      "99999999999999999999999"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        id = -5;
        assert_false(quota_json_audit_cursor_decode(bad[i], strlen(bad[i]), &id));
        assert_true(id == -5);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(vectors),         cmocka_unit_test(every_byte_and_length),
        cmocka_unit_test(encode_refusals), cmocka_unit_test(decode_refusals),
        cmocka_unit_test(audit_cursors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
