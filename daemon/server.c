/*
 * server.c - the state every worker shares, and what changes it while the
 * service runs: the clock, the rules (loaded, reloaded) and the /v1/rules
 * text rendered from them.
 */
#include "server.h"

#include "admin/tiers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/rules_text.h"
#include "log.h"

/* Rule errors logged per failed load. */
#define MAX_LOGGED_ERRORS 20u

int64_t server_now_us(server *s)
{
    return weir_ctx_now_us(s->ctx);
}

int64_t server_clock(void *s)
{
    return server_now_us(s);
}

void server_rules_text(server *s, weir_buf *out, bool upstream)
{
    pthread_mutex_lock(&s->rules_lock);
    if (upstream) /* after weir's text and its NUL */
        weir_buf_put(out, s->rules_text + s->rules_text_len + 1, s->rlconfig_len);
    else
        weir_buf_put(out, s->rules_text, s->rules_text_len);
    pthread_mutex_unlock(&s->rules_lock);
}

/* "file:line:column: message" onto @why (when not NULL), "; " between. */
static void say_why(weir_buf *why, const char *file, uint32_t line, uint32_t column,
                    const char *message)
{
    if (!why)
        return;
    if (why->len)
        weir_buf_puts(why, "; ");
    weir_buf_printf(why, "%s:%u:%u: %s", file, line, column, message);
}

static void log_rule_errors(const weir_rules_error *errs, size_t n, weir_status st,
                            const char *path, weir_buf *why)
{
    if (!n) {
        dlog(WEIR_LOG_ERROR, "rules_error", "path", path, "error", weir_strerror(st), NULL);
        if (why)
            weir_buf_puts(why, weir_strerror(st));
        return;
    }
    for (size_t i = 0; i < n && i < MAX_LOGGED_ERRORS; i++) {
        char line[16], col[16];
        snprintf(line, sizeof(line), "%u", errs[i].line);
        snprintf(col, sizeof(col), "%u", errs[i].column);
        dlog(WEIR_LOG_ERROR, "rules_error", "file", errs[i].file, "line", line, "column", col,
             "error", errs[i].message, NULL);
        say_why(why, errs[i].file, errs[i].line, errs[i].column, errs[i].message);
    }
}

/* Limits the store cannot hold, under @rule and its children, logged as
 * rule errors; returns how many. */
static size_t unfit_limits(server *s, const weir_rule *rule, weir_buf *why)
{
    size_t bad = 0;
    for (size_t i = 0; i < weir_rule_limit_count(rule); i++) {
        const weir_rule_limit *l = weir_rule_limit_at(rule, i);
        if (l->unlimited || weir_store_check_limit(s->store, &l->compiled) == WEIR_OK)
            continue;
        char line[16], col[16], what[160];
        snprintf(line, sizeof(line), "%u", l->line);
        snprintf(col, sizeof(col), "%u", l->column);
        snprintf(what, sizeof(what),
                 "%u per %s with %s is past what this store computes exactly "
                 "(docs/OPERATIONS.md, \"Limits on Redis\")",
                 l->requests_per_unit, weir_rule_unit_name(l->unit),
                 weir_algorithm_name(l->algorithm));
        dlog(WEIR_LOG_ERROR, "rules_error", "file", l->file, "line", line, "column", col, "error",
             what, NULL);
        say_why(why, l->file, l->line, l->column, what);
        bad++;
    }
    for (size_t i = 0; i < weir_rule_child_count(rule); i++)
        bad += unfit_limits(s, weir_rule_child(rule, i), why);
    return bad;
}

/* Whether the store can hold every limit of @rules. */
static bool rules_fit_store(server *s, const weir_rules *rules, weir_buf *why)
{
    size_t bad = 0;
    for (size_t d = 0; d < weir_rules_domain_count(rules); d++) {
        const weir_rules_domain *dom = weir_rules_domain_at(rules, d);
        for (size_t r = 0; r < weir_rules_domain_rule_count(dom); r++)
            bad += unfit_limits(s, weir_rules_domain_rule(dom, r), why);
    }
    return bad == 0;
}

