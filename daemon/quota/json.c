/*
 * json.c - the PUT body of the quota admin API read into a quota_tenant:
 * parsed by the API's strict JSON parser, then walked member by member
 * against the rules of json.h. Nothing is kept from a refused body: the
 * record is emptied again, its key aside.
 *
 * Checks go object by object: first its members' names (unknown or
 * repeated: 400), then each member in a fixed order (its JSON type: 400;
 * its value: 422), so the same body always gives the same refusal.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "api/decode_internal.h"
#include "json.h"
#include "rfc3339.h"

typedef const weir_json_node jnode;

/* Where the walk is, for the error: the override being read. */
typedef struct pctx {
    const quota_json_checks *checks;
    quota_json_error *err;
    size_t item;
    bool in_item; /* inside overrides[item] */
} pctx;

/* ------------------------------------------------------------ errors */

static bool refuse(pctx *c, int status, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Fills the error for member @name of the object being read ("" or NULL:
 * the object itself) and returns false. */
static bool refuse(pctx *c, int status, const char *name, const char *fmt, ...)
{
    quota_json_error *e = c->err;
    e->status = status;
    if (!name)
        name = "";
    if (c->in_item)
        snprintf(e->field, sizeof(e->field), "overrides[%zu]%s%s", c->item, name[0] ? "." : "",
                 name);
    else
        snprintf(e->field, sizeof(e->field), "%s", name);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->detail, sizeof(e->detail), fmt, ap);
    va_end(ap);
    return false;
}

/* ------------------------------------------------------------ members */

/*
 * Sorts the members of object @obj into @out, one slot per name of
 * @names (NULL when absent or null). An unknown member is refused (a typo
 * must not be dropped silently), and so is a repeated one (parsers that
 * keep the first and the last would read two different quotas).
 */
static bool members(pctx *c, jnode *obj, const char *const *names, size_t n, jnode **out)
{
    bool twice;
    jnode *key = weir_api_dec_members(obj, names, n, out, &twice);
    if (!key)
        return true;
    char q[WEIR_API_QUOTE_MAX + 4];
    weir_api_dec_quote(q, key->s, key->n);
    return refuse(c, 400, q, twice ? "member '%s' given twice" : "unknown member '%s'", q);
}

/* A string member, NUL-terminated into @dst (@max bytes and its NUL). */
static bool get_string(pctx *c, jnode *v, const char *name, char *dst, size_t max)
{
    if (v->type != WEIR_JSON_STRING)
        return refuse(c, 400, name, "%s must be a string", name);
    if (memchr(v->s, '\0', v->n))
        return refuse(c, 422, name, "%s must not contain a NUL byte (\\u0000)", name);
    if (v->n > max)
        return refuse(c, 422, name, "%s is %u bytes long, more than the %zu allowed", name, v->n,
                      max);
    memcpy(dst, v->s, v->n);
    dst[v->n] = '\0';
    return true;
}

/* The value 1 .. @n - 1 whose name (@name_of, NULL for none) is exactly
 * @s; 0 when none is. */
static size_t lookup(const char *s, const char *(*name_of)(size_t), size_t n)
{
    for (size_t i = 1; i < n; i++) {
        const char *name = name_of(i);
        if (name && strcmp(name, s) == 0)
            return i;
    }
    return 0;
}

static const char *unit_name(size_t i)
{
    return weir_rule_unit_name((weir_rule_unit)i);
}

static const char *calendar_name(size_t i)
{
    return quota_calendar_name((weir_calendar)i);
}

static const char *algorithm_name(size_t i)
{
    return weir_algorithm_name((weir_algorithm)i);
}

const char *quota_calendar_name(weir_calendar c)
{
    switch (c) {
    case WEIR_CALENDAR_DAY:
        return "day";
    case WEIR_CALENDAR_MONTH:
        return "month";
    case WEIR_CALENDAR_YEAR:
        return "year";
    case WEIR_CALENDAR_NONE:
        break;
    }
    return NULL;
}

/* ------------------------------------------------------------ values */

/* [A-Za-z0-9_.-]: a tier's bytes. */
static bool tier_byte(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '_' || ch == '.' || ch == '-';
}

