/*
 * db_rows.c - what both engines of the quota database read and write
 * alike: the names stored for the model's enums, rows assembled into
 * records and audit entries (checked: a name weir does not know means the
 * database was edited by hand), and error messages on one escaped line.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "quota/db_internal.h"

/* ---------------------------------------------------------------- errors */

/* @in into @out: one line of printable ASCII. Runs of line breaks and tabs
 * (a library's message over several lines) become one space; any other
 * control or non-ASCII byte becomes \xNN. */
static void one_line(char *out, size_t cap, const char *in)
{
    size_t o = 0;
    bool space = false;
    for (const unsigned char *p = (const unsigned char *)in; *p && o + 5 < cap; p++) {
        if (*p == '\n' || *p == '\r' || *p == '\t') {
            space = o > 0;
            continue;
        }
        if (space) {
            out[o++] = ' ';
            space = false;
        }
        if (*p >= 0x20 && *p < 0x7f)
            out[o++] = (char)*p;
        else
            o += (size_t)snprintf(out + o, cap - o, "\\x%02x", *p);
    }
    out[o] = '\0';
}

static void vformat(char *out, size_t cap, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
static void vformat(char *out, size_t cap, const char *fmt, va_list ap)
{
    char raw[QDB_ERR_CAP * 2];
    vsnprintf(raw, sizeof raw, fmt, ap);
    one_line(out, cap, raw);
}

void qdb_errorf(quota_db *db, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vformat(db->err, sizeof db->err, fmt, ap);
    va_end(ap);
}

void qdb_format(char *out, size_t cap, const char *fmt, ...)
{
    if (!out || cap == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vformat(out, cap, fmt, ap);
    va_end(ap);
}

const char *qdb_quote(char *out, size_t cap, const char *s, size_t n)
{
    size_t o = 0;
    out[o++] = '"';
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (o + 9 >= cap) { /* room for \xNN, "...", the quote and NUL */
            memcpy(out + o, "...", 3);
            o += 3;
            break;
        }
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\')
            out[o++] = (char)c;
        else
            o += (size_t)snprintf(out + o, cap - o, "\\x%02x", c);
    }
    out[o++] = '"';
    out[o] = '\0';
    return out;
}

int64_t qdb_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---------------------------------------------------------------- names */

static const char *const calendar_names[] = {
    [WEIR_CALENDAR_DAY] = "day", [WEIR_CALENDAR_MONTH] = "month", [WEIR_CALENDAR_YEAR] = "year"};
static const char *const action_names[] = {
    [QUOTA_ACTION_CREATE] = "create",
    [QUOTA_ACTION_UPDATE] = "update",
    [QUOTA_ACTION_DELETE] = "delete",
};
#define NAMES_COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

const char *qdb_unit_name(weir_rule_unit unit)
{
    return unit == WEIR_UNIT_NONE ? NULL : weir_rule_unit_name(unit);
}

const char *qdb_calendar_name(weir_calendar cal)
{
    return (int)cal > 0 && (int)cal < NAMES_COUNT(calendar_names) ? calendar_names[cal] : NULL;
}

const char *qdb_algorithm_name(weir_algorithm algo)
{
    return (int)algo == 0 ? NULL : weir_algorithm_name(algo);
}

const char *qdb_action_name(quota_action action)
{
    return (int)action > 0 && (int)action < NAMES_COUNT(action_names) ? action_names[action] : NULL;
}

/* The number 1 .. @count whose @name_of() is @name exactly, 0 when none:
 * the names a column holds are the ones weir writes, compared as such. */
static int number_of(const char *name, int count, const char *(*name_of)(int))
{
    for (int i = 1; i <= count; i++) {
        const char *n = name_of(i);
        if (n && strcmp(n, name) == 0)
            return i;
    }
    return 0;
}

static const char *unit_at(int i)
{
    return qdb_unit_name((weir_rule_unit)i);
}

static const char *calendar_at(int i)
{
    return qdb_calendar_name((weir_calendar)i);
}

static const char *algorithm_at(int i)
{
    return qdb_algorithm_name((weir_algorithm)i);
}

static const char *action_at(int i)
{
    return qdb_action_name((quota_action)i);
}

/* ---------------------------------------------------------------- rows */

/* Copies @s (@n bytes) into @out (room for @cap bytes and a NUL); false
 * when it is longer. */
static bool copy_text(char *out, size_t cap, const char *s, size_t n)
{
    if (n > cap)
        return false;
    memcpy(out, s, n);
    out[n] = '\0';
    return true;
}

/* QDB_ERROR: @what of the record of @key in the database is not one weir
 * can hold. */
static quota_db_status bad_row(quota_db *db, const char *key, size_t key_len, const char *what,
                               const char *value)
{
    char k[96], v[96];
    qdb_quote(k, sizeof k, key, key_len);
    if (value)
        qdb_errorf(db, "the quota database holds %s %s for tenant %s (edited by hand?)", what,
                   qdb_quote(v, sizeof v, value, strlen(value)), k);
    else
        qdb_errorf(db, "the quota database holds %s for tenant %s (edited by hand?)", what, k);
    return QDB_ERROR;
}

/* The columns of QDB_RECORD_COLUMNS and QDB_AUDIT_COLUMNS. */
enum {
    R_KEY,
    R_TIER,
    R_EFFECTIVE,
    R_EXPIRES,
    R_CREATED,
    R_UPDATED,
    R_VERSION,
    R_DESCRIPTOR,
    R_RPU,
    R_UNIT,
    R_CALENDAR,
    R_TZ,
    R_ALGORITHM
};
enum { A_ID, A_AT, A_ACTOR, A_ACTION, A_KEY, A_BEFORE, A_AFTER };

static const char *text_of(const qdb_cols *c, int col)
{
    size_t len;
    return c->text(c->ctx, col, &len);
}

static quota_db_status add_override(quota_db *db, quota_tenant *t, const qdb_cols *c,
                                    const char *descriptor)
{
    if (t->n_overrides == QUOTA_MAX_OVERRIDES)
        return bad_row(db, t->key, t->key_len, "more than 64 overrides", NULL);
    quota_override *o = &t->overrides[t->n_overrides];
    if (!copy_text(o->descriptor, QUOTA_MAX_DESCRIPTOR_BYTES, descriptor, strlen(descriptor)))
        return bad_row(db, t->key, t->key_len, "a descriptor too long", NULL);
    int64_t rpu = c->int64(c->ctx, R_RPU, -1);
    if (rpu < 0 || rpu > (int64_t)UINT32_MAX)
        return bad_row(db, t->key, t->key_len, "a requests_per_unit out of range", NULL);
    o->requests_per_unit = (uint64_t)rpu;
    const char *unit = text_of(c, R_UNIT), *cal = text_of(c, R_CALENDAR);
    const char *tz = text_of(c, R_TZ), *algo = text_of(c, R_ALGORITHM);
    o->unit = unit ? (weir_rule_unit)number_of(unit, WEIR_UNIT_WEEK, unit_at) : WEIR_UNIT_NONE;
    o->calendar =
        cal ? (weir_calendar)number_of(cal, WEIR_CALENDAR_YEAR, calendar_at) : WEIR_CALENDAR_NONE;
    o->algorithm = algo ? (weir_algorithm)number_of(algo, WEIR_ALGORITHM_COUNT, algorithm_at) : 0;
    if (unit && o->unit == WEIR_UNIT_NONE)
        return bad_row(db, t->key, t->key_len, "the unknown unit", unit);
    if (cal && o->calendar == WEIR_CALENDAR_NONE)
        return bad_row(db, t->key, t->key_len, "the unknown calendar", cal);
    if (algo && o->algorithm == 0)
        return bad_row(db, t->key, t->key_len, "the unknown algorithm", algo);
    if ((o->unit == WEIR_UNIT_NONE) == (o->calendar == WEIR_CALENDAR_NONE))
        return bad_row(db, t->key, t->key_len, "an override with no unit or calendar", NULL);
    if (!copy_text(o->time_zone, QUOTA_MAX_TZ_BYTES, tz ? tz : "", tz ? strlen(tz) : 0))
        return bad_row(db, t->key, t->key_len, "a time zone too long", NULL);
    t->n_overrides++;
    return QDB_OK;
}

/* Starts the record of the row @c, key @key (@len bytes). */
static quota_db_status start_record(quota_db *db, quota_tenant *t, const qdb_cols *c,
                                    const char *key, size_t len)
{
    /* field by field: no memset of the ~40 KiB a record (load reads them
     * by the hundred thousand) */
    if (len == 0 || !copy_text(t->key, QUOTA_MAX_KEY_BYTES, key, len))
        return bad_row(db, key, len, "a key too long", NULL);
    t->key_len = len;
    const char *tier = text_of(c, R_TIER);
    if (!tier || !copy_text(t->tier, QUOTA_MAX_TIER_BYTES, tier, strlen(tier)))
        return bad_row(db, key, len, "a tier too long", NULL);
    t->effective_at_us = c->int64(c->ctx, R_EFFECTIVE, QUOTA_TIME_NONE);
    t->expires_at_us = c->int64(c->ctx, R_EXPIRES, QUOTA_TIME_NONE);
    t->created_at_us = c->int64(c->ctx, R_CREATED, 0);
    t->updated_at_us = c->int64(c->ctx, R_UPDATED, 0);
    t->version = c->int64(c->ctx, R_VERSION, 0);
    t->n_overrides = 0;
    return QDB_OK;
}

quota_db_status qdb_sink_row(quota_db *db, qdb_sink *s, const qdb_cols *c)
{
    quota_tenant *t = s->cur;
    size_t len = 0;
    const char *key = c->text(c->ctx, R_KEY, &len);
    if (!key)
        return bad_row(db, "", 0, "a NULL key", NULL);
    if (s->open && (len != t->key_len || memcmp(key, t->key, len) != 0)) {
        quota_db_status st = qdb_sink_end(db, s);
        if (st != QDB_OK)
            return st;
    }
    if (!s->open) {
        quota_db_status st = start_record(db, t, c, key, len);
        if (st != QDB_OK)
            return st;
        s->open = true;
    }
    const char *descriptor = text_of(c, R_DESCRIPTOR);
    return descriptor ? add_override(db, t, c, descriptor) : QDB_OK;
}

quota_db_status qdb_sink_end(quota_db *db, qdb_sink *s)
{
    if (!s->open)
        return QDB_OK;
    s->open = false;
    if (!s->each(s->arg, s->cur)) {
        qdb_errorf(db, "reading the quota database: stopped by the caller");
        return QDB_ERROR;
    }
    return QDB_OK;
}

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

quota_db_status qdb_page_add(quota_db *db, qdb_page *page, const qdb_cols *c)
{
    if (page->n == page->limit) {
        page->more = true;
        return QDB_OK;
    }
    quota_audit *a = &page->out[page->n];
    memset(a, 0, sizeof *a);
    size_t len = 0;
    const char *key = c->text(c->ctx, A_KEY, &len);
    const char *actor = text_of(c, A_ACTOR), *action = text_of(c, A_ACTION);
    a->id = c->int64(c->ctx, A_ID, 0);
    a->at_us = c->int64(c->ctx, A_AT, 0);
    if (!key || len == 0 || !copy_text(a->key, QUOTA_MAX_KEY_BYTES, key, len))
        return bad_row(db, key ? key : "", len, "an audit entry's key too long", NULL);
    a->key_len = len;
    if (!action || !(a->action = (quota_action)number_of(action, QUOTA_ACTION_DELETE, action_at)))
        return bad_row(db, key, len, "the unknown audit action", action ? action : "");
    if (!actor || !copy_text(a->actor, QUOTA_MAX_ACTOR_BYTES, actor, strlen(actor)))
        return bad_row(db, key, len, "an audit actor too long", NULL);
    const char *before = text_of(c, A_BEFORE), *after = text_of(c, A_AFTER);
    a->before = dup_or_null(before);
    a->after = dup_or_null(after);
    page->n++; /* freed by the caller even when a copy failed */
    if ((before && !a->before) || (after && !a->after)) {
        qdb_errorf(db, "out of memory");
        return QDB_ERROR;
    }
    return QDB_OK;
}

void quota_audit_free(quota_audit *a)
{
    if (!a)
        return;
    free(a->before);
    free(a->after);
    a->before = a->after = NULL;
}
