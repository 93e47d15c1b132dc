/*
 * db_sqlite.c - the quota database in a SQLite file (sqlite:///path.db):
 * one connection, its statements prepared once, a change in a BEGIN
 * IMMEDIATE transaction (the file's write lock from its first read, so
 * the read-compare-write of a put is whole even when several processes
 * share the file). Times are INTEGER Unix microseconds.
 */
#include <errno.h>
#include <libgen.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>

#include "quota/db_internal.h"

#define AS_IS(column) column

enum {
    S_READ,
    S_LIST,
    S_LIST_TIER,
    S_LOAD,
    S_AUDIT,
    S_AUDIT_KEY,
    S_INSERT,
    S_UPDATE,
    S_CLEAR,
    S_OVERRIDE,
    S_REMOVE,
    S_APPEND,
    S_DATA_VERSION,
    S_COUNT
};

/* Parameters: ?1 the key (or the key after which a page starts), then as
 * the statement says. S_INSERT and S_UPDATE share theirs (sqlite_write()). */
// clang-format off
#define SELECT_RECORDS "SELECT " QDB_RECORD_COLUMNS(AS_IS)
static const char *const statements[S_COUNT] = {
    [S_READ] =
        SELECT_RECORDS " FROM tenants t" QDB_JOIN_OVERRIDES
        " WHERE t.api_key = ?1 ORDER BY o.position",
    [S_LIST] =
        SELECT_RECORDS " FROM (SELECT * FROM tenants WHERE api_key > ?1"
        " ORDER BY api_key LIMIT ?2) t" QDB_JOIN_OVERRIDES
        " ORDER BY t.api_key, o.position",
    [S_LIST_TIER] =
        SELECT_RECORDS " FROM (SELECT * FROM tenants WHERE tier = ?3 AND api_key > ?1"
        " ORDER BY api_key LIMIT ?2) t" QDB_JOIN_OVERRIDES
        " ORDER BY t.api_key, o.position",
    [S_LOAD] =
        SELECT_RECORDS " FROM tenants t" QDB_JOIN_OVERRIDES
        " ORDER BY t.api_key, o.position",
    [S_AUDIT] =
        "SELECT " QDB_AUDIT_COLUMNS(AS_IS) " FROM audit_log"
        " WHERE id < ?1 ORDER BY id DESC LIMIT ?2",
    [S_AUDIT_KEY] =
        "SELECT " QDB_AUDIT_COLUMNS(AS_IS) " FROM audit_log"
        " WHERE api_key = ?3 AND id < ?1 ORDER BY id DESC LIMIT ?2",
    [S_INSERT] =
        "INSERT INTO tenants (api_key, tier, effective_at, expires_at, version, created_at,"
        " updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    [S_UPDATE] =
        "UPDATE tenants SET tier = ?2, effective_at = ?3, expires_at = ?4, version = ?5,"
        " updated_at = ?7 WHERE api_key = ?1",
    [S_CLEAR] = "DELETE FROM quota_overrides WHERE api_key = ?1",
    [S_OVERRIDE] =
        "INSERT INTO quota_overrides (api_key, position, descriptor, requests_per_unit, unit,"
        " calendar, time_zone, algorithm, created_at, updated_at)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9)",
    [S_REMOVE] = "DELETE FROM tenants WHERE api_key = ?1",
    [S_APPEND] =
        "INSERT INTO audit_log (at, actor, action, api_key, \"before\", \"after\")"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    [S_DATA_VERSION] = "PRAGMA data_version",
};
// clang-format on

typedef struct qsqlite {
    quota_db base;
    sqlite3 *db;
    sqlite3_stmt *stmt[S_COUNT];
    int64_t data_version; /* PRAGMA data_version when changed() last looked */
    bool committed;       /* this handle committed a change since then */
} qsqlite;

static qsqlite *of(quota_db *db)
{
    return (qsqlite *)db;
}

