/*
 * db.h - the quota database: tenants, their overrides and the audit log,
 * in SQLite (an embedded file, the default) or PostgreSQL (shared by
 * several instances), behind one interface. Blocking calls, made only off
 * the decision path (the admin thread); a handle belongs to one thread.
 *
 * Every change (put, delete) is one transaction that also appends its
 * audit entry (who, when, what, the record before and after). Keys,
 * tiers and descriptors are always bound as parameters, never spliced
 * into SQL. The schema's migrations (daemon/quota/migrations/) are applied
 * at open, each once, in order, in a transaction.
 *
 * Keys hold any bytes but NUL on SQLite; PostgreSQL stores text, so there
 * a key, tier, descriptor or actor must be valid UTF-8 (else QDB_INVALID,
 * refused before the server is asked). Keys sort bytewise on both.
 */
#ifndef WEIR_DAEMON_QUOTA_DB_H
#define WEIR_DAEMON_QUOTA_DB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "quota.h"

typedef struct quota_db quota_db;

typedef enum quota_db_status {
    QDB_OK = 0,
    QDB_NOT_FOUND,   /* no such tenant */
    QDB_CONFLICT,    /* the If-Match version is not the stored one */
    QDB_UNAVAILABLE, /* the database cannot be reached now (retry later) */
    QDB_INVALID,     /* text this database cannot store (PostgreSQL: not UTF-8) */
    QDB_ERROR,       /* anything else; quota_db_error() says what */
} quota_db_status;

/** Renders a tenant record as JSON (for the audit log's before and
 *  after). Returns a malloc'd NUL-terminated string, NULL when out of
 *  memory. NULL as the function: entries without before and after. */
typedef char *(*quota_db_render_fn)(const quota_tenant *t);

typedef struct quota_db_options {
    /** sqlite:///absolute/path.db, sqlite://relative/path.db (relative
     *  to the working directory), or a libpq URI postgres://... /
     *  postgresql://... */
    const char *url;
    quota_db_render_fn render;
    /** Longest wait for the database, in milliseconds: SQLite's busy
     *  timeout, PostgreSQL's connect_timeout (rounded up to seconds) and
     *  statement_timeout. 0 = 5000. */
    unsigned timeout_ms;
} quota_db_options;

/**
 * quota_db_open() - open (creating a SQLite file if missing, not its
 * directory: a missing directory is a failure naming the path), apply the
 * migrations not yet applied, and for PostgreSQL LISTEN for changes. On
 * failure writes a one-line reason into @err and returns NULL: a scheme
 * other than sqlite://, postgres:// and postgresql:// ("unknown
 * --quota-db scheme"), a PostgreSQL server that is down, a schema newer
 * than this binary's migrations.
 */
quota_db *quota_db_open(const quota_db_options *o, char *err, size_t err_cap);
void quota_db_close(quota_db *db);

/** "sqlite" or "postgres". */
const char *quota_db_kind(const quota_db *db);

/** The last error's text (valid until the next call): one line of
 *  printable ASCII, any other byte (of a key, say) written \xNN. */
const char *quota_db_error(const quota_db *db);

/** The record of @key into @out. QDB_OK, QDB_NOT_FOUND, QDB_UNAVAILABLE,
 *  QDB_ERROR. */
quota_db_status quota_db_get(quota_db *db, const char *key, size_t key_len, quota_tenant *out);

/**
 * quota_db_put() - create or replace @t's record (its key, tier, times and
 * overrides; created/updated/version are the database's).
 * @if_match: -1 = unconditional; 0 = only if no record exists
 *            (If-None-Match: *); N > 0 = only if the stored version is N
 *            (even when the record would not change).
 * @actor:    the token's name, for the audit log.
 * @now_us:   the time of the change.
 * @stored:   receives the record as stored.
 * @created:  true when no record existed.
 * @changed:  false when the stored record already said exactly this (no
 *            new version, no audit entry: a repeated PUT changes nothing).
 * @stored, @created and @changed may be NULL.
 * Returns QDB_OK, QDB_CONFLICT (nothing written), QDB_UNAVAILABLE,
 * QDB_ERROR.
 */
quota_db_status quota_db_put(quota_db *db, const quota_tenant *t, int64_t if_match,
                             const char *actor, int64_t now_us, quota_tenant *stored, bool *created,
                             bool *changed);

/** Delete @key's record and its overrides (audited). @if_match as for
 *  put (0 is refused as QDB_ERROR). @before (may be NULL) receives the
 *  deleted record.
 *  QDB_OK, QDB_NOT_FOUND, QDB_CONFLICT, QDB_UNAVAILABLE, QDB_ERROR. */
quota_db_status quota_db_delete(quota_db *db, const char *key, size_t key_len, int64_t if_match,
                                const char *actor, int64_t now_us, quota_tenant *before);

/**
 * quota_db_list() - a page of records in key order (bytewise), those of
 * tier @tier only when not NULL, starting after key @after (@after_len
 * bytes; NULL or 0 bytes for the first page). At most @limit (1 .. 1000)
 * records into @out (an array of @limit). @n receives how many; @more
 * whether records follow.
 */
quota_db_status quota_db_list(quota_db *db, const char *tier, const char *after, size_t after_len,
                              size_t limit, quota_tenant *out, size_t *n, bool *more);

/**
 * quota_db_audit() - a page of the audit log, newest first: entries of
 * @key only when not NULL, with id < @before_id (0 for the newest). At most
 * @limit (1 .. 1000) into @out; free each with quota_audit_free().
 */
quota_db_status quota_db_audit(quota_db *db, const char *key, size_t key_len, int64_t before_id,
                               size_t limit, quota_audit *out, size_t *n, bool *more);
void quota_audit_free(quota_audit *a);

/**
 * quota_db_load() - every record, in no particular order, each passed to
 * @each (the record is valid for the call only); the source of a
 * snapshot. @each returning false stops with QDB_ERROR.
 */
quota_db_status quota_db_load(quota_db *db, bool (*each)(void *arg, const quota_tenant *t),
                              void *arg);

/**
 * quota_db_changed() - whether a change was committed (by any process)
 * since the last call returned true or since open: SQLite compares PRAGMA
 * data_version; PostgreSQL reads the notifications that arrived (each
 * change NOTIFYs channel weir_quotas in its transaction). Never blocks
 * long. A PostgreSQL connection that was lost is tried again here (and
 * reports true once it is back, since changes may have been missed).
 */
bool quota_db_changed(quota_db *db);

/** Whether the database was found away by the last call and could not be
 *  reached again (PostgreSQL: the connection is lost, quota_db_error()
 *  says why; it is tried again by the next call). SQLite: never. */
bool quota_db_lost(const quota_db *db);

/** The socket to watch for notifications (PostgreSQL), else -1. It may
 *  change when the connection is made again: ask again after
 *  quota_db_changed() returned true. */
int quota_db_fd(const quota_db *db);

#endif /* WEIR_DAEMON_QUOTA_DB_H */
