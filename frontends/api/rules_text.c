/*
 * rules_text.c - one line per limit of a rule set.
 */
#include "rules_text.h"

static void put_limit(weir_buf *b, const weir_rule *r, const weir_rule_limit *l, const char *tier)
{
    uint32_t f = weir_rule_flags(r);
    weir_buf_printf(b, "%s.%s:", l->domain, l->path);
    if (tier)
        weir_buf_printf(b, " tier=%s", tier);
    if (l->unlimited) {
        weir_buf_puts(b, " unlimited");
    } else {
        weir_buf_printf(b, " requests_per_unit=%u", l->requests_per_unit);
        if (l->unit != WEIR_UNIT_NONE)
            weir_buf_printf(b, " unit=%s", weir_rule_unit_name(l->unit));
        weir_buf_printf(b, " window_us=%lld algorithm=%s burst=%llu", (long long)l->window_us,
                        weir_algorithm_name(l->algorithm), (unsigned long long)l->compiled.burst);
        if (l->compiled.warmup_us)
            weir_buf_printf(b, " warmup_us=%lld cold_factor=%u", (long long)l->compiled.warmup_us,
                            l->compiled.cold_factor);
        if (l->calendar != WEIR_CALENDAR_NONE)
            weir_buf_printf(b, " calendar=%s time_zone=%s", weir_calendar_name(l->calendar),
                            l->time_zone ? l->time_zone : "UTC");
        if (l->failure_mode == WEIR_FAILURE_DENY)
            weir_buf_puts(b, " failure_mode=deny");
        else if (l->failure_mode == WEIR_FAILURE_LOCAL)
            weir_buf_puts(b, " failure_mode=local");
        if (l->local_share_ppm)
            weir_buf_printf(b, " local_share=%u.%06u", l->local_share_ppm / 1000000,
                            l->local_share_ppm % 1000000);
        if (l->count_rejected)
            weir_buf_puts(b, " count_rejected=true");
        if (l->no_local_cache)
            weir_buf_puts(b, " over_limit_cache=false");
        if (l->sync_interval_us)
            weir_buf_printf(b, " sync=local sync_interval_us=%lld", (long long)l->sync_interval_us);
        if (l->sketch_bytes)
            weir_buf_printf(b, " sketch_bytes=%zu", l->sketch_bytes);
        /* `shed:` by priority rank (1 the most important): shed=3:30.00% */
        for (unsigned i = 0, n = 0; i < WEIR_RULES_MAX_PRIORITIES; i++)
            if (l->shed_bp[i])
                weir_buf_printf(b, "%s%u:%u.%02u%%", n++ ? "," : " shed=", i + 1,
                                l->shed_bp[i] / 100u, l->shed_bp[i] % 100u);
    }
    if (l->name)
        weir_buf_printf(b, " name=%s", l->name);
    for (size_t i = 0; i < l->n_replaces; i++)
        weir_buf_printf(b, " replaces=%s", l->replaces[i]);
    weir_buf_printf(b, " shadow_mode=%s", (f & WEIR_RULE_SHADOW_MODE) ? "true" : "false");
    if (f & WEIR_RULE_QUOTA_MODE)
        weir_buf_puts(b, " quota_mode=true");
    weir_buf_putc(b, '\n');
}

/* envoyproxy/ratelimit's /rlconfig line: its unit names, its UNKNOWN for
 * an unlimited limit or one with a window of weir's. */
static void put_upstream(weir_buf *b, const weir_rule *r, const weir_rule_limit *l,
                         const char *tier)
{
    (void)tier;
    static const char *const units[] = {"UNKNOWN", "SECOND", "MINUTE", "HOUR",
                                        "DAY",     "MONTH",  "YEAR",   "WEEK"};
    const char *unit = !l->unlimited && (unsigned)l->unit < 8 ? units[l->unit] : "UNKNOWN";
    weir_buf_printf(b, "%s.%s: unit=%s requests_per_unit=%u, shadow_mode: %s\n", l->domain, l->path,
                    unit, l->unlimited ? 0u : l->requests_per_unit,
                    (weir_rule_flags(r) & WEIR_RULE_SHADOW_MODE) ? "true" : "false");
}

typedef void (*put_fn)(weir_buf *b, const weir_rule *r, const weir_rule_limit *l, const char *tier);

static void put_rule(weir_buf *b, const weir_rule *r, put_fn put, const char *tier)
{
    for (size_t i = 0; i < weir_rule_limit_count(r); i++)
        put(b, r, weir_rule_limit_at(r, i), tier);
    for (size_t i = 0; i < weir_rule_child_count(r); i++)
        put_rule(b, weir_rule_child(r, i), put, tier);
}

/* Every limit of every domain; then, with @tiers, each tier's, marked
 * with its name (upstream's form has no tiers). */
static void render(weir_buf *out, const weir_rules *rules, put_fn put, bool tiers)
{
    for (size_t i = 0; i < weir_rules_domain_count(rules); i++) {
        const weir_rules_domain *d = weir_rules_domain_at(rules, i);
        for (size_t j = 0; j < weir_rules_domain_rule_count(d); j++)
            put_rule(out, weir_rules_domain_rule(d, j), put, NULL);
        for (size_t t = 0; tiers && t < weir_rules_domain_tier_count(d); t++)
            put_rule(out, weir_rules_domain_tier(d, t), put, weir_rules_domain_tier_name(d, t));
    }
}

void weir_api_render_rules(weir_buf *out, const weir_rules *rules)
{
    render(out, rules, put_limit, true);
}

void weir_api_render_rlconfig(weir_buf *out, const weir_rules *rules)
{
    render(out, rules, put_upstream, false);
}