/* The handle's error from SQLite's last one; QDB_UNAVAILABLE when the file
 * stayed locked past the busy timeout. */
static quota_db_status fail(qsqlite *q, int rc, const char *doing)
{
    qdb_errorf(&q->base, "sqlite: %s: %s", doing, sqlite3_errmsg(q->db));
    int primary = rc & 0xff;
    return primary == SQLITE_BUSY || primary == SQLITE_LOCKED ? QDB_UNAVAILABLE : QDB_ERROR;
}

static quota_db_status exec(qsqlite *q, const char *sql, const char *doing)
{
    int rc = sqlite3_exec(q->db, sql, NULL, NULL, NULL);
    return rc == SQLITE_OK ? QDB_OK : fail(q, rc, doing);
}

/* ---------------------------------------------------------------- binding */

static void bind_text(sqlite3_stmt *s, int i, const char *text, size_t len)
{
    if (text)
        sqlite3_bind_text(s, i, text, (int)len, SQLITE_STATIC);
    else
        sqlite3_bind_null(s, i);
}

static void bind_name(sqlite3_stmt *s, int i, const char *name)
{
    bind_text(s, i, name, name ? strlen(name) : 0);
}

static void bind_time(sqlite3_stmt *s, int i, int64_t us)
{
    if (us == QUOTA_TIME_NONE)
        sqlite3_bind_null(s, i);
    else
        sqlite3_bind_int64(s, i, us);
}

/* Steps @s, which returns no rows, then resets it. */
static quota_db_status run(qsqlite *q, sqlite3_stmt *s, const char *doing)
{
    int rc = sqlite3_step(s);
    quota_db_status st = rc == SQLITE_DONE ? QDB_OK : fail(q, rc, doing);
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    return st;
}

/* ---------------------------------------------------------------- reads */

static const char *col_text(void *ctx, int col, size_t *len)
{
    sqlite3_stmt *s = ctx;
    if (sqlite3_column_type(s, col) == SQLITE_NULL)
        return NULL;
    const char *text = (const char *)sqlite3_column_text(s, col);
    *len = (size_t)sqlite3_column_bytes(s, col);
    return text;
}

static int64_t col_int64(void *ctx, int col, int64_t if_null)
{
    sqlite3_stmt *s = ctx;
    return sqlite3_column_type(s, col) == SQLITE_NULL ? if_null : sqlite3_column_int64(s, col);
}

/* Steps @s, each row to @sink (records) or @page (audit entries), then
 * resets it. */
static quota_db_status rows(qsqlite *q, sqlite3_stmt *s, qdb_sink *sink, qdb_page *page)
{
    qdb_cols cols = {.text = col_text, .int64 = col_int64, .ctx = s};
    quota_db_status st = QDB_OK;
    int rc;
    while (st == QDB_OK && (rc = sqlite3_step(s)) == SQLITE_ROW)
        st = sink ? qdb_sink_row(&q->base, sink, &cols) : qdb_page_add(&q->base, page, &cols);
    if (st == QDB_OK && rc != SQLITE_DONE)
        st = fail(q, rc, "reading");
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    return st;
}

static quota_db_status sqlite_read(quota_db *db, const char *key, size_t key_len, bool lock,
                                   qdb_sink *sink)
{
    (void)lock; /* BEGIN IMMEDIATE holds the file's write lock */
    sqlite3_stmt *s = of(db)->stmt[S_READ];
    bind_text(s, 1, key, key_len);
    return rows(of(db), s, sink, NULL);
}

static quota_db_status sqlite_list(quota_db *db, const char *tier, const char *after,
                                   size_t after_len, size_t limit, qdb_sink *sink)
{
    sqlite3_stmt *s = of(db)->stmt[tier ? S_LIST_TIER : S_LIST];
    bind_text(s, 1, after, after_len);
    sqlite3_bind_int64(s, 2, (sqlite3_int64)limit);
    if (tier)
        bind_name(s, 3, tier);
    return rows(of(db), s, sink, NULL);
}

