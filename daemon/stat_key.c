/*
 * stat_key.c - upstream's stat key of a decided descriptor, level by level
 * (see stat_key.h), and its stat name sanitiser.
 *
 * Invariant: a built key always holds the domain and n_levels NUL-ended
 * levels within STAT_KEY_MAX_BYTES; a key that would not fit is replaced
 * whole by the domain's overflow key, never cut.
 */
#include "stat_key.h"

#include <string.h>

typedef struct writer {
    stat_key *k;
    bool full;
} writer;

static void put(writer *w, const char *s, size_t n)
{
    stat_key *k = w->k;
    if (w->full || n >= STAT_KEY_MAX_BYTES - k->len) {
        w->full = true;
        return;
    }
    for (size_t i = 0; i < n; i++)
        k->text[k->len++] = s[i] ? s[i] : '_';
}

static void puts_(writer *w, const char *s)
{
    put(w, s, strlen(s));
}

static void end_level(writer *w)
{
    if (w->k->len >= STAT_KEY_MAX_BYTES)
        w->full = true;
    if (!w->full)
        w->k->text[w->k->len++] = '\0';
}

/* `key_value`; `key` alone when @value is empty and !@always_sep. */
static void level(writer *w, const char *key, size_t key_len, const char *value, size_t value_len,
                  bool always_sep)
{
    put(w, key, key_len);
    if (value_len || always_sep) {
        put(w, "_", 1);
        put(w, value, value_len);
    }
    end_level(w);
    w->k->n_levels++;
}

static void rule_level(writer *w, const weir_rule *r)
{
    const char *v = weir_rule_value(r);
    const char *key = weir_rule_key(r);
    level(w, key, strlen(key), v ? v : "", v ? strlen(v) : 0, false);
}

void stat_key_overflow(stat_key *k, const char *domain)
{
    k->len = 0;
    k->n_levels = 0;
    k->from_request = false;
    writer w = {k, false};
    size_t n = strlen(domain);
    put(&w, domain, n < STAT_KEY_MAX_BYTES / 2 ? n : STAT_KEY_MAX_BYTES / 2);
    end_level(&w);
    level(&w, "_overflow", 9, "", 0, false);
}

/* Each level of a request that names its own limit: upstream names it by
 * the request's entries, whatever rule it matched. */
static void entries(writer *w, const weir_descriptor *d, bool always_sep)
{
    for (size_t i = 0; i < d->n_entries; i++) {
        const weir_entry *e = &d->entries[i];
        level(w, e->key ? e->key : "", e->key_len, e->value ? e->value : "", e->value_len,
              always_sep);
    }
}

/* detailed_metric: the request's entries, except that a level with
 * share_threshold (always a pattern) keeps its pattern; upstream spells
 * the levels `key_value` even for an empty value, except when a pattern
 * is kept. */
static void detailed(writer *w, const weir_rule_limit *l, const weir_descriptor *d)
{
    bool share = false;
    for (size_t i = 0; i < l->n_levels; i++)
        share |= (weir_rule_flags(l->levels[i]) & WEIR_RULE_SHARE_THRESHOLD) != 0;
    if (!share) {
        entries(w, d, true);
        return;
    }
    for (size_t i = 0; i < l->n_levels; i++) {
        const weir_entry *e = &d->entries[i];
        if (weir_rule_flags(l->levels[i]) & WEIR_RULE_SHARE_THRESHOLD)
            rule_level(w, l->levels[i]);
        else
            level(w, e->key ? e->key : "", e->key_len, e->value ? e->value : "", e->value_len,
                  false);
    }
}

/* The rule's levels, with value_to_metric's request values where a
 * level's own node asks for them and matched by its default or a pattern
 * (an exact value is the request's value already; a share_threshold
 * pattern keeps its pattern). */
static void by_rule(writer *w, const weir_rule_limit *l, const weir_descriptor *d)
{
    bool values = d->n_entries == l->n_levels;
    for (size_t i = 0; i < l->n_levels; i++) {
        const weir_rule *r = l->levels[i];
        uint32_t f = weir_rule_flags(r);
        bool from_request = values && (f & WEIR_RULE_VALUE_TO_METRIC) &&
                            !(f & WEIR_RULE_SHARE_THRESHOLD) &&
                            (!weir_rule_value(r) || weir_rule_is_wildcard(r));
        if (!from_request) {
            rule_level(w, r);
            continue;
        }
        const weir_entry *e = &d->entries[i];
        const char *key = weir_rule_key(r);
        level(w, key, strlen(key), e->value ? e->value : "", e->value_len, false);
        w->k->from_request = true;
    }
}

void stat_key_build(stat_key *k, const weir_rule_limit *l, const weir_descriptor *d)
{
    k->len = 0;
    k->n_levels = 0;
    k->from_request = false;
    writer w = {k, false};
    puts_(&w, l->domain);
    end_level(&w);
    if (d->limit || !l->n_levels) {
        entries(&w, d, false);
        k->from_request = true;
    } else if ((weir_rule_flags(l->levels[l->n_levels - 1]) & WEIR_RULE_DETAILED_METRIC) &&
               d->n_entries == l->n_levels) {
        detailed(&w, l, d);
        k->from_request = true;
    } else {
        by_rule(&w, l, d);
    }
    if (w.full)
        stat_key_overflow(k, l->domain);
}

/* ------------------------------------------------------------ sanitising */

static bool digit(char c)
{
    return c >= '0' && c <= '9';
}

static size_t digits(const char *s, size_t n, size_t i)
{
    size_t j = i;
    while (j < n && digit(s[j]))
        j++;
    return j - i;
}

/* The end of an IPv4 address starting at @i, or 0 when none does: three
 * runs of 1 to 3 digits each ended by a dot (a longer run cannot end in
 * one), then 1 to 3 digits (the pattern takes up to 3 of a longer run). */
static size_t ipv4_at(const char *s, size_t n, size_t i)
{
    for (int g = 0; g < 3; g++) {
        size_t run = digits(s, n, i);
        if (run < 1 || run > 3 || i + run >= n || s[i + run] != '.')
            return 0;
        i += run + 1;
    }
    size_t run = digits(s, n, i);
    if (run < 1)
        return 0;
    return i + (run > 3 ? 3 : run);
}

void stat_sanitize(char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == ':' || c == '|' || c < 0x20 || c == 0x7f)
            s[i] = '_';
    }
    for (size_t i = 0; i < n;) {
        size_t end = digit(s[i]) ? ipv4_at(s, n, i) : 0;
        if (!end) {
            i++;
            continue;
        }
        for (; i < end; i++)
            if (s[i] == '.')
                s[i] = '_';
    }
}
