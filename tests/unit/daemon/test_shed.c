/*
 * test_shed.c - priorities and the loop's lag (daemon/shed.c): the
 * settings read or refused, a request's priority from what its protocol
 * gives, then a descriptor, then the default, the lag's average, and
 * which denials are a share's (answered overloaded) and which a limit's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "shed.h"

static void settings(void **unused)
{
    (void)unused;
    shed_config c;
    char err[256];
    assert_true(shed_configure(&c, "critical,normal,sheddable,test", "normal", "priority",
                               "test=20ms,sheddable=100ms,normal=1s", err, sizeof(err)));
    assert_int_equal(c.n, 4);
    assert_int_equal(c.dflt, 1);
    assert_int_equal(c.lag_us[0], 0);
    assert_int_equal(c.lag_us[1], 1000000);
    assert_int_equal(c.lag_us[2], 100000);
    assert_int_equal(c.lag_us[3], 20000);
    assert_int_equal(shed_priority_named(&c, "SHEDDABLE", 9), 2);
    assert_int_equal(shed_priority_named(&c, "shed", 4), -1);
    assert_true(shed_configure(&c, "a", "a", "", "", err, sizeof(err)));
    static const struct {
        const char *list, *dflt, *lag, *why;
    } bad[] = {
        {"", "a", "", "at least one name"},
        {"a,,b", "a", "", "is not a name"},
        {"a,A", "a", "", "is not a name"},
        {"a,b,a", "a", "", "twice"},
        {"a,b,c,d,e,f,g,h,i", "a", "", "more than 8"},
        {"a,b", "c", "", "--default-priority 'c'"},
        {"a,b", "a", "c=1s", "--shed-lag: 'c=1s'"},
        {"a,b", "a", "a=0s", "--shed-lag: 'a=0s'"},
        {"a,b", "a", "a=", "--shed-lag: 'a='"},
        {"a,b", "a", "a=1s,", "--shed-lag: ''"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        if (shed_configure(&c, bad[i].list, bad[i].dflt, "k", bad[i].lag, err, sizeof(err)))
            fail_msg("accepted %s / %s / %s", bad[i].list, bad[i].dflt, bad[i].lag);
        if (!strstr(err, bad[i].why))
            fail_msg("%s: '%s' says nothing of '%s'", bad[i].list, err, bad[i].why);
    }
}

static void priority_of_a_request(void **unused)
{
    (void)unused;
    shed_config c;
    char err[256];
    assert_true(shed_configure(&c, "critical,normal,sheddable", "normal", "priority",
                               "sheddable=1ms", err, sizeof(err)));
    weir_entry user = {"user", 4, "u", 1}, prio = {"priority", 8, "sheddable", 9},
               bogus = {"priority", 8, "urgent", 6};
    weir_entry two[] = {{"priority", 8, "critical", 8}, {"user", 4, "u", 1}};
    weir_descriptor d[3] = {{&user, 1, false, 0, NULL}, {&prio, 1, false, 0, NULL}};
    weir_request r = {"api", 3, d, 1, 0, 0};
    assert_int_equal(shed_priority_of(&c, &r, -1), 1); /* the default */
    assert_int_equal(shed_priority_of(&c, &r, 0), 0);  /* the protocol's */
    r.n_descriptors = 2;
    assert_int_equal(shed_priority_of(&c, &r, -1), 2); /* a descriptor's */
    assert_int_equal(shed_priority_of(&c, &r, 0), 0);  /* the protocol's first */
    d[1] = (weir_descriptor){&bogus, 1, false, 0, NULL};
    assert_int_equal(shed_priority_of(&c, &r, -1), 1); /* not a priority: none */
    d[1] = (weir_descriptor){two, 2, false, 0, NULL};
    assert_int_equal(shed_priority_of(&c, &r, -1), 1); /* one entry only */
}

/* A request is shed by shares only when every descriptor over its limit
 * is so by shares alone, and it has a priority. */
static void denied_by_shares(void **unused)
{
    (void)unused;
    shed_config c;
    char err[256], msg[192];
    assert_true(shed_configure(&c, "critical,normal,sheddable", "normal", "priority", "", err,
                               sizeof(err)));
    weir_request r = {"api", 3, NULL, 0, 0, 3};
    weir_descriptor_status st[3];
    memset(st, 0, sizeof(st));
    st[0].code = WEIR_CODE_OK;
    st[1].code = st[2].code = WEIR_CODE_OVER_LIMIT;
    st[1].shed = st[2].shed = true;
    assert_true(shed_by_share(&c, &r, WEIR_CODE_OVER_LIMIT, st, 3, msg, sizeof(msg)));
    assert_non_null(strstr(msg, "overloaded: sheddable requests are shed"));
    /* admitted: nothing to shed */
    assert_false(shed_by_share(&c, &r, WEIR_CODE_OK, st, 1, msg, sizeof(msg)));
    /* a limit itself denies one descriptor: over limit */
    st[2].shed = false;
    assert_false(shed_by_share(&c, &r, WEIR_CODE_OVER_LIMIT, st, 3, msg, sizeof(msg)));
    st[2].shed = true;
    /* no priority, or one past the list: no share applied */
    r.priority = 0;
    assert_false(shed_by_share(&c, &r, WEIR_CODE_OVER_LIMIT, st, 3, msg, sizeof(msg)));
    r.priority = 4;
    assert_false(shed_by_share(&c, &r, WEIR_CODE_OVER_LIMIT, st, 3, msg, sizeof(msg)));
}

static void the_lag(void **unused)
{
    (void)unused;
    shed_config c;
    char err[256];
    assert_true(shed_configure(&c, "critical,sheddable", "critical", "", "sheddable=20ms", err,
                               sizeof(err)));
    shed_monitor m = {0};
    shed_tick(&m, 1000); /* the first tick sets the due time */
    assert_int_equal(m.lag_us, 0);
    shed_tick(&m, 1000 + SHED_TICK_MS); /* on time */
    assert_int_equal(m.lag_us, 0);
    assert_false(shed_now(&c, &m, 1));
    /* a loop stuck 100 ms: shed at once, critical never */
    shed_tick(&m, m.due_ms + 100);
    assert_int_equal(m.last_us, 100000);
    assert_true(m.lag_us >= 75000);
    assert_true(shed_now(&c, &m, 1));
    assert_false(shed_now(&c, &m, 0));
    /* calm ticks bring it down */
    for (int i = 0; i < 10; i++)
        shed_tick(&m, m.due_ms);
    assert_false(shed_now(&c, &m, 1));
    assert_false(shed_now(&c, &m, 7)); /* not a priority */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(settings),
        cmocka_unit_test(priority_of_a_request),
        cmocka_unit_test(the_lag),
        cmocka_unit_test(denied_by_shares),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
