/*
 * quota.h - the quota model the admin API, the quota database and the
 * snapshot builder share: a tenant (an API key), the tier it is on, the
 * time its record is in force, and its per-key overrides; an audit entry.
 * Plain data with fixed caps, no behaviour (docs/QUOTAS.md).
 */
#ifndef WEIR_DAEMON_QUOTA_QUOTA_H
#define WEIR_DAEMON_QUOTA_QUOTA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "weir/algo.h"
#include "weir/calendar.h"
#include "weir/rules.h"

/* Caps: input past one is refused with an error naming the field. */
#define QUOTA_MAX_KEY_BYTES 256u        /* a tenant key (no NUL byte) */
#define QUOTA_MAX_TIER_BYTES 64u        /* a tier name */
#define QUOTA_MAX_DESCRIPTOR_BYTES 512u /* "default" or "key:value" */
#define QUOTA_MAX_TZ_BYTES 64u          /* an IANA zone name */
#define QUOTA_MAX_OVERRIDES 64u         /* overrides of one tenant */
#define QUOTA_MAX_ACTOR_BYTES 64u       /* a token's name */

/** "No time": effective_at unset (always in force) or expires_at unset
 *  (never expires). */
#define QUOTA_TIME_NONE INT64_MIN

/**
 * One override of a tenant: the limit of one of its scopes. @descriptor
 * is "default" (the descriptor that carries the tenant key alone) or
 * "key:value" (the entry that follows the tenant key; the key is the text
 * before the first ':'). A limit has a window of @unit, or a calendar
 * period (@calendar, in @time_zone) when @calendar is not NONE (@unit is
 * then WEIR_UNIT_NONE). Within a scope an override replaces the tier's or
 * the rule file's limit of the same window and adds itself otherwise.
 */
typedef struct quota_override {
    char descriptor[QUOTA_MAX_DESCRIPTOR_BYTES + 1]; /* NUL-terminated */
    uint64_t requests_per_unit;                      /* 0 .. UINT32_MAX; 0 bans */
    weir_rule_unit unit;
    weir_calendar calendar;
    char time_zone[QUOTA_MAX_TZ_BYTES + 1]; /* "" = UTC */
    weir_algorithm algorithm;               /* 0 = the replaced limit's, else fixed_window */
} quota_override;

/** A tenant's record. Times are Unix microseconds (UTC). */
typedef struct quota_tenant {
    char key[QUOTA_MAX_KEY_BYTES + 1]; /* NUL-terminated; key_len bytes */
    size_t key_len;
    char tier[QUOTA_MAX_TIER_BYTES + 1];
    int64_t effective_at_us; /* QUOTA_TIME_NONE: in force from the start */
    int64_t expires_at_us;   /* QUOTA_TIME_NONE: never expires */
    int64_t created_at_us, updated_at_us;
    int64_t version; /* 1 when created, one more at each change: the ETag */
    size_t n_overrides;
    quota_override overrides[QUOTA_MAX_OVERRIDES];
} quota_tenant;

/** What an audit entry records. */
typedef enum quota_action {
    QUOTA_ACTION_CREATE = 1,
    QUOTA_ACTION_UPDATE = 2,
    QUOTA_ACTION_DELETE = 3
} quota_action;

/** One entry of the append-only audit log. @before and @after are the
 *  record as JSON (quota_json_tenant()), NULL for none (before a create,
 *  after a delete); owned by the entry (quota_audit_free()). */
typedef struct quota_audit {
    int64_t id; /* increasing */
    int64_t at_us;
    char actor[QUOTA_MAX_ACTOR_BYTES + 1];
    quota_action action;
    char key[QUOTA_MAX_KEY_BYTES + 1];
    size_t key_len;
    char *before;
    char *after;
} quota_audit;

#endif /* WEIR_DAEMON_QUOTA_QUOTA_H */
