/*
 * db_pg.c - the quota database in PostgreSQL (postgres://...), shared by
 * several instances: one libpq connection that LISTENs on weir_quotas; a
 * change in a transaction that locks the tenant's row (SELECT ... FOR
 * UPDATE OF t) and NOTIFYs weir_quotas with the key before it commits.
 * Every value travels as a parameter (PQsendQueryParams); times are
 * TIMESTAMPTZ, exchanged as Unix microseconds.
 *
 * A lost connection is tried again (PQreset) at most once a second: by
 * the call that finds it lost, which then runs its statement again when
 * nothing of it had been done (never within a change's transaction), and
 * by quota_db_changed(), which reports true once it is back.
 */
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quota/db_internal.h"

#define CHANNEL "weir_quotas"
#define RECONNECT_EVERY_MS 1000
/* pg_advisory_xact_lock()'s key for the migrations: "weir" in ASCII */
#define MIGRATION_LOCK "2003135858"

/* A time column as Unix microseconds, and a parameter of them as a time
 * (exact: EXTRACT gives a numeric since PostgreSQL 14). */
#define US(column) "(EXTRACT(EPOCH FROM " column ") * 1000000)::bigint"
#define TS(param) "(TIMESTAMPTZ 'epoch' + " param "::bigint * INTERVAL '1 microsecond')"
/* Keys order bytewise: the columns are COLLATE "C" and the statements say
 * so too, so the cursor of a page agrees with the order of its rows. */
#define C_ORDER " COLLATE \"C\""

// clang-format off
#define SELECT_RECORDS "SELECT " QDB_RECORD_COLUMNS(US)
static const char SQL_READ[] =
    SELECT_RECORDS " FROM tenants t" QDB_JOIN_OVERRIDES
    " WHERE t.api_key = $1 ORDER BY o.position";
static const char SQL_READ_LOCK[] =
    SELECT_RECORDS " FROM tenants t" QDB_JOIN_OVERRIDES
    " WHERE t.api_key = $1 ORDER BY o.position FOR UPDATE OF t";
static const char SQL_LIST[] =
    SELECT_RECORDS " FROM (SELECT * FROM tenants WHERE api_key > $1" C_ORDER
    " ORDER BY api_key" C_ORDER " LIMIT $2) t" QDB_JOIN_OVERRIDES
    " ORDER BY t.api_key" C_ORDER ", o.position";
static const char SQL_LIST_TIER[] =
    SELECT_RECORDS " FROM (SELECT * FROM tenants WHERE tier = $3 AND api_key > $1" C_ORDER
    " ORDER BY api_key" C_ORDER " LIMIT $2) t" QDB_JOIN_OVERRIDES
    " ORDER BY t.api_key" C_ORDER ", o.position";
static const char SQL_LOAD[] =
    SELECT_RECORDS " FROM tenants t" QDB_JOIN_OVERRIDES
    " ORDER BY t.api_key" C_ORDER ", o.position";
static const char SQL_AUDIT[] =
    "SELECT " QDB_AUDIT_COLUMNS(US) " FROM audit_log"
    " WHERE id < $1 ORDER BY id DESC LIMIT $2";
static const char SQL_AUDIT_KEY[] =
    "SELECT " QDB_AUDIT_COLUMNS(US) " FROM audit_log"
    " WHERE api_key = $3 AND id < $1 ORDER BY id DESC LIMIT $2";
/* SQL_UPDATE's parameters are SQL_INSERT's first six, $6 the update's
 * time */
static const char SQL_INSERT[] =
    "INSERT INTO tenants (api_key, tier, effective_at, expires_at, version, created_at,"
    " updated_at) VALUES ($1, $2, " TS("$3") ", " TS("$4") ", $5, " TS("$6") ", " TS("$7") ")";
static const char SQL_UPDATE[] =
    "UPDATE tenants SET tier = $2, effective_at = " TS("$3") ", expires_at = " TS("$4") ","
    " version = $5, updated_at = " TS("$6") " WHERE api_key = $1";
static const char SQL_OVERRIDE[] =
    "INSERT INTO quota_overrides (api_key, position, descriptor, requests_per_unit, unit,"
    " calendar, time_zone, algorithm, created_at, updated_at)"
    " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, " TS("$9") ", " TS("$9") ")";
static const char SQL_APPEND[] =
    "INSERT INTO audit_log (at, actor, action, api_key, \"before\", \"after\")"
    " VALUES (" TS("$1") ", $2, $3, $4, $5, $6)";
