/*
 * weir/rules.h - rule files: loading envoyproxy/ratelimit YAML configs into
 * an immutable in-memory tree of domains, descriptors and limits.
 *
 * The loader reads upstream's schema unchanged (domain, nested descriptors,
 * key/value, rate_limit with unit, requests_per_unit, unlimited, name,
 * replaces, and the flags) plus weir's extensions (several limits per
 * descriptor, algorithm, burst, warmup, cold_factor, window, failure_mode, count_rejected,
 * sub_windows); docs/CONFIG.md gives the exact syntax. It validates
 * everything, collects every error it finds with its file, line and column,
 * and either returns a complete tree or nothing at all.
 *
 * A loaded weir_rules is immutable: any number of threads may read it at
 * once without locking. Every string and pointer an accessor returns lives
 * as long as the weir_rules it came from and must not be freed.
 *
 * Memory comes from the context's allocator, except libyaml's own parser
 * buffers, which libyaml takes from the C library's malloc (it has no
 * allocator hook); they are released before a load returns.
 */
#ifndef WEIR_RULES_H
#define WEIR_RULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "weir/adaptive.h"
#include "weir/algo.h"
#include "weir/calendar.h"
#include "weir/context.h"
#include "weir/export.h"
#include "weir/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Caps. Input past one is an error with a location, never a crash. */
#define WEIR_RULES_MAX_FILE_BYTES (16u * 1024u * 1024u) /* one rule file or buffer */
#define WEIR_RULES_MAX_DEPTH 32u                        /* descriptor nesting levels */
#define WEIR_RULES_MAX_DESCRIPTORS 1000000u             /* default for options.max_descriptors */
#define WEIR_RULES_MAX_LIMITS 1000000u                  /* default for options.max_limits */
#define WEIR_RULES_MAX_STRING_BYTES 1024u               /* a domain, key, value or limit name */
#define WEIR_RULES_MAX_FILES 4096u                      /* rule files in one directory */
#define WEIR_RULES_MAX_LIMITS_PER_RULE 64u              /* entries of one `rate_limits:` list */
#define WEIR_RULES_MAX_REPLACES 1024u                   /* entries of one `replaces:` list */
#define WEIR_RULES_MAX_TIERS 64u                        /* tiers of one domain */
#define WEIR_RULES_MAX_TIER_NAME_BYTES 64u              /* a tier's name */
#define WEIR_RULES_MAX_PRIORITIES 8u                    /* options.priorities (Since 0.2) */
#define WEIR_RULES_MAX_PRIORITY_BYTES 32u               /* one priority's name, with its NUL */

/** Sizes of the text fields of weir_rules_error (longer text is cut). */
#define WEIR_RULES_ERROR_FILE_BYTES 512u
#define WEIR_RULES_ERROR_MESSAGE_BYTES 512u

typedef struct weir_rules weir_rules;
typedef struct weir_rules_domain weir_rules_domain;
/** One descriptor node of a domain's tree. */
typedef struct weir_rule weir_rule;

/**
 * The unit of a limit. The numbers are those of envoy's
 * RateLimitResponse.RateLimit.Unit; WEIR_UNIT_NONE means the limit has a
 * `window:` (weir's extension) or is unlimited.
 */
typedef enum weir_rule_unit {
    WEIR_UNIT_NONE = 0,
    WEIR_UNIT_SECOND = 1,
    WEIR_UNIT_MINUTE = 2,
    WEIR_UNIT_HOUR = 3,
    WEIR_UNIT_DAY = 4,
    WEIR_UNIT_MONTH = 5, /* 30 days */
    WEIR_UNIT_YEAR = 6,  /* 365 days */
    WEIR_UNIT_WEEK = 7
} weir_rule_unit;

/** What the engine should answer when the store holding a limit fails. */
typedef enum weir_failure_mode {
    WEIR_FAILURE_ALLOW = 0, /* fail open (upstream's behaviour, the default) */
    WEIR_FAILURE_DENY = 1,  /* fail closed */
    /* decide on the instance's own memory, the limit scaled down to its
     * share (weir_engine_options.fallback): approximate limits instead of
     * none while a shared store is away */
    WEIR_FAILURE_LOCAL = 2
} weir_failure_mode;

