/*
 * service.h - the quota database kept in force: a thread of its own that
 * opens the database (again and again while it is down), reads every
 * tenant into a table and hands it to the engine, then reads it again
 * when a change is committed anywhere (PostgreSQL: LISTEN/NOTIFY; SQLite:
 * the file's data version, looked at every second) and at least every
 * --quota-refresh. A decision never waits on SQL, and while the database
 * is away the last table stays in force.
 */
#ifndef WEIR_DAEMON_QUOTA_SERVICE_H
#define WEIR_DAEMON_QUOTA_SERVICE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "weir/weir.h"

typedef struct quota_service quota_service;

/** What /healthz and /metrics say of the tenant table. */
typedef struct quota_stats {
    const char *kind;  /* "sqlite" or "postgres" */
    bool up;           /* the last attempt reached the database */
    uint64_t tenants;  /* records in the table in force */
    int64_t loaded_us; /* when it was read; 0: never */
    uint64_t loads;    /* tables put in force */
    uint64_t errors;   /* attempts that failed (open, read) */
    uint64_t skipped;  /* records the last read could not use */
} quota_stats;

/**
 * quota_service_start() - start the thread on @url for @engine (tables
 * made in @ctx). @now_us
 * is the daemon's clock. Returns NULL with a reason in @why for a URL
 * that can never work (an unknown scheme); a database that is down is
 * retried, not a failure.
 */
quota_service *quota_service_start(const char *url, weir_ctx *ctx, weir_engine *engine,
                                   int64_t refresh_ms, int64_t (*now_us)(void *arg), void *now_arg,
                                   char *why, size_t cap);

/** Read the database again soon (a change was made here). Thread-safe. */
void quota_service_poke(quota_service *s);

/** Read the database again and wait, at most @timeout_ms, until a read
 *  begun after this call has put its table in force (or failed): a change
 *  committed before the call is then in force when it returns true.
 *  Blocks the caller (the admin listener's worker, never a deciding
 *  one). True for NULL. Thread-safe. */
bool quota_service_sync(quota_service *s, int64_t timeout_ms);

/** A copy of the statistics. Thread-safe. */
void quota_service_stats(quota_service *s, quota_stats *out);

struct weir_buf;
/** The weir_quota_* series of /metrics; nothing for NULL. */
void quota_service_metrics(quota_service *s, struct weir_buf *b, int64_t now_us);
/** /healthz's ,"quotas":{...} member; nothing for NULL. */
void quota_service_health(quota_service *s, struct weir_buf *b, int64_t now_us);

/** Stop the thread and free. NULL is a no-op. */
void quota_service_stop(quota_service *s);

#endif /* WEIR_DAEMON_QUOTA_SERVICE_H */
