/*
 * test_memtrim.c - when memory is given back after a burst: once the
 * connections fell to half a peak at least MEMTRIM_MIN_DROP above them,
 * once per burst.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "memtrim.h"

static void trims_after_a_burst(void **unused)
{
    (void)unused;
    memtrim t = {0};
    assert_false(memtrim_tick(&t, 10, 10));
    assert_false(memtrim_tick(&t, 0, 200)); /* a burst too small */
    assert_false(memtrim_tick(&t, 8000, 8000));
    assert_false(memtrim_tick(&t, 5000, 8000)); /* above half the peak */
    assert_true(memtrim_tick(&t, 3000, 5000));
    assert_false(memtrim_tick(&t, 3000, 3000)); /* once: the peak starts over */
    assert_false(memtrim_tick(&t, 2900, 3000));
    /* a burst seen only between two ticks still counts */
    assert_true(memtrim_tick(&t, 100, 9000));
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(trims_after_a_burst)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