// clang-format on

typedef struct qpg {
    quota_db base;
    PGconn *conn;
    bool in_tx;       /* within BEGIN ... COMMIT/ROLLBACK */
    bool missed;      /* reconnected: changes may have gone unnoticed */
    int64_t reset_ms; /* the last reconnection's attempt */
    char conn_err[QDB_ERR_CAP];
} qpg;

static qpg *of(quota_db *db)
{
    return (qpg *)db;
}

static void quiet(void *arg, const char *message)
{
    (void)arg; /* NOTICEs ("relation ... already exists, skipping") */
    (void)message;
}

/* A SQLSTATE that means "not now": the connection, a shutdown, the
 * statement timeout, a lock or a serialization failure. */
static bool transient(const char *state)
{
    static const char *const states[] = {"08", "57P", "57014", "40001", "40P01", "55P03", "53"};
    for (size_t i = 0; i < sizeof states / sizeof states[0]; i++) {
        if (strncmp(state, states[i], strlen(states[i])) == 0)
            return true;
    }
    return false;
}

/* The handle's error from a failed result (NULL: the connection's). A
 * unique violation of the tenants' key is QDB_CONFLICT (an insert that
 * lost to a concurrent one). */
static quota_db_status fail(qpg *p, const PGresult *res, const char *doing)
{
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    const char *msg = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
    const char *constraint = res ? PQresultErrorField(res, PG_DIAG_CONSTRAINT_NAME) : NULL;
    qdb_errorf(&p->base, "postgres: %s: %s", doing, msg ? msg : PQerrorMessage(p->conn));
    if (PQstatus(p->conn) != CONNECTION_OK || (state && transient(state)))
        return QDB_UNAVAILABLE;
    if (state && strcmp(state, "23505") == 0 && constraint &&
        strcmp(constraint, "tenants_pkey") == 0)
        return QDB_CONFLICT;
    return QDB_ERROR;
}

/* ---------------------------------------------------------------- connection */

static PGconn *connect_to(const char *url, unsigned timeout_ms)
{
    char seconds[16];
    unsigned s = (timeout_ms + 999) / 1000;
    snprintf(seconds, sizeof seconds, "%u", s < 2 ? 2 : s);
    /* the URL (expanded: expand_dbname) comes last, so what it says wins */
    const char *const keys[] = {"connect_timeout", "client_encoding", "application_name", "dbname",
                                NULL};
    const char *const values[] = {seconds, "UTF8", "weir", url, NULL};
    return PQconnectdbParams(keys, values, 1);
}

static quota_db_status run(qpg *p, const char *sql, int n, const char *const *params,
                           const char *doing);

/* What a connection needs once up: the statement timeout, and LISTEN. */
static quota_db_status session(qpg *p)
{
    char ms[16];
    snprintf(ms, sizeof ms, "%u", p->base.timeout_ms);
    const char *params[] = {ms};
    quota_db_status st = run(p, "SELECT set_config('statement_timeout', $1, false)", 1, params,
                             "setting statement_timeout");
    return st == QDB_OK ? run(p, "LISTEN " CHANNEL, 0, NULL, "listening") : st;
}

/* Tries the connection again, unless that was tried less than a second
 * ago. */
static bool reconnect(qpg *p)
{
    int64_t now = qdb_now_ms();
    if (now - p->reset_ms >= RECONNECT_EVERY_MS) {
        p->reset_ms = now;
        p->in_tx = false;
        PQreset(p->conn);
        if (PQstatus(p->conn) == CONNECTION_OK && session(p) == QDB_OK) {
            p->missed = true;
            return true;
        }
        qdb_format(p->conn_err, sizeof p->conn_err, "postgres: connection lost: %s",
                   PQerrorMessage(p->conn));
    }
    qdb_errorf(&p->base, "%s", p->conn_err[0] ? p->conn_err : "postgres: connection lost");
    return false;
}

static bool ready(qpg *p)
{
    return PQstatus(p->conn) == CONNECTION_OK || reconnect(p);
}

/* ---------------------------------------------------------------- statements */

typedef struct row_ctx {
    const PGresult *res;
    int row;
} row_ctx;

static const char *col_text(void *ctx, int col, size_t *len)
{
    const row_ctx *r = ctx;
    if (PQgetisnull(r->res, r->row, col))
        return NULL;
    *len = (size_t)PQgetlength(r->res, r->row, col);
    return PQgetvalue(r->res, r->row, col);
}