/* Flags of a descriptor node (weir_rule_flags()). */
#define WEIR_RULE_SHADOW_MODE 0x01u
#define WEIR_RULE_QUOTA_MODE 0x02u
#define WEIR_RULE_DETAILED_METRIC 0x04u
#define WEIR_RULE_VALUE_TO_METRIC 0x08u
#define WEIR_RULE_SHARE_THRESHOLD 0x10u

/** One limit hanging on a descriptor node. Read-only. */
typedef struct weir_rule_limit {
    /** `name:`, or NULL when the limit has none. */
    const char *name;
    /** `unlimited: true`: never limited; `compiled` is then all zero. */
    bool unlimited;
    /** `count_rejected:` (default false): whether a rejected request is
     *  still counted (upstream's fixed window counts every request; by
     *  default weir's rejected request consumes nothing). The engine
     *  gives it its exact effect. */
    bool count_rejected;
    /** `failure_mode:`, or the load's default_failure_mode. */
    weir_failure_mode failure_mode;
    /** `over_limit_cache: false`: a store shared between instances must
     *  ask about every request of this limit, never answer a denial from
     *  its local cache (default: it may, docs/OPERATIONS.md). */
    bool no_local_cache;
    /** `local_share:` in millionths (1 .. 1000000): the part of the limit
     *  this instance enforces on its own under failure_mode local; 0 =
     *  the engine's default (1 / weir_engine_options.instances). */
    uint32_t local_share_ppm;
    /** Requests per window; 0 is a ban (always over limit). */
    uint32_t requests_per_unit;
    weir_rule_unit unit;
    /** The window in microseconds, from `unit` or `window:`; 0 when
     *  unlimited. */
    int64_t window_us;
    weir_algorithm algorithm;
    /** `burst:` as written; 0 = the algorithm's default. */
    uint64_t burst;
    /** `sub_windows:` as written; 0 = the algorithm's default. */
    uint32_t sub_windows;
    /** The names in `replaces:` (n_replaces of them, none NULL). */
    size_t n_replaces;
    const char *const *replaces;
    /** The compiled limit (weir_limit_compile()) when !unlimited. */
    weir_limit compiled;
    /** The domain, and the descriptor path the limit hangs on in
     *  upstream's spelling (`key_value.key2`: one level per descriptor,
     *  `key_value` or `key`), for names in metrics and headers. */
    const char *domain;
    const char *path;
    /** Where the limit's mapping starts (1-based). */
    const char *file;
    uint32_t line;
    uint32_t column;
    /** Since 0.2. The descriptor nodes of `path`, top level first
     *  (n_levels of them, the limit's own node last): a limit's levels
     *  whatever bytes their keys and values hold, for metrics that name
     *  it level by level. NULL and 0 for the limit the engine makes for a
     *  request's own override of an unmatched descriptor. */
    const weir_rule *const *levels;
    size_t n_levels;
    /** Since 0.2. `sync: local`: the interval, in microseconds, at which
     *  an instance on a shared store reserves ahead the capacity it
     *  decides from (`sync_interval:`, 100 ms by default); 0 for `sync:
     *  global` (the default: every decision asks the store). */
    int64_t sync_interval_us;
    /** Since 0.2. `calendar:` (a billing quota): the window is the
     *  calendar day, month or year holding the request in @tz (UTC when
     *  NULL), reset at its local midnight; `unit` is then the period's
     *  envoy unit (DAY, MONTH, YEAR) and `window_us` its nominal length.
     *  WEIR_CALENDAR_NONE for every other limit. */
    weir_calendar calendar;
    /** `time_zone:` as written (NULL: UTC), and the zone loaded. */
    const char *time_zone;
    const struct weir_tz *tz;
    /** Since 0.2. `sketch:` a memory budget in bytes: the limit (a fixed
     *  window) is counted per key in a count-min sketch of that size in
     *  each instance's own memory (weir/cms.h), never in the store; 0 =
     *  the store counts it. */
    size_t sketch_bytes;
    /** `warmup:` (token_bucket only): the warm-up period in microseconds,
     *  0 = none; `cold_factor:` as written, 0 = the default (3). The
     *  compiled limit has them both, defaults applied (weir/algo.h). */
    int64_t warmup_us;
    uint32_t cold_factor;
    /** Since 0.2. `adaptive:` (concurrency only): the controller that
     *  moves the limit between its min and requests_per_unit from the
     *  time the leases are held (weir/adaptive.h; docs/CONFIG.md); its
     *  max_limit is requests_per_unit. NULL for a fixed limit. */
    const weir_adaptive_options *adaptive;
    /** Since 0.2. `shed:` the share of the limit each priority must leave
     *  free, in hundredths of a percent (0 .. 10000), by rank: [0] is the
     *  most important priority's (weir_rules_options.priorities). A
     *  request of rank r (weir_request.priority, r >= 1) is admitted only
     *  if ceil(shed_bp[r - 1] x requests_per_unit / 10000) units stay free
     *  after it; for a concurrency limit, that many of its in-flight
     *  slots. All 0 without `shed:`. Not part of the limit's identity: a
     *  counter keeps its state when only the shares change. */
    uint16_t shed_bp[WEIR_RULES_MAX_PRIORITIES];
} weir_rule_limit;

