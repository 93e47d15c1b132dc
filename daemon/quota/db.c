/*
 * db.c - the quota database's interface (db.h) over its two engines: the
 * URL picks SQLite (db_sqlite.c) or PostgreSQL (db_pg.c); everything that
 * does not depend on the engine is here: the input's checks, a change's
 * read-compare-write and its audit entry, paging, and the migrations'
 * order of application.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/utf8.h"
#include "quota/db_internal.h"

#define DEFAULT_TIMEOUT_MS 5000u
#define MAX_PAGE 1000u

void qdb_init(quota_db *db, const qdb_ops *ops, const quota_db_options *o)
{
    db->ops = ops;
    db->render = o->render;
    db->timeout_ms = o->timeout_ms ? o->timeout_ms : DEFAULT_TIMEOUT_MS;
    db->err[0] = '\0';
}

static bool has_prefix(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

quota_db *quota_db_open(const quota_db_options *o, char *err, size_t err_cap)
{
    if (!o || !o->url || !*o->url) {
        qdb_format(err, err_cap, "no --quota-db URL");
        return NULL;
    }
    if (has_prefix(o->url, "sqlite://"))
        return qdb_sqlite_open(o, o->url + strlen("sqlite://"), err, err_cap);
    if (has_prefix(o->url, "postgres://") || has_prefix(o->url, "postgresql://"))
        return qdb_pg_open(o, o->url, err, err_cap);
    /* the scheme only: the rest may hold a password */
    const char *colon = strstr(o->url, "://");
    char scheme[48];
    qdb_quote(scheme, sizeof scheme, o->url, colon ? (size_t)(colon - o->url) : strlen(o->url));
    qdb_format(err, err_cap,
               "unknown --quota-db scheme %s (sqlite:///path, sqlite://relative/path, "
               "postgres://...)",
               scheme);
    return NULL;
}

void quota_db_close(quota_db *db)
{
    if (db)
        db->ops->close(db);
}

const char *quota_db_kind(const quota_db *db)
{
    return db->ops->kind;
}

const char *quota_db_error(const quota_db *db)
{
    return db->err;
}

bool quota_db_changed(quota_db *db)
{
    return db->ops->changed(db);
}

bool quota_db_lost(const quota_db *db)
{
    return db->ops->lost && db->ops->lost(db);
}

int quota_db_fd(const quota_db *db)
{
    return db->ops->fd(db);
}

quota_db_status qdb_migrate(quota_db *db, const qdb_migration *m, size_t n)
{
    int known = n ? m[n - 1].version : 0;
    for (;;) {
        int have = 0;
        quota_db_status st = db->ops->migrate_begin(db, &have);
        if (st != QDB_OK)
            return st;
        if (have > known) {
            db->ops->rollback(db);
            qdb_errorf(db,
                       "the quota database's schema is version %d, newer than this weir "
                       "knows (%d): run a newer weir",
                       have, known);
            return QDB_ERROR;
        }
        size_t i = 0;
        while (i < n && m[i].version <= have)
            i++;
        if (i == n) {
            db->ops->rollback(db);
            return QDB_OK;
        }
        st = db->ops->migrate_apply(db, &m[i]);
        if (st == QDB_OK)
            st = db->ops->commit(db, NULL, 0);
        if (st != QDB_OK) {
            db->ops->rollback(db);
            char why[QDB_ERR_CAP];
            memcpy(why, db->err, sizeof why);
            qdb_errorf(db, "quota database migration %s: %s", m[i].name, why);
            return st;
        }
    }
}

/* ---------------------------------------------------------------- checks */

static quota_db_status invalid(quota_db *db, const char *what)
{
    qdb_errorf(db, "%s", what);
    return QDB_ERROR;
}

/* Text that an engine storing text only (PostgreSQL) would fail on at
 * the server ("invalid byte sequence"): refused here, saying why. */
