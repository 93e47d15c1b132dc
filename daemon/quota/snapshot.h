/*
 * snapshot.h - every record of the quota database read into a tenant
 * table for the engine (weir/tenants.h).
 */
#ifndef WEIR_DAEMON_QUOTA_SNAPSHOT_H
#define WEIR_DAEMON_QUOTA_SNAPSHOT_H

#include <stddef.h>

#include "db.h"
#include "quota.h"
#include "weir/weir.h"

typedef struct quota_snapshot {
    size_t skipped;          /* records the table refused (a zone this machine lacks...) */
    char first_skipped[160]; /* the first of them: its key (escaped) and why */
} quota_snapshot;

/** The table of @db's records (NULL when the database could not be read:
 *  quota_db_error() says why). */
weir_tenants *quota_snapshot_read(quota_db *db, weir_ctx *ctx, quota_snapshot *out);

/** @t as the engine's record, its limits in @limits (QUOTA_MAX_OVERRIDES). */
weir_tenant quota_snapshot_tenant(const quota_tenant *t, weir_tenant_limit *limits);

#endif /* WEIR_DAEMON_QUOTA_SNAPSHOT_H */
