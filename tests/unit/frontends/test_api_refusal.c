/*
 * test_api_refusal.c - the reasons a request is refused before the engine
 * sees it, in upstream's words.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "api/api.h"

static void reasons(void **unused)
{
    (void)unused;
    char buf[128];
    weir_entry e = {"k", 1, "v", 1};
    weir_limit_override none = {5, WEIR_UNIT_NONE}, sec = {5, WEIR_UNIT_SECOND};
    weir_descriptor ok = {&e, 1, false, 0, NULL}, empty = {NULL, 0, false, 0, NULL};
    weir_descriptor bad_unit = {&e, 1, false, 0, &none}, good_unit = {&e, 1, false, 0, &sec};
    weir_request r = {"", 0, &ok, 1, 0};
    assert_string_equal(weir_api_refusal(&r, buf, sizeof(buf)),
                        "rate limit domain must not be empty");
    r = (weir_request){"d", 1, &ok, 0, 0};
    assert_string_equal(weir_api_refusal(&r, buf, sizeof(buf)),
                        "rate limit descriptor list must not be empty");
    weir_descriptor two[2] = {ok, empty};
    r = (weir_request){"d", 1, two, 2, 0};
    assert_string_equal(weir_api_refusal(&r, buf, sizeof(buf)), "descriptors[1] has no entries");
    two[1] = bad_unit;
    assert_string_equal(weir_api_refusal(&r, buf, sizeof(buf)),
                        "descriptors[1].limit.unit must not be UNKNOWN");
    two[1] = good_unit;
    assert_null(weir_api_refusal(&r, buf, sizeof(buf)));
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(reasons)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
