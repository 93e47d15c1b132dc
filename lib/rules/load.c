/*
 * load.c - the public entry points: options, reading a rule file or a
 * directory of them, and handing the tree over only when the whole load
 * passed.
 *
 * Invariant: *out is written only with a finished tree from a load that
 * recorded no problem; on every other path the partial tree is released
 * here, so a failed reload leaves the caller's old rules untouched.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/file.h"
#include "rules/loader.h"

/* The first release's options end after max_limits. */
#define OPTIONS_V1_SIZE (offsetof(weir_rules_options, max_limits) + sizeof(uint32_t))

static weir_status begin(weir_ctx *ctx, const weir_rules_options *opts, weir_rules **out,
                         weir_rules_error *errors, size_t max_errors, rules_loader *ld)
{
    if (!ctx || !out || (!errors && max_errors))
        return WEIR_EINVAL;
    memset(ld, 0, sizeof(*ld));
    if (opts) {
        if (opts->size < OPTIONS_V1_SIZE)
            return WEIR_EINVAL;
        memcpy(&ld->opts, opts, opts->size < sizeof(ld->opts) ? opts->size : sizeof(ld->opts));
    }
    if (!ld->opts.default_algorithm)
        ld->opts.default_algorithm = WEIR_ALGO_FIXED_WINDOW;
    else if (!weir_algorithm_name(ld->opts.default_algorithm))
        return WEIR_EINVAL;
    if (!ld->opts.max_descriptors)
        ld->opts.max_descriptors = WEIR_RULES_MAX_DESCRIPTORS;
    if (!ld->opts.max_limits)
        ld->opts.max_limits = WEIR_RULES_MAX_LIMITS;
    if ((unsigned)ld->opts.default_failure_mode > WEIR_FAILURE_LOCAL)
        return WEIR_EINVAL;
    if (!weir__rules_priorities(&ld->opts))
        return WEIR_EINVAL;
    ld->errors = errors;
    ld->max_errors = max_errors;
    ld->rules = weir__calloc(ctx, 1, sizeof(*ld->rules));
    if (!ld->rules)
        return WEIR_ENOMEM;
    ld->rules->ctx = ctx;
    return WEIR_OK;
}

static weir_status end(rules_loader *ld, weir_rules **out, size_t *n_errors)
{
    if (!ld->nomem && ld->n_errors == 0)
        weir__rules_finish(ld);
    if (n_errors)
        *n_errors = ld->n_errors;
    weir_status st = WEIR_OK;
    if (ld->nomem)
        st = WEIR_ENOMEM;
    else if (ld->io_error)
        st = WEIR_EIO;
    else if (ld->n_errors)
        st = WEIR_EPARSE;
    if (st != WEIR_OK) {
        weir__rules_release(ld->rules);
        return st;
    }
    *out = ld->rules;
    return WEIR_OK;
}

static void parse_named(rules_loader *ld, const char *name, const void *data, size_t len)
{
    const char *file = weir__rules_strndup(ld, name, strlen(name));
    if (!file)
        return;
    if (len > WEIR_RULES_MAX_FILE_BYTES) {
        weir__rules_error(ld, file, 0, 0, "file is larger than %u bytes",
                          WEIR_RULES_MAX_FILE_BYTES);
        return;
    }
    weir__rules_parse_doc(ld, file, data, len);
}

weir_status weir_rules_parse(weir_ctx *ctx, const char *name, const void *data, size_t len,
                             const weir_rules_options *opts, weir_rules **out,
                             weir_rules_error *errors, size_t max_errors, size_t *n_errors)
{
    rules_loader ld;
    if (!data && len)
        return WEIR_EINVAL;
    weir_status st = begin(ctx, opts, out, errors, max_errors, &ld);
    if (st == WEIR_ENOMEM && n_errors)
        *n_errors = 0;
    if (st != WEIR_OK)
        return st;
    parse_named(&ld, name ? name : "<memory>", data, len);
    return end(&ld, out, n_errors);
}

weir_status weir_rules_parse_many(weir_ctx *ctx, const weir_rules_doc *docs, size_t n_docs,
                                  const weir_rules_options *opts, weir_rules **out,
                                  weir_rules_error *errors, size_t max_errors, size_t *n_errors)
{
    rules_loader ld;
    if ((!docs && n_docs) || n_docs > WEIR_RULES_MAX_FILES)
        return WEIR_EINVAL;
    for (size_t i = 0; i < n_docs; i++)
        if (!docs[i].data && docs[i].len)
            return WEIR_EINVAL;
    weir_status st = begin(ctx, opts, out, errors, max_errors, &ld);
    if (st == WEIR_ENOMEM && n_errors)
        *n_errors = 0;
    if (st != WEIR_OK)
        return st;
    for (size_t i = 0; i < n_docs && !ld.nomem; i++)
        parse_named(&ld, docs[i].name ? docs[i].name : "<memory>", docs[i].data, docs[i].len);
    if (!ld.nomem && ld.n_errors == 0 && ld.rules->n_domains == 0)
        weir__rules_warn(&ld, "<memory>", 0, 0, "no domain loaded: every request is allowed");
    return end(&ld, out, n_errors);
}

static void io_error(rules_loader *ld, const char *path, const char *what, int err)
{
    ld->io_error = true;
    weir__rules_error(ld, path, 0, 0, "%s: %s", what, strerror(err));
}