static int64_t col_int64(void *ctx, int col, int64_t if_null)
{
    const row_ctx *r = ctx;
    if (PQgetisnull(r->res, r->row, col))
        return if_null;
    return strtoll(PQgetvalue(r->res, r->row, col), NULL, 10);
}

/* Where a statement's rows go: records, audit entries, or one integer. */
typedef struct rows_to {
    qdb_sink *sink;
    qdb_page *page;
    int64_t *value;
} rows_to;

static quota_db_status take_row(qpg *p, const PGresult *res, int row, const rows_to *to)
{
    row_ctx ctx = {res, row};
    qdb_cols cols = {.text = col_text, .int64 = col_int64, .ctx = &ctx};
    if (to->sink)
        return qdb_sink_row(&p->base, to->sink, &cols);
    if (to->page)
        return qdb_page_add(&p->base, to->page, &cols);
    if (to->value)
        *to->value = col_int64(&ctx, 0, 0);
    return QDB_OK;
}

/* Runs @sql once, its rows (one at a time: a load streams) to @to;
 * *@taken: whether any row was. */
static quota_db_status run_once(qpg *p, const char *sql, int n, const char *const *params,
                                const rows_to *to, const char *doing, bool *taken)
{
    if (!PQsendQueryParams(p->conn, sql, n, NULL, params, NULL, NULL, 0))
        return fail(p, NULL, doing);
    PQsetSingleRowMode(p->conn);
    quota_db_status st = QDB_OK;
    PGresult *res;
    /* to the end, whatever happens: the connection is ready for the next */
    while ((res = PQgetResult(p->conn)) != NULL) {
        ExecStatusType es = PQresultStatus(res);
        if (es == PGRES_SINGLE_TUPLE || es == PGRES_TUPLES_OK || es == PGRES_COMMAND_OK) {
            for (int i = 0; i < PQntuples(res) && st == QDB_OK; i++) {
                *taken = true;
                st = take_row(p, res, i, to);
            }
        } else if (st == QDB_OK) {
            st = fail(p, res, doing);
        }
        PQclear(res);
    }
    return st;
}

/* Runs @sql with @n text parameters (NULL for SQL NULL). Outside a
 * transaction, a statement that found the connection lost before any of
 * its rows came is run again once the connection is back. */
static quota_db_status run_to(qpg *p, const char *sql, int n, const char *const *params,
                              const rows_to *to, const char *doing)
{
    for (int attempt = 0;; attempt++) {
        if (!ready(p))
            return QDB_UNAVAILABLE;
        bool taken = false;
        quota_db_status st = run_once(p, sql, n, params, to, doing, &taken);
        if (st == QDB_OK || taken || attempt > 0 || p->in_tx || PQstatus(p->conn) == CONNECTION_OK)
            return st;
    }
}

static quota_db_status run(qpg *p, const char *sql, int n, const char *const *params,
                           const char *doing)
{
    rows_to none = {0};
    return run_to(p, sql, n, params, &none, doing);
}

/* A number as a parameter; a time, NULL when QUOTA_TIME_NONE. */
static const char *num(char buf[24], int64_t v)
{
    snprintf(buf, 24, "%lld", (long long)v);
    return buf;
}

static const char *time_param(char buf[24], int64_t us)
{
    return us == QUOTA_TIME_NONE ? NULL : num(buf, us);
}

/* ---------------------------------------------------------------- reads */

static quota_db_status pg_read(quota_db *db, const char *key, size_t key_len, bool lock,
                               qdb_sink *sink)
{
    (void)key_len;
    const char *params[] = {key};
    rows_to to = {.sink = sink};
    return run_to(of(db), lock ? SQL_READ_LOCK : SQL_READ, 1, params, &to, "reading the tenant");
}

static quota_db_status pg_list(quota_db *db, const char *tier, const char *after, size_t after_len,
                               size_t limit, qdb_sink *sink)
{
    (void)after_len;
    char n[24];
    const char *params[] = {after, num(n, (int64_t)limit), tier};
    rows_to to = {.sink = sink};
    return run_to(of(db), tier ? SQL_LIST_TIER : SQL_LIST, tier ? 3 : 2, params, &to, "listing");
}

