/*
 * explain.c - a decision explained: per descriptor, the walk through the
 * rules (weir_engine_explain()) and every limit of the rule reached with
 * its verdict in the decision. Three forms of the same facts: JSON for
 * POST /v1/check?explain=1, lines for `weir explain`, and one line for the
 * debug log.
 */
#include <stdio.h>
#include <string.h>

#include "api.h"
#include "jsonw.h"

/* ------------------------------------------------------------ the facts */

static const char *how_name(weir_match_how how)
{
    switch (how) {
    case WEIR_MATCH_EXACT:
        return "exact";
    case WEIR_MATCH_PATTERN:
        return "pattern";
    case WEIR_MATCH_DEFAULT:
        return "default";
    }
    return "unknown";
}

static const char *miss_name(weir_match_miss miss)
{
    switch (miss) {
    case WEIR_MISS_NONE:
        return "none";
    case WEIR_MISS_DOMAIN:
        return "unknown_domain";
    case WEIR_MISS_TOO_DEEP:
        return "too_deep";
    case WEIR_MISS_KEY:
        return "unknown_key";
    case WEIR_MISS_VALUE:
        return "no_value";
    case WEIR_MISS_SHALLOW:
        return "too_shallow";
    case WEIR_MISS_NO_LIMIT:
        return "no_limit";
    }
    return "unknown";
}

/* A byte string shown in a sentence, cut if long. */
#define SHOWN(n) (int)((n) > 80 ? 80 : (n))

/* Why the walk of descriptor @ds reached no limit, in words, into @b;
 * nothing when it reached one. */
static void miss_text(weir_buf *b, const weir_request *req, const weir_descriptor *ds,
                      const weir_match_trace *t)
{
    const weir_entry *e = t->depth < ds->n_entries ? &ds->entries[t->depth] : NULL;
    switch (t->miss) {
    case WEIR_MISS_NONE:
        return;
    case WEIR_MISS_DOMAIN:
        weir_buf_printf(b, "domain '%.*s' has no rules", SHOWN(req->domain_len),
                        req->domain ? req->domain : "");
        return;
    case WEIR_MISS_KEY:
        weir_buf_printf(b, "no rule at level %zu has key '%.*s'", t->depth + 1, SHOWN(e->key_len),
                        e->key);
        return;
    case WEIR_MISS_VALUE:
        weir_buf_printf(b,
                        "rules at level %zu have key '%.*s' but none has value '%.*s', a "
                        "pattern matching it, or no value",
                        t->depth + 1, SHOWN(e->key_len), e->key, SHOWN(e->value_len), e->value);
        return;
    case WEIR_MISS_TOO_DEEP:
        weir_buf_printf(b, "the descriptor has %zu entries but the rules stop at level %zu",
                        ds->n_entries, t->depth);
        return;
    case WEIR_MISS_SHALLOW:
        weir_buf_printf(b,
                        "the rule reached has no limit of its own; the rules below it need "
                        "more entries than this descriptor has (%zu)",
                        ds->n_entries);
        return;
    case WEIR_MISS_NO_LIMIT:
        weir_buf_puts(b, "the rule reached has no rate_limit: always allowed");
        return;
    }
}

/* The rule the walk reached, when it reached every entry. */
static const weir_rule *rule_reached(const weir_descriptor *ds, const weir_match_trace *t)
{
    return t->depth == ds->n_entries && t->depth > 0 ? t->levels[t->depth - 1].rule : NULL;
}

/* The outcome of limit @l in status @s, or NULL (not tested: replaced). */
static const weir_limit_outcome *outcome_of(const weir_descriptor_status *s,
                                            const weir_rule_limit *l)
{
    for (size_t i = 0; i < s->n_outcomes; i++)
        if (s->outcomes[i].limit == l)
            return &s->outcomes[i];
    return NULL;
}

static const char *verdict(const weir_rule_limit *l, const weir_limit_outcome *o)
{
    if (l->unlimited)
        return "unlimited";
    if (!o)
        return "replaced";
    return o->denied ? "denied" : "admitted";
}