server_rules_counts server_count_rules(const weir_rules *rules)
{
    server_rules_counts c = {weir_rules_domain_count(rules), weir_rules_rule_count(rules),
                             weir_rules_limit_count(rules)};
    return c;
}

void server_log_loaded(server *s, const server_rules_counts *c, const char *why)
{
    char d[24], r[24], l[24];
    snprintf(d, sizeof(d), "%zu", c->domains);
    snprintf(r, sizeof(r), "%zu", c->descriptors);
    snprintf(l, sizeof(l), "%zu", c->limits);
    bool xds = s->opt.config_xds;
    /* in force before it is said to be */
    if (c->domains > 0)
        atomic_store(&s->rules_seen, true);
    dlog(WEIR_LOG_INFO, "rules_loaded", "reason", why, xds ? "xds_server" : "path",
         xds ? s->opt.xds_server : s->opt.rules, "domains", d, "descriptors", r, "limits", l, NULL);
}

bool server_healthy(server *s)
{
    return !atomic_load(&s->draining) &&
           (!s->opt.health_needs_rules || atomic_load(&s->rules_seen));
}

/* Logs the load's warnings (rules that load but likely do not do what
 * was meant); false when --strict makes them errors. */
static bool warnings_pass(server *s, const weir_rules *rules, weir_buf *why)
{
    size_t n = weir_rules_warning_count(rules);
    for (size_t i = 0; i < n; i++) {
        const weir_rules_error *w = weir_rules_warning_at(rules, i);
        char line[16], col[16];
        snprintf(line, sizeof(line), "%u", w->line);
        snprintf(col, sizeof(col), "%u", w->column);
        dlog(s->opt.strict ? WEIR_LOG_ERROR : WEIR_LOG_WARN, "rules_warning", "file", w->file,
             "line", line, "column", col, "warning", w->message, NULL);
        if (s->opt.strict)
            say_why(why, w->file, w->line, w->column, w->message);
    }
    if (n && s->opt.strict) {
        char count[24];
        snprintf(count, sizeof(count), "%zu", n);
        dlog(WEIR_LOG_ERROR, "rules_rejected", "reason", "warnings, and --strict", "warnings",
             count, NULL);
        return false;
    }
    return true;
}

/* Loads the rule path (@from_path) or @n_docs documents; see
 * server_load_rules() and server_parse_rules(). */
static weir_rules *load(server *s, bool from_path, const weir_rules_doc *docs, size_t n_docs,
                        weir_buf *why)
{
    /* `shed:` names the priorities of --priorities */
    const char *prio[SHED_MAX_PRIORITIES];
    for (unsigned i = 0; i < s->opt.shed.n; i++)
        prio[i] = s->opt.shed.names[i];
    weir_rules_options ro = {sizeof(ro),
                             s->opt.merge_domains,
                             s->opt.default_algorithm,
                             0,
                             0,
                             s->opt.failure_mode,
                             s->opt.shadow_mode,
                             prio,
                             s->opt.shed.n};
    weir_rules_error *errs = calloc(MAX_LOGGED_ERRORS, sizeof(*errs));
    if (!errs)
        return NULL;
    weir_rules *rules = NULL;
    size_t n = 0;
    weir_status st =
        from_path
            ? weir_rules_load(s->ctx, s->opt.rules, &ro, &rules, errs, MAX_LOGGED_ERRORS, &n)
            : weir_rules_parse_many(s->ctx, docs, n_docs, &ro, &rules, errs, MAX_LOGGED_ERRORS, &n);
    if (st != WEIR_OK)
        log_rule_errors(errs, n, st, from_path ? s->opt.rules : "xds", why);
    free(errs);
    if (st == WEIR_OK && (!rules_fit_store(s, rules, why) || !warnings_pass(s, rules, why))) {
        weir_rules_free(rules);
        return NULL;
    }
    return st == WEIR_OK ? rules : NULL;
}

weir_rules *server_load_rules(server *s)
{
    return load(s, true, NULL, 0, NULL);
}

weir_rules *server_parse_rules(server *s, const weir_rules_doc *docs, size_t n_docs, weir_buf *why)
{
    return load(s, false, docs, n_docs, why);
}

/* The /v1/rules text of @rules, NUL-terminated, then the /rlconfig text,
 * NUL-terminated, into @b (initialised here); false (nothing to free)
 * when out of memory. */
