/*
 * tiers.c - the tiers of the rules in force as JSON (tiers.h).
 */
#include "tiers.h"

#include <string.h>

static void put_str(weir_buf *b, const char *s)
{
    weir_buf_putc(b, '"');
    weir_buf_put_json_str(b, s, strlen(s));
    weir_buf_putc(b, '"');
}

/* The limits of one tier node, @scope naming it ("default" for the
 * tier's own, "key:value" or "key:*pattern*" or "key" below). */
static void put_limits(weir_buf *b, const weir_rule *r, const char *key, bool *first)
{
    const char *v = weir_rule_value(r);
    for (size_t i = 0; i < weir_rule_limit_count(r); i++) {
        const weir_rule_limit *l = weir_rule_limit_at(r, i);
        weir_buf_puts(b, *first ? "{" : ",{");
        *first = false;
        weir_buf_puts(b, "\"descriptor\":\"");
        if (!key) {
            weir_buf_puts(b, "default");
        } else {
            weir_buf_put_json_str(b, key, strlen(key));
            if (v) {
                weir_buf_putc(b, ':');
                weir_buf_put_json_str(b, v, strlen(v));
            }
        }
        weir_buf_putc(b, '"');
        if (l->unlimited) {
            weir_buf_puts(b, ",\"unlimited\":true}");
            continue;
        }
        weir_buf_printf(b, ",\"requests_per_unit\":%u", l->requests_per_unit);
        if (l->calendar != WEIR_CALENDAR_NONE) {
            static const char *const cal[] = {"none", "day", "month", "year"};
            weir_buf_printf(b, ",\"calendar\":\"%s\",\"time_zone\":",
                            cal[(unsigned)l->calendar < 4 ? l->calendar : 0]);
            put_str(b, l->time_zone ? l->time_zone : "UTC");
        } else if (l->unit != WEIR_UNIT_NONE) {
            weir_buf_printf(b, ",\"unit\":\"%s\"", weir_rule_unit_name(l->unit));
        } else {
            weir_buf_printf(b, ",\"window_seconds\":%lld", (long long)(l->window_us / 1000000));
        }
        weir_buf_printf(b, ",\"algorithm\":\"%s\"}", weir_algorithm_name(l->algorithm));
    }
}

void admin_render_tiers(weir_buf *b, const weir_rules *rules)
{
    weir_buf_puts(b, "{\"domains\":[");
    bool first_domain = true;
    for (size_t d = 0; d < weir_rules_domain_count(rules); d++) {
        const weir_rules_domain *dom = weir_rules_domain_at(rules, d);
        const char *key = weir_rules_domain_tenant_key(dom);
        if (!key)
            continue;
        weir_buf_puts(b, first_domain ? "{\"domain\":" : ",{\"domain\":");
        first_domain = false;
        put_str(b, weir_rules_domain_name(dom));
        weir_buf_puts(b, ",\"tenant_key\":");
        put_str(b, key);
        weir_buf_puts(b, ",\"default_tier\":");
        const char *dflt = weir_rules_domain_default_tier(dom);
        if (dflt)
            put_str(b, dflt);
        else
            weir_buf_puts(b, "null");
        weir_buf_puts(b, ",\"tiers\":[");
        for (size_t t = 0; t < weir_rules_domain_tier_count(dom); t++) {
            const weir_rule *root = weir_rules_domain_tier(dom, t);
            weir_buf_puts(b, t ? ",{\"name\":" : "{\"name\":");
            put_str(b, weir_rules_domain_tier_name(dom, t));
            weir_buf_puts(b, ",\"limits\":[");
            bool first = true;
            put_limits(b, root, NULL, &first);
            for (size_t c = 0; c < weir_rule_child_count(root); c++) {
                const weir_rule *ch = weir_rule_child(root, c);
                put_limits(b, ch, weir_rule_key(ch), &first);
            }
            weir_buf_puts(b, "]}");
        }
        weir_buf_puts(b, "]}");
    }
    weir_buf_puts(b, "]}");
}

bool admin_render_tier_default(weir_buf *b, const weir_rules *rules, const char *tier)
{
    for (size_t d = 0; d < weir_rules_domain_count(rules); d++) {
        const weir_rule *root = weir_rules_domain_find_tier(weir_rules_domain_at(rules, d), tier);
        if (!root)
            continue;
        weir_buf_putc(b, '[');
        bool first = true;
        put_limits(b, root, NULL, &first);
        weir_buf_putc(b, ']');
        return true;
    }
    return false;
}