static quota_db_status sqlite_load(quota_db *db, qdb_sink *sink)
{
    return rows(of(db), of(db)->stmt[S_LOAD], sink, NULL);
}

static quota_db_status sqlite_audit(quota_db *db, const char *key, size_t key_len,
                                    int64_t before_id, qdb_page *page)
{
    sqlite3_stmt *s = of(db)->stmt[key ? S_AUDIT_KEY : S_AUDIT];
    sqlite3_bind_int64(s, 1, before_id);
    sqlite3_bind_int64(s, 2, (sqlite3_int64)page->limit + 1);
    if (key)
        bind_text(s, 3, key, key_len);
    return rows(of(db), s, NULL, page);
}

/* ---------------------------------------------------------------- changes */

static quota_db_status sqlite_begin(quota_db *db)
{
    return exec(of(db), "BEGIN IMMEDIATE", "beginning a change");
}

static quota_db_status sqlite_commit(quota_db *db, const char *key, size_t key_len)
{
    (void)key_len;
    quota_db_status st = exec(of(db), "COMMIT", "committing");
    if (st == QDB_OK && key)
        of(db)->committed = true;
    return st;
}

static void sqlite_rollback(quota_db *db)
{
    if (!sqlite3_get_autocommit(of(db)->db))
        sqlite3_exec(of(db)->db, "ROLLBACK", NULL, NULL, NULL);
}

static quota_db_status sqlite_write(quota_db *db, const quota_tenant *t, bool exists,
                                    int64_t now_us)
{
    qsqlite *q = of(db);
    sqlite3_stmt *s = q->stmt[exists ? S_UPDATE : S_INSERT];
    bind_text(s, 1, t->key, t->key_len);
    bind_name(s, 2, t->tier);
    bind_time(s, 3, t->effective_at_us);
    bind_time(s, 4, t->expires_at_us);
    sqlite3_bind_int64(s, 5, t->version);
    sqlite3_bind_int64(s, 6, t->created_at_us);
    sqlite3_bind_int64(s, 7, t->updated_at_us);
    quota_db_status st = run(q, s, "writing the tenant");
    if (st == QDB_OK && exists) {
        bind_text(q->stmt[S_CLEAR], 1, t->key, t->key_len);
        st = run(q, q->stmt[S_CLEAR], "replacing the overrides");
    }
    for (size_t i = 0; i < t->n_overrides && st == QDB_OK; i++) {
        const quota_override *o = &t->overrides[i];
        s = q->stmt[S_OVERRIDE];
        bind_text(s, 1, t->key, t->key_len);
        sqlite3_bind_int64(s, 2, (sqlite3_int64)i);
        bind_name(s, 3, o->descriptor);
        sqlite3_bind_int64(s, 4, (sqlite3_int64)o->requests_per_unit);
        bind_name(s, 5, qdb_unit_name(o->unit));
        bind_name(s, 6, qdb_calendar_name(o->calendar));
        bind_name(s, 7, o->time_zone[0] ? o->time_zone : NULL);
        bind_name(s, 8, qdb_algorithm_name(o->algorithm));
        sqlite3_bind_int64(s, 9, now_us);
        st = run(q, s, "writing an override");
    }
    return st;
}

static quota_db_status sqlite_remove(quota_db *db, const char *key, size_t key_len)
{
    sqlite3_stmt *s = of(db)->stmt[S_REMOVE];
    bind_text(s, 1, key, key_len);
    return run(of(db), s, "deleting the tenant"); /* its overrides by ON DELETE CASCADE */
}