/* One limit's verdict: @l, its outcome @o (NULL when not tested). */
typedef void (*limit_fn)(weir_buf *b, const weir_rule_limit *l, const weir_limit_outcome *o,
                         bool first);

/* Whether @l is one of @rule's limits. */
static bool limit_of(const weir_rule *rule, const weir_rule_limit *l)
{
    for (size_t i = 0; rule && i < weir_rule_limit_count(rule); i++)
        if (weir_rule_limit_at(rule, i) == l)
            return true;
    return false;
}

/* Calls @fn for every limit the descriptor's decision concerns: those of
 * the rule reached, then the outcomes of limits from elsewhere (a
 * tenant's tier or overrides, or the limit a descriptor gave of its own
 * when it matched nothing). */
static void each_limit(weir_buf *b, const weir_descriptor *ds, const weir_match_trace *t,
                       const weir_descriptor_status *s, limit_fn fn)
{
    const weir_rule *rule = rule_reached(ds, t);
    bool first = true;
    for (size_t i = 0; rule && i < weir_rule_limit_count(rule); i++, first = false) {
        const weir_rule_limit *l = weir_rule_limit_at(rule, i);
        fn(b, l, s ? outcome_of(s, l) : NULL, first);
    }
    for (size_t i = 0; s && i < s->n_outcomes; i++) {
        if (limit_of(rule, s->outcomes[i].limit))
            continue;
        fn(b, s->outcomes[i].limit, &s->outcomes[i], first);
        first = false;
    }
}

/* The limit as it applied: the outcome's effective numbers (the request's
 * override when it gave one), else the rule's. */
static void limit_numbers(const weir_rule_limit *l, const weir_limit_outcome *o, uint64_t *rpu,
                          const char **unit, int64_t *window_us)
{
    *rpu = o ? o->requests_per_unit : l->requests_per_unit;
    *unit = weir_rule_unit_name(o ? o->unit : l->unit); /* NULL: a `window:` */
    *window_us = o ? o->window_us : l->window_us;
}

/* ------------------------------------------------------------ JSON */

static void json_limit(weir_buf *b, const weir_rule_limit *l, const weir_limit_outcome *o,
                       bool first)
{
    if (!first)
        weir_buf_putc(b, ',');
    obj lo = obj_open(b);
    obj_key(&lo, "name");
    put_cstr(b, l->name);
    obj_key(&lo, "path");
    put_cstr(b, l->path);
    if (l->file && *l->file) {
        obj_key(&lo, "file");
        put_cstr(b, l->file);
        obj_key(&lo, "line");
        weir_buf_put_u64(b, l->line);
        obj_key(&lo, "column");
        weir_buf_put_u64(b, l->column);
    }
    if (!l->unlimited) {
        uint64_t rpu;
        const char *unit;
        int64_t window_us;
        limit_numbers(l, o, &rpu, &unit, &window_us);
        obj_key(&lo, "requests_per_unit");
        weir_buf_put_u64(b, rpu);
        if (unit) {
            obj_key(&lo, "unit");
            put_cstr(b, unit);
        }
        obj_key(&lo, "window_ms");
        weir_buf_put_u64(b, weir_api_ceil_div(window_us, 1000));
        obj_key(&lo, "algorithm");
        put_cstr(b, weir_algorithm_name(l->algorithm));
    }
    obj_key(&lo, "verdict");
    put_cstr(b, verdict(l, o));
    if (o) {
        obj_key(&lo, "remaining");
        weir_buf_put_u64(b, o->remaining);
        if (o->shadow) {
            obj_key(&lo, "shadow");
            put_bool(b, true);
        }
        if (o->failure_mode) {
            obj_key(&lo, "failure_mode");
            put_cstr(b, o->local                               ? "local"
                        : l->failure_mode == WEIR_FAILURE_DENY ? "deny"
                                                               : "allow");
        }
    }
    obj_close(&lo);
}

