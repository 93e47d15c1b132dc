/*
 * tenants.c - a domain's `tenants:` section: the descriptor entry that
 * carries a tenant's key, the tier of keys with no record, and the tiers
 * themselves, each a descriptor body (limits, nested descriptors) read by
 * parse.c's descriptor reader (docs/QUOTAS.md gives the syntax).
 */
#include <stdio.h>
#include <string.h>

#include "rules/yaml_walk.h"

#define DEFAULT_TENANT_KEY "api_key"

/* Whether @s is a tier name: 1 .. WEIR_RULES_MAX_TIER_NAME_BYTES of
 * [A-Za-z0-9_.-], the same names the admin API takes. */
static bool tier_name_ok(const char *s, size_t len)
{
    if (len == 0 || len > WEIR_RULES_MAX_TIER_NAME_BYTES)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '_' || c == '.' || c == '-';
        if (!ok)
            return false;
    }
    return true;
}

/* A tier while the section is read. */
typedef struct tier_item {
    rules_tier t;
    pos at;
    struct tier_item *next;
} tier_item;

/* Reads the `tiers:` mapping: name -> body. */
static bool read_tiers(yp *p, tier_item **head, size_t *count)
{
    if (weir__yp_is_null(p))
        return true;
    if (p->ev.type != YAML_MAPPING_START_EVENT)
        return weir__yp_wrong_kind(p, "tiers", "a mapping of tier names to their limits");
    tier_item **tail = head;
    for (;;) {
        if (!weir__yp_next(p))
            return false;
        if (p->ev.type == YAML_MAPPING_END_EVENT)
            return true;
        pos at = weir__yp_here(p);
        const char *name = NULL;
        if (p->ev.type != YAML_SCALAR_EVENT) {
            if (!weir__yp_wrong_kind(p, "a tier name", "a string"))
                return false;
        } else {
            const char *s = (const char *)p->ev.data.scalar.value;
            size_t len = p->ev.data.scalar.length;
            if (!tier_name_ok(s, len))
                ERR(p, at, "tier name '%.64s' must be 1 to %u letters, digits, '_', '.' or '-'", s,
                    WEIR_RULES_MAX_TIER_NAME_BYTES);
            else
                name = weir__rules_strndup(p->ld, s, len);
        }
        for (tier_item *t = *head; name && t; t = t->next) {
            if (strcmp(t->t.name, name) == 0) {
                ERR(p, at, "duplicate tier '%s' (first at line %llu)", name,
                    (unsigned long long)t->at.line);
                name = NULL;
            }
        }
        if (name && *count == WEIR_RULES_MAX_TIERS) {
            ERR(p, at, "more than %u tiers in one domain", WEIR_RULES_MAX_TIERS);
            name = NULL;
        }
        if (!weir__yp_next(p))
            return false;
        if (p->ev.type != YAML_MAPPING_START_EVENT) {
            if (!weir__yp_is_null(p) &&
                !weir__yp_wrong_kind(p, "a tier", "a mapping (rate_limit(s), descriptors)"))
                return false;
            continue;
        }
        weir_rule *root = NULL;
        if (!weir__rules_read_descriptor(p, 1, true, &root))
            return false;
        if (!name || !root)
            continue;
        tier_item *it = weir__rules_alloc(p->ld, sizeof(*it));
        if (!it)
            return false;
        it->t.name = name;
        it->t.root = root;
        it->at = at;
        *tail = it;
        tail = &it->next;
        (*count)++;
    }
}

bool weir__rules_read_tenants(yp *p, rules_tenants *out)
{
    pos start = weir__yp_here(p);
    if (weir__yp_is_null(p))
        return true;
    if (p->ev.type != YAML_MAPPING_START_EVENT)
        return weir__yp_wrong_kind(p, "tenants", "a mapping (key, default_tier, tiers)");
    static const char *const names[] = {"key", "default_tier", "tiers"};
    uint64_t seen = 0;
    pos key_at, default_at = start;
    const char *key = DEFAULT_TENANT_KEY, *default_tier = NULL;
    tier_item *tiers = NULL;
    size_t n_tiers = 0;
    bool bad = false;
    int k;
    while ((k = weir__yp_key(p, names, 3, &seen, &key_at)) != -1) {
        if (k == -3)
            return false;
        if (k == 0) {
            const char *s = weir__yp_string(p, "key", WEIR_RULES_MAX_STRING_BYTES);
            if (s && !*s)
                ERR(p, weir__yp_here(p), "tenants.key must not be empty");
            if (s && *s)
                key = s;
            else
                bad = true;
        } else if (k == 1) {
            default_at = weir__yp_here(p);
            if (!weir__yp_is_null(p) &&
                !(default_tier = weir__yp_string(p, "default_tier", WEIR_RULES_MAX_STRING_BYTES)))
                bad = true;
        } else if (!read_tiers(p, &tiers, &n_tiers)) {
            return false;
        }
        if (!weir__yp_skip(p))
            return false;
    }
    if (p->dead)
        return false;
    rules_tier *arr = n_tiers ? weir__rules_alloc(p->ld, n_tiers * sizeof(*arr)) : NULL;
    if (n_tiers && !arr)
        return false;
    size_t i = 0;
    bool default_found = !default_tier;
    for (tier_item *t = tiers; t; t = t->next) {
        t->t.root->key = key;
        arr[i++] = t->t;
        default_found = default_found || strcmp(t->t.name, default_tier) == 0;
    }
    if (!default_found) {
        ERR(p, default_at, "default_tier '%.64s' is not one of this domain's tiers", default_tier);
        bad = true;
    }
    if (bad)
        return true;
    out->key = key;
    out->default_tier = default_tier;
    out->tiers = arr;
    out->n_tiers = n_tiers;
    out->file = p->file;
    out->line = (uint32_t)start.line;
    out->column = (uint32_t)start.col;
    out->default_line = (uint32_t)default_at.line;
    out->default_column = (uint32_t)default_at.col;
    return true;
}
