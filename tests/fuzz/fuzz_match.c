/*
 * fuzz_match.c - fuzzes descriptor matching: the input is a rule file, a
 * NUL byte, then requests; every request is matched through the index and
 * through a slow reference walk of the rule tree, and the two must agree
 * (same node, same kind at every level). A matched limit must have a
 * counter key, the same one twice. A disagreement aborts, so the fuzzer
 * reports it like a crash.
 *
 * Request records: one byte n (entries, taken modulo 8, 0 meaning "use the
 * domain name from the input" for one more byte-counted string first),
 * then n times [key length byte][key][value length byte][value]; a
 * truncated record ends the input.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/match.h"
#include "weir/rules.h"
#include "weir/weir.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
    if (!ok)
        abort();
}

/* Reference glob by dynamic programming over the value (at most 255
 * bytes here): row[j] = the pattern so far matches value[0..j). */
static bool ref_glob(const char *p, size_t pl, const char *v, size_t vl)
{
    bool row[256 + 1];
    check(vl <= 256);
    row[0] = true;
    for (size_t j = 1; j <= vl; j++)
        row[j] = false;
    for (size_t i = 0; i < pl; i++) {
        if (p[i] == '*') {
            for (size_t j = 1; j <= vl; j++)
                row[j] = row[j] || row[j - 1];
        } else {
            for (size_t j = vl; j >= 1; j--)
                row[j] = row[j - 1] && v[j - 1] == p[i];
            row[0] = false;
        }
    }
    return row[vl];
}

static bool eq(const char *a, const char *b, size_t bl)
{
    return strlen(a) == bl && (bl == 0 || memcmp(a, b, bl) == 0);
}

static const weir_rule *ref_match(const weir_rules *r, const char *domain, size_t domain_len,
                                  const weir__entry *e, size_t n, weir__match_kind *kinds,
                                  bool *found)
{
    const weir_rules_domain *d = NULL;
    for (size_t i = 0; i < weir_rules_domain_count(r) && !d; i++) {
        const weir_rules_domain *c = weir_rules_domain_at(r, i);
        if (eq(weir_rules_domain_name(c), domain, domain_len))
            d = c;
    }
    *found = d != NULL;
    if (!d)
        return NULL;
    const weir_rule *cur = NULL;
    for (size_t l = 0; l < n; l++) {
        size_t nc = cur ? weir_rule_child_count(cur) : weir_rules_domain_rule_count(d);
        const weir_rule *hit = NULL;
        for (int pass = 0; pass < 3 && !hit; pass++) {
            for (size_t i = 0; i < nc && !hit; i++) {
                const weir_rule *c = cur ? weir_rule_child(cur, i) : weir_rules_domain_rule(d, i);
                const char *v = weir_rule_value(c);
                if (!eq(weir_rule_key(c), e[l].key, e[l].key_len))
                    continue;
                bool wild = v && weir_rule_is_wildcard(c);
                if ((pass == 0 && v && !wild && eq(v, e[l].value, e[l].value_len)) ||
                    (pass == 1 && wild && ref_glob(v, strlen(v), e[l].value, e[l].value_len)) ||
                    (pass == 2 && !v)) {
                    hit = c;
                    kinds[l] = pass == 0   ? WEIR__MATCH_EXACT
                               : pass == 1 ? WEIR__MATCH_WILDCARD
                                           : WEIR__MATCH_DEFAULT;
                }
            }
        }
        if (!hit)
            return NULL;
        cur = hit;
    }
    return cur;
}

/* A byte-counted string from the input; false when it is cut short. */
static bool take(const uint8_t **p, const uint8_t *end, const char **s, size_t *len)
{
    if (*p >= end)
        return false;
    size_t n = **p;
    (*p)++;
    if ((size_t)(end - *p) < n)
        return false;
    *s = (const char *)*p;
    *len = n;
    *p += n;
    return true;
}

static void run_requests(const weir_rules *r, const weir__match_index *idx, const uint8_t *p,
                         const uint8_t *end)
{
    static char key_a[1 << 16], key_b[1 << 16];
    const weir_rules_domain *d0 = weir_rules_domain_at(r, 0);
    const char *dflt = d0 ? weir_rules_domain_name(d0) : "d";
    for (int q = 0; q < 256 && p < end; q++) {
        size_t n = *p++ % 8;
        const char *domain = dflt;
        size_t domain_len = strlen(dflt);
        if (n == 0) {
            if (!take(&p, end, &domain, &domain_len) || p >= end)
                return;
            n = 1 + *p++ % 7;
        }
        weir__entry e[8];
        for (size_t i = 0; i < n; i++) {
            if (!take(&p, end, &e[i].key, &e[i].key_len) ||
                !take(&p, end, &e[i].value, &e[i].value_len))
                return;
        }
        weir__match_result m;
        check(weir__match(idx, domain, domain_len, e, n, &m) == WEIR_OK);
        weir__match_kind kinds[8];
        bool found;
        const weir_rule *want = ref_match(r, domain, domain_len, e, n, kinds, &found);
        check(m.domain_found == found);
        check(m.rule == want);
        if (!want)
            continue;
        check(m.depth == n);
        for (size_t i = 0; i < n; i++) {
            check(m.levels[i].kind == kinds[i]);
            bool share = (weir_rule_flags(m.levels[i].rule) & WEIR_RULE_SHARE_THRESHOLD) != 0;
            check(m.levels[i].value_in_key == (kinds[i] == WEIR__MATCH_DEFAULT ||
                                               (kinds[i] == WEIR__MATCH_WILDCARD && !share)));
        }
        for (size_t l = 0; l < weir_rule_limit_count(want); l++) {
            size_t a = weir__counter_key(&m, e, l, key_a, sizeof(key_a));
            size_t b = weir__counter_key(&m, e, l, key_b, sizeof(key_b));
            check(a > 0 && a == b && memcmp(key_a, key_b, a) == 0);
            check(weir__counter_key(&m, e, l, key_b, a - 1) == 0);
        }
        check(weir__counter_key(&m, e, weir_rule_limit_count(want), key_a, sizeof(key_a)) == 0);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static weir_ctx *ctx;
    if (!ctx && weir_ctx_new(NULL, &ctx) != WEIR_OK)
        abort();
    const uint8_t *sep = size ? memchr(data, 0, size) : NULL;
    if (!sep)
        return 0;
    weir_rules *r = NULL;
    if (weir_rules_parse(ctx, "fuzz.yaml", data, (size_t)(sep - data), NULL, &r, NULL, 0, NULL) !=
        WEIR_OK)
        return 0;
    weir__match_index *idx = NULL;
    weir_status st = weir__match_index_new(ctx, r, &idx);
    check(st == WEIR_OK || st == WEIR_ENOMEM);
    if (st == WEIR_OK)
        run_requests(r, idx, sep + 1, data + size);
    weir__match_index_free(idx);
    weir_rules_free(r);
    return 0;
}
