/*
 * parse.c - reads one YAML rule document into the tree: a recursive-descent
 * walk over libyaml's event stream that applies the rule-file schema as it
 * goes (upstream's keys and errors, plus weir's rate_limit extensions).
 *
 * Invariants: the walk pulls events and never builds a YAML tree, so memory
 * is the rules kept plus libyaml's own bounded buffers; recursion follows
 * descriptor nesting only and stops at WEIR_RULES_MAX_DEPTH; aliases are
 * refused wherever a value is read (and never expanded anywhere), so there
 * is no alias blow-up; after a schema error the offending node is skipped
 * and the walk goes on, so one pass reports every problem, while a YAML
 * syntax error ends the document (libyaml cannot resume after one).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "rules/yaml_walk.h"
#include "weir/cms.h"
#include "weir/units.h"

/* ---- rate_limit */

enum rl_field {
    RL_UNIT,
    RL_RPU,
    RL_UNLIMITED,
    RL_NAME,
    RL_REPLACES,
    RL_ALGORITHM,
    RL_BURST,
    RL_WINDOW,
    RL_FAILURE_MODE,
    RL_COUNT_REJECTED,
    RL_SUB_WINDOWS,
    RL_LOCAL_SHARE,
    RL_OVER_LIMIT_CACHE,
    RL_SYNC,
    RL_SYNC_INTERVAL,
    RL_CALENDAR,
    RL_TIME_ZONE,
    RL_SKETCH,
    RL_WARMUP,
    RL_COLD_FACTOR,
    RL_ADAPTIVE,
    RL_SHED,
    RL_N
};

static const char *const rl_names[RL_N] = {
    [RL_UNIT] = "unit",
    [RL_RPU] = "requests_per_unit",
    [RL_UNLIMITED] = "unlimited",
    [RL_NAME] = "name",
    [RL_REPLACES] = "replaces",
    [RL_ALGORITHM] = "algorithm",
    [RL_BURST] = "burst",
    [RL_WINDOW] = "window",
    [RL_FAILURE_MODE] = "failure_mode",
    [RL_COUNT_REJECTED] = "count_rejected",
    [RL_SUB_WINDOWS] = "sub_windows",
    [RL_LOCAL_SHARE] = "local_share",
    [RL_OVER_LIMIT_CACHE] = "over_limit_cache",
    [RL_SYNC] = "sync",
    [RL_SYNC_INTERVAL] = "sync_interval",
    [RL_CALENDAR] = "calendar",
    [RL_TIME_ZONE] = "time_zone",
    [RL_SKETCH] = "sketch",
    [RL_WARMUP] = "warmup",
    [RL_COLD_FACTOR] = "cold_factor",
    [RL_ADAPTIVE] = "adaptive",
    [RL_SHED] = "shed",
};

/* A replaces entry while its limit is read (names are checked at the end,
 * when the limit's own name is known). */
typedef struct repl {
    const char *name;
    pos at;
    struct repl *next;
} repl;

static bool read_replaces(yp *p, repl **head, size_t *count)
{
    if (weir__yp_is_null(p))
        return true;
    if (p->ev.type != YAML_SEQUENCE_START_EVENT)
        return weir__yp_wrong_kind(p, "replaces", "a list");
    repl **tail = head;
    for (;;) {
        if (!weir__yp_next(p))
            return false;
        if (p->ev.type == YAML_SEQUENCE_END_EVENT)
            return true;
        pos at = weir__yp_here(p);
        const char *name = NULL;
        if (p->ev.type != YAML_MAPPING_START_EVENT) {
            if (!weir__yp_wrong_kind(p, "replaces entry", "a mapping"))
                return false;
            continue;
        }
        static const char *const names[] = {"name"};
        uint64_t seen = 0;
        pos key_at;
        int k;
        while ((k = weir__yp_key(p, names, 1, &seen, &key_at)) != -1) {
            if (k == -3)
                return false;
            if (k == 0 && !weir__yp_is_null(p))
                name = weir__yp_string(p, "name", WEIR_RULES_MAX_STRING_BYTES);
            else if (k == 0)
                name = "";
        }
        if (!name || !*name) {
            if (!(seen & 1) || (name && !*name))
                ERR(p, at, "should not have an empty replaces entry");
            continue;
        }
        if (*count >= WEIR_RULES_MAX_REPLACES) {
            ERR(p, at, "more than %u replaces entries", WEIR_RULES_MAX_REPLACES);
            continue;
        }
        repl *r = weir__rules_alloc(p->ld, sizeof(*r));
        if (!r)
            return false;
        r->name = name;
        r->at = at;
        *tail = r;
        tail = &r->next;
        (*count)++;
    }
}