static quota_db_status sqlite_append(quota_db *db, const qdb_entry *e)
{
    sqlite3_stmt *s = of(db)->stmt[S_APPEND];
    sqlite3_bind_int64(s, 1, e->at_us);
    bind_name(s, 2, e->actor);
    bind_name(s, 3, e->action);
    bind_text(s, 4, e->key, e->key_len);
    bind_name(s, 5, e->before);
    bind_name(s, 6, e->after);
    return run(of(db), s, "appending to the audit log");
}

static bool sqlite_changed(quota_db *db)
{
    qsqlite *q = of(db);
    sqlite3_stmt *s = q->stmt[S_DATA_VERSION];
    /* data_version moves when another connection commits, not this one */
    int64_t v = sqlite3_step(s) == SQLITE_ROW ? sqlite3_column_int64(s, 0) : q->data_version;
    sqlite3_reset(s);
    bool changed = q->committed || v != q->data_version;
    q->data_version = v;
    q->committed = false;
    return changed;
}

static int sqlite_fd(const quota_db *db)
{
    (void)db;
    return -1;
}

/* ---------------------------------------------------------------- open */

static quota_db_status sqlite_migrate_begin(quota_db *db, int *version)
{
    qsqlite *q = of(db);
    /* the write lock first: another process opening the file at once
     * waits here, then finds the migrations applied */
    quota_db_status st = exec(q, "BEGIN IMMEDIATE", "locking for the migrations");
    if (st == QDB_OK)
        st = exec(q,
                  "CREATE TABLE IF NOT EXISTS weir_schema_migrations (version INTEGER PRIMARY "
                  "KEY, applied_at INTEGER NOT NULL)",
                  "creating weir_schema_migrations");
    sqlite3_stmt *s = NULL;
    if (st == QDB_OK &&
        sqlite3_prepare_v2(q->db, "SELECT COALESCE(MAX(version), 0) FROM weir_schema_migrations",
                           -1, &s, NULL) != SQLITE_OK)
        st = fail(q, SQLITE_ERROR, "reading the schema's version");
    if (st == QDB_OK && sqlite3_step(s) == SQLITE_ROW)
        *version = sqlite3_column_int(s, 0);
    sqlite3_finalize(s);
    if (st != QDB_OK)
        sqlite_rollback(db);
    return st;
}

static quota_db_status sqlite_migrate_apply(quota_db *db, const qdb_migration *m)
{
    qsqlite *q = of(db);
    quota_db_status st = exec(q, m->sql, "applying");
    sqlite3_stmt *s = NULL;
    if (st == QDB_OK && sqlite3_prepare_v2(q->db,
                                           "INSERT INTO weir_schema_migrations (version, "
                                           "applied_at) VALUES (?1, ?2)",
                                           -1, &s, NULL) != SQLITE_OK)
        st = fail(q, SQLITE_ERROR, "recording");
    if (st == QDB_OK) {
        struct timeval tv;
        gettimeofday(&tv, NULL);
        sqlite3_bind_int(s, 1, m->version);
        sqlite3_bind_int64(s, 2, (int64_t)tv.tv_sec * 1000000 + tv.tv_usec);
        st = run(q, s, "recording");
    }
    sqlite3_finalize(s);
    return st;
}

static void sqlite_close(quota_db *db)
{
    qsqlite *q = of(db);
    for (int i = 0; i < S_COUNT; i++)
        sqlite3_finalize(q->stmt[i]);
    sqlite3_close(q->db);
    free(q);
}

static const qdb_ops sqlite_ops = {
    .kind = "sqlite",
    .close = sqlite_close,
    .read = sqlite_read,
    .list = sqlite_list,
    .load = sqlite_load,
    .audit = sqlite_audit,
    .begin = sqlite_begin,
    .write = sqlite_write,
    .remove = sqlite_remove,
    .append = sqlite_append,
    .commit = sqlite_commit,
    .rollback = sqlite_rollback,
    .migrate_begin = sqlite_migrate_begin,
    .migrate_apply = sqlite_migrate_apply,
    .changed = sqlite_changed,
    .fd = sqlite_fd,
};

