/*
 * test_quota_db.c - the quota database (daemon/quota/db.h) on SQLite, in a
 * fresh file a test; or, when WEIR_TEST_PG_URL names a PostgreSQL
 * database, the same tests there (its schema public emptied before each;
 * tests/integration/test_quota_db_pg.py starts a server and runs them).
 *
 * Migrations (once, even for instances that open at once), every field of a record back as written,
 * repeated puts, If-Match, deletes, pages by tier and of the audit log, the audit log's refusal of
 * UPDATE and DELETE whoever sends them, hostile keys, names edited by hand, changes seen by a
 * second handle, a load of 100,000 tenants (timed), and what each engine adds: SQLite's busy file,
 * PostgreSQL's lost connection and concurrent creates.
 */
#define _XOPEN_SOURCE 700 /* mkdtemp, nftw, nanosleep */
#include <ftw.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <setjmp.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "quota/db.h"

static const char *pg_url; /* WEIR_TEST_PG_URL, or NULL: SQLite */
static char dir[64];       /* SQLite: the files' directory */
static char url[1024];     /* this test's database */
static int test_no;
static quota_tenant T1, T2; /* ~40 KiB each: not on the stack */
static quota_tenant page[8];

static bool is_pg(void)
{
    return pg_url != NULL;
}

/* ---------------------------------------------------------------- raw SQL */

static void quiet(void *arg, const char *message)
{
    (void)arg; /* DROP SCHEMA ... CASCADE's NOTICE */
    (void)message;
}

/* Runs @sql on a connection of its own; 0, or -1 with the error in @err. */
static int raw_try(const char *sql, char *err, size_t cap, long long *value)
{
    int rc = 0;
    if (is_pg()) {
        PGconn *c = PQconnectdb(pg_url);
        assert_int_equal(PQstatus(c), CONNECTION_OK);
        PQsetNoticeProcessor(c, quiet, NULL);
        PGresult *r = PQexec(c, sql);
        ExecStatusType es = PQresultStatus(r);
        if (es != PGRES_COMMAND_OK && es != PGRES_TUPLES_OK) {
            snprintf(err, cap, "%s", PQresultErrorMessage(r));
            rc = -1;
        } else if (value && PQntuples(r) > 0) {
            *value = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
        }
        PQclear(r);
        PQfinish(c);
        return rc;
    }
    sqlite3 *db;
    assert_int_equal(sqlite3_open(url + strlen("sqlite://"), &db), SQLITE_OK);
    sqlite3_stmt *s = NULL;
    const char *tail = sql;
    while (rc == 0 && *tail) {
        if (sqlite3_prepare_v2(db, tail, -1, &s, &tail) != SQLITE_OK) {
            rc = -1;
            break;
        }
        int step;
        while ((step = sqlite3_step(s)) == SQLITE_ROW) {
            if (value)
                *value = sqlite3_column_int64(s, 0);
        }
        if (step != SQLITE_DONE)
            rc = -1;
        sqlite3_finalize(s);
        while (*tail == ' ' || *tail == '\n' || *tail == ';')
            tail++;
    }
    if (rc)
        snprintf(err, cap, "%s", sqlite3_errmsg(db));
    sqlite3_close(db);
    return rc;
}

static void raw_exec(const char *sql)
{
    char err[512];
    if (raw_try(sql, err, sizeof err, NULL) != 0)
        fail_msg("%s: %s", sql, err);
}

static long long raw_int(const char *sql)
{
    char err[512];
    long long v = -1;
    if (raw_try(sql, err, sizeof err, &v) != 0)
        fail_msg("%s: %s", sql, err);
    return v;
}

