/*
 * fuzz_quota_json.c - fuzzes the quota admin API's codec
 * (daemon/quota): any bytes as a PUT body, an RFC 3339 timestamp, a page
 * cursor and a stored audit record must be accepted or refused cleanly.
 *
 * The first byte steers the caller's hooks (which tiers and time zones
 * exist, derived from the names and that byte) and whether the tier's
 * limits are rendered; the rest is the body. An accepted body must give a
 * record within the rules of json.h (caps, NUL-free strings, one window
 * per override, times in range and in order) that renders as JSON the
 * project's parser reads; a refusal must carry a status, a field and a
 * detail, leave the record empty and render as a JSON problem. The bytes
 * are also a timestamp (accepted: formats back to the same instant), a
 * key cursor and an audit cursor (accepted: encode back to the same
 * text), and an audit record's stored text (the page stays JSON). A
 * broken invariant aborts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "quota/json.h"
#include "quota/rfc3339.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
    if (!ok)
        abort();
}

static weir_json parser, reader;
static weir_buf out;
static quota_tenant t;

static void cleanup(void)
{
    weir_json_release(&parser);
    weir_json_release(&reader);
    weir_buf_free(&out);
}

/* A tier or zone exists by its name's length, steered by the first byte. */
static bool known(void *arg, const char *name)
{
    unsigned steer = *(const unsigned char *)arg;
    return (strlen(name) + steer) % 5 != 0;
}

/* The buffer holds one JSON document; then it is emptied. */
static void check_json(void)
{
    check(weir_buf_ok(&out));
    weir_json_error je;
    check(weir_json_parse(&reader, out.p, out.len, 0, &je) == WEIR_JSON_OK);
    weir_buf_clear(&out);
}

/* A NUL-terminated field of @cap bytes and its NUL, at most @max long. */
static size_t field_len(const char *s, size_t cap, size_t max)
{
    const char *nul = memchr(s, '\0', cap);
    check(nul != NULL);
    size_t n = (size_t)(nul - s);
    check(n <= max);
    return n;
}

static void check_tenant(void)
{
    check(t.key_len == 3 && memcmp(t.key, "k\"\0", 4) == 0);
    size_t tier = field_len(t.tier, sizeof(t.tier), QUOTA_MAX_TIER_BYTES);
    check(tier >= 1);
    check(t.n_overrides <= QUOTA_MAX_OVERRIDES);
    for (size_t i = 0; i < t.n_overrides; i++) {
        const quota_override *o = &t.overrides[i];
        size_t d = field_len(o->descriptor, sizeof(o->descriptor), QUOTA_MAX_DESCRIPTOR_BYTES);
        check(d >= 3);
        check(
            strcmp(o->descriptor, "default") == 0 ||
            (o->descriptor[0] != ':' && strchr(o->descriptor, ':') && o->descriptor[d - 1] != ':'));
        check(o->requests_per_unit <= UINT32_MAX);
        check((o->unit == WEIR_UNIT_NONE) != (o->calendar == WEIR_CALENDAR_NONE));
        size_t tz = field_len(o->time_zone, sizeof(o->time_zone), QUOTA_MAX_TZ_BYTES);
        check(tz == 0 || o->calendar != WEIR_CALENDAR_NONE);
        check(o->algorithm != WEIR_ALGO_CONCURRENCY && o->algorithm != WEIR_ALGO_LEAKY_SHAPER);
        check(o->calendar == WEIR_CALENDAR_NONE || o->algorithm == 0 ||
              o->algorithm == WEIR_ALGO_FIXED_WINDOW);
        for (size_t j = 0; j < i; j++) {
            const quota_override *p = &t.overrides[j];
            check(strcmp(p->descriptor, o->descriptor) != 0 || p->unit != o->unit ||
                  p->calendar != o->calendar);
        }
    }
    check(t.effective_at_us == QUOTA_TIME_NONE || t.effective_at_us >= 0);
    check(t.expires_at_us == QUOTA_TIME_NONE || t.expires_at_us >= 0);
    check(t.effective_at_us == QUOTA_TIME_NONE || t.expires_at_us == QUOTA_TIME_NONE ||
          t.effective_at_us < t.expires_at_us);
}