/** Load options. NULL means all defaults. */
typedef struct weir_rules_options {
    /** sizeof(weir_rules_options), so fields can be appended later. */
    size_t size;
    /** Several files naming one domain merge their descriptors instead of
     *  being an error ("duplicate domain"). */
    bool merge_domains;
    /** The algorithm of limits without `algorithm:`; 0 = fixed_window, the
     *  only algorithm upstream has. */
    weir_algorithm default_algorithm;
    /** Caps on descriptors and limits over the whole load; 0 =
     *  WEIR_RULES_MAX_DESCRIPTORS / WEIR_RULES_MAX_LIMITS. */
    uint32_t max_descriptors;
    uint32_t max_limits;
    /** The failure mode of limits without `failure_mode:` (default allow,
     *  upstream's behaviour). */
    weir_failure_mode default_failure_mode;
    /** Since 0.2. Every descriptor in shadow mode, as if each said
     *  `shadow_mode: true` (upstream's global SHADOW_MODE): decisions are
     *  counted and reported ("would deny") and never deny. */
    bool shadow_mode;
    /** Since 0.2. The request priorities `shed:` names, most important
     *  first (n_priorities of them, 1 .. WEIR_RULES_MAX_PRIORITIES, each
     *  [a-z0-9_-], 1 .. WEIR_RULES_MAX_PRIORITY_BYTES - 1 bytes, no name
     *  twice); borrowed for the load. NULL and 0: critical, normal,
     *  sheddable, test. A priority's rank (weir_request.priority) is its
     *  index here plus one. */
    const char *const *priorities;
    size_t n_priorities;
} weir_rules_options;

/** One problem found while loading. */
typedef struct weir_rules_error {
    /** The file (as given or as found in the directory), or the display
     *  name given to weir_rules_parse(). */
    char file[WEIR_RULES_ERROR_FILE_BYTES];
    /** 1-based; 0 when the problem has no position (e.g. an unreadable
     *  file). */
    uint32_t line;
    uint32_t column;
    /** NUL-terminated, e.g. "invalid rate limit unit 'secs'". */
    char message[WEIR_RULES_ERROR_MESSAGE_BYTES];
} weir_rules_error;

/**
 * weir_rules_load() - load a rule file, or every rule file of a directory.
 *
 * @ctx:        allocator for the tree; must outlive the returned rules.
 * @path:       a file (loaded whatever its name), or a directory: its
 *              entries ending in ".yaml" or ".yml" are loaded in name order,
 *              following symbolic links; entries whose name starts with '.'
 *              (dot-files, editor swap files, Kubernetes' "..data" and
 *              "..2024_..." ConfigMap directories) and subdirectories are
 *              skipped. At most WEIR_RULES_MAX_FILES files.
 * @opts:       may be NULL; copied, not kept.
 * @out:        written only on success; free with weir_rules_free().
 * @errors:     may be NULL when @max_errors is 0; receives the first
 *              @max_errors problems in the order found (file order, then
 *              position in the file; duplicate-key checks run last).
 * @n_errors:   may be NULL; receives the number of problems found, which
 *              may exceed @max_errors. Written on every return but
 *              WEIR_EINVAL.
 *
 * Every file is read and checked completely even after a problem, so one
 * run reports all of them (a YAML syntax error ends its own file only).
 *
 * Returns WEIR_OK; WEIR_EPARSE when any rule problem was found (the records
 * say what and where); WEIR_EIO when a file or the directory could not be
 * read (recorded too, with line 0); WEIR_EINVAL for a NULL @ctx, @path or
 * @out, @errors NULL with @max_errors > 0, a bad opts->size or an unknown
 * opts->default_algorithm; WEIR_ENOMEM. On any error nothing is returned.
 * Thread-safe (loads share nothing).
 */
