/*
 * test_calendar.c - calendar quotas end to end: a limit per local day,
 * month or year in a time zone, its reset at the period's real end
 * across DST changes and month lengths, a fresh count each period, in the
 * rule file and as a tenant's override; and the rule file's refusals.
 *
 * Times come from `date -u -d 'TZ="America/New_York" 2026-03-09 00:00' +%s`
 * and the like.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "engine_world.h"
#include "rules_support.h"

#define S 1000000LL

static const char *daily = "domain: api\n"
                           "descriptors:\n"
                           "  - key: user\n"
                           "    rate_limit:\n"
                           "      calendar: day\n"
                           "      time_zone: America/New_York\n"
                           "      requests_per_unit: 3\n";

/* Decides @n requests of user @u at @now; returns how many were admitted
 * and the last status. */
static int admitted(world *w, const char *u, int n, int64_t now, weir_descriptor_status *last)
{
    weir_entry e[] = {{"user", 4, u, strlen(u)}};
    weir_descriptor d = {e, 1, false, 0, NULL};
    int ok = 0;
    for (int i = 0; i < n; i++)
        ok += decide(w, "api", &d, 1, 0, now, last) == WEIR_CODE_OK;
    return ok;
}

static void a_day_in_new_york(void **unused)
{
    (void)unused;
    world w;
    open_world(&w, daily);
    weir_descriptor_status st;
    /* 2026-03-08, 23 hours long in New York: 05:00Z to 2026-03-09T04:00Z */
    int64_t noon = 1772971200 * S; /* 2026-03-08T12:00:00Z */
    int64_t end = 1773028800 * S;  /* 2026-03-09T04:00:00Z */
    assert_int_equal(admitted(&w, "a", 5, noon, &st), 3);
    assert_int_equal(st.code, WEIR_CODE_OVER_LIMIT);
    assert_int_equal(st.unit, WEIR_UNIT_DAY);
    assert_int_equal(st.n_outcomes, 1);
    assert_int_equal(st.outcomes[0].reset_after_us, end - noon);
    /* the last microsecond of the day, then the next day */
    assert_int_equal(admitted(&w, "a", 1, end - 1, &st), 0);
    assert_int_equal(admitted(&w, "a", 5, end, &st), 3);
    /* 2026-11-01 is 25 hours: 04:00Z to 2026-11-02T05:00Z */
    int64_t fall = 1793541600 * S; /* 2026-11-01T14:00:00Z */
    assert_int_equal(admitted(&w, "b", 4, fall, &st), 3);
    assert_int_equal(st.outcomes[0].reset_after_us, (1793595600 - 1793541600) * S);
    close_world(&w);
}

static void february_and_the_month(void **unused)
{
    (void)unused;
    world w;
    open_world(&w, "domain: api\n"
                   "descriptors:\n"
                   "  - key: user\n"
                   "    rate_limit: {calendar: month, requests_per_unit: 2}\n");
    weir_descriptor_status st;
    int64_t leap = 1709251199 * S; /* 2024-02-29T23:59:59Z */
    assert_int_equal(admitted(&w, "a", 3, leap, &st), 2);
    assert_int_equal(st.outcomes[0].reset_after_us, 1 * S);
    assert_int_equal(st.unit, WEIR_UNIT_MONTH);
    assert_int_equal(admitted(&w, "a", 3, leap + 1 * S, &st), 2); /* March */
    int64_t feb26 = 1771545600 * S; /* 2026-02-20T00:00:00Z: 9 days to March */
    assert_int_equal(admitted(&w, "b", 3, feb26, &st), 2);
    assert_int_equal(st.outcomes[0].reset_after_us, 9 * 86400 * S);
    close_world(&w);
}

static void a_tenant_quota_in_its_zone(void **unused)
{
    (void)unused;
    world w;
    open_world(&w, "domain: api\n"
                   "tenants:\n"
                   "  default_tier: free\n"
                   "  tiers:\n"
                   "    free:\n"
                   "      rate_limits:\n"
                   "        - {unit: minute, requests_per_unit: 100}\n"
                   "        - {calendar: month, time_zone: Europe/London, requests_per_unit: 4}\n"
                   "descriptors: []\n");
    weir_tenant_limit l = {"default",          7, 2, WEIR_UNIT_NONE, WEIR_CALENDAR_MONTH,
                           "America/New_York", 0};
    weir_tenant rec = {"k", 1, NULL, INT64_MIN, INT64_MAX, &l, 1};
    weir_tenants *t;
    assert_int_equal(weir_tenants_new(w.ctx, &t), WEIR_OK);
    assert_int_equal(weir_tenants_add(t, &rec), WEIR_OK);
    assert_int_equal(weir_engine_set_tenants(w.engine, t), WEIR_OK);
    weir_entry k[] = {{"api_key", 7, "k", 1}}, o[] = {{"api_key", 7, "o", 1}};
    weir_descriptor dk = {k, 1, false, 0, NULL}, dof = {o, 1, false, 0, NULL};
    weir_descriptor_status st;
    /* 2026-04-01T02:00Z: April in London, still March in New York */
    int64_t now = 1775008800 * S;
    int ok = 0;
    for (int i = 0; i < 6; i++)
        ok += decide(&w, "api", &dk, 1, 0, now, &st) == WEIR_CODE_OK;
    assert_int_equal(ok, 2); /* the override replaced the tier's month */
    /* New York's April starts at 04:00Z */
    assert_int_equal(st.outcomes[1].reset_after_us, 2 * 3600 * S);
    ok = 0;
    for (int i = 0; i < 6; i++)
        ok += decide(&w, "api", &dof, 1, 0, now, &st) == WEIR_CODE_OK;
    assert_int_equal(ok, 4); /* the tier's month in London */
    close_world(&w);
}

static void the_rule_file_refuses_bad_calendars(void **unused)
{
    (void)unused;
    static const struct {
        const char *limit, *why;
    } bad[] = {
        {"{calendar: week, requests_per_unit: 1}", "invalid calendar 'week'"},
        {"{calendar: day, unit: day, requests_per_unit: 1}", "'calendar' is the window"},
        {"{calendar: day, window: 1h, requests_per_unit: 1}", "'calendar' is the window"},
        {"{calendar: day, algorithm: gcra, requests_per_unit: 1}", "counted as a fixed_window"},
        {"{unit: day, time_zone: UTC, requests_per_unit: 1}", "applies to a 'calendar' limit"},
        {"{calendar: day, time_zone: Mars/Olympus, requests_per_unit: 1}", "no such zone"},
        {"{calendar: day, time_zone: ../etc/passwd, requests_per_unit: 1}", "not a time zone name"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char yaml[512];
        snprintf(yaml, sizeof(yaml),
                 "domain: api\ndescriptors:\n  - key: user\n    rate_limit: %s\n", bad[i].limit);
        test_rules_expect_error(yaml, bad[i].why);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_day_in_new_york),
        cmocka_unit_test(february_and_the_month),
        cmocka_unit_test(a_tenant_quota_in_its_zone),
    };
    const struct CMUnitTest rules[] = {
        cmocka_unit_test(the_rule_file_refuses_bad_calendars),
    };
    int failed = cmocka_run_group_tests_name("memory store", tests, world_use_memory, NULL);
    world_deferred_opts.shared_keys = true;
    failed +=
        cmocka_run_group_tests_name("deferred store, stable keys", tests, world_use_deferred, NULL);
    failed += cmocka_run_group_tests_name("rules", rules, NULL, NULL);
    return failed;
}