static bool algo_has_burst(weir_algorithm a)
{
    return a == WEIR_ALGO_TOKEN_BUCKET || a == WEIR_ALGO_LEAKY_BUCKET ||
           a == WEIR_ALGO_LEAKY_SHAPER || a == WEIR_ALGO_GCRA;
}

static void algo_list(char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 1; i <= WEIR_ALGORITHM_COUNT; i++) {
        int w = snprintf(buf + len, cap - len, "%s%s", i > 1 ? ", " : "",
                         weir_algorithm_name((weir_algorithm)i));
        if (w < 0 || (size_t)w >= cap - len)
            return;
        len += (size_t)w;
    }
}

/* Warnings of a valid limit that likely does not do what was meant. */
static void warn_limit(yp *p, const weir_rule_limit *l, pos at, bool has_rpu)
{
    if (!has_rpu)
        weir__rules_warn(p->ld, p->file, at.line, at.col,
                         "no 'requests_per_unit': the limit is 0, a ban (every request that "
                         "matches is denied); write requests_per_unit: 0 if that is meant");
    if (l->algorithm == WEIR_ALGO_LEAKY_SHAPER)
        weir__rules_warn(p->ld, p->file, at.line, at.col,
                         "leaky_bucket_shaper: the wait it asks for reaches clients only in "
                         "weir's HTTP API (delay_ms); Envoy's protocol has no way to make a "
                         "request wait, so through Envoy it admits at once");
}

/* sketch: the smallest budget taken (a sketch of 4 rows of 2,048
 * counters) */
#define SKETCH_MIN_BYTES 65536u

/* What a limit counted in a sketch cannot be: the sketch is a fixed
 * window of this instance's own, counting admitted hits only. */
static void check_sketch(yp *p, const weir_rule_limit *l, pos at, bool sync_local)
{
    const char *why = l->unlimited                        ? "has no effect when unlimited"
                      : l->calendar != WEIR_CALENDAR_NONE ? "does not apply to a calendar limit"
                      : l->algorithm != WEIR_ALGO_FIXED_WINDOW
                          ? "counts a fixed_window only (algorithm: fixed_window)"
                      : sync_local ? "is counted in this instance's memory: no 'sync' with it"
                      : l->count_rejected ? "counts admitted hits only: no 'count_rejected' with it"
                      : l->requests_per_unit > WEIR_CMS_MAX_LIMIT
                          ? "holds at most 4294967294 requests a window"
                          : NULL;
    if (why)
        ERR(p, at, "'sketch' %s", why);
}

/* Reads one rate_limit mapping (the current event) into a new limit.
 * Returns the limit, NULL when it was reported or the parser died. */
/* sync: local's interval: its default and bounds */
#define SYNC_DEFAULT_US 100000
#define SYNC_MIN_US 1000
#define SYNC_MAX_US 60000000