WEIR_API weir_status weir_rules_load(weir_ctx *ctx, const char *path,
                                     const weir_rules_options *opts, weir_rules **out,
                                     weir_rules_error *errors, size_t max_errors, size_t *n_errors);

/**
 * weir_rules_parse() - load one rule document from memory.
 *
 * @name: the display name used in error records (e.g. "inline.yaml");
 *        NULL means "<memory>". @data/@len: the YAML text (need not be
 *        NUL-terminated; at most WEIR_RULES_MAX_FILE_BYTES). Other
 *        arguments, returns and guarantees as weir_rules_load(), except
 *        that WEIR_EIO is never returned. @data NULL with @len 0 is an
 *        empty document.
 */
WEIR_API weir_status weir_rules_parse(weir_ctx *ctx, const char *name, const void *data, size_t len,
                                      const weir_rules_options *opts, weir_rules **out,
                                      weir_rules_error *errors, size_t max_errors,
                                      size_t *n_errors);

/** One in-memory rule document for weir_rules_parse_many(). */
typedef struct weir_rules_doc {
    /** The display name used in error records; NULL means "<memory>". */
    const char *name;
    /** The YAML text (need not be NUL-terminated; at most
     *  WEIR_RULES_MAX_FILE_BYTES); NULL with @len 0 is an empty document. */
    const void *data;
    size_t len;
} weir_rules_doc;

/**
 * weir_rules_parse_many() - load several rule documents from memory as one
 * config, as weir_rules_load() loads the files of a directory: in the
 * order given, a domain named twice being an error ("duplicate domain")
 * unless opts->merge_domains merges them. At most WEIR_RULES_MAX_FILES
 * documents. No domain at all loads (every request is then allowed) with
 * a warning saying so.
 *
 * @docs may be NULL when @n_docs is 0. Other arguments, returns and
 * guarantees as weir_rules_parse(); WEIR_EINVAL also for a document with
 * NULL data and a non-zero length. Since 0.2.
 */
WEIR_API weir_status weir_rules_parse_many(weir_ctx *ctx, const weir_rules_doc *docs, size_t n_docs,
                                           const weir_rules_options *opts, weir_rules **out,
                                           weir_rules_error *errors, size_t max_errors,
                                           size_t *n_errors);

/**
 * Warnings of a load that succeeded: rules that are valid but likely not
 * what was meant, each with its file, line and column (0 when it concerns
 * the whole load): no domain loaded (every request is allowed; with a
 * hint when the path holds upstream's RUNTIME_ROOT layout), an empty
 * `rate_limit:` (it limits nothing), a limit without `requests_per_unit`
 * (a ban: every request is denied), the leaky bucket shaper (its delay
 * reaches only weir's own HTTP API). Since 0.2.
 */
WEIR_API size_t weir_rules_warning_count(const weir_rules *rules);
/** The i-th warning in the order found, or NULL when out of range. */
WEIR_API const weir_rules_error *weir_rules_warning_at(const weir_rules *rules, size_t i);

/** weir_rules_empty() - rules with no domain (every request is allowed):
 *  what a service serves until its first rules load. Returns WEIR_OK,
 *  WEIR_EINVAL (NULL argument) or WEIR_ENOMEM. Since 0.2. */
WEIR_API weir_status weir_rules_empty(weir_ctx *ctx, weir_rules **out);

/** Free loaded rules. NULL is a no-op. No accessor result may be used
 *  afterwards. */
WEIR_API void weir_rules_free(weir_rules *rules);

/** Number of descriptor nodes, at every depth, over all domains. */
WEIR_API size_t weir_rules_rule_count(const weir_rules *rules);
/** Number of limits (unlimited ones included) over all domains. */
WEIR_API size_t weir_rules_limit_count(const weir_rules *rules);

