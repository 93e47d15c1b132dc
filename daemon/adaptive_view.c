/*
 * adaptive_view.c - the `adaptive:` limits in force in /metrics and in
 * the admin stats (adaptive_view.h).
 */
#include "adaptive_view.h"

#include <stdlib.h>
#include <string.h>

#include "metrics_internal.h"

/* The adaptive limits in force, held: *n of them (NULL when none or out
 * of memory; the hold is then released). */
static weir_engine_adaptive *list(weir_engine *e, weir_rules_hold **hold, size_t *n)
{
    *n = 0;
    weir_engine_rules_hold(e, hold);
    size_t count = weir_engine_adaptive_list(*hold, NULL, 0);
    weir_engine_adaptive *v = count ? calloc(count, sizeof(*v)) : NULL;
    if (!v) {
        weir_engine_rules_unhold(*hold);
        return NULL;
    }
    *n = weir_engine_adaptive_list(*hold, v, count);
    return v;
}

static const char *rule_of(const weir_rule_limit *l)
{
    return l->name ? l->name : l->path;
}

/* name{domain="..",rule=".."} */
static void series(weir_buf *b, const char *name, const weir_rule_limit *l)
{
    weir_buf_puts(b, name);
    weir_buf_puts(b, "{domain=\"");
    metrics_put_label(b, l->domain);
    weir_buf_puts(b, "\",rule=\"");
    metrics_put_label(b, rule_of(l));
    weir_buf_puts(b, "\"} ");
}

void adaptive_view_metrics(weir_engine *e, weir_buf *b)
{
    weir_rules_hold *hold;
    size_t n;
    weir_engine_adaptive *v = list(e, &hold, &n);
    if (!v)
        return;
    weir_adaptive_stats *st = calloc(n, sizeof(*st));
    if (!st) {
        b->failed = true;
        n = 0;
    }
    for (size_t i = 0; i < n; i++)
        weir_adaptive_stats_get(v[i].controller, &st[i]);
    static const struct {
        const char *name, *type, *help;
    } what[] = {
        {"weir_adaptive_limit", "gauge",
         "An adaptive concurrency limit: what its controller admits now."},
        {"weir_adaptive_max_limit", "gauge", "Its most (requests_per_unit)."},
        {"weir_adaptive_samples_total", "counter", "Leases given back and learnt from."},
        {"weir_adaptive_dropped_total", "counter",
         "Of them, work that failed from overload (dropped, or past the lease timeout)."},
        {"weir_adaptive_rtt_seconds", "gauge", "The last window's mean time in flight."},
        {"weir_adaptive_noload_rtt_seconds", "gauge",
         "The time in flight without load, as the last probe measured it (0: none yet)."},
    };
    for (size_t k = 0; k < sizeof(what) / sizeof(what[0]); k++) {
        metrics_header(b, what[k].name, what[k].type, what[k].help);
        for (size_t i = 0; i < n; i++) {
            series(b, what[k].name, v[i].limit);
            switch (k) {
            case 0:
                weir_buf_put_u64(b, st[i].limit);
                break;
            case 1:
                weir_buf_put_u64(b, st[i].max_limit);
                break;
            case 2:
                weir_buf_put_u64(b, st[i].samples);
                break;
            case 3:
                weir_buf_put_u64(b, st[i].dropped);
                break;
            case 4:
                weir_buf_printf(b, "%.6f", (double)st[i].rtt_short_us / 1e6);
                break;
            default:
                weir_buf_printf(b, "%.6f", (double)st[i].rtt_noload_us / 1e6);
                break;
            }
            weir_buf_putc(b, '\n');
        }
    }
    free(st);
    free(v);
    weir_engine_rules_unhold(hold);
}

static void put_str(weir_buf *b, const char *name, const char *s)
{
    weir_buf_printf(b, ",\"%s\":\"", name);
    weir_buf_put_json_str(b, s, strlen(s));
    weir_buf_putc(b, '"');
}

void adaptive_view_json(weir_engine *e, weir_buf *b)
{
    weir_buf_puts(b, ",\"adaptive\":[");
    weir_rules_hold *hold;
    size_t n;
    weir_engine_adaptive *v = list(e, &hold, &n);
    weir_adaptive_change *h = v ? calloc(WEIR_ADAPTIVE_MAX_HISTORY, sizeof(*h)) : NULL;
    if (v && !h)
        b->failed = true;
    for (size_t i = 0; h && i < n; i++) {
        weir_adaptive_stats st;
        weir_adaptive_stats_get(v[i].controller, &st);
        weir_buf_puts(b, i ? ",{" : "{");
        weir_buf_printf(b, "\"id\":\"%llx\"", (unsigned long long)v[i].id);
        put_str(b, "domain", v[i].limit->domain);
        put_str(b, "rule", rule_of(v[i].limit));
        put_str(b, "controller", weir_adaptive_kind_name(st.kind));
        weir_buf_printf(b,
                        ",\"limit\":%u,\"min\":%u,\"max\":%u,\"samples\":%llu,\"dropped\":%llu,"
                        "\"windows\":%llu,\"rtt_ms\":%.3f,\"noload_rtt_ms\":%.3f,\"probing\":%s",
                        st.limit, st.min_limit, st.max_limit, (unsigned long long)st.samples,
                        (unsigned long long)st.dropped, (unsigned long long)st.windows,
                        (double)st.rtt_short_us / 1e3, (double)st.rtt_noload_us / 1e3,
                        st.probing ? "true" : "false");
        size_t k = weir_adaptive_history(v[i].controller, h, WEIR_ADAPTIVE_MAX_HISTORY);
        weir_buf_puts(b, ",\"history\":[");
        for (size_t j = 0; j < k; j++)
            weir_buf_printf(b, "%s[%lld,%u]", j ? "," : "", (long long)(h[j].t_us / 1000),
                            h[j].limit);
        weir_buf_puts(b, "]}");
    }
    weir_buf_putc(b, ']');
    free(h);
    if (v) {
        free(v);
        weir_engine_rules_unhold(hold);
    }
}