/* The connection's settings. */
static quota_db_status configure(qsqlite *q)
{
    sqlite3_busy_timeout(q->db,
                         q->base.timeout_ms > INT32_MAX ? INT32_MAX : (int)q->base.timeout_ms);
    /* WAL: readers (the snapshot's load) never wait for a writer. */
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(q->db, "PRAGMA journal_mode=WAL", -1, &s, NULL);
    const unsigned char *mode = NULL;
    if (rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW)
        mode = sqlite3_column_text(s, 0);
    bool wal = mode && strcmp((const char *)mode, "wal") == 0;
    sqlite3_finalize(s);
    if (!wal) {
        qdb_errorf(&q->base, "sqlite: cannot switch to WAL mode: %s", sqlite3_errmsg(q->db));
        return rc == SQLITE_BUSY ? QDB_UNAVAILABLE : QDB_ERROR;
    }
    /* FULL: in WAL mode NORMAL syncs the log only at checkpoints, so a
     * committed change, already acknowledged to the admin API's client,
     * could be lost to a power failure or an OS crash; FULL syncs the log
     * at every commit (changes are rare: the cost does not matter). */
    quota_db_status st = exec(q, "PRAGMA synchronous=FULL", "setting synchronous=FULL");
    if (st == QDB_OK) /* ON DELETE CASCADE needs it */
        st = exec(q, "PRAGMA foreign_keys=ON", "setting foreign_keys=ON");
    return st;
}

static quota_db_status prepare(qsqlite *q)
{
    for (int i = 0; i < S_COUNT; i++) {
        if (sqlite3_prepare_v3(q->db, statements[i], -1, SQLITE_PREPARE_PERSISTENT, &q->stmt[i],
                               NULL) != SQLITE_OK)
            return fail(q, SQLITE_ERROR, "preparing the statements");
    }
    q->data_version = 0;
    (void)sqlite_changed(&q->base); /* the version at open */
    return QDB_OK;
}

/* 0 when @path's directory exists, else why not: a missing directory is
 * an error (SQLite would say only "unable to open database file"); the
 * file itself is created. */
static int directory_error(const char *path)
{
    char *copy = strdup(path);
    if (!copy)
        return ENOMEM;
    struct stat sb;
    int e = stat(dirname(copy), &sb) != 0 ? errno : S_ISDIR(sb.st_mode) ? 0 : ENOTDIR;
    free(copy);
    return e;
}

quota_db *qdb_sqlite_open(const quota_db_options *o, const char *path, char *err, size_t err_cap)
{
    char quoted[300];
    qdb_quote(quoted, sizeof quoted, path, strlen(path));
    if (!*path) {
        qdb_format(err, err_cap, "--quota-db sqlite:// names no file");
        return NULL;
    }
    int e = directory_error(path);
    if (e) {
        qdb_format(err, err_cap, "quota database %s: its directory: %s", quoted, strerror(e));
        return NULL;
    }
    qsqlite *q = calloc(1, sizeof *q);
    if (!q) {
        qdb_format(err, err_cap, "out of memory");
        return NULL;
    }
    qdb_init(&q->base, &sqlite_ops, o);
    /* NOMUTEX: a handle belongs to one thread */
    int rc = sqlite3_open_v2(
        path, &q->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
    quota_db_status st = rc == SQLITE_OK ? QDB_OK : fail(q, rc, "opening");
    if (st == QDB_OK)
        st = configure(q);
    if (st == QDB_OK)
        st = qdb_migrate(&q->base, weir__quota_migrations_sqlite,
                         weir__quota_migrations_sqlite_count);
    if (st == QDB_OK)
        st = prepare(q);
    if (st != QDB_OK) {
        qdb_format(err, err_cap, "quota database %s: %s", quoted, q->base.err);
        sqlite_close(&q->base);
        return NULL;
    }
    return &q->base;
}
