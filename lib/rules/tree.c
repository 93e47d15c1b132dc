/*
 * tree.c - the rule tree: its arena, the error records, joining documents
 * into domains, the checks that need the whole load, the accessors and
 * weir_rules_free().
 *
 * Invariant: every node, string and array of a tree is carved out of its
 * arena, so freeing a tree is one walk over the arena's chunks; the arrays
 * the accessors index are built by weir__rules_finish() and never change
 * afterwards, which is what makes a loaded tree safe to share.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rules/loader.h"

struct rules_chunk {
    rules_chunk *next;
    size_t used;
    size_t cap;
    max_align_t data[]; /* keeps every carve aligned for any type */
};

#define CHUNK_BYTES ((size_t)64 * 1024)
#define ALIGN ((size_t) _Alignof(max_align_t))

void *weir__rules_alloc(rules_loader *ld, size_t size)
{
    weir_rules *r = ld->rules;
    size_t need = (size + ALIGN - 1) & ~(ALIGN - 1);
    if (need < size) {
        ld->nomem = true;
        return NULL;
    }
    rules_chunk *c = r->chunks;
    if (!c || c->cap - c->used < need) {
        size_t cap = need > CHUNK_BYTES ? need : CHUNK_BYTES;
        rules_chunk *n = weir__malloc(r->ctx, sizeof(*n) + cap);
        if (!n) {
            ld->nomem = true;
            return NULL;
        }
        n->used = 0;
        n->cap = cap;
        /* An oversized carve gets a chunk of its own behind the current
         * one, so the current chunk's free space is not given up. */
        if (c && cap > CHUNK_BYTES) {
            n->next = c->next;
            c->next = n;
        } else {
            n->next = c;
            r->chunks = n;
        }
        c = n;
    }
    unsigned char *p = (unsigned char *)c->data + c->used;
    c->used += need;
    memset(p, 0, size);
    return p;
}

char *weir__rules_strndup(rules_loader *ld, const char *s, size_t len)
{
    if (len == SIZE_MAX) {
        ld->nomem = true;
        return NULL;
    }
    char *p = weir__rules_alloc(ld, len + 1);
    if (p && len)
        memcpy(p, s, len);
    return p;
}