static weir_rule_limit *read_rate_limit(yp *p)
{
    rules_loader *ld = p->ld;
    pos start = weir__yp_here(p);
    if (p->ev.type != YAML_MAPPING_START_EVENT) {
        weir__yp_wrong_kind(p, "rate_limit", "a mapping");
        return NULL;
    }
    size_t errors_before = ld->n_errors;
    weir_rule_limit *l = weir__rules_alloc(ld, sizeof(*l));
    if (!l) {
        weir__yp_skip(p);
        return NULL;
    }
    l->file = p->file;
    l->line = (uint32_t)(start.line > UINT32_MAX ? UINT32_MAX : start.line);
    l->column = (uint32_t)(start.col > UINT32_MAX ? UINT32_MAX : start.col);
    l->algorithm = ld->opts.default_algorithm;
    l->failure_mode = ld->opts.default_failure_mode;
    bool unit_ok = false, unit_bad = false;
    pos at[RL_N];
    memset(at, 0, sizeof(at));
    uint64_t seen = 0;
    repl *replaces = NULL;
    size_t n_replaces = 0;
    bool sync_local = false;
    int64_t sync_us = SYNC_DEFAULT_US;
    int k;
    pos key_at;
    while ((k = weir__yp_key(p, rl_names, RL_N, &seen, &key_at)) != -1) {
        if (k == -3)
            return NULL;
        at[k] = weir__yp_here(p);
        const char *s;
        uint64_t v;
        bool b;
        switch ((enum rl_field)k) {
        case RL_UNIT:
            if (weir__yp_is_null(p))
                break;
            if ((s = weir__yp_scalar(p, "unit")) == NULL) {
                unit_bad = true;
            } else if (weir__rules_parse_unit(s, &l->unit, &l->window_us)) {
                unit_ok = true;
            } else {
                unit_bad = true;
                ERR(p, at[k], "invalid rate limit unit '%.64s'", s);
            }
            break;
        case RL_RPU:
            if (weir__yp_u64(p, "requests_per_unit", UINT32_MAX, &v))
                l->requests_per_unit = (uint32_t)v;
            break;
        case RL_UNLIMITED:
            if (weir__yp_bool(p, "unlimited", &b))
                l->unlimited = b;
            break;
        case RL_NAME:
            if (!weir__yp_is_null(p)) {
                s = weir__yp_string(p, "name", WEIR_RULES_MAX_STRING_BYTES);
                l->name = s && *s ? s : NULL;
            }
            break;
        case RL_REPLACES:
            if (!read_replaces(p, &replaces, &n_replaces))
                return NULL;
            break;
        case RL_ALGORITHM:
            if ((s = weir__yp_scalar(p, "algorithm")) != NULL &&
                weir_algorithm_parse(s, &l->algorithm) != WEIR_OK) {
                char list[256];
                algo_list(list, sizeof(list));
                ERR(p, at[k], "unknown algorithm '%.64s' (expected one of: %s)", s, list);
            }
            break;
        case RL_BURST:
            if (weir__yp_u64(p, "burst", UINT32_MAX, &v))
                l->burst = v;
            break;
        case RL_WINDOW:
            if ((s = weir__yp_scalar(p, "window")) != NULL) {
                const char *why = weir__rules_parse_duration(s, &l->window_us);
                if (why)
                    ERR(p, at[k], "window '%.64s' %s", s, why);
            }
            break;
        case RL_FAILURE_MODE:
            if ((s = weir__yp_scalar(p, "failure_mode")) != NULL) {
                if (strcasecmp(s, "allow") == 0)
                    l->failure_mode = WEIR_FAILURE_ALLOW;
                else if (strcasecmp(s, "deny") == 0)
                    l->failure_mode = WEIR_FAILURE_DENY;
                else if (strcasecmp(s, "local") == 0)
                    l->failure_mode = WEIR_FAILURE_LOCAL;
                else
                    ERR(p, at[k], "invalid failure_mode '%.64s' (expected allow, deny or local)",
                        s);
            }
            break;
        case RL_LOCAL_SHARE:
            if ((s = weir__yp_scalar(p, "local_share")) != NULL &&
                !weir__rules_parse_share(s, &l->local_share_ppm))
                ERR(p, at[k],
                    "local_share '%.64s' must be a fraction above 0 and at most 1 (e.g. 0.25), or "
                    "a percentage (25%%)",
                    s);
            break;
        case RL_OVER_LIMIT_CACHE:
            if (weir__yp_bool(p, "over_limit_cache", &b))
                l->no_local_cache = !b;
            break;
        case RL_SYNC:
            if ((s = weir__yp_scalar(p, "sync")) != NULL) {
                if (strcasecmp(s, "local") == 0)
                    sync_local = true;
                else if (strcasecmp(s, "global") != 0)
                    ERR(p, at[k], "invalid sync '%.64s' (expected global or local)", s);
            }
            break;
        case RL_SYNC_INTERVAL:
            if ((s = weir__yp_scalar(p, "sync_interval")) != NULL) {
                const char *why = weir__rules_parse_duration(s, &sync_us);
                if (why)
                    ERR(p, at[k], "sync_interval '%.64s' %s", s, why);
                else if (sync_us < SYNC_MIN_US || sync_us > SYNC_MAX_US)
                    ERR(p, at[k], "sync_interval '%.64s' must be from 1ms to 60s", s);
            }
            break;
        case RL_CALENDAR:
            if ((s = weir__yp_scalar(p, "calendar")) != NULL &&
                weir_calendar_parse(s, strlen(s), &l->calendar) != WEIR_OK)
                ERR(p, at[k], "invalid calendar '%.64s' (expected day, month or year)", s);
            break;
        case RL_TIME_ZONE:
            if ((s = weir__yp_string(p, "time_zone", WEIR_TZ_MAX_NAME_BYTES)) != NULL) {
                const char *why = weir__rules_zone(ld, s, &l->tz);
                if (why)
                    ERR(p, at[k], "time_zone '%.64s': %s", s, why);
                l->time_zone = s;
            }
            break;
        case RL_COUNT_REJECTED:
            if (weir__yp_bool(p, "count_rejected", &b))
                l->count_rejected = b;
            break;
        case RL_SUB_WINDOWS:
            if (weir__yp_u64(p, "sub_windows", UINT32_MAX, &v))
                l->sub_windows = (uint32_t)v;
            break;
        case RL_SKETCH:
            if ((s = weir__yp_scalar(p, "sketch")) != NULL) {
                uint64_t bytes;
                if (weir_size_parse(s, &bytes) != WEIR_OK || bytes < SKETCH_MIN_BYTES ||
                    bytes > WEIR_CMS_MAX_BYTES)
                    ERR(p, at[k], "sketch '%.64s' must be a size from 64KiB to 1GiB (e.g. 4MiB)",
                        s);
                else
                    l->sketch_bytes = (size_t)bytes;
            }
            break;
        case RL_WARMUP:
            if ((s = weir__yp_scalar(p, "warmup")) != NULL) {
                const char *why = weir__rules_parse_duration(s, &l->warmup_us);
                if (why)
                    ERR(p, at[k], "warmup '%.64s' %s", s, why);
                else if (l->warmup_us > WEIR_MAX_WARMUP_US)
                    ERR(p, at[k], "warmup '%.64s' must be at most 1 day", s);
            }
            break;
        case RL_COLD_FACTOR:
            if (weir__yp_u64(p, "cold_factor", WEIR_MAX_COLD_FACTOR, &v)) {
                if (v < 1)
                    ERR(p, at[k], "cold_factor must be from 1 to %u", WEIR_MAX_COLD_FACTOR);
                l->cold_factor = (uint32_t)v;
            }
            break;
        case RL_ADAPTIVE:
            if (!weir__rules_read_adaptive(p, l))
                return NULL;
            break;
        case RL_SHED:
            if (!weir__rules_read_shed(p, l))
                return NULL;
            break;
        case RL_N:
            break;
        }
        if (!weir__yp_skip(p))
            return NULL;
    }
    if (p->dead)
        return NULL;

    bool has_window = seen & (UINT64_C(1) << RL_WINDOW);
    if (l->calendar != WEIR_CALENDAR_NONE) {
        /* a billing quota: the calendar period is the window */
        if (unit_ok || unit_bad || has_window)
            ERR(p, at[unit_ok || unit_bad ? RL_UNIT : RL_WINDOW],
                "'calendar' is the window: give no 'unit' or 'window' with it");
        if ((seen & (UINT64_C(1) << RL_ALGORITHM)) && l->algorithm != WEIR_ALGO_FIXED_WINDOW)
            ERR(p, at[RL_ALGORITHM], "a calendar period is counted as a fixed_window");
        static const weir_rule_unit unit_of[] = {WEIR_UNIT_NONE, WEIR_UNIT_DAY, WEIR_UNIT_MONTH,
                                                 WEIR_UNIT_YEAR};
        l->algorithm = WEIR_ALGO_FIXED_WINDOW;
        l->unit = unit_of[l->calendar];
        weir__rules_parse_unit(weir_rule_unit_name(l->unit), &l->unit, &l->window_us);
        unit_ok = true;
    } else if (seen & (UINT64_C(1) << RL_TIME_ZONE)) {
        ERR(p, at[RL_TIME_ZONE], "'time_zone' applies to a 'calendar' limit only");
    }
    if (l->unlimited) {
        if (unit_ok)
            ERR(p, at[RL_UNIT], "should not specify rate limit unit when unlimited");
        if (has_window)
            ERR(p, at[RL_WINDOW], "should not specify rate limit window when unlimited");
        static const enum rl_field moot[] = {RL_ALGORITHM, RL_BURST, RL_SUB_WINDOWS, RL_WARMUP,
                                             RL_COLD_FACTOR};
        for (size_t i = 0; i < sizeof(moot) / sizeof(moot[0]); i++) {
            if (seen & (UINT64_C(1) << moot[i]))
                ERR(p, at[moot[i]], "'%s' has no effect when unlimited", rl_names[moot[i]]);
        }
        l->unit = WEIR_UNIT_NONE;
        l->window_us = 0;
    } else if (has_window && (unit_ok || unit_bad)) {
        ERR(p, at[RL_WINDOW], "specify either 'unit' or 'window', not both");
    } else if (!has_window && !unit_ok && !unit_bad) {
        ERR(p, start, "invalid rate limit unit '' (a rate_limit needs 'unit' or 'window')");
    }

    const char **names = n_replaces ? weir__rules_alloc(ld, n_replaces * sizeof(*names)) : NULL;
    size_t i = 0;
    for (repl *r = replaces; r; r = r->next) {
        if (l->name && strcmp(r->name, l->name) == 0)
            ERR(p, r->at, "replaces should not contain name of same descriptor");
        if (names)
            names[i++] = r->name;
    }
    l->replaces = names;
    l->n_replaces = names ? n_replaces : 0;

    if ((seen & (UINT64_C(1) << RL_SYNC_INTERVAL)) && !sync_local)
        ERR(p, at[RL_SYNC_INTERVAL], "'sync_interval' needs 'sync: local'");
    if (sync_local && l->unlimited)
        ERR(p, at[RL_SYNC], "'sync' has no effect when unlimited");
    else if (sync_local && l->algorithm == WEIR_ALGO_CONCURRENCY)
        ERR(p, at[RL_SYNC],
            "'sync: local' does not apply to concurrency (a lease is held where it was given)");
    else if (sync_local)
        l->sync_interval_us = sync_us;
    if (l->sketch_bytes)
        check_sketch(p, l, at[RL_SKETCH], sync_local);
    if ((seen & (UINT64_C(1) << RL_SHED)) && (l->unlimited || l->sketch_bytes))
        ERR(p, at[RL_SHED], "'shed' %s",
            l->unlimited ? "has no effect when unlimited"
                         : "does not apply to a 'sketch' limit: a sketch keeps no reserve");
    if (!l->unlimited) {
        if ((seen & (UINT64_C(1) << RL_SUB_WINDOWS)) && l->algorithm != WEIR_ALGO_SLIDING_COUNTER)
            ERR(p, at[RL_SUB_WINDOWS], "'sub_windows' only applies to sliding_window_counter");
        if ((seen & (UINT64_C(1) << RL_BURST)) && !algo_has_burst(l->algorithm))
            ERR(p, at[RL_BURST], "'burst' does not apply to %s", weir_algorithm_name(l->algorithm));
        if ((seen & (UINT64_C(1) << RL_WARMUP)) && l->algorithm != WEIR_ALGO_TOKEN_BUCKET)
            ERR(p, at[RL_WARMUP], "'warmup' only applies to token_bucket, not %s",
                weir_algorithm_name(l->algorithm));
        else if ((seen & (UINT64_C(1) << RL_COLD_FACTOR)) && !(seen & (UINT64_C(1) << RL_WARMUP)))
            ERR(p, at[RL_COLD_FACTOR], "'cold_factor' needs 'warmup'");
    }
    if (l->adaptive)
        weir__rules_check_adaptive(p, l, at[RL_ADAPTIVE]);
    if (ld->n_errors != errors_before)
        return NULL;
    if (!l->unlimited) {
        weir_limit_spec spec = {.algorithm = l->algorithm,
                                .limit = l->requests_per_unit,
                                .window_us = l->window_us,
                                .burst = l->burst,
                                .sub_windows = l->sub_windows,
                                .warmup_us = l->warmup_us,
                                .cold_factor = l->cold_factor};
        weir_status st = weir_limit_compile(&spec, &l->compiled);
        if (st != WEIR_OK) {
            ERR(p, start, "limit not accepted: %s (%s, %u per %lld us, burst %llu, sub_windows %u)",
                weir_strerror(st), weir_algorithm_name(l->algorithm), l->requests_per_unit,
                (long long)l->window_us, (unsigned long long)l->burst, l->sub_windows);
            return NULL;
        }
        warn_limit(p, l, start, (seen & (UINT64_C(1) << RL_RPU)) != 0);
    }
    return l;
}