static void json_descriptor(weir_buf *b, const weir_request *req, size_t d,
                            const weir_descriptor_status *s, const weir_match_trace *t)
{
    const weir_descriptor *ds = &req->descriptors[d];
    obj o = obj_open(b);
    obj_key(&o, "walk");
    weir_buf_putc(b, '[');
    for (size_t i = 0; i < t->depth; i++) {
        const weir_match_level *lv = &t->levels[i];
        const char *file;
        uint32_t line, column;
        weir_rule_location(lv->rule, &file, &line, &column);
        if (i)
            weir_buf_putc(b, ',');
        obj lo = obj_open(b);
        obj_key(&lo, "key");
        put_str(b, ds->entries[i].key, ds->entries[i].key_len);
        obj_key(&lo, "value");
        put_str(b, ds->entries[i].value, ds->entries[i].value_len);
        obj_key(&lo, "matched");
        put_cstr(b, how_name(lv->how));
        obj_key(&lo, "rule");
        obj ro = obj_open(b);
        obj_key(&ro, "key");
        put_cstr(b, weir_rule_key(lv->rule));
        obj_key(&ro, "value");
        put_cstr(b, weir_rule_value(lv->rule));
        obj_key(&ro, "file");
        put_cstr(b, file);
        obj_key(&ro, "line");
        weir_buf_put_u64(b, line);
        obj_key(&ro, "column");
        weir_buf_put_u64(b, column);
        obj_close(&ro);
        obj_close(&lo);
    }
    weir_buf_putc(b, ']');
    obj_key(&o, "miss");
    put_cstr(b, miss_name(t->miss));
    if (t->miss != WEIR_MISS_NONE) {
        obj_key(&o, "reason");
        weir_buf_putc(b, '"');
        weir_buf tmp;
        weir_buf_init(&tmp, 1024);
        miss_text(&tmp, req, ds, t);
        weir_buf_put_json_str(b, tmp.p ? tmp.p : "", tmp.len);
        weir_buf_free(&tmp);
        weir_buf_putc(b, '"');
    }
    if (ds->limit) {
        obj_key(&o, "override");
        put_bool(b, true);
    }
    obj_key(&o, "limits");
    weir_buf_putc(b, '[');
    each_limit(b, ds, t, s, json_limit);
    weir_buf_putc(b, ']');
    obj_close(&o);
}

void weir_api_render_explain(weir_buf *out, const weir_request *req, const weir_api_decision *dec,
                             const weir_match_trace *traces)
{
    weir_buf_putc(out, '[');
    for (size_t d = 0; d < req->n_descriptors; d++) {
        if (d)
            weir_buf_putc(out, ',');
        json_descriptor(out, req, d, dec && d < dec->n ? &dec->statuses[d] : NULL, &traces[d]);
    }
    weir_buf_putc(out, ']');
}

/* ------------------------------------------------------------ text */

/* A limit's name as a person reads it: its name, else its path. */
static void put_limit_label(weir_buf *b, const weir_rule_limit *l)
{
    if (l->name)
        weir_buf_printf(b, "%s", l->name);
    else
        weir_buf_printf(b, "%s", l->path ? l->path : "?");
}

static void text_limit(weir_buf *b, const weir_rule_limit *l, const weir_limit_outcome *o,
                       bool first)
{
    (void)first;
    weir_buf_puts(b, "    limit ");
    put_limit_label(b, l);
    if (!l->unlimited) {
        uint64_t rpu;
        const char *unit;
        int64_t window_us;
        limit_numbers(l, o, &rpu, &unit, &window_us);
        if (unit)
            weir_buf_printf(b, ": %llu per %s", (unsigned long long)rpu, unit);
        else
            weir_buf_printf(b, ": %llu per %llu ms", (unsigned long long)rpu,
                            (unsigned long long)weir_api_ceil_div(window_us, 1000));
        weir_buf_printf(b, ", %s", weir_algorithm_name(l->algorithm));
    }
    if (l->file && *l->file)
        weir_buf_printf(b, " (%s:%u:%u)", l->file, l->line, l->column);
    weir_buf_printf(b, " -> %s", verdict(l, o));
    if (o && !l->unlimited)
        weir_buf_printf(b, ", %llu left", (unsigned long long)o->remaining);
    if (o && o->shadow)
        weir_buf_puts(b, " (shadow mode: not enforced)");
    if (o && o->failure_mode)
        weir_buf_puts(b, o->local ? " (store failed: decided locally)"
                                  : " (store failed: decided by failure_mode)");
    weir_buf_putc(b, '\n');
}