/* ---------------------------------------------------------------- fixtures */

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int group_setup(void **state)
{
    (void)state;
    pg_url = getenv("WEIR_TEST_PG_URL");
    if (pg_url && !*pg_url)
        pg_url = NULL;
    snprintf(dir, sizeof dir, "/tmp/weir_qdb_XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    printf("quota db tests on %s\n", is_pg() ? "PostgreSQL (WEIR_TEST_PG_URL)" : "SQLite");
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    return nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

/* Every test on an empty database. */
static int setup(void **state)
{
    (void)state;
    if (is_pg()) {
        snprintf(url, sizeof url, "%s", pg_url);
        raw_exec("DROP SCHEMA public CASCADE; CREATE SCHEMA public");
    } else {
        snprintf(url, sizeof url, "sqlite://%s/t%d.db", dir, ++test_no);
    }
    return 0;
}

/* The audit log's JSON, enough to tell records apart. */
static char *render(const quota_tenant *t)
{
    char *s = malloc(2 * t->key_len + 160);
    if (!s)
        return NULL;
    int n = sprintf(s, "{\"key\":\"");
    for (size_t i = 0; i < t->key_len; i++)
        n += sprintf(s + n, "%02x", (unsigned char)t->key[i]);
    sprintf(s + n, "\",\"tier\":\"%s\",\"version\":%lld,\"overrides\":%zu}", t->tier,
            (long long)t->version, t->n_overrides);
    return s;
}

static quota_db *open_timeout(unsigned timeout_ms)
{
    char err[512];
    quota_db_options o = {.url = url, .render = render, .timeout_ms = timeout_ms};
    quota_db *db = quota_db_open(&o, err, sizeof err);
    if (!db)
        fail_msg("open %s: %s", url, err);
    return db;
}

static quota_db *open_db(void)
{
    return open_timeout(5000);
}

static quota_tenant *tenant(quota_tenant *t, const char *key, size_t len, const char *tier)
{
    memset(t, 0, sizeof *t);
    memcpy(t->key, key, len);
    t->key_len = len;
    snprintf(t->tier, sizeof t->tier, "%s", tier);
    t->effective_at_us = t->expires_at_us = QUOTA_TIME_NONE;
    return t;
}

static quota_override *add(quota_tenant *t, const char *descriptor, uint64_t rpu,
                           weir_rule_unit unit)
{
    quota_override *o = &t->overrides[t->n_overrides++];
    snprintf(o->descriptor, sizeof o->descriptor, "%s", descriptor);
    o->requests_per_unit = rpu;
    o->unit = unit;
    return o;
}

static quota_db_status put(quota_db *db, const quota_tenant *t, int64_t if_match, int64_t now)
{
    quota_tenant *stored = malloc(sizeof *stored);
    bool created, changed;
    quota_db_status st = quota_db_put(db, t, if_match, "alice", now, stored, &created, &changed);
    free(stored);
    return st;
}

static void assert_same(const quota_tenant *a, const quota_tenant *b)
{
    assert_int_equal(a->key_len, b->key_len);
    assert_memory_equal(a->key, b->key, a->key_len);
    assert_string_equal(a->tier, b->tier);
    assert_int_equal(a->effective_at_us, b->effective_at_us);
    assert_int_equal(a->expires_at_us, b->expires_at_us);
    assert_int_equal(a->n_overrides, b->n_overrides);
    for (size_t i = 0; i < a->n_overrides; i++) {
        const quota_override *x = &a->overrides[i], *y = &b->overrides[i];
        assert_string_equal(x->descriptor, y->descriptor);
        assert_int_equal(x->requests_per_unit, y->requests_per_unit);
        assert_int_equal(x->unit, y->unit);
        assert_int_equal(x->calendar, y->calendar);
        assert_string_equal(x->time_zone, y->time_zone);
        assert_int_equal(x->algorithm, y->algorithm);
    }
}

/* An error message is one line of printable ASCII. */
static void assert_one_line(const char *msg)
{
    assert_true(*msg);
    for (const unsigned char *p = (const unsigned char *)msg; *p; p++) {
        if (*p < 0x20 || *p >= 0x7f)
            fail_msg("byte 0x%02x in error %s", *p, msg);
    }
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Whether changed() says true within @ms. */
static bool changed_within(quota_db *db, long ms)
{
    for (long waited = 0; waited <= ms; waited += 20) {
        if (quota_db_changed(db))
            return true;
        sleep_ms(20);
    }
    return false;
}

/* ---------------------------------------------------------------- open */

static void migrations_applied_once(void **state)
{
    (void)state;
    quota_db *db = open_db();
    assert_string_equal(quota_db_kind(db), is_pg() ? "postgres" : "sqlite");
    quota_db_close(db);
    db = open_db();
    assert_int_equal(quota_db_get(db, "a", 1, &T1), QDB_NOT_FOUND);
    quota_db_close(db);
    assert_int_equal(raw_int("SELECT COUNT(*) FROM weir_schema_migrations"), 1);
    assert_int_equal(raw_int("SELECT MAX(version) FROM weir_schema_migrations"), 1);
}

typedef struct opener {
    pthread_barrier_t *start;
    quota_db *db;
    char err[512];
} opener;

static void *open_at_once(void *arg)
{
    opener *o = arg;
    quota_db_options opts = {.url = url, .render = render, .timeout_ms = 10000};
    pthread_barrier_wait(o->start);
    o->db = quota_db_open(&opts, o->err, sizeof o->err);
    return NULL;
}

/* Instances that open a new database at once apply each migration once:
 * the others wait for the lock, then find it applied. */
static void concurrent_opens_migrate_once(void **state)
{
    (void)state;
    enum { N = 4 };
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, N);
    static opener openers[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) {
        openers[i].start = &start;
        assert_int_equal(pthread_create(&th[i], NULL, open_at_once, &openers[i]), 0);
    }
    for (int i = 0; i < N; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&start);
    for (int i = 0; i < N; i++) {
        if (!openers[i].db)
            fail_msg("open %d: %s", i, openers[i].err);
        quota_db_close(openers[i].db);
    }
    assert_int_equal(raw_int("SELECT COUNT(*) FROM weir_schema_migrations"), 1);
}

static void newer_schema_refused(void **state)
{
    (void)state;
    quota_db_close(open_db());
    raw_exec(is_pg() ? "INSERT INTO weir_schema_migrations (version) VALUES (999)"
                     : "INSERT INTO weir_schema_migrations VALUES (999, 0)");
    char err[512];
    quota_db_options o = {.url = url, .render = render};
    assert_null(quota_db_open(&o, err, sizeof err));
    assert_non_null(strstr(err, "version 999, newer than this weir knows (1)"));
    assert_one_line(err);
}

static void open_errors(void **state)
{
    (void)state;
    char err[512];
    quota_db_options o = {.url = "mysql://root:secret@host/db", .render = render};
    assert_null(quota_db_open(&o, err, sizeof err));
    assert_non_null(strstr(err, "unknown --quota-db scheme \"mysql\""));
    assert_null(strstr(err, "secret"));
    o.url = "/tmp/q.db";
    assert_null(quota_db_open(&o, err, sizeof err));
    assert_non_null(strstr(err, "unknown --quota-db scheme"));
    char missing[256];
    snprintf(missing, sizeof missing, "sqlite://%s/no/such/dir/q.db", dir);
    o.url = missing;
    assert_null(quota_db_open(&o, err, sizeof err));
    assert_non_null(strstr(err, "/no/such/dir/q.db"));
    assert_non_null(strstr(err, "No such file or directory"));
    o.url = "sqlite://";
    assert_null(quota_db_open(&o, err, sizeof err));
    o.url = "postgresql://127.0.0.1:1/none";
    o.timeout_ms = 1000;
    assert_null(quota_db_open(&o, err, sizeof err));
    assert_non_null(strstr(err, "cannot connect"));
    assert_one_line(err);
}

/* sqlite://relative/path is relative to the working directory. */
static void sqlite_relative_path(void **state)
{
    (void)state;
    if (is_pg())
        skip();
    char cwd[512];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(dir), 0);
    assert_int_equal(mkdir("rel", 0700), 0);
    char err[512];
    quota_db_options o = {.url = "sqlite://rel/q.db", .render = render};
    quota_db *db = quota_db_open(&o, err, sizeof err);
    struct stat sb;
    assert_int_equal(stat("rel/q.db", &sb), 0);
    assert_int_equal(chdir(cwd), 0);
    assert_non_null(db);
    quota_db_close(db);
}

/* ---------------------------------------------------------------- records */

static void roundtrip_every_field(void **state)
{
    (void)state;
    quota_db *db = open_db();
    tenant(&T1, "acme", 4, "enterprise");
    T1.effective_at_us = 1738368000123456;
    T1.expires_at_us = 1769904000654321;
    static const weir_rule_unit units[] = {WEIR_UNIT_SECOND, WEIR_UNIT_MINUTE, WEIR_UNIT_HOUR,
                                           WEIR_UNIT_DAY,    WEIR_UNIT_WEEK,   WEIR_UNIT_MONTH,
                                           WEIR_UNIT_YEAR};
    for (int i = 0; i < 7; i++) {
        char d[32];
        snprintf(d, sizeof d, "endpoint:POST /v%d", i);
        quota_override *o =
            add(&T1, i == 0 ? "default" : d, i == 1 ? 0 : 100u * (unsigned)i, units[i]);
        o->algorithm = (weir_algorithm)(i + 1); /* 1 .. 7 */
    }
    static const weir_calendar cals[] = {WEIR_CALENDAR_DAY, WEIR_CALENDAR_MONTH,
                                         WEIR_CALENDAR_YEAR};
    static const char *const zones[] = {"Europe/Paris", "", "America/New_York"};
    for (int i = 0; i < 3; i++) {
        quota_override *o = add(&T1, "default", UINT32_MAX, WEIR_UNIT_NONE);
        o->calendar = cals[i];
        snprintf(o->time_zone, sizeof o->time_zone, "%s", zones[i]);
        o->algorithm = i == 2 ? WEIR_ALGO_CONCURRENCY : 0;
    }
    quota_tenant *stored = malloc(sizeof *stored);
    bool created = false, changed = false;
    assert_int_equal(quota_db_put(db, &T1, -1, "alice", 1000, stored, &created, &changed), QDB_OK);
    assert_true(created);
    assert_true(changed);
    assert_int_equal(stored->version, 1);
    assert_int_equal(stored->created_at_us, 1000);
    assert_int_equal(stored->updated_at_us, 1000);
    assert_same(stored, &T1);
    assert_int_equal(quota_db_get(db, "acme", 4, &T2), QDB_OK);
    assert_same(&T2, &T1);
    assert_int_equal(T2.version, 1);
    assert_int_equal(T2.created_at_us, 1000);
    assert_int_equal(T2.updated_at_us, 1000);
    /* no times, no overrides */
    tenant(&T1, "bare", 4, "free");
    assert_int_equal(quota_db_put(db, &T1, 0, "bob", 2000, stored, &created, &changed), QDB_OK);
    assert_int_equal(quota_db_get(db, "bare", 4, &T2), QDB_OK);
    assert_same(&T2, &T1);
    assert_int_equal(T2.effective_at_us, QUOTA_TIME_NONE);
    assert_int_equal(T2.expires_at_us, QUOTA_TIME_NONE);
    free(stored);
    quota_db_close(db);
}

static void repeated_put_changes_nothing(void **state)
{
    (void)state;
    quota_db *db = open_db();
    tenant(&T1, "k", 1, "pro");
    add(&T1, "default", 10, WEIR_UNIT_MINUTE);
    add(&T1, "path:/a", 5, WEIR_UNIT_SECOND);
    quota_tenant *stored = malloc(sizeof *stored);
    bool created, changed;
    assert_int_equal(quota_db_put(db, &T1, -1, "a", 1000, stored, &created, &changed), QDB_OK);
    assert_int_equal(quota_db_put(db, &T1, -1, "a", 2000, stored, &created, &changed), QDB_OK);
    assert_false(created);
    assert_false(changed);
    assert_int_equal(stored->version, 1);
    assert_int_equal(stored->updated_at_us, 1000);
    assert_int_equal(raw_int("SELECT COUNT(*) FROM audit_log"), 1);
    /* the same overrides in another order are another record */
    quota_override swap = T1.overrides[0];
    T1.overrides[0] = T1.overrides[1];
    T1.overrides[1] = swap;
    assert_int_equal(quota_db_put(db, &T1, 1, "a", 3000, stored, &created, &changed), QDB_OK);
    assert_true(changed);
    assert_int_equal(stored->version, 2);
    assert_int_equal(stored->created_at_us, 1000);
    assert_int_equal(stored->updated_at_us, 3000);
    assert_int_equal(quota_db_get(db, "k", 1, &T2), QDB_OK);
    assert_same(&T2, &T1);
    assert_int_equal(raw_int("SELECT COUNT(*) FROM audit_log"), 2);
    free(stored);
    quota_db_close(db);
}

static void if_match(void **state)
{
    (void)state;
    quota_db *db = open_db();
    tenant(&T1, "k", 1, "pro");
    assert_int_equal(put(db, &T1, 0, 1000), QDB_OK);
    snprintf(T1.tier, sizeof T1.tier, "enterprise");
    assert_int_equal(put(db, &T1, 0, 2000), QDB_CONFLICT); /* If-None-Match: * */
    assert_one_line(quota_db_error(db));
    assert_int_equal(put(db, &T1, 7, 2000), QDB_CONFLICT);
    assert_non_null(strstr(quota_db_error(db), "version is 1, not 7"));
    assert_int_equal(quota_db_get(db, "k", 1, &T2), QDB_OK);
    assert_string_equal(T2.tier, "pro");
    assert_int_equal(put(db, &T1, 1, 3000), QDB_OK);
    assert_int_equal(put(db, &T1, 1, 3000), QDB_CONFLICT); /* even with nothing to change */
    assert_int_equal(put(db, &T1, 2, 3000), QDB_OK);
    snprintf(T1.tier, sizeof T1.tier, "free");
    assert_int_equal(put(db, &T1, 1, 4000), QDB_CONFLICT);
    assert_int_equal(put(db, &T1, 2, 4000), QDB_OK);
    tenant(&T1, "absent", 6, "pro");
    assert_int_equal(put(db, &T1, 3, 4000), QDB_CONFLICT);
    assert_int_equal(quota_db_get(db, "absent", 6, &T2), QDB_NOT_FOUND);
    assert_int_equal(raw_int("SELECT COUNT(*) FROM audit_log"), 3);
    quota_db_close(db);
}

static void delete_records(void **state)
{
    (void)state;
    quota_db *db = open_db();
    tenant(&T1, "k", 1, "pro");
    add(&T1, "default", 10, WEIR_UNIT_MINUTE);
    assert_int_equal(put(db, &T1, -1, 1000), QDB_OK);
    snprintf(T1.tier, sizeof T1.tier, "free");
    assert_int_equal(put(db, &T1, -1, 2000), QDB_OK);
    assert_int_equal(quota_db_delete(db, "k", 1, 1, "bob", 3000, &T2), QDB_CONFLICT);
    assert_int_equal(quota_db_delete(db, "k", 1, 0, "bob", 3000, &T2), QDB_ERROR);
    assert_int_equal(quota_db_delete(db, "k", 1, 2, "bob", 3000, &T2), QDB_OK);
    assert_int_equal(T2.version, 2);
    assert_string_equal(T2.tier, "free");
    assert_int_equal(T2.n_overrides, 1);
    assert_int_equal(quota_db_get(db, "k", 1, &T2), QDB_NOT_FOUND);
    assert_int_equal(quota_db_delete(db, "k", 1, -1, "bob", 3000, &T2), QDB_NOT_FOUND);
    assert_int_equal(quota_db_delete(db, "k", 1, 2, "bob", 3000, &T2), QDB_NOT_FOUND);
    assert_int_equal(raw_int("SELECT COUNT(*) FROM quota_overrides"), 0);
    tenant(&T1, "j", 1, "pro");
    assert_int_equal(put(db, &T1, -1, 4000), QDB_OK);
    assert_int_equal(quota_db_delete(db, "j", 1, -1, "bob", 5000, NULL), QDB_OK);
    quota_audit a[2];
    size_t n;
    bool more;
    assert_int_equal(quota_db_audit(db, "k", 1, 0, 2, a, &n, &more), QDB_OK);
    assert_int_equal(n, 2);
    assert_true(more);
    assert_int_equal(a[0].action, QUOTA_ACTION_DELETE);
    assert_string_equal(a[0].actor, "bob");
    assert_int_equal(a[0].at_us, 3000);
    assert_null(a[0].after);
    assert_string_equal(a[0].before, "{\"key\":\"6b\",\"tier\":\"free\",\"version\":2,"
                                     "\"overrides\":1}");
    for (size_t i = 0; i < n; i++)
        quota_audit_free(&a[i]);
    quota_db_close(db);
}

/* ---------------------------------------------------------------- pages */

static int by_bytes(const void *a, const void *b)
{
    const quota_tenant *x = *(quota_tenant *const *)a, *y = *(quota_tenant *const *)b;
    size_t n = x->key_len < y->key_len ? x->key_len : y->key_len;
    int c = memcmp(x->key, y->key, n);
    return c ? c : (x->key_len > y->key_len) - (x->key_len < y->key_len);
}

/* Pages of @limit of @tier hold, in order, the @n records of @want. */
static void assert_pages(quota_db *db, const char *tier, size_t limit, quota_tenant **want,
                         size_t n)
{
    size_t seen = 0;
    bool more = true;
    char after[QUOTA_MAX_KEY_BYTES + 1];
    size_t after_len = 0;
    while (more) {
        size_t got;
        assert_int_equal(
            quota_db_list(db, tier, seen ? after : NULL, after_len, limit, page, &got, &more),
            QDB_OK);
        assert_true(got == limit || !more);
        for (size_t i = 0; i < got; i++, seen++) {
            assert_true(seen < n);
            assert_same(&page[i], want[seen]);
        }
        if (got) {
            memcpy(after, page[got - 1].key, page[got - 1].key_len);
            after_len = page[got - 1].key_len;
        }
    }
    assert_int_equal(seen, n);
}

static void list_pages_by_tier(void **state)
{
    (void)state;
    quota_db *db = open_db();
    static const char *const keys[] = {
        "k00",   "k'q", "k\"dq", "k\xc3\xbc", "k\\bs", "k01", "K02", "k \xf0\x9f\x99\x82",
        "k\x01", "k03", "k",     "k0",        "k000",  "z",   "a b", "k04",
        "k05'",  "k06", "k07",   "\x7f"};
    enum { N = sizeof keys / sizeof keys[0] };
    static quota_tenant all[N];
    quota_tenant *gold[N], *every[N];
    size_t n_gold = 0;
    for (size_t i = 0; i < N; i++) {
        tenant(&all[i], keys[i], strlen(keys[i]), i % 2 ? "silver" : "gold");
        for (size_t j = 0; j < i % 3; j++)
            add(&all[i], j ? "path:/x" : "default", i * 10 + j, WEIR_UNIT_HOUR);
        assert_int_equal(put(db, &all[i], 0, 1000 + (int64_t)i), QDB_OK);
        every[i] = &all[i];
        if (i % 2 == 0)
            gold[n_gold++] = &all[i];
    }
    qsort(gold, n_gold, sizeof gold[0], by_bytes);
    qsort(every, N, sizeof every[0], by_bytes);
    assert_pages(db, "gold", 3, gold, n_gold);
    assert_pages(db, "gold", 1, gold, n_gold);
    assert_pages(db, "gold", 8, gold, n_gold);
    assert_pages(db, NULL, 7, every, N);
    assert_pages(db, "bronze", 5, NULL, 0);
    size_t n;
    bool more;
    assert_int_equal(quota_db_list(db, NULL, NULL, 0, 0, page, &n, &more), QDB_ERROR);
    assert_int_equal(quota_db_list(db, NULL, NULL, 0, 1001, page, &n, &more), QDB_ERROR);
    quota_db_close(db);
}

static void audit_pages_newest_first(void **state)
{
    (void)state;
    quota_db *db = open_db();
    quota_tenant *stored = malloc(sizeof *stored);
    bool created, changed;
    tenant(&T1, "a", 1, "free");
    assert_int_equal(quota_db_put(db, &T1, -1, "alice", 100, stored, &created, &changed), 0);
    snprintf(T1.tier, sizeof T1.tier, "pro");
    assert_int_equal(quota_db_put(db, &T1, -1, "bob", 200, stored, &created, &changed), 0);
    tenant(&T2, "b", 1, "free");
    assert_int_equal(quota_db_put(db, &T2, -1, "carol", 300, stored, &created, &changed), 0);
    assert_int_equal(quota_db_delete(db, "a", 1, -1, "dave", 400, stored), 0);
    snprintf(T2.tier, sizeof T2.tier, "pro");
    assert_int_equal(quota_db_put(db, &T2, -1, "erin", 500, stored, &created, &changed), 0);
    free(stored);

    static const struct {
        const char *actor, *before, *after;
        quota_action action;
    } want[] = {
        {"erin", "{\"key\":\"62\",\"tier\":\"free\",\"version\":1,\"overrides\":0}",
         "{\"key\":\"62\",\"tier\":\"pro\",\"version\":2,\"overrides\":0}", QUOTA_ACTION_UPDATE},
        {"dave", "{\"key\":\"61\",\"tier\":\"pro\",\"version\":2,\"overrides\":0}", NULL,
         QUOTA_ACTION_DELETE},
        {"carol", NULL, "{\"key\":\"62\",\"tier\":\"free\",\"version\":1,\"overrides\":0}",
         QUOTA_ACTION_CREATE},
        {"bob", "{\"key\":\"61\",\"tier\":\"free\",\"version\":1,\"overrides\":0}",
         "{\"key\":\"61\",\"tier\":\"pro\",\"version\":2,\"overrides\":0}", QUOTA_ACTION_UPDATE},
        {"alice", NULL, "{\"key\":\"61\",\"tier\":\"free\",\"version\":1,\"overrides\":0}",
         QUOTA_ACTION_CREATE},
    };
    quota_audit a[2];
    size_t n, seen = 0;
    bool more = true;
    int64_t before_id = 0, last_id = INT64_MAX;
    while (more) {
        assert_int_equal(quota_db_audit(db, NULL, 0, before_id, 2, a, &n, &more), QDB_OK);
        for (size_t i = 0; i < n; i++, seen++) {
            assert_true(a[i].id < last_id);
            last_id = before_id = a[i].id;
            assert_string_equal(a[i].actor, want[seen].actor);
            assert_int_equal(a[i].action, want[seen].action);
            assert_int_equal(a[i].at_us, 500 - 100 * (int64_t)seen);
            assert_int_equal(a[i].key_len, 1);
            if (want[seen].before)
                assert_string_equal(a[i].before, want[seen].before);
            else
                assert_null(a[i].before);
            if (want[seen].after)
                assert_string_equal(a[i].after, want[seen].after);
            else
                assert_null(a[i].after);
            quota_audit_free(&a[i]);
        }
    }
    assert_int_equal(seen, 5);
    /* one key's */
    assert_int_equal(quota_db_audit(db, "a", 1, 0, 2, a, &n, &more), QDB_OK);
    assert_int_equal(n, 2);
    assert_true(more);
    assert_string_equal(a[0].actor, "dave");
    assert_string_equal(a[1].actor, "bob");
    int64_t next = a[1].id;
    quota_audit_free(&a[0]);
    quota_audit_free(&a[1]);
    assert_int_equal(quota_db_audit(db, "a", 1, next, 2, a, &n, &more), QDB_OK);
    assert_int_equal(n, 1);
    assert_false(more);
    assert_string_equal(a[0].actor, "alice");
    quota_audit_free(&a[0]);
    quota_db_close(db);
}

static void audit_log_is_append_only(void **state)
{
    (void)state;
    quota_db *db = open_db();
    tenant(&T1, "k", 1, "pro");
    assert_int_equal(put(db, &T1, -1, 1000), QDB_OK);
    quota_db_close(db);
    char err[512];
    assert_int_equal(raw_try("UPDATE audit_log SET actor = 'mallory'", err, sizeof err, NULL), -1);
    assert_non_null(strstr(err, "audit_log is append-only"));
    assert_int_equal(raw_try("DELETE FROM audit_log", err, sizeof err, NULL), -1);
    assert_non_null(strstr(err, "audit_log is append-only"));
    if (is_pg()) {
        assert_int_equal(raw_try("TRUNCATE audit_log", err, sizeof err, NULL), -1);
        assert_non_null(strstr(err, "audit_log is append-only"));
    }
    assert_int_equal(raw_int("SELECT COUNT(*) FROM audit_log WHERE actor = 'alice'"), 1);
}

/* ---------------------------------------------------------------- keys */

static void hostile_keys_round_trip(void **state)
{
    (void)state;
    quota_db *db = open_db();
    char longest[QUOTA_MAX_KEY_BYTES];
    for (size_t i = 0; i < sizeof longest; i++)
        longest[i] = (char)('!' + i % 90);
    struct {
        const char *k;
        size_t len;
    } keys[] = {
        {"'; DROP TABLE tenants; --", 0},
        {"Robert'); DELETE FROM audit_log; --", 0},
        {"\"double\" 'single' `back`", 0},
        {"back\\slash\\", 0},
        {"unicode \xc3\xbc \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x99\x82", 0},
        {"ctl\x01\x02\x1b[31m\r\n\t", 0},
        {"%s%n%x", 0},
        {" ", 0},
        {"$1 ?1 :a @a", 0},
        {"\x7f", 0},
        {longest, sizeof longest},
        {"\xff\xfe not UTF-8", 0}, /* SQLite only: PostgreSQL's text is UTF-8 */
    };
    size_t n_keys = sizeof keys / sizeof keys[0] - (is_pg() ? 1 : 0);
    for (size_t i = 0; i < n_keys; i++) {
        size_t len = keys[i].len ? keys[i].len : strlen(keys[i].k);
        tenant(&T1, keys[i].k, len, "gold");
        add(&T1, keys[i].k[0] == '\x7f' ? "x" : "default", i, WEIR_UNIT_DAY);
        assert_int_equal(put(db, &T1, 0, 1000), QDB_OK);
        assert_int_equal(quota_db_get(db, keys[i].k, len, &T2), QDB_OK);
        assert_same(&T2, &T1);
        quota_audit a;
        size_t n;
        bool more;
        assert_int_equal(quota_db_audit(db, keys[i].k, len, 0, 1, &a, &n, &more), QDB_OK);
        assert_int_equal(n, 1);
        assert_int_equal(a.key_len, len);
        assert_memory_equal(a.key, keys[i].k, len);
        quota_audit_free(&a);
    }
    size_t n;
    bool more;
    assert_int_equal(quota_db_list(db, "gold", NULL, 0, 8, page, &n, &more), QDB_OK);
    assert_int_equal(raw_int("SELECT COUNT(*) FROM tenants"), (long long)n_keys);
    for (size_t i = 0; i < n_keys; i++) {
        size_t len = keys[i].len ? keys[i].len : strlen(keys[i].k);
        assert_int_equal(quota_db_delete(db, keys[i].k, len, 1, "x", 2000, &T2), QDB_OK);
        assert_memory_equal(T2.key, keys[i].k, len);
    }
    assert_int_equal(raw_int("SELECT COUNT(*) FROM audit_log"), 2 * (long long)n_keys);
    /* not keys */
    char too_long[QUOTA_MAX_KEY_BYTES + 1];
    memset(too_long, 'k', sizeof too_long);
    assert_int_equal(quota_db_get(db, too_long, sizeof too_long, &T2), QDB_ERROR);
    assert_int_equal(quota_db_get(db, "a\0b", 3, &T2), QDB_ERROR);
    assert_int_equal(quota_db_get(db, "", 0, &T2), QDB_ERROR);
    assert_one_line(quota_db_error(db));
    if (is_pg()) { /* text: UTF-8 only, refused before the server is asked */
        tenant(&T1, "\xff\xfe", 2, "gold");
        assert_int_equal(put(db, &T1, -1, 1), QDB_INVALID);
        assert_string_equal(quota_db_error(db),
                            "the tenant key is not valid UTF-8 (the quota database stores text)");
        assert_int_equal(quota_db_get(db, "a\xc3", 2, &T2), QDB_INVALID);
        assert_int_equal(quota_db_delete(db, "\xed\xa0\x80", 3, -1, "x", 1, NULL), QDB_INVALID);
        assert_int_equal(quota_db_list(db, "\xff", NULL, 0, 8, page, &n, &more), QDB_INVALID);
        tenant(&T1, "k", 1, "gold");
        add(&T1, "endpoint:\xc0\xaf", 1, WEIR_UNIT_DAY);
        assert_int_equal(put(db, &T1, -1, 1), QDB_INVALID);
        assert_non_null(strstr(quota_db_error(db), "override 1's descriptor is not valid UTF-8"));
        assert_int_equal(quota_db_get(db, "k", 1, &T2), QDB_NOT_FOUND); /* nothing written */
    }
    quota_db_close(db);
}

static void invalid_records_refused(void **state)
{
    (void)state;
    quota_db *db = open_db();
    tenant(&T1, "k", 1, "");
    assert_int_equal(put(db, &T1, -1, 1), QDB_ERROR);
    assert_string_equal(quota_db_error(db), "the tier is empty");
    tenant(&T1, "k", 1, "pro");
    add(&T1, "default", (uint64_t)UINT32_MAX + 1, WEIR_UNIT_DAY);
    assert_int_equal(put(db, &T1, -1, 1), QDB_ERROR);
    tenant(&T1, "k", 1, "pro");
    add(&T1, "default", 1, WEIR_UNIT_NONE);
    assert_int_equal(put(db, &T1, -1, 1), QDB_ERROR);
    T1.overrides[0].calendar = WEIR_CALENDAR_DAY;
    T1.overrides[0].unit = WEIR_UNIT_DAY;
    assert_int_equal(put(db, &T1, -1, 1), QDB_ERROR);
    T1.overrides[0].unit = WEIR_UNIT_NONE;
    add(&T1, "default", 2, WEIR_UNIT_NONE)->calendar = WEIR_CALENDAR_DAY;
    assert_int_equal(put(db, &T1, -1, 1), QDB_ERROR);
    assert_non_null(strstr(quota_db_error(db), "override 2 repeats"));
    tenant(&T1, "k", 1, "pro");
    add(&T1, "default", 1, WEIR_UNIT_DAY)->algorithm = (weir_algorithm)99;
    assert_int_equal(put(db, &T1, -1, 1), QDB_ERROR);
    tenant(&T1, "k", 1, "pro");
    T1.n_overrides = QUOTA_MAX_OVERRIDES + 1;
    assert_int_equal(put(db, &T1, -1, 1), QDB_ERROR);
    tenant(&T1, "k", 1, "pro");
    bool c, ch;
    assert_int_equal(quota_db_put(db, &T1, -1,
                                  "an actor whose name is much longer than sixty-four "
                                  "bytes, which is the cap",
                                  1, NULL, &c, &ch),
                     QDB_ERROR);
    assert_int_equal(raw_int("SELECT COUNT(*) FROM tenants"), 0);
    quota_db_close(db);
}

/* A name weir does not know, written by hand, is an error naming it. */
static void unknown_names_in_the_database(void **state)
{
    (void)state;
    quota_db *db = open_db();
    tenant(&T1, "k\n\x01", 3, "pro");
    add(&T1, "default", 1, WEIR_UNIT_DAY);
    assert_int_equal(put(db, &T1, -1, 1), QDB_OK);
    raw_exec("UPDATE quota_overrides SET algorithm = 'bogus\x02'");
    assert_int_equal(quota_db_get(db, "k\n\x01", 3, &T2), QDB_ERROR);
    const char *err = quota_db_error(db);
    assert_one_line(err);
    assert_non_null(strstr(err, "unknown algorithm \"bogus\\x02\""));
    assert_non_null(strstr(err, "\"k\\x0a\\x01\""));
    raw_exec("UPDATE quota_overrides SET algorithm = NULL, time_zone = 'Mars/Olympus'");
    assert_int_equal(quota_db_get(db, "k\n\x01", 3, &T2), QDB_OK);
    assert_string_equal(T2.overrides[0].time_zone, "Mars/Olympus");
    quota_db_close(db);
}

/* ---------------------------------------------------------------- load */

typedef struct loaded {
    size_t tenants, overrides, stop_after;
} loaded;

static bool count_tenant(void *arg, const quota_tenant *t)
{
    loaded *l = arg;
    l->tenants++;
    l->overrides += t->n_overrides;
    return l->stop_after == 0 || l->tenants < l->stop_after;
}

static void load_every_record(void **state)
{
    (void)state;
    quota_db *db = open_db();
    for (int i = 0; i < 10; i++) {
        char key[8];
        snprintf(key, sizeof key, "t%d", i);
        tenant(&T1, key, strlen(key), "pro");
        for (int j = 0; j < i; j++) {
            char d[16];
            snprintf(d, sizeof d, "path:/%d", j);
            add(&T1, d, (uint64_t)j, WEIR_UNIT_SECOND);
        }
        assert_int_equal(put(db, &T1, 0, 1), QDB_OK);
    }
    loaded l = {0};
    assert_int_equal(quota_db_load(db, count_tenant, &l), QDB_OK);
    assert_int_equal(l.tenants, 10);
    assert_int_equal(l.overrides, 45);
    loaded stop = {.stop_after = 3};
    assert_int_equal(quota_db_load(db, count_tenant, &stop), QDB_ERROR);
    assert_int_equal(stop.tenants, 3);
    /* the handle still works after a stopped load */
    assert_int_equal(quota_db_get(db, "t3", 2, &T2), QDB_OK);
    assert_int_equal(T2.n_overrides, 3);
    quota_db_close(db);
}

static void load_100k_tenants(void **state)
{
    (void)state;
    quota_db *db = open_db();
    if (is_pg()) {
        raw_exec("INSERT INTO tenants SELECT 'tenant-' || lpad(i::text, 6, '0'), "
                 "CASE WHEN i % 3 = 0 THEN 'free' ELSE 'pro' END, NULL, NULL, 1, now(), now() "
                 "FROM generate_series(0, 99999) i");
        raw_exec("INSERT INTO quota_overrides SELECT api_key, 0, 'default', 100, 'minute', NULL, "
                 "NULL, NULL, now(), now() FROM tenants");
        raw_exec("INSERT INTO quota_overrides SELECT api_key, 1, 'path:/x', 10, NULL, 'day', "
                 "'Europe/Paris', 'gcra', now(), now() FROM tenants WHERE tier = 'pro'");
    } else {
        raw_exec("WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i < 99999) "
                 "INSERT INTO tenants SELECT printf('tenant-%06d', i), CASE WHEN i % 3 = 0 THEN "
                 "'free' ELSE 'pro' END, NULL, NULL, 1, 0, 0 FROM c");
        raw_exec("INSERT INTO quota_overrides SELECT api_key, 0, 'default', 100, 'minute', NULL, "
                 "NULL, NULL, 0, 0 FROM tenants");
        raw_exec("INSERT INTO quota_overrides SELECT api_key, 1, 'path:/x', 10, NULL, 'day', "
                 "'Europe/Paris', 'gcra', 0, 0 FROM tenants WHERE tier = 'pro'");
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    loaded l = {0};
    assert_int_equal(quota_db_load(db, count_tenant, &l), QDB_OK);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    printf("load: %zu tenants, %zu overrides in %.0f ms (%s)\n", l.tenants, l.overrides, ms,
           quota_db_kind(db));
    assert_int_equal(l.tenants, 100000);
    assert_int_equal(l.overrides, 100000 + 66666);
    assert_true(ms < 30000);
    quota_db_close(db);
}

/* ---------------------------------------------------------------- changes */

static void second_handle_sees_changes(void **state)
{
    (void)state;
    quota_db *a = open_db(), *b = open_db();
    assert_false(changed_within(a, 100));
    assert_false(changed_within(b, 100));
    tenant(&T1, "k", 1, "pro");
    assert_int_equal(put(b, &T1, -1, 1000), QDB_OK);
    assert_true(changed_within(a, 5000));
    assert_false(quota_db_changed(a));
    assert_true(changed_within(b, 5000)); /* its own change too */
    assert_false(changed_within(a, 200)); /* nothing happened */
    assert_false(changed_within(b, 200));
    assert_int_equal(put(b, &T1, -1, 2000), QDB_OK); /* the same record: no change */
    assert_false(changed_within(a, 300));
    assert_int_equal(quota_db_delete(b, "k", 1, -1, "bob", 3000, NULL), QDB_OK);
    assert_true(changed_within(a, 5000));
    if (is_pg()) {
        assert_true(quota_db_fd(a) >= 0);
    } else {
        assert_int_equal(quota_db_fd(a), -1);
    }
    quota_db_close(a);
    quota_db_close(b);
}

/* SQLite: a file another connection holds locked past the timeout. */
static void sqlite_busy_is_unavailable(void **state)
{
    (void)state;
    if (is_pg())
        skip();
    quota_db *db = open_timeout(200);
    sqlite3 *other;
    assert_int_equal(sqlite3_open(url + strlen("sqlite://"), &other), SQLITE_OK);
    assert_int_equal(sqlite3_exec(other, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    tenant(&T1, "k", 1, "pro");
    assert_int_equal(put(db, &T1, -1, 1), QDB_UNAVAILABLE);
    assert_int_equal(quota_db_get(db, "k", 1, &T2), QDB_NOT_FOUND); /* WAL: reads go on */
    assert_int_equal(sqlite3_exec(other, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(other);
    assert_int_equal(put(db, &T1, -1, 1), QDB_OK);
    quota_db_close(db);
}

/* PostgreSQL: a connection the server dropped comes back, and changed()
 * says so (changes may have been missed). */
static void pg_connection_comes_back(void **state)
{
    (void)state;
    if (!is_pg())
        skip();
    quota_db *db = open_db();
    static const char kill[] = "SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity "
                               "WHERE application_name = 'weir' AND pid <> pg_backend_pid()";
    assert_int_equal(raw_int(kill), 1);
    sleep_ms(100);
    assert_int_equal(quota_db_get(db, "k", 1, &T2), QDB_NOT_FOUND); /* after a reconnection */
    assert_true(quota_db_changed(db));
    assert_false(quota_db_changed(db));
    sleep_ms(1100); /* reconnections are a second apart */
    assert_int_equal(raw_int(kill), 1);
    assert_true(changed_within(db, 3000));
    tenant(&T1, "k", 1, "pro");
    assert_int_equal(put(db, &T1, -1, 1), QDB_OK);
    quota_db_close(db);
}

typedef struct racer {
    quota_db *db;
    int64_t if_match;
    quota_db_status st;
    bool created;
} racer;

static void *race_put(void *arg)
{
    racer *r = arg;
    static quota_tenant t, stored;
    tenant(&t, "race", 4, "pro");
    bool changed;
    r->st = quota_db_put(r->db, &t, r->if_match, "racer", 5, &stored, &r->created, &changed);
    return NULL;
}

/* PostgreSQL: a create that meets a concurrent one's insert is a
 * conflict under If-None-Match, else an update of what the other wrote. */
static void pg_concurrent_create(void **state)
{
    (void)state;
    if (!is_pg())
        skip();
    static const int64_t if_matches[] = {0, -1};
    for (int i = 0; i < 2; i++) {
        quota_db *db = open_db();
        PGconn *other = PQconnectdb(pg_url);
        assert_int_equal(PQstatus(other), CONNECTION_OK);
        PQclear(PQexec(other, "DELETE FROM tenants"));
        PQclear(PQexec(other, "BEGIN"));
        PGresult *r = PQexec(other, "INSERT INTO tenants VALUES ('race', 'free', NULL, NULL, 1, "
                                    "now(), now())");
        assert_int_equal(PQresultStatus(r), PGRES_COMMAND_OK);
        PQclear(r);
        racer rc = {.db = db, .if_match = if_matches[i]};
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, race_put, &rc), 0);
        sleep_ms(300); /* the put waits on the uncommitted key */
        PQclear(PQexec(other, "COMMIT"));
        pthread_join(th, NULL);
        PQfinish(other);
        if (if_matches[i] == 0) {
            assert_int_equal(rc.st, QDB_CONFLICT);
        } else {
            assert_int_equal(rc.st, QDB_OK);
            assert_false(rc.created);
            assert_int_equal(quota_db_get(db, "race", 4, &T2), QDB_OK);
            assert_int_equal(T2.version, 2);
            assert_string_equal(T2.tier, "pro");
        }
        quota_db_close(db);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(migrations_applied_once, setup),
        cmocka_unit_test_setup(concurrent_opens_migrate_once, setup),
        cmocka_unit_test_setup(newer_schema_refused, setup),
        cmocka_unit_test_setup(open_errors, setup),
        cmocka_unit_test_setup(sqlite_relative_path, setup),
        cmocka_unit_test_setup(roundtrip_every_field, setup),
        cmocka_unit_test_setup(repeated_put_changes_nothing, setup),
        cmocka_unit_test_setup(if_match, setup),
        cmocka_unit_test_setup(delete_records, setup),
        cmocka_unit_test_setup(list_pages_by_tier, setup),
        cmocka_unit_test_setup(audit_pages_newest_first, setup),
        cmocka_unit_test_setup(audit_log_is_append_only, setup),
        cmocka_unit_test_setup(hostile_keys_round_trip, setup),
        cmocka_unit_test_setup(invalid_records_refused, setup),
        cmocka_unit_test_setup(unknown_names_in_the_database, setup),
        cmocka_unit_test_setup(load_every_record, setup),
        cmocka_unit_test_setup(load_100k_tenants, setup),
        cmocka_unit_test_setup(second_handle_sees_changes, setup),
        cmocka_unit_test_setup(sqlite_busy_is_unavailable, setup),
        cmocka_unit_test_setup(pg_connection_comes_back, setup),
        cmocka_unit_test_setup(pg_concurrent_create, setup),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