/* ---- descriptors */

enum d_field {
    D_KEY,
    D_VALUE,
    D_RATE_LIMIT,
    D_RATE_LIMITS,
    D_DESCRIPTORS,
    D_SHADOW_MODE,
    D_QUOTA_MODE,
    D_DETAILED_METRIC,
    D_VALUE_TO_METRIC,
    D_SHARE_THRESHOLD,
    D_METADATA,
    D_N
};

static const char *const d_names[D_N] = {
    [D_KEY] = "key",
    [D_VALUE] = "value",
    [D_RATE_LIMIT] = "rate_limit",
    [D_RATE_LIMITS] = "rate_limits",
    [D_DESCRIPTORS] = "descriptors",
    [D_SHADOW_MODE] = "shadow_mode",
    [D_QUOTA_MODE] = "quota_mode",
    [D_DETAILED_METRIC] = "detailed_metric",
    [D_VALUE_TO_METRIC] = "value_to_metric",
    [D_SHARE_THRESHOLD] = "share_threshold",
    [D_METADATA] = "metadata",
};

static const uint32_t d_flag[D_N] = {
    [D_SHADOW_MODE] = WEIR_RULE_SHADOW_MODE,
    [D_QUOTA_MODE] = WEIR_RULE_QUOTA_MODE,
    [D_DETAILED_METRIC] = WEIR_RULE_DETAILED_METRIC,
    [D_VALUE_TO_METRIC] = WEIR_RULE_VALUE_TO_METRIC,
    [D_SHARE_THRESHOLD] = WEIR_RULE_SHARE_THRESHOLD,
};