static quota_db_status pg_load(quota_db *db, qdb_sink *sink)
{
    rows_to to = {.sink = sink};
    return run_to(of(db), SQL_LOAD, 0, NULL, &to, "loading");
}

static quota_db_status pg_audit(quota_db *db, const char *key, size_t key_len, int64_t before_id,
                                qdb_page *page)
{
    (void)key_len;
    char id[24], n[24];
    const char *params[] = {num(id, before_id), num(n, (int64_t)page->limit + 1), key};
    rows_to to = {.page = page};
    return run_to(of(db), key ? SQL_AUDIT_KEY : SQL_AUDIT, key ? 3 : 2, params, &to,
                  "reading the audit log");
}

/* ---------------------------------------------------------------- changes */

static quota_db_status pg_begin(quota_db *db)
{
    quota_db_status st = run(of(db), "BEGIN", 0, NULL, "beginning a change");
    of(db)->in_tx = st == QDB_OK;
    return st;
}

static quota_db_status pg_commit(quota_db *db, const char *key, size_t key_len)
{
    (void)key_len;
    qpg *p = of(db);
    const char *params[] = {key};
    /* delivered to the listeners when (and only if) the change commits */
    quota_db_status st =
        key ? run(p, "SELECT pg_notify('" CHANNEL "', $1)", 1, params, "notifying") : QDB_OK;
    if (st != QDB_OK)
        return st;
    PGresult *res = PQexec(p->conn, "COMMIT");
    if (PQresultStatus(res) != PGRES_COMMAND_OK) {
        st = fail(p, res, "committing");
    } else if (strcmp(PQcmdStatus(res), "COMMIT") != 0) { /* "ROLLBACK": it had failed */
        qdb_errorf(db, "postgres: committing: the transaction had failed");
        st = QDB_ERROR;
    }
    PQclear(res);
    if (st == QDB_OK)
        p->in_tx = false;
    return st;
}

static void pg_rollback(quota_db *db)
{
    qpg *p = of(db);
    if (p->in_tx && PQstatus(p->conn) == CONNECTION_OK)
        PQclear(PQexec(p->conn, "ROLLBACK"));
    p->in_tx = false;
}

static quota_db_status pg_write(quota_db *db, const quota_tenant *t, bool exists, int64_t now_us)
{
    qpg *p = of(db);
    char eff[24], exp[24], ver[24], cr[24], up[24], pos[24], rpu[24], now[24];
    const char *head[] = {t->key,
                          t->tier,
                          time_param(eff, t->effective_at_us),
                          time_param(exp, t->expires_at_us),
                          num(ver, t->version),
                          exists ? num(up, t->updated_at_us) : num(cr, t->created_at_us),
                          num(up, t->updated_at_us)};
    quota_db_status st =
        run(p, exists ? SQL_UPDATE : SQL_INSERT, exists ? 6 : 7, head, "writing the tenant");
    if (st == QDB_OK && exists) {
        const char *key[] = {t->key};
        st = run(p, "DELETE FROM quota_overrides WHERE api_key = $1", 1, key,
                 "replacing the overrides");
    }
    for (size_t i = 0; i < t->n_overrides && st == QDB_OK; i++) {
        const quota_override *o = &t->overrides[i];
        const char *row[] = {t->key,
                             num(pos, (int64_t)i),
                             o->descriptor,
                             num(rpu, (int64_t)o->requests_per_unit),
                             qdb_unit_name(o->unit),
                             qdb_calendar_name(o->calendar),
                             o->time_zone[0] ? o->time_zone : NULL,
                             qdb_algorithm_name(o->algorithm),
                             num(now, now_us)};
        st = run(p, SQL_OVERRIDE, 9, row, "writing an override");
    }
    return st;
}

static quota_db_status pg_remove(quota_db *db, const char *key, size_t key_len)
{
    (void)key_len;
    const char *params[] = {key};
    /* its overrides by ON DELETE CASCADE */
    return run(of(db), "DELETE FROM tenants WHERE api_key = $1", 1, params, "deleting the tenant");
}

static quota_db_status pg_append(quota_db *db, const qdb_entry *e)
{
    char at[24];
    const char *params[] = {num(at, e->at_us), e->actor, e->action, e->key, e->before, e->after};
    return run(of(db), SQL_APPEND, 6, params, "appending to the audit log");
}

