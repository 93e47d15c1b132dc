/*
 * db_internal.h - what the quota database's engines (db_sqlite.c,
 * db_pg.c) share with db.c: the handle's common head, the operations an
 * engine provides, the embedded migrations, and the helpers that make
 * both engines read and write records alike (names of units, calendars,
 * algorithms and actions; a result's rows assembled into records; errors
 * on one escaped line).
 *
 * db.c does everything that is the same whatever the engine: it checks
 * the input, runs a change's read-compare-write between an engine's begin
 * and commit, renders the audit entry, and pages results. An engine only
 * runs statements.
 */
#ifndef WEIR_DAEMON_QUOTA_DB_INTERNAL_H
#define WEIR_DAEMON_QUOTA_DB_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "db.h"

/** One migration: its version (the number its file name starts with),
 *  its file name and its SQL (a script of several statements). */
typedef struct qdb_migration {
    int version;
    const char *name;
    const char *sql;
} qdb_migration;

/* gen/quota_migrations.c (CMakeLists.txt), in the order of application */
extern const qdb_migration weir__quota_migrations_sqlite[];
extern const size_t weir__quota_migrations_sqlite_count;
extern const qdb_migration weir__quota_migrations_postgres[];
extern const size_t weir__quota_migrations_postgres_count;

#define QDB_ERR_CAP 512

/**
 * The rows of a query of records, one row an override (or one row with no
 * override for a record that has none), ordered by key then position: an
 * engine hands each row to qdb_sink_row(), which assembles the records and
 * passes each complete one to @each, then calls qdb_sink_end().
 */
typedef struct qdb_sink {
    /* false stops the query: the engine returns QDB_ERROR */
    bool (*each)(void *arg, const quota_tenant *t);
    void *arg;
    quota_tenant *cur; /* the record being assembled (~40 KiB) */
    bool open;         /* cur holds a record's first rows */
} qdb_sink;

// clang-format off
/* The columns of a query of records, in this order; @TIME(column) gives a
 * time column as Unix microseconds in the engine's SQL. */
#define QDB_RECORD_COLUMNS(TIME)                                                \
    "t.api_key, t.tier, " TIME("t.effective_at") ", " TIME("t.expires_at") ", " \
    TIME("t.created_at") ", " TIME("t.updated_at") ", t.version,"               \
    " o.descriptor, o.requests_per_unit, o.unit, o.calendar, o.time_zone, o.algorithm"
/* Each record's overrides, after "FROM tenants t" or a subquery named t. */
#define QDB_JOIN_OVERRIDES " LEFT JOIN quota_overrides o ON o.api_key = t.api_key"
/* The columns of a query of the audit log, in this order. */
#define QDB_AUDIT_COLUMNS(TIME) \
    "id, " TIME("at") ", actor, action, api_key, \"before\", \"after\""
// clang-format on

/** A result row's columns, as the engine reads them. */
typedef struct qdb_cols {
    /* column @col's text and its length, NULL for SQL NULL */
    const char *(*text)(void *ctx, int col, size_t *len);
    /* column @col's integer, @if_null for SQL NULL */
    int64_t (*int64)(void *ctx, int col, int64_t if_null);
    void *ctx;
} qdb_cols;

/** One audit entry to append (the names of the columns). */
typedef struct qdb_entry {
    int64_t at_us;
    const char *actor;
    const char *action; /* "create", "update", "delete" */
    const char *key;    /* NUL-terminated */
    size_t key_len;
    const char *before, *after; /* JSON or NULL */
} qdb_entry;

/** A page of audit entries being filled (qdb_page_add()). */
typedef struct qdb_page {
    quota_audit *out;
    size_t limit, n;
    bool more;
} qdb_page;

/**
 * An engine's operations. Keys come checked (1 .. QUOTA_MAX_KEY_BYTES
 * bytes, no NUL) and NUL-terminated. Every one sets the handle's error
 * when it fails. A change is begin, read (lock true), write or remove,
 * append, then commit or rollback; outside a change, reads stand alone.
 */