/* A limit while its descriptor is read. */
typedef struct lim_item {
    weir_rule_limit *l;
    struct lim_item *next;
} lim_item;

static bool add_limit(yp *p, lim_item ***tail, size_t *n)
{
    weir_rule_limit *l = read_rate_limit(p);
    if (!l)
        return !p->dead;
    rules_loader *ld = p->ld;
    if (ld->rules->n_limits >= ld->opts.max_limits) {
        if (!ld->limit_cap_hit)
            weir__rules_error(ld, l->file, l->line, l->column, "more than %u limits in all",
                              ld->opts.max_limits);
        ld->limit_cap_hit = true;
        return true;
    }
    lim_item *it = weir__rules_alloc(ld, sizeof(*it));
    if (!it)
        return false;
    it->l = l;
    **tail = it;
    *tail = &it->next;
    (*n)++;
    ld->rules->n_limits++;
    return true;
}

static bool read_rate_limits(yp *p, lim_item ***tail, size_t *n)
{
    if (weir__yp_is_null(p))
        return true;
    if (p->ev.type != YAML_SEQUENCE_START_EVENT)
        return weir__yp_wrong_kind(p, "rate_limits", "a list");
    size_t count = 0;
    for (;;) {
        if (!weir__yp_next(p))
            return false;
        if (p->ev.type == YAML_SEQUENCE_END_EVENT)
            return true;
        if (++count > WEIR_RULES_MAX_LIMITS_PER_RULE) {
            if (count == WEIR_RULES_MAX_LIMITS_PER_RULE + 1)
                ERR(p, weir__yp_here(p), "more than %u entries in 'rate_limits'",
                    WEIR_RULES_MAX_LIMITS_PER_RULE);
            if (!weir__yp_skip(p))
                return false;
            continue;
        }
        if (!add_limit(p, tail, n))
            return false;
    }
}