static const char *code_text(weir_code code)
{
    return code == WEIR_CODE_OVER_LIMIT ? "OVER_LIMIT" : "OK";
}

void weir_api_explain_text(weir_buf *out, const weir_request *req, const weir_api_decision *dec,
                           const weir_match_trace *traces)
{
    weir_buf_printf(out, "domain %.*s", SHOWN(req->domain_len), req->domain);
    if (dec)
        weir_buf_printf(out, ": %s", code_text(dec->overall));
    weir_buf_putc(out, '\n');
    for (size_t d = 0; d < req->n_descriptors; d++) {
        const weir_descriptor *ds = &req->descriptors[d];
        const weir_match_trace *t = &traces[d];
        const weir_descriptor_status *s = dec && d < dec->n ? &dec->statuses[d] : NULL;
        weir_buf_printf(out, "descriptor %zu", d);
        if (s)
            weir_buf_printf(out, ": %s", code_text(s->code));
        weir_buf_putc(out, '\n');
        for (size_t i = 0; i < ds->n_entries; i++) {
            const weir_entry *e = &ds->entries[i];
            weir_buf_printf(out, "  %.*s=%.*s", SHOWN(e->key_len), e->key, SHOWN(e->value_len),
                            e->value);
            if (i < t->depth) {
                const weir_rule *r = t->levels[i].rule;
                const char *file, *value = weir_rule_value(r);
                uint32_t line, column;
                weir_rule_location(r, &file, &line, &column);
                weir_buf_printf(out, "  matched %s: %s%s%s (%s:%u:%u)\n",
                                how_name(t->levels[i].how), weir_rule_key(r), value ? "=" : "",
                                value ? value : "", file, line, column);
            } else if (i == t->depth && t->miss != WEIR_MISS_NONE && t->miss != WEIR_MISS_DOMAIN) {
                weir_buf_puts(out, "  no match\n");
            } else {
                weir_buf_putc(out, '\n');
            }
        }
        if (t->miss != WEIR_MISS_NONE) {
            weir_buf_puts(out, "  ");
            miss_text(out, req, ds, t);
            weir_buf_putc(out, '\n');
        }
        if (ds->limit)
            weir_buf_puts(out, "  the request gives its own limit (override)\n");
        each_limit(out, ds, t, s, text_limit);
    }
}

/* ------------------------------------------------------------ one line */

static void line_limit(weir_buf *b, const weir_rule_limit *l, const weir_limit_outcome *o,
                       bool first)
{
    weir_buf_puts(b, first ? " limits " : ",");
    put_limit_label(b, l);
    weir_buf_printf(b, ":%s", verdict(l, o));
}

void weir_api_explain_line(weir_buf *out, const weir_request *req, const weir_api_decision *dec,
                           const weir_match_trace *traces)
{
    for (size_t d = 0; d < req->n_descriptors; d++) {
        const weir_descriptor *ds = &req->descriptors[d];
        const weir_match_trace *t = &traces[d];
        weir_buf_printf(out, "%s[%zu]", d ? "; " : "", d);
        for (size_t i = 0; i < t->depth; i++) {
            const weir_entry *e = &ds->entries[i];
            weir_buf_printf(out, " %.*s=%.*s:%s", SHOWN(e->key_len), e->key, SHOWN(e->value_len),
                            e->value, how_name(t->levels[i].how));
        }
        if (t->miss != WEIR_MISS_NONE)
            weir_buf_printf(out, " miss:%s@%zu", miss_name(t->miss), t->depth);
        each_limit(out, ds, t, dec && d < dec->n ? &dec->statuses[d] : NULL, line_limit);
    }
}