static bool get_tier(pctx *c, jnode *v, char *tier)
{
    if (!v)
        return refuse(c, 400, "tier", "tier is required");
    if (!get_string(c, v, "tier", tier, QUOTA_MAX_TIER_BYTES))
        return false;
    if (!tier[0])
        return refuse(c, 422, "tier", "tier must not be empty");
    for (const char *p = tier; *p; p++) {
        if (!tier_byte(*p))
            return refuse(c, 422, "tier", "tier may hold only letters, digits, '_', '.' and '-'");
    }
    const quota_json_checks *k = c->checks;
    if (k && k->tier_known && !k->tier_known(k->arg, tier))
        return refuse(c, 422, "tier", "unknown tier '%s'", tier);
    return true;
}

/* "default", or "key:value" with neither side empty. */
static bool check_descriptor(pctx *c, const char *d)
{
    if (strcmp(d, "default") == 0)
        return true;
    const char *colon = strchr(d, ':');
    if (!colon || colon == d)
        return refuse(c, 422, "descriptor",
                      "descriptor must be \"default\" or \"key:value\" with a non-empty key");
    if (!colon[1])
        return refuse(c, 422, "descriptor",
                      "descriptor \"key:value\" needs a value after the ':' (an empty value "
                      "matches nothing a client sends)");
    return true;
}

/* An integer 0 .. UINT32_MAX as JSON writes one: digits only (a '-' only
 * for -0). Fractions and exponents are refused even when integral (5.0,
 * 1e3): a quota is a count, written as one. The text is read here, not
 * through a double, so 99999999999999999999 cannot round into range. */
static bool get_requests(pctx *c, jnode *v, uint64_t *out)
{
    static const char name[] = "requests_per_unit";
    if (!v)
        return refuse(c, 400, name, "%s is required", name);
    if (v->type != WEIR_JSON_NUMBER)
        return refuse(c, 400, name, "%s must be a number", name);
    bool negative = v->s[0] == '-';
    uint64_t x = 0;
    if (!v->integer || !weir_api_dec_decimal(v->s + negative, v->n - negative, UINT32_MAX, &x) ||
        (negative && x))
        return refuse(c, 422, name,
                      "%s must be an integer from 0 to 4294967295, without a "
                      "fraction or an exponent",
                      name);
    *out = x;
    return true;
}

/* A name of a table (unit, calendar, algorithm): a string of at most 32
 * bytes found by @name_of. 0 when unknown (the caller says what is
 * known). */
static bool get_name(pctx *c, jnode *v, const char *name, const char *(*name_of)(size_t), size_t n,
                     size_t *out)
{
    char s[33];
    if (v->type != WEIR_JSON_STRING)
        return refuse(c, 400, name, "%s must be a string", name);
    *out = 0;
    if (v->n < sizeof(s) && !memchr(v->s, '\0', v->n)) {
        memcpy(s, v->s, v->n);
        s[v->n] = '\0';
        *out = lookup(s, name_of, n);
    }
    return true;
}

/* An IANA zone name: parts between '/' that start with a letter, then
 * letters, digits, '_', '.', '-' and '+' (Etc/GMT+5). So no absolute
 * path, no empty, "." or ".." part: safe as a path under a zoneinfo
 * directory, whatever the hook does with it. */
static bool zone_name_ok(const char *z)
{
    for (const char *p = z; *p; p++) {
        char ch = *p;
        bool letter = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
        bool part_start = p == z || p[-1] == '/';
        if (part_start ? !letter : !(tier_byte(ch) || ch == '+' || ch == '/'))
            return false;
    }
    return z[strlen(z) - 1] != '/';
}

static bool get_time_zone(pctx *c, jnode *v, char *tz)
{
    if (!get_string(c, v, "time_zone", tz, QUOTA_MAX_TZ_BYTES))
        return false;
    if (!tz[0])
        return refuse(c, 422, "time_zone",
                      "time_zone must not be empty (leave it out for the calendar of UTC)");
    char q[WEIR_API_QUOTE_MAX + 4];
    if (!zone_name_ok(tz))
        return refuse(c, 422, "time_zone",
                      "time_zone '%s' is not an IANA time zone name such as America/New_York",
                      weir_api_dec_quote(q, tz, strlen(tz)));
    const quota_json_checks *k = c->checks;
    if (k && k->time_zone_known && !k->time_zone_known(k->arg, tz))
        return refuse(c, 422, "time_zone", "unknown time zone '%s'",
                      weir_api_dec_quote(q, tz, strlen(tz)));
    return true;
}