static bool render_rules(const weir_rules *rules, weir_buf *b)
{
    weir_buf_init(b, SIZE_MAX);
    weir_api_render_rules(b, rules);
    weir_buf_putc(b, '\0');
    weir_api_render_rlconfig(b, rules);
    weir_buf_putc(b, '\0');
    admin_render_tiers(b, rules);
    weir_buf_putc(b, '\0');
    if (weir_buf_ok(b))
        return true;
    weir_buf_free(b);
    return false;
}

/* Serves the texts rendered into @b from now on (taken over). */
static void swap_rules_text(server *s, weir_buf *b)
{
    size_t first = strlen(b->p), second = strlen(b->p + first + 1);
    pthread_mutex_lock(&s->rules_lock);
    char *old = s->rules_text;
    s->rules_text = b->p;
    s->rules_text_len = first;
    s->rlconfig_len = second;
    s->tiers_len = b->len - first - second - 3;
    s->rules_total = b->len;
    pthread_mutex_unlock(&s->rules_lock);
    free(old);
}

bool server_set_rules_text(server *s, const weir_rules *rules)
{
    weir_buf b;
    if (!render_rules(rules, &b))
        return false;
    swap_rules_text(s, &b);
    return true;
}

/* Whether @b holds the text served now. */
static bool same_rules_text(server *s, const weir_buf *b)
{
    pthread_mutex_lock(&s->rules_lock);
    bool same =
        s->rules_text && s->rules_total == b->len && memcmp(s->rules_text, b->p, b->len) == 0;
    pthread_mutex_unlock(&s->rules_lock);
    return same;
}

bool server_reload(server *s, const char *why)
{
    weir_buf errors; /* what /admin/v1/stats says of the failure */
    weir_buf_init(&errors, SIZE_MAX);
    weir_rules *rules = load(s, true, NULL, 0, &errors);
    if (!rules) {
        weir_buf_putc(&errors, '\0');
        metrics_reload(s->metrics, false, server_now_us(s), weir_buf_ok(&errors) ? errors.p : NULL);
        weir_buf_free(&errors);
        dlog(WEIR_LOG_ERROR, "rules_reload_failed", "reason", why, "path", s->opt.rules, "kept",
             "the rules in force", NULL);
        return false;
    }
    weir_buf_free(&errors);
    return server_put_rules(s, rules, why);
}

bool server_put_rules(server *s, weir_rules *rules, const char *why)
{
    weir_buf text;
    if (!render_rules(rules, &text)) {
        weir_rules_free(rules);
        metrics_reload(s->metrics, false, server_now_us(s), "out of memory");
        dlog(WEIR_LOG_ERROR, "rules_reload_failed", "reason", why, "error", "out of memory", NULL);
        return false;
    }
    /* A file watch also fires for files that change nothing; a SIGHUP or
     * a management server's push reloads identical rules. */
    if (strcmp(why, "file_changed") == 0 && same_rules_text(s, &text)) {
        weir_buf_free(&text);
        weir_rules_free(rules);
        dlog(WEIR_LOG_DEBUG, "rules_unchanged", "reason", why, NULL);
        return true;
    }
    server_rules_counts counts = server_count_rules(rules);
    if (weir_engine_reload(s->engine, rules) != WEIR_OK) {
        weir_buf_free(&text);
        weir_rules_free(rules);
        metrics_reload(s->metrics, false, server_now_us(s), "out of memory");
        dlog(WEIR_LOG_ERROR, "rules_reload_failed", "reason", why, "error", "out of memory", NULL);
        return false;
    }
    swap_rules_text(s, &text);
    metrics_reload(s->metrics, true, server_now_us(s), NULL);
    server_log_loaded(s, &counts, why);
    return true;
}

void server_tiers_json(server *s, weir_buf *out)
{
    pthread_mutex_lock(&s->rules_lock);
    if (s->rules_text)
        weir_buf_put(out, s->rules_text + s->rules_text_len + s->rlconfig_len + 2, s->tiers_len);
    else
        weir_buf_puts(out, "{\"domains\":[]}");
    pthread_mutex_unlock(&s->rules_lock);
}