/* Reads one descriptor mapping (the current event); a tier's body when
 * @tier (no key or value of its own: the domain's tenant key is given to
 * it once known). Returns false only when the parser died; *out is the
 * node, or NULL when it was dropped. */
bool weir__rules_read_descriptor(yp *p, unsigned depth, bool tier, weir_rule **out)
{
    rules_loader *ld = p->ld;
    pos start = weir__yp_here(p);
    *out = NULL;
    weir_rule *n = weir__rules_alloc(ld, sizeof(*n));
    if (!n)
        return false;
    n->file = p->file;
    n->line = (uint32_t)(start.line > UINT32_MAX ? UINT32_MAX : start.line);
    n->column = (uint32_t)(start.col > UINT32_MAX ? UINT32_MAX : start.col);
    n->seq = ld->rules->next_seq++;
    if (ld->opts.shadow_mode)
        n->flags |= WEIR_RULE_SHADOW_MODE; /* upstream's global SHADOW_MODE */
    lim_item *limits = NULL, **ltail = &limits;
    size_t n_limits = 0;
    rule_list children = {NULL, NULL, 0};
    pos at[D_N];
    memset(at, 0, sizeof(at));
    uint64_t seen = 0;
    bool key_bad = false;
    pos key_at;
    int k;
    while ((k = weir__yp_key(p, d_names, D_N, &seen, &key_at)) != -1) {
        if (k == -3)
            return false;
        at[k] = weir__yp_here(p);
        bool b;
        if (tier && (k == D_KEY || k == D_VALUE)) {
            ERR(p, key_at, "a tier has no '%s': its key is the domain's tenants.key", d_names[k]);
            if (!weir__yp_skip(p))
                return false;
            continue;
        }
        switch ((enum d_field)k) {
        case D_KEY:
            if (!weir__yp_is_null(p)) {
                n->key = weir__yp_string(p, "key", WEIR_RULES_MAX_STRING_BYTES);
                key_bad = !n->key;
            }
            break;
        case D_VALUE:
            if (!weir__yp_is_null(p)) {
                const char *v = weir__yp_string(p, "value", WEIR_RULES_MAX_STRING_BYTES);
                /* upstream reads a missing and an empty value alike */
                n->value = v && *v ? v : NULL;
            }
            break;
        case D_RATE_LIMIT:
            if (seen & (UINT64_C(1) << D_RATE_LIMITS))
                ERR(p, key_at, "use either 'rate_limit' or 'rate_limits', not both");
            else if (weir__yp_is_null(p))
                weir__rules_warn(ld, p->file, key_at.line, key_at.col,
                                 "empty 'rate_limit': this descriptor limits nothing (give it a "
                                 "unit and requests_per_unit, or remove it)");
            else if (!add_limit(p, &ltail, &n_limits))
                return false;
            break;
        case D_RATE_LIMITS:
            if (seen & (UINT64_C(1) << D_RATE_LIMIT))
                ERR(p, key_at, "use either 'rate_limit' or 'rate_limits', not both");
            else if (!read_rate_limits(p, &ltail, &n_limits))
                return false;
            break;
        case D_DESCRIPTORS:
            if (!weir__rules_read_descriptors(p, &children, depth + 1))
                return false;
            break;
        case D_SHADOW_MODE:
        case D_QUOTA_MODE:
        case D_DETAILED_METRIC:
        case D_VALUE_TO_METRIC:
        case D_SHARE_THRESHOLD:
            if (weir__yp_bool(p, d_names[k], &b) && b)
                n->flags |= d_flag[k];
            break;
        case D_METADATA:
            if (p->ev.type == YAML_MAPPING_START_EVENT)
                n->has_metadata = true;
            else if (!weir__yp_is_null(p))
                weir__yp_wrong_kind(p, "metadata", "a mapping");
            break;
        case D_N:
            break;
        }
        if (!weir__yp_skip(p))
            return false;
    }
    if (p->dead)
        return false;
    if (key_bad)
        return true; /* reported already */
    if (tier) {
        n->key = "";
    } else if (!n->key || !*n->key) {
        ERR(p, (seen & (UINT64_C(1) << D_KEY)) ? at[D_KEY] : start, "descriptor has empty key");
        return true;
    }
    n->wildcard = n->value && strchr(n->value, '*') != NULL;
    if ((n->flags & WEIR_RULE_SHARE_THRESHOLD) && !n->wildcard)
        ERR(p, at[D_SHARE_THRESHOLD], "share_threshold can only be used with wildcard values");

    if (n_limits) {
        n->limits = weir__rules_alloc(ld, n_limits * sizeof(*n->limits));
        if (!n->limits)
            return false;
        for (lim_item *it = limits; it; it = it->next)
            n->limits[n->n_limits++] = it->l;
    }
    if (children.n) {
        n->children = weir__rules_alloc(ld, children.n * sizeof(*n->children));
        if (!n->children)
            return false;
        for (weir_rule *c = children.first; c; c = c->next)
            n->children[n->n_children++] = c;
    }
    if (ld->rules->n_rules >= ld->opts.max_descriptors) {
        if (!ld->rule_cap_hit)
            ERR(p, start, "more than %u descriptors in all", ld->opts.max_descriptors);
        ld->rule_cap_hit = true;
        return true;
    }
    ld->rules->n_rules++;
    *out = n;
    return true;
}