static void load_file(rules_loader *ld, const char *path)
{
    uint8_t *buf;
    size_t got;
    weir_file_error why;
    weir_status st =
        weir__read_file(ld->rules->ctx, path, WEIR_RULES_MAX_FILE_BYTES, &buf, &got, &why);
    if (st == WEIR_ENOMEM) {
        ld->nomem = true;
        return;
    }
    if (st != WEIR_OK) {
        if (why.err)
            io_error(ld, path, why.what, why.err);
        else
            weir__rules_error(ld, path, 0, 0, "%s", why.what);
        return;
    }
    parse_named(ld, path, buf, got);
    weir__free(ld->rules->ctx, buf);
}

static bool rule_file_name(const char *name)
{
    if (name[0] == '.')
        return false;
    size_t len = strlen(name);
    return (len > 5 && strcmp(name + len - 5, ".yaml") == 0) ||
           (len > 4 && strcmp(name + len - 4, ".yml") == 0);
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *join(const weir_ctx *ctx, const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    char *p = weir__malloc(ctx, a + b + 2);
    if (!p)
        return NULL;
    memcpy(p, dir, a);
    size_t i = a;
    if (a && dir[a - 1] != '/')
        p[i++] = '/';
    memcpy(p + i, name, b + 1);
    return p;
}

static void load_dir(rules_loader *ld, const char *path)
{
    const weir_ctx *ctx = ld->rules->ctx;
    DIR *d = opendir(path);
    if (!d) {
        io_error(ld, path, "cannot open directory", errno);
        return;
    }
    /* Names are collected and sorted first: readdir order is arbitrary,
     * and the load order decides merge order and error order. */
    char **names = NULL;
    size_t n = 0, cap = 0;
    bool too_many = false;
    struct dirent *de;
    errno = 0;
    while ((de = readdir(d)) != NULL) {
        if (!rule_file_name(de->d_name))
            continue;
        if (n == WEIR_RULES_MAX_FILES) {
            too_many = true;
            break;
        }
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            char **grown = weir__realloc(ctx, names, ncap * sizeof(*names));
            if (!grown) {
                ld->nomem = true;
                break;
            }
            names = grown;
            cap = ncap;
        }
        if ((names[n] = join(ctx, path, de->d_name)) == NULL) {
            ld->nomem = true;
            break;
        }
        n++;
    }
    closedir(d);
    if (too_many)
        weir__rules_error(ld, path, 0, 0, "directory holds more than %u rule files",
                          WEIR_RULES_MAX_FILES);
    if (!too_many && !ld->nomem) {
        if (n > 1) /* an empty directory has no array to sort (qsort(NULL) is undefined) */
            qsort(names, n, sizeof(*names), cmp_name);
        for (size_t i = 0; i < n && !ld->nomem; i++) {
            struct stat st;
            /* stat() follows links: ConfigMap files are symlinks into
             * "..data/"; a subdirectory named *.yaml is skipped. */
            if (stat(names[i], &st) == 0 && S_ISDIR(st.st_mode))
                continue;
            load_file(ld, names[i]);
        }
    }
    for (size_t i = 0; i < n; i++)
        weir__free(ctx, names[i]);
    weir__free(ctx, names);
}

/* Whether @dir holds a rule file (a *.yaml or *.yml entry). */
static bool holds_rules(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return false;
    bool found = false;
    struct dirent *de;
    while (!found && (de = readdir(d)) != NULL)
        found = rule_file_name(de->d_name);
    closedir(d);
    return found;
}

/* A load that found no domain allows every request: said loudly, with
 * the directory that holds the rules when @path is upstream's
 * RUNTIME_ROOT (or RUNTIME_ROOT/RUNTIME_SUBDIRECTORY) and the files are in
 * its config/ below, where upstream reads them. */
static void warn_no_domain(rules_loader *ld, const char *path)
{
    const weir_ctx *ctx = ld->rules->ctx;
    char *hint = join(ctx, path, "config");
    bool found = hint && holds_rules(hint);
    DIR *d = found || !hint ? NULL : opendir(path);
    struct dirent *de;
    while (d && !found && (de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        char *sub = join(ctx, path, de->d_name);
        weir__free(ctx, hint);
        hint = sub ? join(ctx, sub, "config") : NULL;
        weir__free(ctx, sub);
        found = hint && holds_rules(hint);
    }
    if (d)
        closedir(d);
    if (found)
        weir__rules_warn(ld, path, 0, 0,
                         "no domain loaded: every request is allowed; the rule files are in %s "
                         "(upstream's RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config layout): use "
                         "--rules %s",
                         hint, hint);
    else
        weir__rules_warn(ld, path, 0, 0,
                         "no domain loaded: every request is allowed (no *.yaml or *.yml file "
                         "with a domain here)");
    weir__free(ctx, hint);
}

weir_status weir_rules_empty(weir_ctx *ctx, weir_rules **out)
{
    rules_loader ld;
    weir_status st = begin(ctx, NULL, out, NULL, 0, &ld);
    return st == WEIR_OK ? end(&ld, out, NULL) : st;
}

weir_status weir_rules_load(weir_ctx *ctx, const char *path, const weir_rules_options *opts,
                            weir_rules **out, weir_rules_error *errors, size_t max_errors,
                            size_t *n_errors)
{
    rules_loader ld;
    if (!path)
        return WEIR_EINVAL;
    weir_status st = begin(ctx, opts, out, errors, max_errors, &ld);
    if (st == WEIR_ENOMEM && n_errors)
        *n_errors = 0;
    if (st != WEIR_OK)
        return st;
    struct stat sb;
    if (stat(path, &sb) != 0)
        io_error(&ld, path, "cannot open", errno);
    else if (S_ISDIR(sb.st_mode))
        load_dir(&ld, path);
    else
        load_file(&ld, path);
    if (!ld.nomem && ld.n_errors == 0 && ld.rules->n_domains == 0)
        warn_no_domain(&ld, path);
    return end(&ld, out, n_errors);
}
