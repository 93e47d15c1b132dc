/*
 * test_admin_tokens.c - the admin API's token file and the check of a
 * request's bearer token.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "admin/tokens.h"

static admin_tokens tokens;

static bool parse(const char *text, char *why, size_t cap)
{
    return admin_tokens_parse(text, strlen(text), &tokens, why, cap);
}

static void reads_named_tokens(void **unused)
{
    (void)unused;
    char why[160];
    assert_true(parse("# the ops team\n\nops-alice  aaaaaaaaaaaaaaaa1\r\n"
                      "  deploy.bot\tbbbbbbbbbbbbbbbb2  \nci_runner cccccccccccccccc3",
                      why, sizeof(why)));
    assert_int_equal(tokens.n, 3);
    assert_string_equal(tokens.t[0].name, "ops-alice");
    assert_string_equal(tokens.t[1].name, "deploy.bot");
    assert_int_equal(tokens.t[2].len, 17);
}

static void refuses_bad_files(void **unused)
{
    (void)unused;
    static const struct {
        const char *text, *why;
    } bad[] = {
        {"", "no token in the file"},
        {"# only a comment\n", "no token in the file"},
        {"alice\n", "line 1: expected 'NAME TOKEN'"},
        {"alice short\n", "line 1: a token is 16 to 256"},
        {"al ice aaaaaaaaaaaaaaaaaaaa\n", "line 1: a token is"},
        {"al!ce aaaaaaaaaaaaaaaaaaaa\n", "line 1: expected 'NAME TOKEN'"},
        {"a aaaaaaaaaaaaaaaaaaaa\na bbbbbbbbbbbbbbbbbbbbbb\n",
         "line 2: a name or a token given twice"},
        {"a aaaaaaaaaaaaaaaaaaaa\nb aaaaaaaaaaaaaaaaaaaa\n",
         "line 2: a name or a token given twice"},
        {"a aaaaaaaa\x01"
         "aaaaaaaaaaa\n",
         "line 1: a token is"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char why[160] = "";
        assert_false(parse(bad[i].text, why, sizeof(why)));
        assert_non_null(strstr(why, bad[i].why));
    }
}

static void checks_bearer_tokens(void **unused)
{
    (void)unused;
    char why[160];
    assert_true(parse("alice aaaaaaaaaaaaaaaa1\nbob bbbbbbbbbbbbbbbb2\n", why, sizeof(why)));
    const char *h = "Bearer bbbbbbbbbbbbbbbb2";
    assert_string_equal(admin_tokens_check(&tokens, h, strlen(h)), "bob");
    h = "bearer aaaaaaaaaaaaaaaa1";
    assert_string_equal(admin_tokens_check(&tokens, h, strlen(h)), "alice");
    static const char *const wrong[] = {
        "Bearer aaaaaaaaaaaaaaaa",   /* a prefix */
        "Bearer aaaaaaaaaaaaaaaa12", /* longer */
        "Bearer ",
        "Basic aaaaaaaaaaaaaaaa1",
        "aaaaaaaaaaaaaaaa1",
        "Bearer bbbbbbbbbbbbbbbb1",
    };
    for (size_t i = 0; i < sizeof(wrong) / sizeof(wrong[0]); i++)
        assert_null(admin_tokens_check(&tokens, wrong[i], strlen(wrong[i])));
    char longer[400];
    memset(longer, 'a', sizeof(longer));
    memcpy(longer, "Bearer ", 7);
    assert_null(admin_tokens_check(&tokens, longer, sizeof(longer)));
    assert_null(admin_tokens_check(NULL, h, strlen(h)));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reads_named_tokens),
        cmocka_unit_test(refuses_bad_files),
        cmocka_unit_test(checks_bearer_tokens),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
