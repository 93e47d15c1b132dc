/*
 * log.c - key=value or JSON lines on stderr.
 */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/buf.h"

static weir_log_level max_level = WEIR_LOG_INFO;
static bool as_json;

static const char *const level_names[] = {"error", "warn", "info", "debug"};

void dlog_setup(weir_log_level level, bool json)
{
    max_level = level;
    as_json = json;
}

bool dlog_enabled(weir_log_level level)
{
    return level <= max_level;
}

/* Whether a text value must be quoted. */
static bool needs_quotes(const char *v)
{
    if (!*v)
        return true;
    for (const char *p = v; *p; p++)
        if (*p == ' ' || *p == '"' || *p == '=' || (unsigned char)*p < 0x20)
            return true;
    return false;
}

static void put_field(weir_buf *b, const char *k, size_t kn, const char *v, size_t vn)
{
    if (as_json) {
        weir_buf_puts(b, ",\"");
        weir_buf_put_json_str(b, k, kn);
        weir_buf_puts(b, "\":\"");
        weir_buf_put_json_str(b, v, vn);
        weir_buf_putc(b, '"');
        return;
    }
    weir_buf_putc(b, ' ');
    weir_buf_put(b, k, kn);
    weir_buf_putc(b, '=');
    char tmp[512];
    size_t n = vn < sizeof(tmp) - 1 ? vn : sizeof(tmp) - 1;
    memcpy(tmp, v, n);
    tmp[n] = '\0';
    if (needs_quotes(tmp)) {
        weir_buf_putc(b, '"');
        weir_buf_put_json_str(b, v, vn);
        weir_buf_putc(b, '"');
    } else {
        weir_buf_put(b, v, vn);
    }
}

static void begin(weir_buf *b, weir_log_level level, const char *event)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char when[64];
    snprintf(when, sizeof(when), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
             (int)(ts.tv_nsec / 1000000));
    if (as_json)
        weir_buf_printf(b, "{\"ts\":\"%s\",\"level\":\"%s\",\"event\":\"", when,
                        level_names[level]);
    else
        weir_buf_printf(b, "ts=%s level=%s event=", when, level_names[level]);
    weir_buf_put_json_str(b, event, strlen(event));
    if (as_json)
        weir_buf_putc(b, '"');
}

static void finish(weir_buf *b)
{
    if (as_json)
        weir_buf_putc(b, '}');
    weir_buf_putc(b, '\n');
    if (weir_buf_ok(b)) {
        ssize_t w = write(STDERR_FILENO, b->p, b->len);
        (void)w;
    }
    weir_buf_free(b);
}

void dlog(weir_log_level level, const char *event, ...)
{
    if (!dlog_enabled(level))
        return;
    weir_buf b;
    weir_buf_init(&b, 8192);
    begin(&b, level, event);
    va_list ap;
    va_start(ap, event);
    for (;;) {
        const char *k = va_arg(ap, const char *);
        if (!k)
            break;
        const char *v = va_arg(ap, const char *);
        put_field(&b, k, strlen(k), v ? v : "", v ? strlen(v) : 0);
    }
    va_end(ap);
    finish(&b);
}

void dlog_lib(void *ud, weir_log_level level, const char *msg)
{
    (void)ud;
    if (!dlog_enabled(level))
        return;
    /* "event=NAME k=v k=\"v w\"; free text": the event first, then the
     * fields (a value in double quotes may hold spaces), then, after "; ",
     * the rest under "msg". A token without '=' is kept under "msg". */
    const char *p = msg;
    const char *event = "library";
    size_t event_len = strlen(event);
    if (strncmp(p, "event=", 6) == 0) {
        event = p + 6;
        event_len = strcspn(event, " ");
        p = event + event_len;
    }
    char ev[64];
    size_t n = event_len < sizeof(ev) - 1 ? event_len : sizeof(ev) - 1;
    memcpy(ev, event, n);
    ev[n] = '\0';
    weir_buf b;
    weir_buf_init(&b, 8192);
    begin(&b, level, ev);
    while (*p) {
        p += strspn(p, " ");
        if (!*p)
            break;
        if (*p == ';') {
            p += 1 + strspn(p + 1, " ");
            put_field(&b, "msg", 3, p, strlen(p));
            break;
        }
        size_t tok = strcspn(p, " ;");
        const char *eq = memchr(p, '=', tok);
        if (eq && eq[1] == '"' && strchr(eq + 2, '"')) {
            const char *close = strchr(eq + 2, '"');
            put_field(&b, p, (size_t)(eq - p), eq + 2, (size_t)(close - eq - 2));
            p = close + 1;
            continue;
        }
        if (eq)
            put_field(&b, p, (size_t)(eq - p), eq + 1, tok - (size_t)(eq - p) - 1);
        else
            put_field(&b, "msg", 3, p, tok);
        p += tok;
    }
    finish(&b);
}