/* The window of an override: unit or calendar, exactly one. */
static bool get_window(pctx *c, jnode *unit, jnode *calendar, quota_override *o)
{
    size_t u = 0, cal = 0;
    if (!unit && !calendar)
        return refuse(c, 400, "unit", "unit (or calendar) is required");
    if (unit && !get_name(c, unit, "unit", unit_name, WEIR_UNIT_WEEK + 1, &u))
        return false;
    if (calendar && !get_name(c, calendar, "calendar", calendar_name, WEIR_CALENDAR_YEAR + 1, &cal))
        return false;
    if (unit && !u)
        return refuse(c, 422, "unit",
                      "unit must be one of second, minute, hour, day, week, month, year");
    if (calendar && !cal)
        return refuse(c, 422, "calendar", "calendar must be one of day, month, year");
    if (unit && calendar)
        return refuse(c, 422, "calendar",
                      "give unit (a sliding length of time) or calendar (a period of the "
                      "calendar), not both");
    o->unit = (weir_rule_unit)u;
    o->calendar = (weir_calendar)cal;
    return true;
}

static bool get_algorithm(pctx *c, jnode *v, const quota_override *o, weir_algorithm *out)
{
    static const char name[] = "algorithm";
    size_t a = 0;
    if (!get_name(c, v, name, algorithm_name, WEIR_ALGORITHM_COUNT + 1, &a))
        return false;
    if (a == WEIR_ALGO_CONCURRENCY)
        return refuse(c, 422, name,
                      "concurrency limits requests in flight (leases), while a "
                      "quota is a rate of requests per unit");
    if (a == WEIR_ALGO_LEAKY_SHAPER)
        return refuse(c, 422, name,
                      "leaky_bucket_shaper delays requests in a queue, while a "
                      "quota is a rate that admits or refuses them");
    if (!a)
        return refuse(c, 422, name,
                      "algorithm must be one of token_bucket, gcra, leaky_bucket, fixed_window, "
                      "sliding_window_log, sliding_window_counter");
    if (o->calendar != WEIR_CALENDAR_NONE && a != WEIR_ALGO_FIXED_WINDOW)
        return refuse(c, 422, name,
                      "a calendar period is counted by fixed_window only (leave algorithm out)");
    *out = (weir_algorithm)a;
    return true;
}

/* ------------------------------------------------------------ objects */

static bool get_override(pctx *c, jnode *obj, quota_override *o)
{
    enum { DESCRIPTOR, REQUESTS, UNIT, CALENDAR, TIME_ZONE, ALGORITHM, N };
    static const char *const names[N] = {"descriptor", "requests_per_unit", "unit",
                                         "calendar",   "time_zone",         "algorithm"};
    jnode *f[N] = {0};
    memset(o, 0, sizeof(*o));
    if (obj->type != WEIR_JSON_OBJECT)
        return refuse(c, 400, NULL, "an override must be an object");
    if (!members(c, obj, names, N, f))
        return false;
    if (!f[DESCRIPTOR])
        return refuse(c, 400, "descriptor", "descriptor is required");
    if (!get_string(c, f[DESCRIPTOR], "descriptor", o->descriptor, QUOTA_MAX_DESCRIPTOR_BYTES) ||
        !check_descriptor(c, o->descriptor) ||
        !get_requests(c, f[REQUESTS], &o->requests_per_unit) ||
        !get_window(c, f[UNIT], f[CALENDAR], o))
        return false;
    if (f[TIME_ZONE] && o->calendar == WEIR_CALENDAR_NONE)
        return refuse(c, 422, "time_zone",
                      "time_zone applies to a calendar period only (a unit is the same length "
                      "everywhere)");
    if (f[TIME_ZONE] && !get_time_zone(c, f[TIME_ZONE], o->time_zone))
        return false;
    return !f[ALGORITHM] || get_algorithm(c, f[ALGORITHM], o, &o->algorithm);
}

/* Whether @a and @b set the same window: the same unit, or the same
 * calendar period (in whatever zone: one descriptor has one month). */
static bool same_window(const quota_override *a, const quota_override *b)
{
    if (a->calendar != WEIR_CALENDAR_NONE || b->calendar != WEIR_CALENDAR_NONE)
        return a->calendar == b->calendar;
    return a->unit == b->unit;
}