static void check_refusal(const quota_json_error *e)
{
    check(e->status == 400 || e->status == 422 || e->status == 500);
    check(memchr(e->field, '\0', sizeof(e->field)) != NULL);
    size_t detail = field_len(e->detail, sizeof(e->detail), sizeof(e->detail) - 1);
    check(detail > 0);
    check(t.key_len == 3 && t.tier[0] == '\0' && t.n_overrides == 0);
    check(t.effective_at_us == QUOTA_TIME_NONE && t.expires_at_us == QUOTA_TIME_NONE);
    quota_json_render_problem(&out, e);
    check_json();
}

static void body(const uint8_t *data, size_t size)
{
    unsigned char steer = size ? data[0] : 0;
    const char *text = size ? (const char *)data + 1 : NULL;
    size_t len = size ? size - 1 : 0;
    quota_json_checks checks = {known, known, &steer};
    memcpy(t.key, "k\"\0", 4);
    t.key_len = 3;
    quota_json_error e;
    if (!quota_json_parse_put(&parser, text, len, steer & 0x80 ? NULL : &checks, &t, &e)) {
        check_refusal(&e);
        return;
    }
    check_tenant();
    quota_json_render_tenant(&out, &t, steer & 1 ? "{\"requests_per_unit\":5000}" : NULL);
    check_json();
    char *s = quota_json_tenant(&t);
    check(s != NULL);
    weir_json_error je;
    check(weir_json_parse(&reader, s, strlen(s), 0, &je) == WEIR_JSON_OK);
    quota_json_render_list(&out, &t, 1, steer & 2 ? s : NULL);
    check_json();
    free(s);
}

static void timestamp(const char *s, size_t n)
{
    int64_t us = -1;
    if (!quota_time_parse(s, n, &us)) {
        check(us == -1);
        return;
    }
    check(us >= 0 && us <= INT64_C(253402300799999999));
    char text[QUOTA_TIME_TEXT_MAX];
    size_t len = quota_time_format(us, text);
    int64_t back;
    check(quota_time_parse(text, len, &back) && back == us);
}

static void cursors(const char *s, size_t n)
{
    char key[QUOTA_MAX_KEY_BYTES + 1];
    size_t len;
    if (quota_json_cursor_decode(s, n, key, &len)) {
        check(len >= 1 && len <= QUOTA_MAX_KEY_BYTES && key[len] == '\0');
        char again[QUOTA_JSON_CURSOR_MAX];
        check(quota_json_cursor_encode(key, len, again, sizeof(again)));
        check(strlen(again) == n && memcmp(again, s, n) == 0);
    }
    int64_t id;
    if (quota_json_audit_cursor_decode(s, n, &id)) {
        char again[QUOTA_JSON_AUDIT_CURSOR_MAX];
        check(id > 0);
        check(quota_json_audit_cursor_encode(id, again) == n && memcmp(again, s, n) == 0);
    }
}

/* @s as the stored before of an audit entry, and its bytes as the key. */
static void audit(char *s, size_t n)
{
    quota_audit a;
    memset(&a, 0, sizeof(a));
    a.id = (int64_t)n + 1;
    a.at_us = (int64_t)n * 1000003;
    a.action = (quota_action)(n % 5);
    a.key_len = n < QUOTA_MAX_KEY_BYTES ? n : QUOTA_MAX_KEY_BYTES;
    memcpy(a.key, s, a.key_len);
    memcpy(a.actor, s, n < QUOTA_MAX_ACTOR_BYTES ? n : QUOTA_MAX_ACTOR_BYTES);
    a.before = s;
    a.after = n % 2 ? s : NULL;
    quota_json_render_audit(&out, &a, 1, s);
    check_json();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool registered;
    if (!registered) {
        atexit(cleanup);
        weir_buf_init(&out, (size_t)64 << 20);
        registered = true;
    }
    body(data, size);
    char *s = malloc(size + 1);
    check(s != NULL);
    if (size)
        memcpy(s, data, size);
    s[size] = '\0';
    timestamp(s, size);
    cursors(s, size);
    audit(s, size);
    free(s);
    return 0;
}