static quota_db_status check_utf8(quota_db *db, const char *field, const char *s, size_t n)
{
    if (!db->ops->utf8_only || weir_utf8_valid(s, n))
        return QDB_OK;
    qdb_errorf(db, "%s is not valid UTF-8 (the quota database stores text)", field);
    return QDB_INVALID;
}

/* @key (@len bytes) into @buf, NUL-terminated, when it is a key */
static quota_db_status check_key(quota_db *db, const char *key, size_t len,
                                 char buf[QUOTA_MAX_KEY_BYTES + 1])
{
    if (!key || len == 0)
        return invalid(db, "the tenant key is empty");
    if (len > QUOTA_MAX_KEY_BYTES)
        return invalid(db, "the tenant key is longer than 256 bytes");
    if (memchr(key, '\0', len))
        return invalid(db, "the tenant key holds a NUL byte");
    quota_db_status st = check_utf8(db, "the tenant key", key, len);
    if (st != QDB_OK)
        return st;
    memcpy(buf, key, len);
    buf[len] = '\0';
    return QDB_OK;
}

/* A NUL-terminated field of @cap bytes at most, non-empty unless
 * @empty_ok, that the engine can store. */
static quota_db_status check_text(quota_db *db, const char *field, const char *s, size_t cap,
                                  bool empty_ok)
{
    size_t n = strnlen(s, cap + 1);
    if (n > cap)
        qdb_errorf(db, "%s is longer than %zu bytes", field, cap);
    else if (n == 0 && !empty_ok)
        qdb_errorf(db, "%s is empty", field);
    else
        return check_utf8(db, field, s, n);
    return QDB_ERROR;
}

static bool same_window(const quota_override *a, const quota_override *b)
{
    return strcmp(a->descriptor, b->descriptor) == 0 && a->unit == b->unit &&
           a->calendar == b->calendar;
}

static quota_db_status check_override(quota_db *db, const quota_tenant *t, size_t i)
{
    const quota_override *o = &t->overrides[i];
    char field[48];
    snprintf(field, sizeof field, "override %zu's descriptor", i + 1);
    quota_db_status st = check_text(db, field, o->descriptor, QUOTA_MAX_DESCRIPTOR_BYTES, false);
    if (st != QDB_OK)
        return st;
    snprintf(field, sizeof field, "override %zu's time zone", i + 1);
    if ((st = check_text(db, field, o->time_zone, QUOTA_MAX_TZ_BYTES, true)) != QDB_OK)
        return st;
    const char *what = NULL;
    if (o->requests_per_unit > UINT32_MAX)
        what = "requests_per_unit is past 4294967295";
    else if (o->unit != WEIR_UNIT_NONE && !qdb_unit_name(o->unit))
        what = "has an unknown unit";
    else if (o->calendar != WEIR_CALENDAR_NONE && !qdb_calendar_name(o->calendar))
        what = "has an unknown calendar";
    else if ((o->unit == WEIR_UNIT_NONE) == (o->calendar == WEIR_CALENDAR_NONE))
        what = "needs a unit or a calendar, not both";
    else if (o->algorithm != 0 && !qdb_algorithm_name(o->algorithm))
        what = "has an unknown algorithm";
    for (size_t j = 0; j < i && !what; j++) {
        if (same_window(o, &t->overrides[j]))
            what = "repeats an earlier override's descriptor and window";
    }
    if (what) {
        qdb_errorf(db, "override %zu %s", i + 1, what);
        return QDB_ERROR;
    }
    return QDB_OK;
}

static quota_db_status check_tenant(quota_db *db, const quota_tenant *t,
                                    char key[QUOTA_MAX_KEY_BYTES + 1])
{
    quota_db_status st = check_key(db, t->key, t->key_len, key);
    if (st != QDB_OK)
        return st;
    if ((st = check_text(db, "the tier", t->tier, QUOTA_MAX_TIER_BYTES, false)) != QDB_OK)
        return st;
    if (t->n_overrides > QUOTA_MAX_OVERRIDES)
        return invalid(db, "a tenant has 64 overrides at most");
    for (size_t i = 0; i < t->n_overrides; i++) {
        if ((st = check_override(db, t, i)) != QDB_OK)
            return st;
    }
    return QDB_OK;
}