static bool pg_changed(quota_db *db)
{
    qpg *p = of(db);
    bool lost = PQstatus(p->conn) != CONNECTION_OK || !PQconsumeInput(p->conn);
    if (lost && !reconnect(p))
        return false;
    bool changed = false;
    PGnotify *n;
    while ((n = PQnotifies(p->conn)) != NULL) {
        changed |= strcmp(n->relname, CHANNEL) == 0;
        PQfreemem(n);
    }
    changed |= p->missed;
    p->missed = false;
    return changed;
}

static bool pg_lost(const quota_db *db)
{
    return PQstatus(((const qpg *)db)->conn) != CONNECTION_OK;
}

static int pg_fd(const quota_db *db)
{
    return PQsocket(((const qpg *)db)->conn);
}

/* ---------------------------------------------------------------- open */

static quota_db_status pg_migrate_begin(quota_db *db, int *version)
{
    qpg *p = of(db);
    int64_t v = 0;
    rows_to to = {.value = &v};
    /* the lock first: an instance opening the database at once waits
     * here, then finds the migration applied */
    quota_db_status st = pg_begin(db);
    if (st == QDB_OK)
        st = run(p, "SELECT pg_advisory_xact_lock(" MIGRATION_LOCK ")", 0, NULL,
                 "locking for the migrations");
    if (st == QDB_OK)
        st = run(p,
                 "CREATE TABLE IF NOT EXISTS weir_schema_migrations (version INTEGER PRIMARY "
                 "KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())",
                 0, NULL, "creating weir_schema_migrations");
    if (st == QDB_OK)
        st = run_to(p, "SELECT COALESCE(MAX(version), 0) FROM weir_schema_migrations", 0, NULL, &to,
                    "reading the schema's version");
    if (st != QDB_OK)
        pg_rollback(db);
    *version = (int)v;
    return st;
}

static quota_db_status pg_migrate_apply(quota_db *db, const qdb_migration *m)
{
    qpg *p = of(db);
    /* a script of several statements: the simple query protocol */
    PGresult *res = PQexec(p->conn, m->sql);
    quota_db_status st =
        PQresultStatus(res) == PGRES_COMMAND_OK ? QDB_OK : fail(p, res, "applying");
    PQclear(res);
    char v[24];
    const char *params[] = {num(v, m->version)};
    return st == QDB_OK ? run(p, "INSERT INTO weir_schema_migrations (version) VALUES ($1)", 1,
                              params, "recording")
                        : st;
}

static void pg_close(quota_db *db)
{
    PQfinish(of(db)->conn);
    free(db);
}

static const qdb_ops pg_ops = {
    .kind = "postgres",
    .utf8_only = true, /* the database's encoding is UTF8 (client_encoding too) */
    .close = pg_close,
    .read = pg_read,
    .list = pg_list,
    .load = pg_load,
    .audit = pg_audit,
    .begin = pg_begin,
    .write = pg_write,
    .remove = pg_remove,
    .append = pg_append,
    .commit = pg_commit,
    .rollback = pg_rollback,
    .migrate_begin = pg_migrate_begin,
    .migrate_apply = pg_migrate_apply,
    .changed = pg_changed,
    .lost = pg_lost,
    .fd = pg_fd,
};

quota_db *qdb_pg_open(const quota_db_options *o, const char *url, char *err, size_t err_cap)
{
    qpg *p = calloc(1, sizeof *p);
    if (!p) {
        qdb_format(err, err_cap, "out of memory");
        return NULL;
    }
    qdb_init(&p->base, &pg_ops, o);
    p->reset_ms = qdb_now_ms() - RECONNECT_EVERY_MS; /* the first may come at once */
    p->conn = connect_to(url, p->base.timeout_ms);
    quota_db_status st = QDB_ERROR;
    if (!p->conn) {
        qdb_errorf(&p->base, "out of memory");
    } else if (PQstatus(p->conn) != CONNECTION_OK) {
        /* (libpq's message names the host and port, not the password) */
        qdb_errorf(&p->base, "cannot connect: %s", PQerrorMessage(p->conn));
    } else {
        PQsetNoticeProcessor(p->conn, quiet, NULL);
        st = session(p);
    }
    if (st == QDB_OK)
        st = qdb_migrate(&p->base, weir__quota_migrations_postgres,
                         weir__quota_migrations_postgres_count);
    if (st != QDB_OK) {
        qdb_format(err, err_cap, "quota database (PostgreSQL): %s", p->base.err);
        pg_close(&p->base);
        return NULL;
    }
    return &p->base;
}
