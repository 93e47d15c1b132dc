/*
 * config.c - `weir config check PATH` and `weir config print PATH`: load a
 * rule file or directory exactly as the daemon will, and report.
 *
 * check: every problem as "file:line:column: message", exit 1; or a summary
 *        of the domains, descriptors and limits, exit 0.
 * print: the compiled rules, one line per limit, in the spirit of
 *        envoyproxy/ratelimit's /rlconfig.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/rules_text.h"
#include "cli.h"
#include "weir/weir.h"

#define MAX_REPORTED_ERRORS 1000u

typedef struct config_args {
    const char *verb;
    const char *path;
    weir_rules_options opts;
    bool strict;
    /* --priorities, the names `shed:` may use (opts.priorities) */
    char names[WEIR_RULES_MAX_PRIORITIES][WEIR_RULES_MAX_PRIORITY_BYTES];
    const char *priorities[WEIR_RULES_MAX_PRIORITIES];
} config_args;

static void usage(FILE *f)
{
    fprintf(f, "usage: weir config check|print [--merge] [--strict] [--default-algorithm NAME]\n"
               "                               [--priorities LIST] PATH\n"
               "\n"
               "  check   load PATH (a rule file, or a directory of *.yaml / *.yml) and print\n"
               "          every problem as file:line:column: message (exit 1), or a\n"
               "          summary of the domains and rules (exit 0)\n"
               "  print   print the compiled rules, one line per limit\n"
               "\n"
               "  --merge                   files of one domain merge instead of being an error\n"
               "  --strict                  warnings fail the check too (exit 1): for CI\n"
               "  --default-algorithm NAME  algorithm of limits without `algorithm:`\n"
               "                            (default fixed_window, upstream's)\n"
               "  --priorities LIST         the priorities `shed:` names, as weir serve's\n"
               "                            (default critical,normal,sheddable,test)\n"
               "\n"
               "example: weir config check examples/rules.yaml\n");
}

/* --priorities' comma-separated names into @a; false when they are too
 * many or too long (the loader checks the rest). */
static bool read_priorities(config_args *a, const char *list)
{
    size_t n = 0;
    for (const char *p = list;; n++) {
        size_t len = strcspn(p, ",");
        if (n == WEIR_RULES_MAX_PRIORITIES || len >= WEIR_RULES_MAX_PRIORITY_BYTES)
            return false;
        memcpy(a->names[n], p, len);
        a->names[n][len] = '\0';
        a->priorities[n] = a->names[n];
        if (!p[len])
            break;
        p += len + 1;
    }
    a->opts.priorities = a->priorities;
    a->opts.n_priorities = n + 1;
    return true;
}

static int parse_args(int argc, char **argv, config_args *a)
{
    memset(a, 0, sizeof(*a));
    a->opts.size = sizeof(a->opts);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--merge") == 0) {
            a->opts.merge_domains = true;
        } else if (strcmp(argv[i], "--strict") == 0) {
            a->strict = true;
        } else if (strcmp(argv[i], "--default-algorithm") == 0 && i + 1 < argc) {
            if (weir_algorithm_parse(argv[++i], &a->opts.default_algorithm) != WEIR_OK) {
                fprintf(stderr, "weir config: unknown algorithm '%s'\n", argv[i]);
                return 2;
            }
        } else if (strcmp(argv[i], "--priorities") == 0 && i + 1 < argc) {
            if (!read_priorities(a, argv[++i])) {
                fprintf(stderr,
                        "weir config: --priorities: at most %u names of at most %u "
                        "bytes each\n",
                        WEIR_RULES_MAX_PRIORITIES, WEIR_RULES_MAX_PRIORITY_BYTES - 1);
                return 2;
            }
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "weir config: unknown option '%s'\n\n", argv[i]);
            usage(stderr);
            return 2;
        } else if (!a->verb) {
            a->verb = argv[i];
        } else if (!a->path) {
            a->path = argv[i];
        } else {
            fprintf(stderr, "weir config: one PATH only\n");
            return 2;
        }
    }
    if (!a->verb || !a->path || (strcmp(a->verb, "check") != 0 && strcmp(a->verb, "print") != 0)) {
        usage(stderr);
        return 2;
    }
    return -1;
}