bool weir__rules_read_descriptors(yp *p, rule_list *out, unsigned depth)
{
    if (weir__yp_is_null(p))
        return true;
    if (p->ev.type != YAML_SEQUENCE_START_EVENT)
        return weir__yp_wrong_kind(p, "descriptors", "a list");
    if (depth > WEIR_RULES_MAX_DEPTH) {
        ERR(p, weir__yp_here(p), "descriptors nested deeper than %u levels", WEIR_RULES_MAX_DEPTH);
        return weir__yp_skip(p);
    }
    for (;;) {
        if (!weir__yp_next(p))
            return false;
        if (p->ev.type == YAML_SEQUENCE_END_EVENT)
            return true;
        if (p->ev.type != YAML_MAPPING_START_EVENT) {
            if (!weir__yp_wrong_kind(p, "a descriptor", "a mapping"))
                return false;
            continue;
        }
        weir_rule *n;
        if (!weir__rules_read_descriptor(p, depth, false, &n))
            return false;
        if (!n)
            continue;
        if (out->last)
            out->last->next = n;
        else
            out->first = n;
        out->last = n;
        out->n++;
    }
}

/* ---- the document */

static void read_document(yp *p)
{
    /* current event: DOCUMENT_START */
    if (!weir__yp_next(p))
        return;
    pos top = weir__yp_here(p);
    const char *domain = NULL;
    bool domain_bad = false; /* present but not a string: reported already */
    pos domain_at = top;
    rule_list descriptors = {NULL, NULL, 0};
    rules_tenants tenants;
    memset(&tenants, 0, sizeof(tenants));
    if (p->ev.type == YAML_MAPPING_START_EVENT) {
        static const char *const names[] = {"domain", "descriptors", "tenants"};
        uint64_t seen = 0;
        pos key_at;
        int k;
        while ((k = weir__yp_key(p, names, 3, &seen, &key_at)) != -1) {
            if (k == -3)
                return;
            if (k == 0) {
                domain_at = weir__yp_here(p);
                if (!weir__yp_is_null(p)) {
                    domain = weir__yp_string(p, "domain", WEIR_RULES_MAX_STRING_BYTES);
                    domain_bad = !domain;
                }
            } else if (k == 1) {
                if (!weir__rules_read_descriptors(p, &descriptors, 1))
                    return;
            } else if (!weir__rules_read_tenants(p, &tenants)) {
                return;
            }
            if (!weir__yp_skip(p))
                return;
        }
    } else if (!weir__yp_is_null(p)) {
        ERR(p, top, "a rule file must be a mapping with 'domain' and 'descriptors'");
        weir__yp_skip(p);
        return;
    }
    if (domain_bad)
        return;
    if (!domain || !*domain) {
        ERR(p, domain_at, "config file cannot have empty domain");
        return;
    }
    weir__rules_add_domain(p->ld, domain, p->file, (uint32_t)domain_at.line,
                           (uint32_t)domain_at.col, &descriptors, &tenants);
}

