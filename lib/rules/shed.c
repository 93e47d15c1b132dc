/*
 * shed.c - a limit's `shed:` mapping (the share of the limit each request
 * priority must leave free, weir_rule_limit.shed_bp) and the priorities
 * it names (weir_rules_options.priorities).
 *
 *     shed:
 *       normal: 10%
 *       sheddable: 30%
 *       test: 50%
 *
 * A share is a percentage from 0% to 100% with at most two decimals,
 * kept exactly in hundredths of a percent (no floating point).
 */
#include <stdio.h>
#include <string.h>

#include "rules/yaml_walk.h"

static const char *const default_priorities[] = {"critical", "normal", "sheddable", "test"};

/* [a-z0-9_-], 1 .. WEIR_RULES_MAX_PRIORITY_BYTES - 1 of them */
static bool priority_name_ok(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    return n > 0 && n < WEIR_RULES_MAX_PRIORITY_BYTES &&
           strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_-") == n;
}

bool weir__rules_priorities(weir_rules_options *o)
{
    if (!o->priorities && o->n_priorities == 0) {
        o->priorities = default_priorities;
        o->n_priorities = sizeof(default_priorities) / sizeof(default_priorities[0]);
        return true;
    }
    if (!o->priorities || o->n_priorities == 0 || o->n_priorities > WEIR_RULES_MAX_PRIORITIES)
        return false;
    for (size_t i = 0; i < o->n_priorities; i++) {
        if (!priority_name_ok(o->priorities[i]))
            return false;
        for (size_t k = 0; k < i; k++)
            if (strcmp(o->priorities[k], o->priorities[i]) == 0)
                return false;
    }
    return true;
}

/* "30%", "0.5%", "12.25%" in hundredths of a percent; false for anything
 * else or past 100%. */
static bool parse_percent(const char *s, uint16_t *bp)
{
    unsigned whole = 0, frac = 0, digits = 0, places = 0;
    const char *p = s;
    for (; *p >= '0' && *p <= '9'; p++, digits++)
        if ((whole = whole * 10 + (unsigned)(*p - '0')) > 100)
            return false;
    if (*p == '.') {
        for (p++; *p >= '0' && *p <= '9'; p++) {
            if (++places > 2)
                return false;
            frac = frac * 10 + (unsigned)(*p - '0');
        }
    }
    if (digits == 0 || (p[-1] == '.') || p[0] != '%' || p[1] != '\0')
        return false;
    unsigned v = whole * 100 + (places == 1 ? frac * 10 : frac);
    if (v > 10000)
        return false;
    *bp = (uint16_t)v;
    return true;
}

/* The known priorities, "critical, normal, ..." into @buf. */
static void priority_list(const weir_rules_options *o, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < o->n_priorities; i++) {
        int w = snprintf(buf + len, cap - len, "%s%s", i ? ", " : "", o->priorities[i]);
        if (w < 0 || (size_t)w >= cap - len)
            return;
        len += (size_t)w;
    }
}

/* The rank (0 = most important) of the priority the current key names,
 * or -1 when it names none or one @seen already (reported). */
static int key_rank(yp *p, uint32_t seen)
{
    const weir_rules_options *o = &p->ld->opts;
    pos at = weir__yp_here(p);
    const char *k = weir__yp_scalar(p, "shed key");
    if (!k)
        return -1;
    for (size_t i = 0; i < o->n_priorities; i++) {
        if (strcmp(o->priorities[i], k) != 0)
            continue;
        if (!(seen & (1u << i)))
            return (int)i;
        ERR(p, at, "shed: duplicate priority '%s'", k);
        return -1;
    }
    char list[WEIR_RULES_MAX_PRIORITIES * WEIR_RULES_MAX_PRIORITY_BYTES + 16];
    priority_list(o, list, sizeof(list));
    ERR(p, at, "shed: unknown priority '%.64s' (the priorities are: %s)", k, list);
    return -1;
}

bool weir__rules_read_shed(yp *p, weir_rule_limit *l)
{
    if (weir__yp_is_null(p))
        return true;
    if (p->ev.type != YAML_MAPPING_START_EVENT)
        return weir__yp_wrong_kind(p, "shed", "a mapping of priority: percentage");
    uint32_t seen = 0;
    /* key, value, key, value, ... each node consumed whatever it is */
    while (weir__yp_next(p) && p->ev.type != YAML_MAPPING_END_EVENT) {
        int rank = key_rank(p, seen);
        if (!weir__yp_skip(p) || !weir__yp_next(p))
            return false;
        const char *v = rank >= 0 ? weir__yp_scalar(p, "shed") : NULL;
        if (v && parse_percent(v, &l->shed_bp[rank]))
            seen |= 1u << rank;
        else if (v)
            ERR(p, weir__yp_here(p),
                "shed: '%s' share '%.64s' must be a percentage from 0%% to 100%%, at most 2 "
                "decimals (e.g. 30%%)",
                p->ld->opts.priorities[rank], v);
        if (!weir__yp_skip(p))
            return false;
    }
    return !p->dead && !p->ld->nomem;
}