static bool get_overrides(pctx *c, jnode *v, quota_tenant *t)
{
    if (!v)
        return true;
    if (v->type != WEIR_JSON_ARRAY)
        return refuse(c, 400, "overrides", "overrides must be an array");
    if (v->n > QUOTA_MAX_OVERRIDES)
        return refuse(c, 422, "overrides", "%u overrides, more than the %u a tenant may have", v->n,
                      QUOTA_MAX_OVERRIDES);
    jnode *item = v + 1;
    c->in_item = true;
    for (c->item = 0; c->item < v->n; c->item++, item = weir_json_next(item)) {
        quota_override *o = &t->overrides[c->item];
        if (!get_override(c, item, o))
            return false;
        t->n_overrides = c->item + 1;
        for (size_t i = 0; i < c->item; i++) {
            const quota_override *p = &t->overrides[i];
            if (strcmp(p->descriptor, o->descriptor) == 0 && same_window(p, o)) {
                const char *w =
                    o->calendar ? quota_calendar_name(o->calendar) : weir_rule_unit_name(o->unit);
                return refuse(c, 422, "descriptor",
                              "overrides[%zu] already sets the %s limit of this descriptor", i, w);
            }
        }
    }
    c->in_item = false;
    return true;
}

static bool get_time(pctx *c, jnode *v, const char *name, int64_t *us)
{
    *us = QUOTA_TIME_NONE;
    if (!v)
        return true;
    if (v->type != WEIR_JSON_STRING)
        return refuse(c, 400, name, "%s must be a string or null", name);
    if (!quota_time_parse(v->s, v->n, us))
        return refuse(c, 422, name,
                      "%s must be an RFC 3339 timestamp from 1970 to 9999 such as "
                      "2025-02-01T00:00:00Z or 2025-02-01T05:30:00.25+05:30",
                      name);
    return true;
}

static bool get_tenant(pctx *c, jnode *root, quota_tenant *t)
{
    enum { TIER, OVERRIDES, EFFECTIVE_AT, EXPIRES_AT, N };
    static const char *const names[N] = {"tier", "overrides", "effective_at", "expires_at"};
    jnode *f[N] = {0};
    if (root->type != WEIR_JSON_OBJECT)
        return refuse(c, 400, NULL, "the body must be a JSON object");
    if (!members(c, root, names, N, f) || !get_tier(c, f[TIER], t->tier) ||
        !get_overrides(c, f[OVERRIDES], t) ||
        !get_time(c, f[EFFECTIVE_AT], "effective_at", &t->effective_at_us) ||
        !get_time(c, f[EXPIRES_AT], "expires_at", &t->expires_at_us))
        return false;
    if (t->effective_at_us != QUOTA_TIME_NONE && t->expires_at_us != QUOTA_TIME_NONE &&
        t->expires_at_us <= t->effective_at_us)
        return refuse(c, 422, "expires_at", "expires_at must be after effective_at");
    return true;
}

/* ------------------------------------------------------------ the body */

/* Everything but the key, as a record that says nothing. */
static void empty(quota_tenant *t)
{
    t->tier[0] = '\0';
    t->effective_at_us = t->expires_at_us = QUOTA_TIME_NONE;
    t->created_at_us = t->updated_at_us = QUOTA_TIME_NONE;
    t->version = 0;
    t->n_overrides = 0;
}

static bool malformed(pctx *c, const char *body, const weir_json_error *je)
{
    unsigned line, column;
    weir_json_where(body, je->end, &line, &column);
    char q[WEIR_API_QUOTE_MAX + 4];
    if (je->near_len == 0)
        return refuse(c, 400, NULL, "malformed JSON at line %u, column %u: %s near end of file",
                      line, column, je->reason);
    return refuse(c, 400, NULL, "malformed JSON at line %u, column %u: %s near '%s'", line, column,
                  je->reason, weir_api_dec_quote(q, je->near, je->near_len));
}

bool quota_json_parse_put(weir_json *parser, const char *body, size_t len,
                          const quota_json_checks *checks, quota_tenant *t, quota_json_error *err)
{
    pctx c = {.checks = checks, .err = err};
    err->status = 0;
    err->field[0] = err->detail[0] = '\0';
    empty(t);
    weir_json_error je;
    switch (weir_json_parse(parser, body, len, WEIR_JSON_ANY_TOP, &je)) {
    case WEIR_JSON_OK:
        break;
    case WEIR_JSON_MALFORMED:
        return malformed(&c, body, &je);
    case WEIR_JSON_NOMEM:
        return refuse(&c, 500, NULL, "out of memory");
    }
    if (get_tenant(&c, parser->nodes, t))
        return true;
    empty(t);
    return false;
}
