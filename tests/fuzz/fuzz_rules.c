/*
 * fuzz_rules.c - fuzzes the rule-file loader through weir_rules_parse():
 * any bytes must load or fail cleanly, never crash, leak or hang.
 *
 * A loaded tree must keep the loader's promises (keys non-empty, nesting
 * within the cap, counts that match a walk, limits compiled); a failed load
 * must say why and where, within the input. A broken invariant aborts, so
 * the fuzzer reports it like a crash.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "weir/rules.h"
#include "weir/weir.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
    if (!ok)
        abort();
}

static void walk(const weir_rule *n, unsigned depth, size_t *rules, size_t *limits)
{
    check(depth <= WEIR_RULES_MAX_DEPTH);
    const char *key = weir_rule_key(n);
    check(key && *key && strlen(key) <= WEIR_RULES_MAX_STRING_BYTES);
    const char *value = weir_rule_value(n);
    check(!value || (*value && strlen(value) <= WEIR_RULES_MAX_STRING_BYTES));
    check(weir_rule_is_wildcard(n) == (value && strchr(value, '*')));
    (*rules)++;
    for (size_t i = 0; i < weir_rule_limit_count(n); i++) {
        const weir_rule_limit *l = weir_rule_limit_at(n, i);
        check(l != NULL);
        if (l->unlimited) {
            check(l->window_us == 0);
        } else {
            check(l->window_us >= 1 && l->window_us <= WEIR_MAX_WINDOW_US);
            check(l->compiled.window_us == l->window_us);
            check(l->compiled.limit == l->requests_per_unit);
            check(weir_state_size(&l->compiled) > 0);
            if (l->calendar != WEIR_CALENDAR_NONE)
                check(l->algorithm == WEIR_ALGO_FIXED_WINDOW &&
                      (l->unit == WEIR_UNIT_DAY || l->unit == WEIR_UNIT_MONTH ||
                       l->unit == WEIR_UNIT_YEAR));
            else
                check(l->time_zone == NULL && l->tz == NULL);
        }
        for (size_t j = 0; j < l->n_replaces; j++)
            check(l->replaces[j] && *l->replaces[j]);
        (*limits)++;
    }
    check(weir_rule_limit_at(n, weir_rule_limit_count(n)) == NULL);
    for (size_t i = 0; i < weir_rule_child_count(n); i++)
        walk(weir_rule_child(n, i), depth + 1, rules, limits);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static weir_ctx *ctx;
    if (!ctx && weir_ctx_new(NULL, &ctx) != WEIR_OK)
        abort();
    /* the options come from the input too, so both merge paths and a
     * non-default algorithm get explored */
    weir_rules_options o = {.size = sizeof(o)};
    if (size > 0 && (data[0] & 1))
        o.default_algorithm = WEIR_ALGO_TOKEN_BUCKET;
    weir_rules_error errs[4];
    size_t n_errs = 99;
    weir_rules *r = NULL;
    weir_status st = weir_rules_parse(ctx, "fuzz.yaml", data, size, &o, &r, errs, 4, &n_errs);
    size_t lines = 1;
    for (size_t i = 0; i < size; i++)
        lines += data[i] == '\n' || data[i] == '\r';
    if (st == WEIR_OK) {
        check(r != NULL && n_errs == 0);
        size_t rules = 0, limits = 0;
        for (size_t d = 0; d < weir_rules_domain_count(r); d++) {
            const weir_rules_domain *dom = weir_rules_domain_at(r, d);
            check(dom && weir_rules_domain_name(dom)[0] != '\0');
            check(weir_rules_find_domain(r, weir_rules_domain_name(dom)) == dom);
            for (size_t i = 0; i < weir_rules_domain_rule_count(dom); i++)
                walk(weir_rules_domain_rule(dom, i), 1, &rules, &limits);
            /* a tier is a body under the tenant key, with no value */
            const char *tkey = weir_rules_domain_tenant_key(dom);
            size_t nt = weir_rules_domain_tier_count(dom);
            check(tkey || nt == 0);
            const char *dflt = weir_rules_domain_default_tier(dom);
            check(!dflt || weir_rules_domain_find_tier(dom, dflt) != NULL);
            for (size_t t = 0; t < nt; t++) {
                const weir_rule *root = weir_rules_domain_tier(dom, t);
                const char *name = weir_rules_domain_tier_name(dom, t);
                check(root && name && *name && strlen(name) <= WEIR_RULES_MAX_TIER_NAME_BYTES);
                check(strcmp(weir_rule_key(root), tkey) == 0 && !weir_rule_value(root));
                check(weir_rules_domain_find_tier(dom, name) == root);
                walk(root, 1, &rules, &limits);
            }
            check(weir_rules_domain_tier(dom, nt) == NULL);
        }
        check(rules == weir_rules_rule_count(r));
        check(limits == weir_rules_limit_count(r));
        weir_rules_free(r);
    } else {
        check(st == WEIR_EPARSE || st == WEIR_ENOMEM);
        check(r == NULL);
        if (st == WEIR_EPARSE) {
            check(n_errs >= 1);
            for (size_t i = 0; i < n_errs && i < 4; i++) {
                check(errs[i].message[0] != '\0');
                check(memchr(errs[i].message, '\0', sizeof(errs[i].message)) != NULL);
                check(errs[i].line <= lines + 1);
            }
        }
    }
    return 0;
}