/** Number of domains; domains are numbered 0..n-1 in load order. */
WEIR_API size_t weir_rules_domain_count(const weir_rules *rules);
/** The i-th domain, or NULL when @i is out of range. */
WEIR_API const weir_rules_domain *weir_rules_domain_at(const weir_rules *rules, size_t i);
/** The domain called @name (NUL-terminated, exact match), or NULL. */
WEIR_API const weir_rules_domain *weir_rules_find_domain(const weir_rules *rules, const char *name);

/** A domain's name (never NULL or empty). */
WEIR_API const char *weir_rules_domain_name(const weir_rules_domain *domain);

/* Since 0.2. A domain's `tenants:` section (docs/QUOTAS.md): the entry key
 * that carries a tenant's key in a request descriptor, the tier of keys
 * with no record of their own, and the tiers. A tier is a descriptor node
 * whose key is the tenant key and which has no value (each tenant counts
 * apart): its limits are the tenant's own ("default"), its children the
 * nested descriptors it covers. */

/** The tenant key, or NULL when the domain has no tenants section. */
WEIR_API const char *weir_rules_domain_tenant_key(const weir_rules_domain *domain);
/** The default tier's name, or NULL when keys with no record keep the rule
 *  file's limits. */
WEIR_API const char *weir_rules_domain_default_tier(const weir_rules_domain *domain);
/** Number of tiers, and the i-th in file order (name, body); NULL when out
 *  of range. */
WEIR_API size_t weir_rules_domain_tier_count(const weir_rules_domain *domain);
WEIR_API const char *weir_rules_domain_tier_name(const weir_rules_domain *domain, size_t i);
WEIR_API const weir_rule *weir_rules_domain_tier(const weir_rules_domain *domain, size_t i);
/** The tier named @name, or NULL. */
WEIR_API const weir_rule *weir_rules_domain_find_tier(const weir_rules_domain *domain,
                                                      const char *name);
/** Number of top-level descriptors of a domain. */
WEIR_API size_t weir_rules_domain_rule_count(const weir_rules_domain *domain);
/** The i-th top-level descriptor in file order (merged files in load
 *  order), or NULL when out of range. */
WEIR_API const weir_rule *weir_rules_domain_rule(const weir_rules_domain *domain, size_t i);

/** A descriptor's `key` (never NULL or empty). */
WEIR_API const char *weir_rule_key(const weir_rule *rule);
/** Its `value`, or NULL when it has none (an empty `value: ""` counts as
 *  none, as upstream). */
WEIR_API const char *weir_rule_value(const weir_rule *rule);
/** Whether the value is a pattern (contains '*'). */
WEIR_API bool weir_rule_is_wildcard(const weir_rule *rule);
/** WEIR_RULE_* flags set on the descriptor. */
WEIR_API uint32_t weir_rule_flags(const weir_rule *rule);
/** Whether the descriptor has a `metadata:` mapping (its content is not
 *  kept). */
WEIR_API bool weir_rule_has_metadata(const weir_rule *rule);
/** Number of limits on the descriptor (0, 1 for `rate_limit:`, or the
 *  length of `rate_limits:`). */
WEIR_API size_t weir_rule_limit_count(const weir_rule *rule);
/** The i-th limit in file order, or NULL when out of range. */
WEIR_API const weir_rule_limit *weir_rule_limit_at(const weir_rule *rule, size_t i);
/** Number of nested descriptors. */
WEIR_API size_t weir_rule_child_count(const weir_rule *rule);
/** The i-th nested descriptor in file order, or NULL when out of range. */
WEIR_API const weir_rule *weir_rule_child(const weir_rule *rule, size_t i);
/** Where the descriptor's mapping starts: file name and 1-based position.
 *  Any out-pointer may be NULL. */
WEIR_API void weir_rule_location(const weir_rule *rule, const char **file, uint32_t *line,
                                 uint32_t *column);

/** The config name of a unit ("second", ...), or NULL for WEIR_UNIT_NONE
 *  or an unknown number. */
WEIR_API const char *weir_rule_unit_name(weir_rule_unit unit);

#ifdef __cplusplus
}
#endif

#endif /* WEIR_RULES_H */