int weir_cli_load_rules(const char *cmd, const char *path, const weir_rules_options *opts,
                        bool strict, weir_ctx *ctx, weir_rules **out)
{
    weir_rules_error *errs = calloc(MAX_REPORTED_ERRORS, sizeof(*errs));
    weir_rules *rules = NULL;
    size_t n_errs = 0;
    weir_status st =
        errs ? weir_rules_load(ctx, path, opts, &rules, errs, MAX_REPORTED_ERRORS, &n_errs)
             : WEIR_ENOMEM;
    if (st != WEIR_OK) {
        size_t shown = n_errs < MAX_REPORTED_ERRORS ? n_errs : MAX_REPORTED_ERRORS;
        for (size_t i = 0; i < shown; i++) {
            if (errs[i].line)
                fprintf(stderr, "%s:%u:%u: %s\n", errs[i].file, errs[i].line, errs[i].column,
                        errs[i].message);
            else
                fprintf(stderr, "%s: %s\n", errs[i].file, errs[i].message);
        }
        if (n_errs > shown)
            fprintf(stderr, "... and %zu more\n", n_errs - shown);
        if (n_errs == 0)
            fprintf(stderr, "%s: %s: %s\n", cmd, path, weir_strerror(st));
        else
            fprintf(stderr, "%s: %zu problem%s, rules not loaded\n", path, n_errs,
                    n_errs == 1 ? "" : "s");
        free(errs);
        return 1;
    }
    free(errs);

    /* rules that load but likely do not do what was meant */
    size_t nw = weir_rules_warning_count(rules);
    for (size_t i = 0; i < nw; i++) {
        const weir_rules_error *w = weir_rules_warning_at(rules, i);
        if (w->line)
            fprintf(stderr, "%s:%u:%u: warning: %s\n", w->file, w->line, w->column, w->message);
        else
            fprintf(stderr, "%s: warning: %s\n", w->file, w->message);
    }
    if (strict && nw > 0) {
        fprintf(stderr, "%s: %zu warning%s, and --strict: not accepted\n", path, nw,
                nw == 1 ? "" : "s");
        weir_rules_free(rules);
        return 1;
    }
    *out = rules;
    return 0;
}

int weir_cli_config(int argc, char **argv)
{
    config_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0)
        return rc;

    weir_ctx *ctx;
    if (weir_ctx_new(NULL, &ctx) != WEIR_OK) {
        fprintf(stderr, "weir config: out of memory\n");
        return 1;
    }
    weir_rules *rules;
    if (weir_cli_load_rules("weir config", a.path, &a.opts, a.strict, ctx, &rules) != 0) {
        weir_ctx_free(ctx);
        return 1;
    }
    size_t nw = weir_rules_warning_count(rules);

    if (strcmp(a.verb, "check") == 0) {
        size_t nd = weir_rules_domain_count(rules);
        printf("%s: ok: %zu domain%s, %zu descriptor%s, %zu limit%s", a.path, nd,
               nd == 1 ? "" : "s", weir_rules_rule_count(rules),
               weir_rules_rule_count(rules) == 1 ? "" : "s", weir_rules_limit_count(rules),
               weir_rules_limit_count(rules) == 1 ? "" : "s");
        if (nw)
            printf(", %zu warning%s", nw, nw == 1 ? "" : "s");
        printf("\n");
        for (size_t i = 0; i < nd; i++) {
            const weir_rules_domain *d = weir_rules_domain_at(rules, i);
            printf("  domain %s: %zu top-level descriptor%s", weir_rules_domain_name(d),
                   weir_rules_domain_rule_count(d),
                   weir_rules_domain_rule_count(d) == 1 ? "" : "s");
            size_t nt = weir_rules_domain_tier_count(d);
            if (weir_rules_domain_tenant_key(d)) {
                printf("; tenants by %s, %zu tier%s (", weir_rules_domain_tenant_key(d), nt,
                       nt == 1 ? "" : "s");
                for (size_t t = 0; t < nt; t++)
                    printf("%s%s", t ? ", " : "", weir_rules_domain_tier_name(d, t));
                const char *dflt = weir_rules_domain_default_tier(d);
                printf(")%s%s", dflt ? ", default " : "", dflt ? dflt : "");
            }
            printf("\n");
        }
    } else {
        weir_buf text;
        weir_buf_init(&text, SIZE_MAX);
        weir_api_render_rules(&text, rules);
        if (!weir_buf_ok(&text))
            fprintf(stderr, "weir config: out of memory\n");
        else
            fwrite(text.p, 1, text.len, stdout);
        weir_buf_free(&text);
    }
    weir_rules_free(rules);
    weir_ctx_free(ctx);
    return 0;
}