static uint32_t clamp_u32(uint64_t v)
{
    return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

static void fill(weir_rules_error *e, const char *file, uint64_t line, uint64_t column,
                 const char *fmt, va_list ap) __attribute__((format(printf, 5, 0)));

static void fill(weir_rules_error *e, const char *file, uint64_t line, uint64_t column,
                 const char *fmt, va_list ap)
{
    snprintf(e->file, sizeof(e->file), "%s", file ? file : "");
    e->line = clamp_u32(line);
    e->column = clamp_u32(column);
    vsnprintf(e->message, sizeof(e->message), fmt, ap);
}

void weir__rules_error(rules_loader *ld, const char *file, uint64_t line, uint64_t column,
                       const char *fmt, ...)
{
    size_t i = ld->n_errors++;
    if (i >= ld->max_errors)
        return;
    va_list ap;
    va_start(ap, fmt);
    fill(&ld->errors[i], file, line, column, fmt, ap);
    va_end(ap);
}

void weir__rules_warn(rules_loader *ld, const char *file, uint64_t line, uint64_t column,
                      const char *fmt, ...)
{
    rules_warning *rw = weir__rules_alloc(ld, sizeof(*rw));
    if (!rw)
        return;
    va_list ap;
    va_start(ap, fmt);
    fill(&rw->w, file, line, column, fmt, ap);
    va_end(ap);
    weir_rules *r = ld->rules;
    if (r->last_warning)
        r->last_warning->next = rw;
    else
        r->first_warning = rw;
    r->last_warning = rw;
    r->n_warnings++;
}

void weir__rules_add_domain(rules_loader *ld, const char *name, const char *file, uint32_t line,
                            uint32_t column, rule_list *descriptors, const rules_tenants *tenants)
{
    weir_rules *r = ld->rules;
    weir_rules_domain *d = r->first_domain;
    while (d && strcmp(d->name, name) != 0)
        d = d->next;
    if (d) {
        if (!ld->opts.merge_domains) {
            weir__rules_error(ld, file, line, column, "duplicate domain '%s' in config file", name);
            return;
        }
    } else {
        d = weir__rules_alloc(ld, sizeof(*d));
        if (!d)
            return;
        d->name = name;
        d->file = file;
        d->line = line;
        d->column = column;
        if (r->last_domain)
            r->last_domain->next = d;
        else
            r->first_domain = d;
        r->last_domain = d;
        r->n_domains++;
    }
    if (tenants->key) {
        if (d->tenants.key)
            weir__rules_error(ld, tenants->file, tenants->line, tenants->column,
                              "domain '%s' has a tenants section already (%s:%u)", name,
                              d->tenants.file, d->tenants.line);
        else
            d->tenants = *tenants;
    }
    if (!descriptors->first)
        return;
    if (d->building.last)
        d->building.last->next = descriptors->first;
    else
        d->building.first = descriptors->first;
    d->building.last = descriptors->last;
    d->building.n += descriptors->n;
}

/* ---- duplicate composite keys */

static int cmp_rule(const void *a, const void *b)
{
    const weir_rule *x = *(const weir_rule *const *)a;
    const weir_rule *y = *(const weir_rule *const *)b;
    int c = strcmp(x->key, y->key);
    if (c)
        return c;
    if (!x->value || !y->value) {
        if (x->value != y->value)
            return x->value ? 1 : -1;
    } else if ((c = strcmp(x->value, y->value)) != 0) {
        return c;
    }
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Upstream's spelling of one level of a composite key: key, or key_value. */
static size_t append_level(char *path, size_t len, size_t cap, const weir_rule *n)
{
    int w = n->value ? snprintf(path + len, cap - len, "%s_%s", n->key, n->value)
                     : snprintf(path + len, cap - len, "%s", n->key);
    if (w < 0)
        return len;
    size_t end = len + (size_t)w;
    return end < cap ? end : cap - 1;
}

/* Siblings are compared as (key, value) pairs, not as upstream's joined
 * strings, so ("a_b", "c") and ("a", "b_c") are two different rules here;
 * only the message uses upstream's spelling, which tools grep for. */
static void check_siblings(rules_loader *ld, weir_rule **nodes, size_t n, char *path, size_t len,
                           size_t cap)
{
    if (n >= 2) {
        weir_rule **sorted = weir__malloc(ld->rules->ctx, n * sizeof(*sorted));
        if (!sorted) {
            ld->nomem = true;
            return;
        }
        memcpy(sorted, nodes, n * sizeof(*sorted));
        qsort(sorted, n, sizeof(*sorted), cmp_rule);
        for (size_t i = 1; i < n; i++) {
            const weir_rule *a = sorted[i - 1], *b = sorted[i];
            bool same =
                strcmp(a->key, b->key) == 0 &&
                (a->value == b->value || (a->value && b->value && strcmp(a->value, b->value) == 0));
            if (!same)
                continue;
            size_t end = append_level(path, len, cap, b);
            weir__rules_error(ld, b->file, b->line, b->column,
                              "duplicate descriptor composite key '%.*s'", (int)end, path);
            path[len] = '\0';
        }
        weir__free(ld->rules->ctx, sorted);
    }
    for (size_t i = 0; i < n; i++) {
        const weir_rule *c = nodes[i];
        if (!c->n_children)
            continue;
        size_t end = append_level(path, len, cap, c);
        if (end + 1 < cap) {
            path[end++] = '.';
            path[end] = '\0';
        }
        check_siblings(ld, c->children, c->n_children, path, end, cap);
        path[len] = '\0';
    }
}

/* The nodes from a domain's top level down to the one being named. */
typedef struct level_stack {
    const weir_rule *nodes[WEIR_RULES_MAX_DEPTH];
    size_t depth;
} level_stack;

/* Gives every limit below @nodes its domain, its path (@path holds the
 * parent's, @len bytes, '.'-terminated unless empty) and its levels (@st
 * holds the parent's). */
static void name_limits(rules_loader *ld, const char *domain, weir_rule **nodes, size_t n,
                        char *path, size_t len, size_t cap, level_stack *st)
{
    if (st->depth >= WEIR_RULES_MAX_DEPTH)
        return; /* the parser refuses deeper trees */
    for (size_t i = 0; i < n; i++) {
        const weir_rule *c = nodes[i];
        size_t end = append_level(path, len, cap, c);
        st->nodes[st->depth] = c;
        if (c->n_limits) {
            char *copy = weir__rules_alloc(ld, end + 1);
            size_t n_levels = st->depth + 1;
            const weir_rule **levels = weir__rules_alloc(ld, n_levels * sizeof(*levels));
            if (!copy || !levels)
                return;
            memcpy(copy, path, end);
            copy[end] = '\0';
            memcpy(levels, st->nodes, n_levels * sizeof(*levels));
            for (size_t j = 0; j < c->n_limits; j++) {
                /* The limits are the arena's; the tree hands them out const. */
                weir_rule_limit *l = (weir_rule_limit *)(uintptr_t)c->limits[j];
                l->domain = domain;
                l->path = copy;
                l->levels = levels;
                l->n_levels = n_levels;
            }
        }
        if (c->n_children) {
            size_t sub = end;
            if (sub + 1 < cap) {
                path[sub++] = '.';
                path[sub] = '\0';
            }
            st->depth++;
            name_limits(ld, domain, c->children, c->n_children, path, sub, cap, st);
            st->depth--;
        }
        path[len] = '\0';
    }
}

void weir__rules_finish(rules_loader *ld)
{
    weir_rules *r = ld->rules;
    if (r->n_warnings) {
        if (!(r->warnings = weir__rules_alloc(ld, r->n_warnings * sizeof(*r->warnings))))
            return;
        size_t k = 0;
        for (rules_warning *w = r->first_warning; w; w = w->next)
            r->warnings[k++] = &w->w;
    }
    r->domains = weir__rules_alloc(ld, (r->n_domains ? r->n_domains : 1) * sizeof(*r->domains));
    if (!r->domains)
        return;
    size_t i = 0;
    for (weir_rules_domain *d = r->first_domain; d; d = d->next) {
        r->domains[i++] = d;
        d->rules = weir__rules_alloc(ld, (d->building.n ? d->building.n : 1) * sizeof(*d->rules));
        if (!d->rules)
            return;
        size_t j = 0;
        for (weir_rule *n = d->building.first; n; n = n->next)
            d->rules[j++] = n;
        d->n_rules = j;
        char path[WEIR_RULES_ERROR_MESSAGE_BYTES];
        int w = snprintf(path, sizeof(path), "%s.", d->name);
        size_t len = w < 0 ? 0 : (size_t)w;
        if (len >= sizeof(path))
            len = sizeof(path) - 1;
        check_siblings(ld, d->rules, d->n_rules, path, len, sizeof(path));
        path[0] = '\0';
        level_stack st = {{0}, 0};
        name_limits(ld, d->name, d->rules, d->n_rules, path, 0, sizeof(path), &st);
        for (size_t k = 0; k < d->tenants.n_tiers; k++) {
            weir_rule *root = d->tenants.tiers[k].root;
            w = snprintf(path, sizeof(path), "%s.tiers.%s.%s.", d->name, d->tenants.tiers[k].name,
                         root->key);
            len = w < 0 ? 0 : (size_t)w;
            if (len >= sizeof(path))
                len = sizeof(path) - 1;
            check_siblings(ld, root->children, root->n_children, path, len, sizeof(path));
            path[0] = '\0';
            name_limits(ld, d->name, &d->tenants.tiers[k].root, 1, path, 0, sizeof(path), &st);
        }
    }
}

const char *weir__rules_zone(rules_loader *ld, const char *name, const weir_tz **tz)
{
    *tz = NULL;
    if (!*name || strcmp(name, "UTC") == 0)
        return NULL;
    weir_rules *r = ld->rules;
    for (rules_zone *z = r->zones; z; z = z->next) {
        if (strcmp(z->name, name) == 0) {
            *tz = z->tz;
            return NULL;
        }
    }
    rules_zone *z = weir__rules_alloc(ld, sizeof(*z));
    if (!z)
        return "out of memory";
    weir_status st = weir_tz_load(r->ctx, name, &z->tz);
    if (st != WEIR_OK)
        return st == WEIR_EIO      ? "no such zone in the system's time zone data"
               : st == WEIR_EPARSE ? "its zone file is malformed"
               : st == WEIR_ENOMEM ? "out of memory"
                                   : "not a time zone name (e.g. America/New_York)";
    z->name = name;
    z->next = r->zones;
    r->zones = z;
    *tz = z->tz;
    return NULL;
}

void weir__rules_release(weir_rules *rules)
{
    for (rules_zone *z = rules->zones; z; z = z->next)
        weir_tz_free(z->tz);
    rules_chunk *c = rules->chunks;
    while (c) {
        rules_chunk *next = c->next;
        weir__free(rules->ctx, c);
        c = next;
    }
    weir__free(rules->ctx, rules);
}

/* ---- public accessors */

void weir_rules_free(weir_rules *rules)
{
    if (rules)
        weir__rules_release(rules);
}

size_t weir_rules_rule_count(const weir_rules *rules)
{
    return rules ? rules->n_rules : 0;
}

size_t weir_rules_limit_count(const weir_rules *rules)
{
    return rules ? rules->n_limits : 0;
}

size_t weir_rules_warning_count(const weir_rules *rules)
{
    return rules ? rules->n_warnings : 0;
}

const weir_rules_error *weir_rules_warning_at(const weir_rules *rules, size_t i)
{
    return rules && i < rules->n_warnings ? rules->warnings[i] : NULL;
}

size_t weir_rules_domain_count(const weir_rules *rules)
{
    return rules ? rules->n_domains : 0;
}

const weir_rules_domain *weir_rules_domain_at(const weir_rules *rules, size_t i)
{
    return rules && i < rules->n_domains ? rules->domains[i] : NULL;
}

const weir_rules_domain *weir_rules_find_domain(const weir_rules *rules, const char *name)
{
    if (!rules || !name)
        return NULL;
    for (size_t i = 0; i < rules->n_domains; i++) {
        if (strcmp(rules->domains[i]->name, name) == 0)
            return rules->domains[i];
    }
    return NULL;
}

const char *weir_rules_domain_name(const weir_rules_domain *domain)
{
    return domain ? domain->name : NULL;
}

const char *weir_rules_domain_tenant_key(const weir_rules_domain *domain)
{
    return domain ? domain->tenants.key : NULL;
}

const char *weir_rules_domain_default_tier(const weir_rules_domain *domain)
{
    return domain ? domain->tenants.default_tier : NULL;
}

size_t weir_rules_domain_tier_count(const weir_rules_domain *domain)
{
    return domain ? domain->tenants.n_tiers : 0;
}

const char *weir_rules_domain_tier_name(const weir_rules_domain *domain, size_t i)
{
    return domain && i < domain->tenants.n_tiers ? domain->tenants.tiers[i].name : NULL;
}

const weir_rule *weir_rules_domain_tier(const weir_rules_domain *domain, size_t i)
{
    return domain && i < domain->tenants.n_tiers ? domain->tenants.tiers[i].root : NULL;
}

const weir_rule *weir_rules_domain_find_tier(const weir_rules_domain *domain, const char *name)
{
    if (!domain || !name)
        return NULL;
    for (size_t i = 0; i < domain->tenants.n_tiers; i++)
        if (strcmp(domain->tenants.tiers[i].name, name) == 0)
            return domain->tenants.tiers[i].root;
    return NULL;
}

size_t weir_rules_domain_rule_count(const weir_rules_domain *domain)
{
    return domain ? domain->n_rules : 0;
}

const weir_rule *weir_rules_domain_rule(const weir_rules_domain *domain, size_t i)
{
    return domain && i < domain->n_rules ? domain->rules[i] : NULL;
}

const char *weir_rule_key(const weir_rule *rule)
{
    return rule ? rule->key : NULL;
}

const char *weir_rule_value(const weir_rule *rule)
{
    return rule ? rule->value : NULL;
}

bool weir_rule_is_wildcard(const weir_rule *rule)
{
    return rule && rule->wildcard;
}

uint32_t weir_rule_flags(const weir_rule *rule)
{
    return rule ? rule->flags : 0;
}

bool weir_rule_has_metadata(const weir_rule *rule)
{
    return rule && rule->has_metadata;
}

size_t weir_rule_limit_count(const weir_rule *rule)
{
    return rule ? rule->n_limits : 0;
}

const weir_rule_limit *weir_rule_limit_at(const weir_rule *rule, size_t i)
{
    return rule && i < rule->n_limits ? rule->limits[i] : NULL;
}

size_t weir_rule_child_count(const weir_rule *rule)
{
    return rule ? rule->n_children : 0;
}

const weir_rule *weir_rule_child(const weir_rule *rule, size_t i)
{
    return rule && i < rule->n_children ? rule->children[i] : NULL;
}

void weir_rule_location(const weir_rule *rule, const char **file, uint32_t *line, uint32_t *column)
{
    if (file)
        *file = rule ? rule->file : NULL;
    if (line)
        *line = rule ? rule->line : 0;
    if (column)
        *column = rule ? rule->column : 0;
}