static quota_db_status check_limit(quota_db *db, size_t limit)
{
    return limit >= 1 && limit <= MAX_PAGE ? QDB_OK : invalid(db, "a page holds 1 to 1000");
}

/* Whether @a and @b say the same: tier, times and overrides in order. */
static bool same_record(const quota_tenant *a, const quota_tenant *b)
{
    if (strcmp(a->tier, b->tier) != 0 || a->effective_at_us != b->effective_at_us ||
        a->expires_at_us != b->expires_at_us || a->n_overrides != b->n_overrides)
        return false;
    for (size_t i = 0; i < a->n_overrides; i++) {
        const quota_override *x = &a->overrides[i], *y = &b->overrides[i];
        if (!same_window(x, y) || x->requests_per_unit != y->requests_per_unit ||
            strcmp(x->time_zone, y->time_zone) != 0 || x->algorithm != y->algorithm)
            return false;
    }
    return true;
}

/* ---------------------------------------------------------------- reads */

static bool count_one(void *arg, const quota_tenant *t)
{
    (void)t;
    ++*(size_t *)arg;
    return true;
}

/* The record of @key into @out (a change's when @lock). */
static quota_db_status read_record(quota_db *db, const char *key, size_t len, bool lock,
                                   quota_tenant *out)
{
    size_t found = 0;
    qdb_sink sink = {.each = count_one, .arg = &found, .cur = out};
    quota_db_status st = db->ops->read(db, key, len, lock, &sink);
    if (st == QDB_OK)
        st = qdb_sink_end(db, &sink);
    if (st == QDB_OK && found == 0) {
        qdb_errorf(db, "no such tenant");
        st = QDB_NOT_FOUND;
    }
    return st;
}

quota_db_status quota_db_get(quota_db *db, const char *key, size_t key_len, quota_tenant *out)
{
    char k[QUOTA_MAX_KEY_BYTES + 1];
    quota_db_status st = check_key(db, key, key_len, k);
    return st == QDB_OK ? read_record(db, k, key_len, false, out) : st;
}

typedef struct list_state {
    quota_tenant *out;
    size_t limit, n;
    bool more;
} list_state;

static bool list_one(void *arg, const quota_tenant *t)
{
    list_state *ls = arg;
    if (ls->n == ls->limit)
        ls->more = true;
    else
        ls->out[ls->n++] = *t;
    return true;
}

quota_db_status quota_db_list(quota_db *db, const char *tier, const char *after, size_t after_len,
                              size_t limit, quota_tenant *out, size_t *n, bool *more)
{
    list_state ls = {.out = out, .limit = limit};
    char a[QUOTA_MAX_KEY_BYTES + 1] = "";
    quota_db_status st = check_limit(db, limit);
    if (st == QDB_OK && tier)
        st = check_text(db, "the tier", tier, QUOTA_MAX_TIER_BYTES, false);
    if (st == QDB_OK && after && after_len > 0)
        st = check_key(db, after, after_len, a);
    else
        after_len = 0;
    qdb_sink sink = {.each = list_one, .arg = &ls, .cur = malloc(sizeof(quota_tenant))};
    if (st == QDB_OK && !sink.cur)
        st = invalid(db, "out of memory");
    if (st == QDB_OK)
        st = db->ops->list(db, tier, a, after_len, limit + 1, &sink);
    if (st == QDB_OK)
        st = qdb_sink_end(db, &sink);
    free(sink.cur);
    *n = st == QDB_OK ? ls.n : 0;
    *more = st == QDB_OK && ls.more;
    return st;
}

