/*
 * json_render.c - tenants, pages of tenants and pages of the audit log
 * written as the quota admin API's JSON, and its problem+json refusals.
 *
 * Written straight into a weir_buf as the API's renderers are (jsonw.h).
 * Every string of a record is escaped with its length (a key may hold any
 * byte) and the fixed-size fields are read only up to their caps, so what
 * comes out is JSON whatever the record holds.
 */
#include <string.h>

#include "api/api.h"
#include "api/jsonw.h"
#include "json.h"
#include "rfc3339.h"

/* Most bytes of one rendered tenant: a key and 64 descriptors of control
 * bytes, each written as 6 (\u0001), are under 300 KB. */
#define TENANT_JSON_MAX ((size_t)1 << 20)

/* A NUL-terminated field of at most @cap bytes (a record read from a
 * database may lack the NUL). */
static void put_field(weir_buf *b, const char *s, size_t cap)
{
    put_str(b, s, strnlen(s, cap));
}

static void put_time(weir_buf *b, int64_t us)
{
    if (us == QUOTA_TIME_NONE) {
        weir_buf_puts(b, "null");
        return;
    }
    char s[QUOTA_TIME_TEXT_MAX];
    put_str(b, s, quota_time_format(us, s));
}

static void render_override(weir_buf *b, const quota_override *o)
{
    obj r = obj_open(b);
    obj_key(&r, "descriptor");
    put_field(b, o->descriptor, sizeof(o->descriptor));
    obj_key(&r, "requests_per_unit");
    weir_buf_put_u64(b, o->requests_per_unit);
    const char *calendar = quota_calendar_name(o->calendar);
    if (calendar) {
        obj_key(&r, "calendar");
        put_cstr(b, calendar);
        if (o->time_zone[0]) {
            obj_key(&r, "time_zone");
            put_field(b, o->time_zone, sizeof(o->time_zone));
        }
    } else {
        obj_key(&r, "unit");
        put_cstr(b, weir_rule_unit_name(o->unit)); /* null for none */
    }
    const char *algorithm = o->algorithm ? weir_algorithm_name(o->algorithm) : NULL;
    if (algorithm) {
        obj_key(&r, "algorithm");
        put_cstr(b, algorithm);
    }
    obj_close(&r);
}

void quota_json_render_tenant(weir_buf *b, const quota_tenant *t, const char *tier_default_json)
{
    obj o = obj_open(b);
    obj_key(&o, "api_key");
    put_str(b, t->key, t->key_len < QUOTA_MAX_KEY_BYTES ? t->key_len : QUOTA_MAX_KEY_BYTES);
    obj_key(&o, "tier");
    put_field(b, t->tier, sizeof(t->tier));
    obj_key(&o, "quotas");
    obj q = obj_open(b);
    obj_key(&q, "default");
    weir_buf_puts(b, tier_default_json && tier_default_json[0] ? tier_default_json : "null");
    obj_key(&q, "overrides");
    weir_buf_putc(b, '[');
    size_t n = t->n_overrides < QUOTA_MAX_OVERRIDES ? t->n_overrides : QUOTA_MAX_OVERRIDES;
    for (size_t i = 0; i < n; i++) {
        if (i)
            weir_buf_putc(b, ',');
        render_override(b, &t->overrides[i]);
    }
    weir_buf_putc(b, ']');
    obj_close(&q);
    obj_key(&o, "effective_at");
    put_time(b, t->effective_at_us);
    obj_key(&o, "expires_at");
    put_time(b, t->expires_at_us);
    obj_key(&o, "created_at");
    put_time(b, t->created_at_us);
    obj_key(&o, "updated_at");
    put_time(b, t->updated_at_us);
    obj_key(&o, "version");
    weir_buf_put_i64(b, t->version);
    obj_close(&o);
}

char *quota_json_tenant(const quota_tenant *t)
{
    weir_buf b;
    weir_buf_init(&b, TENANT_JSON_MAX);
    quota_json_render_tenant(&b, t, NULL);
    weir_buf_putc(&b, '\0');
    if (!weir_buf_ok(&b)) {
        weir_buf_free(&b);
        return NULL;
    }
    return b.p; /* the caller's now */
}

/* A page: @open ("{\"quotas\":[" and the like), the @n items written
 * by @item, then "next". */
static void render_page(weir_buf *b, const char *open, size_t n,
                        void (*item)(weir_buf *b, const void *arg, size_t i), const void *arg,
                        const char *next_cursor)
{
    weir_buf_puts(b, open);
    for (size_t i = 0; i < n; i++) {
        if (i)
            weir_buf_putc(b, ',');
        item(b, arg, i);
    }
    weir_buf_puts(b, "],\"next\":");
    put_cstr(b, next_cursor);
    weir_buf_putc(b, '}');
}

static void list_item(weir_buf *b, const void *arg, size_t i)
{
    quota_json_render_tenant(b, (const quota_tenant *)arg + i, NULL);
}

void quota_json_render_list(weir_buf *b, const quota_tenant *ts, size_t n, const char *next_cursor)
{
    render_page(b, "{\"quotas\":[", n, list_item, ts, next_cursor);
}

static const char *action_name(quota_action a)
{
    switch (a) {
    case QUOTA_ACTION_CREATE:
        return "create";
    case QUOTA_ACTION_UPDATE:
        return "update";
    case QUOTA_ACTION_DELETE:
        return "delete";
    }
    return NULL;
}

/* A stored record: embedded as the JSON it is, or as a string when it is
 * not JSON (@j checks it). */
static void put_stored(weir_buf *b, weir_json *j, const char *text)
{
    if (!text) {
        weir_buf_puts(b, "null");
        return;
    }
    size_t n = strlen(text);
    weir_json_error je;
    if (weir_json_parse(j, text, n, WEIR_JSON_ANY_TOP, &je) == WEIR_JSON_OK)
        weir_buf_put(b, text, n);
    else
        put_str(b, text, n);
}

/* The entries of an audit page, and the parser that checks their
 * stored records. */
typedef struct audit_page {
    const quota_audit *a;
    weir_json *j;
} audit_page;

static void audit_item(weir_buf *b, const void *arg, size_t i)
{
    const audit_page *page = arg;
    const quota_audit *a = &page->a[i];
    obj o = obj_open(b);
    obj_key(&o, "id");
    weir_buf_put_i64(b, a->id);
    obj_key(&o, "at");
    put_time(b, a->at_us);
    obj_key(&o, "actor");
    put_field(b, a->actor, sizeof(a->actor));
    obj_key(&o, "action");
    put_cstr(b, action_name(a->action));
    obj_key(&o, "api_key");
    put_str(b, a->key, a->key_len < QUOTA_MAX_KEY_BYTES ? a->key_len : QUOTA_MAX_KEY_BYTES);
    obj_key(&o, "before");
    put_stored(b, page->j, a->before);
    obj_key(&o, "after");
    put_stored(b, page->j, a->after);
    obj_close(&o);
}

void quota_json_render_audit(weir_buf *b, const quota_audit *a, size_t n, const char *next_cursor)
{
    weir_json j;
    weir_json_init(&j);
    audit_page page = {a, &j};
    render_page(b, "{\"entries\":[", n, audit_item, &page, next_cursor);
    weir_json_release(&j);
}

void quota_json_render_problem(weir_buf *b, const quota_json_error *e)
{
    weir_api_render_error_at(b, e->status, e->detail, e->field[0] ? e->field : NULL);
}