void weir__rules_parse_doc(rules_loader *ld, const char *file, const unsigned char *data,
                           size_t len)
{
    yp p;
    memset(&p, 0, sizeof(p));
    p.ld = ld;
    p.file = file;
    p.data = data;
    p.len = data ? len : 0;
    if (!yaml_parser_initialize(&p.parser)) {
        ld->nomem = true;
        return;
    }
    static const unsigned char empty[1] = {0};
    yaml_parser_set_input_string(&p.parser, data ? data : empty, data ? len : 0);
    /* STREAM_START, then one document; a second one is an error. */
    if (weir__yp_next(&p) && weir__yp_next(&p)) {
        if (p.ev.type == YAML_STREAM_END_EVENT) {
            weir__rules_error(ld, file, 1, 1, "config file cannot have empty domain");
        } else {
            read_document(&p);
            /* finish the document (its end event) and look past it */
            while (!p.dead && p.ev.type != YAML_DOCUMENT_END_EVENT && weir__yp_next(&p)) {
            }
            if (weir__yp_next(&p) && p.ev.type == YAML_DOCUMENT_START_EVENT)
                ERR(&p, weir__yp_here(&p),
                    "a rule file must hold one YAML document, found a second");
        }
    }
    if (p.have_ev)
        yaml_event_delete(&p.ev);
    yaml_parser_delete(&p.parser);
}