quota_db_status quota_db_audit(quota_db *db, const char *key, size_t key_len, int64_t before_id,
                               size_t limit, quota_audit *out, size_t *n, bool *more)
{
    qdb_page page = {.out = out, .limit = limit};
    char k[QUOTA_MAX_KEY_BYTES + 1];
    quota_db_status st = check_limit(db, limit);
    if (st == QDB_OK && key)
        st = check_key(db, key, key_len, k);
    if (st == QDB_OK)
        st = db->ops->audit(db, key ? k : NULL, key_len, before_id > 0 ? before_id : INT64_MAX,
                            &page);
    if (st != QDB_OK) {
        for (size_t i = 0; i < page.n; i++)
            quota_audit_free(&out[i]);
        page.n = 0;
    }
    *n = page.n;
    *more = st == QDB_OK && page.more;
    return st;
}

quota_db_status quota_db_load(quota_db *db, bool (*each)(void *arg, const quota_tenant *t),
                              void *arg)
{
    qdb_sink sink = {.each = each, .arg = arg, .cur = malloc(sizeof(quota_tenant))};
    if (!sink.cur)
        return invalid(db, "out of memory");
    quota_db_status st = db->ops->load(db, &sink);
    if (st == QDB_OK)
        st = qdb_sink_end(db, &sink);
    free(sink.cur);
    return st;
}

/* ---------------------------------------------------------------- changes */

static quota_db_status version_conflict(quota_db *db, const quota_tenant *cur, int64_t if_match)
{
    qdb_errorf(db, "the tenant's version is %lld, not %lld", (long long)cur->version,
               (long long)if_match);
    return QDB_CONFLICT;
}

/* Appends the audit entry of a change from @before to @after (either NULL)
 * and commits it. */
static quota_db_status audit_and_commit(quota_db *db, quota_action action, const char *actor,
                                        int64_t now_us, const char *key, size_t key_len,
                                        const quota_tenant *before, const quota_tenant *after)
{
    qdb_entry e = {.at_us = now_us,
                   .actor = actor,
                   .action = qdb_action_name(action),
                   .key = key,
                   .key_len = key_len};
    char *b = before && db->render ? db->render(before) : NULL;
    char *a = after && db->render ? db->render(after) : NULL;
    e.before = b;
    e.after = a;
    quota_db_status st = QDB_OK;
    if (db->render && ((before && !b) || (after && !a)))
        st = invalid(db, "out of memory");
    if (st == QDB_OK)
        st = db->ops->append(db, &e);
    if (st == QDB_OK)
        st = db->ops->commit(db, key, key_len);
    free(b);
    free(a);
    return st;
}

/* One attempt at a put in its own transaction; *retry when an insert met
 * a concurrent one's and the put may be tried again. */
static quota_db_status put_once(quota_db *db, const quota_tenant *t, const char *key,
                                int64_t if_match, const char *actor, int64_t now_us,
                                quota_tenant *cur, quota_tenant *next, bool *created, bool *changed,
                                bool *retry)
{
    quota_db_status st = db->ops->begin(db);
    if (st != QDB_OK)
        return st;
    st = read_record(db, key, t->key_len, true, cur);
    bool exists = st == QDB_OK;
    if (st == QDB_NOT_FOUND)
        st = QDB_OK;
    if (st == QDB_OK && if_match == 0 && exists) {
        qdb_errorf(db, "the tenant exists (version %lld)", (long long)cur->version);
        st = QDB_CONFLICT;
    } else if (st == QDB_OK && if_match > 0 && !exists) {
        qdb_errorf(db, "no such tenant (If-Match %lld)", (long long)if_match);
        st = QDB_CONFLICT;
    } else if (st == QDB_OK && if_match > 0 && cur->version != if_match) {
        st = version_conflict(db, cur, if_match);
    }
    if (st == QDB_OK && exists && same_record(cur, t)) {
        db->ops->rollback(db); /* nothing to write */
        *next = *cur;
        return QDB_OK;
    }
    if (st == QDB_OK) {
        *next = *t;
        next->key[next->key_len] = '\0'; /* an engine may read it as a string */
        next->created_at_us = exists ? cur->created_at_us : now_us;
        next->updated_at_us = now_us;
        next->version = exists ? cur->version + 1 : 1;
        st = db->ops->write(db, next, exists, now_us);
        if (st == QDB_CONFLICT && if_match != 0)
            *retry = true;
        if (st == QDB_CONFLICT)
            qdb_errorf(db, "the tenant was created meanwhile");
    }
    if (st == QDB_OK)
        st = audit_and_commit(db, exists ? QUOTA_ACTION_UPDATE : QUOTA_ACTION_CREATE, actor, now_us,
                              key, t->key_len, exists ? cur : NULL, next);
    if (st != QDB_OK) {
        db->ops->rollback(db);
        return st;
    }
    *created = !exists;
    *changed = true;
    return QDB_OK;
}

