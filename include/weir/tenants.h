/*
 * weir/tenants.h - tenants: per-key limits in place of a rule file's
 * defaults (docs/QUOTAS.md).
 *
 * A domain whose rule file has a `tenants:` section names the descriptor
 * entry that carries a tenant's key (`api_key` by default) and its tiers.
 * A request descriptor holding that entry is limited, scope by scope, by
 * the first of these that has limits for it:
 *
 *   1. the tenant's own overrides (this table), in force at the time of
 *      the request;
 *   2. its tier (the tenant's, or the domain's default tier for a key with
 *      no record, or one not in force), from the rule file;
 *   3. the rule file's own descriptors.
 *
 * Within a scope a limit replaces the lower layer's limit of the same
 * window (the same unit or window, or the same calendar period) and adds
 * itself otherwise. A scope is the descriptor's entries after the tenant
 * entry: none ("default"), or one ("key:value" for an override; any tier
 * descriptor that matches). Every other descriptor of the request is
 * decided as usual, so the most restrictive limit still wins: a generous
 * tenant limit never lifts a per-endpoint limit on another descriptor.
 *
 * A table is built once (weir_tenants_new(), weir_tenants_add()) and then
 * handed to an engine, which swaps it in atomically as it swaps rules:
 * a decision never waits for a table being built or replaced.
 */
#ifndef WEIR_TENANTS_H
#define WEIR_TENANTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "weir/algo.h"
#include "weir/calendar.h"
#include "weir/context.h"
#include "weir/export.h"
#include "weir/rules.h"
#include "weir/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Caps. */
#define WEIR_TENANT_MAX_KEY_BYTES 256u   /* a tenant's key */
#define WEIR_TENANT_MAX_SCOPE_BYTES 512u /* "default" or "key:value" */
#define WEIR_TENANT_MAX_LIMITS 64u       /* overrides of one tenant */
#define WEIR_TENANTS_MAX 10000000u       /* tenants in one table */

/** One override: the limit of one scope of a tenant. */
typedef struct weir_tenant_limit {
    /** "default" (the descriptor that holds the tenant entry alone) or
     *  "key:value" (the entry that follows it; the key is the text before
     *  the first ':'). @scope_len bytes. */
    const char *scope;
    size_t scope_len;
    /** Requests per window; 0 bans. */
    uint32_t requests_per_unit;
    /** The window, when @calendar is WEIR_CALENDAR_NONE. */
    weir_rule_unit unit;
    /** A calendar period instead: reset at local midnight, on the first of
     *  the month or of the year in @time_zone. */
    weir_calendar calendar;
    /** An IANA zone name for @calendar; NULL or "" = UTC. */
    const char *time_zone;
    /** 0 = the algorithm of the limit it replaces (fixed_window when it
     *  replaces none, and always for a calendar period). */
    weir_algorithm algorithm;
} weir_tenant_limit;

/** A tenant's record. */
typedef struct weir_tenant {
    const char *key; /* @key_len bytes, 1 .. WEIR_TENANT_MAX_KEY_BYTES */
    size_t key_len;
    /** Its tier's name; NULL = the domain's default tier. A name no domain
     *  knows is the default tier too. */
    const char *tier;
    /** The record is in force from @effective_at_us (INT64_MIN: always)
     *  until before @expires_at_us (INT64_MAX: never), Unix microseconds;
     *  outside, the key is decided as a key with no record. */
    int64_t effective_at_us;
    int64_t expires_at_us;
    const weir_tenant_limit *limits;
    size_t n_limits;
} weir_tenant;

typedef struct weir_tenants weir_tenants;

/** An empty table; free with weir_tenants_free() unless handed to an
 *  engine. WEIR_EINVAL, WEIR_ENOMEM. */
WEIR_API weir_status weir_tenants_new(weir_ctx *ctx, weir_tenants **out);

/**
 * weir_tenants_add() - copy @t into the table.
 *
 * Returns WEIR_OK; WEIR_EINVAL for a NULL argument, an empty or too long
 * key, a table already handed to an engine, expires_at not after
 * effective_at, more than WEIR_TENANT_MAX_LIMITS limits, a bad scope, an
 * unknown unit, calendar or algorithm, or two limits of one scope with the
 * same window; WEIR_ERANGE for a limit that weir_limit_compile() refuses
 * or a table of WEIR_TENANTS_MAX records; WEIR_EIO or WEIR_EPARSE for a
 * time zone whose zone file cannot be read (weir_tz_load()); WEIR_ENOMEM.
 * A key added twice: the later record replaces the earlier. Nothing is
 * added on an error.
 */
WEIR_API weir_status weir_tenants_add(weir_tenants *tenants, const weir_tenant *t);

/** Records in the table. */
WEIR_API size_t weir_tenants_count(const weir_tenants *tenants);

/** Free a table never handed to an engine. NULL is a no-op. */
WEIR_API void weir_tenants_free(weir_tenants *tenants);

#ifdef __cplusplus
}
#endif

#endif /* WEIR_TENANTS_H */