typedef struct qdb_ops {
    const char *kind;
    /* stores text: keys, tiers, descriptors and actors must be UTF-8 */
    bool utf8_only;
    void (*close)(quota_db *db);
    /* the rows of one record (none when there is no such record); @lock:
     * in a change, lock the record against other writers until it ends */
    quota_db_status (*read)(quota_db *db, const char *key, size_t key_len, bool lock,
                            qdb_sink *sink);
    /* at most @limit records after @after ("" for the first), of @tier
     * only when not NULL */
    quota_db_status (*list)(quota_db *db, const char *tier, const char *after, size_t after_len,
                            size_t limit, qdb_sink *sink);
    quota_db_status (*load)(quota_db *db, qdb_sink *sink);
    /* at most @page->limit + 1 entries with id < @before_id, of @key when
     * not NULL, newest first, each passed to qdb_page_add() */
    quota_db_status (*audit)(quota_db *db, const char *key, size_t key_len, int64_t before_id,
                             qdb_page *page);
    quota_db_status (*begin)(quota_db *db);
    /* @t's record, all of it (its overrides replace the stored ones);
     * @exists: update, else insert. An insert that finds the key taken by
     * a concurrent one returns QDB_CONFLICT (the change must be rolled
     * back). */
    quota_db_status (*write)(quota_db *db, const quota_tenant *t, bool exists, int64_t now_us);
    quota_db_status (*remove)(quota_db *db, const char *key, size_t key_len);
    quota_db_status (*append)(quota_db *db, const qdb_entry *e);
    /* @key: the record changed (PostgreSQL notifies its listeners); NULL
     * for a migration */
    quota_db_status (*commit)(quota_db *db, const char *key, size_t key_len);
    void (*rollback)(quota_db *db);
    /* a migration's transaction: begun, holding the lock that keeps other
     * instances out until it ends, weir_schema_migrations created if
     * missing, and the latest version applied read (0: none) */
    quota_db_status (*migrate_begin)(quota_db *db, int *version);
    /* runs @m's script and records its version */
    quota_db_status (*migrate_apply)(quota_db *db, const qdb_migration *m);
    bool (*changed)(quota_db *db);
    bool (*lost)(const quota_db *db);
    int (*fd)(const quota_db *db);
} qdb_ops;

/** The common head of an engine's handle (its first member). */
struct quota_db {
    const qdb_ops *ops;
    quota_db_render_fn render;
    unsigned timeout_ms; /* never 0 */
    char err[QDB_ERR_CAP];
};

/* The engines' open: after qdb_init(), return NULL with @err set on
 * failure. @target is the URL's part after the scheme (SQLite: the path)
 * or the whole URL (PostgreSQL). */
quota_db *qdb_sqlite_open(const quota_db_options *o, const char *path, char *err, size_t err_cap);
quota_db *qdb_pg_open(const quota_db_options *o, const char *url, char *err, size_t err_cap);
void qdb_init(quota_db *db, const qdb_ops *ops, const quota_db_options *o);

/* ---------------------------------------------------------------- errors */

/** Formats the handle's error: one line, printable ASCII only (control
 *  and non-ASCII bytes \xNN-escaped, line breaks of a library's message
 *  folded into spaces). */
void qdb_errorf(quota_db *db, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/** The same into a caller's buffer (open's @err). */
void qdb_format(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/** @s (@n bytes) quoted for an error message: printable ASCII as is but
 *  '"' and '\\', everything else \xNN; cut with "..." past @cap. */
const char *qdb_quote(char *out, size_t cap, const char *s, size_t n);

/* ---------------------------------------------------------------- names */

/** The names stored for an override's enums; NULL for none (the unit of a
 *  calendar limit, a calendar of none, the replaced limit's algorithm). */
const char *qdb_unit_name(weir_rule_unit unit);
const char *qdb_calendar_name(weir_calendar cal);
const char *qdb_algorithm_name(weir_algorithm algo);
const char *qdb_action_name(quota_action action);

/* ---------------------------------------------------------------- rows */

/** Adds a row of QDB_RECORD_COLUMNS to the record being assembled,
 *  passing the previous one on when the row starts another. QDB_ERROR for
 *  a row the model cannot hold (a name weir does not know: the database
 *  was edited by hand). */
quota_db_status qdb_sink_row(quota_db *db, qdb_sink *s, const qdb_cols *row);
/** Passes the last record on. */
quota_db_status qdb_sink_end(quota_db *db, qdb_sink *s);
/** Adds a row of QDB_AUDIT_COLUMNS to @page (copying its JSON), or notes
 *  that more follow when the page is full. QDB_ERROR for an action weir
 *  does not know. */
quota_db_status qdb_page_add(quota_db *db, qdb_page *page, const qdb_cols *row);

/** Applies the migrations of @m (@n, in order) not yet applied, each in
 *  its own transaction; fails on a schema newer than the last of them. */
quota_db_status qdb_migrate(quota_db *db, const qdb_migration *m, size_t n);

/** A monotonic clock in milliseconds (reconnects are paced by it). */
int64_t qdb_now_ms(void);

#endif /* WEIR_DAEMON_QUOTA_DB_INTERNAL_H */