quota_db_status quota_db_put(quota_db *db, const quota_tenant *t, int64_t if_match,
                             const char *actor, int64_t now_us, quota_tenant *stored, bool *created,
                             bool *changed)
{
    char key[QUOTA_MAX_KEY_BYTES + 1];
    bool c1 = false, c2 = false;
    created = created ? created : &c1;
    changed = changed ? changed : &c2;
    *created = *changed = false;
    quota_db_status st = check_tenant(db, t, key);
    if (st == QDB_OK)
        st = check_text(db, "the actor", actor ? actor : "", QUOTA_MAX_ACTOR_BYTES, true);
    if (st != QDB_OK)
        return st;
    quota_tenant *cur = malloc(sizeof *cur), *next = malloc(sizeof *next);
    st = cur && next ? QDB_OK : invalid(db, "out of memory");
    /* a second attempt only after an insert lost to a concurrent one: the
     * record exists then, and its row lock orders the two */
    for (int attempt = 0; attempt < 2 && st == QDB_OK; attempt++) {
        bool retry = false;
        st = put_once(db, t, key, if_match, actor ? actor : "", now_us, cur, next, created, changed,
                      &retry);
        if (st == QDB_OK && stored)
            *stored = *next;
        if (!retry)
            break;
        st = attempt == 0 ? QDB_OK : invalid(db, "the tenant changed twice under a put");
    }
    free(cur);
    free(next);
    return st;
}

quota_db_status quota_db_delete(quota_db *db, const char *key, size_t key_len, int64_t if_match,
                                const char *actor, int64_t now_us, quota_tenant *before)
{
    char k[QUOTA_MAX_KEY_BYTES + 1];
    quota_db_status st = check_key(db, key, key_len, k);
    if (st == QDB_OK && if_match == 0)
        st = invalid(db, "a delete's If-Match is a version (or none)");
    if (st == QDB_OK)
        st = check_text(db, "the actor", actor ? actor : "", QUOTA_MAX_ACTOR_BYTES, true);
    quota_tenant *cur = st == QDB_OK ? malloc(sizeof *cur) : NULL;
    if (st == QDB_OK && !cur)
        st = invalid(db, "out of memory");
    if (st == QDB_OK && (st = db->ops->begin(db)) == QDB_OK) {
        st = read_record(db, k, key_len, true, cur);
        if (st == QDB_OK && if_match > 0 && cur->version != if_match)
            st = version_conflict(db, cur, if_match);
        if (st == QDB_OK)
            st = db->ops->remove(db, k, key_len);
        if (st == QDB_OK)
            st = audit_and_commit(db, QUOTA_ACTION_DELETE, actor ? actor : "", now_us, k, key_len,
                                  cur, NULL);
        if (st != QDB_OK)
            db->ops->rollback(db);
    }
    if (st == QDB_OK && before)
        *before = *cur;
    free(cur);
    return st;
}
