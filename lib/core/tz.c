/*
 * tz.c - time zones: TZif files (RFC 8536) read from the system's time zone
 * database, and the offset from UTC they give at an instant.
 *
 * Why weir reads the files itself: the C library converts only through the
 * process-wide TZ variable (setenv + tzset + localtime_r), which is not
 * thread-safe to switch per call and holds one zone at a time, while a
 * quota may follow any number of zones at once from any thread; and there
 * is no small C library for periods in arbitrary zones (ICU is C++-centred
 * and large). So a zone is read here from $TZDIR or /usr/share/zoneinfo,
 * once, into an immutable table of transitions plus the footer's POSIX TZ
 * rule (tz_rule.c) for the instants after the last transition: Debian's
 * files may be "slim", with every future change only in that rule.
 *
 * Every count and index of a file is checked against the caps below before
 * it is used; a file is one TZif file and nothing else.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "core/context.h"
#include "core/file.h"
#include "core/tz.h"

/* Caps on what one file may hold. */
#define TZIF_MAX_TIMES 2000u       /* transitions */
#define TZIF_MAX_TYPES 256u        /* local time types */
#define TZIF_MAX_CHARS 256u        /* bytes of abbreviations */
#define TZIF_MAX_LEAPS 256u        /* leap-second records (read, ignored) */
#define TZIF_MAX_FOOTER_BYTES 256u /* the TZ string between the footer's newlines */
#define TZ_MAX_PATH_BYTES 4096u    /* $TZDIR/NAME */

#define TZIF_HEADER_BYTES 44u
#define TZIF_TYPE_BYTES 6u
#define DEFAULT_TZDIR "/usr/share/zoneinfo"

typedef struct tzif_header {
    char version; /* 0, '2', '3' or '4' */
    uint32_t isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt;
} tzif_header;

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int64_t be_time(const uint8_t *p, size_t bytes)
{
    if (bytes == 4)
        return (int32_t)be32(p);
    uint64_t v = (uint64_t)be32(p) << 32 | be32(p + 4);
    return (int64_t)v;
}

/* The header at @p (@len bytes left). */
static bool read_header(const uint8_t *p, size_t len, tzif_header *h)
{
    if (len < TZIF_HEADER_BYTES || memcmp(p, "TZif", 4) != 0)
        return false;
    h->version = (char)p[4];
    if (h->version != 0 && (h->version < '2' || h->version > '4'))
        return false;
    h->isutcnt = be32(p + 20);
    h->isstdcnt = be32(p + 24);
    h->leapcnt = be32(p + 28);
    h->timecnt = be32(p + 32);
    h->typecnt = be32(p + 36);
    h->charcnt = be32(p + 40);
    return true;
}

/* The counts of a header whose data block is read: within the caps and
 * consistent (RFC 8536 section 3.1). */
static bool counts_ok(const tzif_header *h)
{
    return h->timecnt <= TZIF_MAX_TIMES && h->typecnt >= 1 && h->typecnt <= TZIF_MAX_TYPES &&
           h->charcnt >= 1 && h->charcnt <= TZIF_MAX_CHARS && h->leapcnt <= TZIF_MAX_LEAPS &&
           (h->isstdcnt == 0 || h->isstdcnt == h->typecnt) &&
           (h->isutcnt == 0 || h->isutcnt == h->typecnt);
}

/* Bytes of the data block after @h, times of @tb bytes (32-bit counts:
 * no overflow in 64 bits). */
static uint64_t block_bytes(const tzif_header *h, uint64_t tb)
{
    return h->timecnt * (tb + 1) + h->typecnt * (uint64_t)TZIF_TYPE_BYTES + h->charcnt +
           h->leapcnt * (tb + 4) + h->isstdcnt + (uint64_t)h->isutcnt;
}

/* The data block at @p (block_bytes() of them): checked, and the
 * transitions written to @tz (room for h->timecnt). */
static bool read_block(const tzif_header *h, const uint8_t *p, size_t tb, weir_tz *tz)
{
    const uint8_t *times = p;
    const uint8_t *idx = times + h->timecnt * tb;
    const uint8_t *types = idx + h->timecnt;
    const uint8_t *chars = types + h->typecnt * TZIF_TYPE_BYTES;
    const uint8_t *leaps = chars + h->charcnt;
    const uint8_t *isstd = leaps + h->leapcnt * (tb + 4);
    const uint8_t *isut = isstd + h->isstdcnt;
    int32_t offs[TZIF_MAX_TYPES];
    for (uint32_t i = 0; i < h->typecnt; i++) {
        const uint8_t *t = types + i * TZIF_TYPE_BYTES;
        int32_t off = (int32_t)be32(t);
        uint8_t desig = t[5];
        if (off < TZ_OFFSET_MIN || off > TZ_OFFSET_MAX || t[4] > 1 || desig >= h->charcnt ||
            !memchr(chars + desig, 0, h->charcnt - desig))
            return false;
        offs[i] = off;
    }
    for (uint32_t i = 0; i < h->timecnt; i++) {
        int64_t at = be_time(times + i * tb, tb);
        if ((i > 0 && at <= tz->trans[i - 1].at) || idx[i] >= h->typecnt)
            return false;
        tz->trans[i] = (tz_trans){at, offs[idx[i]]};
    }
    for (uint32_t i = 0; i < h->isstdcnt; i++)
        if (isstd[i] > 1)
            return false;
    for (uint32_t i = 0; i < h->isutcnt; i++)
        if (isut[i] > 1 || (isut[i] && h->isstdcnt && !isstd[i]))
            return false;
    tz->n_trans = h->timecnt;
    tz->first_off = offs[0];
    return true;
}

static weir_tz *new_tz(const weir_ctx *ctx, const char *name, size_t name_len, uint32_t n_trans)
{
    weir_tz *tz = weir__calloc(ctx, 1, sizeof(*tz) + n_trans * sizeof(tz_trans));
    if (!tz)
        return NULL;
    tz->ctx = ctx;
    memcpy(tz->name, name, name_len);
    tz->name[name_len] = '\0';
    return tz;
}

/* The footer "\nTZ\n" at @p, exactly @len bytes. */
static bool read_footer(const uint8_t *p, size_t len, weir_tz *tz)
{
    if (len < 2 || len - 2 > TZIF_MAX_FOOTER_BYTES || p[0] != '\n' || p[len - 1] != '\n')
        return false;
    const char *s = (const char *)p + 1;
    size_t n = len - 2;
    if (memchr(s, '\n', n))
        return false;
    if (n == 0)
        return true; /* no rule: the last transition's offset stays */
    tz->has_rule = true;
    return weir__tz_rule_parse(s, n, &tz->rule);
}

static weir_status parse(const weir_ctx *ctx, const char *name, size_t name_len, const uint8_t *p,
                         size_t len, weir_tz **out)
{
    tzif_header h;
    if (len > WEIR_TZ_MAX_FILE_BYTES || !read_header(p, len, &h))
        return WEIR_EPARSE;
    size_t tb = 4, at = TZIF_HEADER_BYTES;
    if (h.version != 0) {
        /* skip the 32-bit block: a version 2+ reader uses the 64-bit one
         * and ignores the other (RFC 8536 section 4) */
        uint64_t skip = block_bytes(&h, 4);
        char version = h.version;
        if (skip > len - at)
            return WEIR_EPARSE;
        at += (size_t)skip;
        if (!read_header(p + at, len - at, &h) || h.version != version)
            return WEIR_EPARSE;
        at += TZIF_HEADER_BYTES;
        tb = 8;
    }
    if (!counts_ok(&h) || block_bytes(&h, tb) > len - at)
        return WEIR_EPARSE;
    weir_tz *tz = new_tz(ctx, name, name_len, h.timecnt);
    if (!tz)
        return WEIR_ENOMEM;
    bool ok = read_block(&h, p + at, tb, tz);
    at += (size_t)block_bytes(&h, tb);
    if (ok)
        ok = tb == 4 ? at == len : read_footer(p + at, len - at, tz);
    if (!ok) {
        weir__free(ctx, tz);
        return WEIR_EPARSE;
    }
    *out = tz;
    return WEIR_OK;
}

weir_status weir_tz_parse(weir_ctx *ctx, const char *name, const void *tzif, size_t len,
                          weir_tz **out)
{
    if (!ctx || !name || !out || (!tzif && len))
        return WEIR_EINVAL;
    size_t name_len = strnlen(name, WEIR_TZ_MAX_NAME_BYTES + 1);
    if (name_len > WEIR_TZ_MAX_NAME_BYTES)
        return WEIR_EINVAL;
    return parse(ctx, name, name_len, tzif, len, out);
}

/* The grammar of weir_tz_load()'s names (weir/calendar.h). */
static bool zone_name(const char *name, size_t len)
{
    bool component_start = true;
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        if (c == '/') {
            if (component_start)
                return false; /* leading '/' or "//" */
            component_start = true;
            continue;
        }
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '+' || c == '-'))
            return false;
        component_start = false;
    }
    return len > 0 && !component_start;
}

weir_status weir_tz_load(weir_ctx *ctx, const char *name, weir_tz **out)
{
    if (!ctx || !name || !out)
        return WEIR_EINVAL;
    size_t len = strnlen(name, WEIR_TZ_MAX_NAME_BYTES + 1);
    if (len == 0 || strcmp(name, "UTC") == 0 || strcmp(name, "Etc/UTC") == 0) {
        weir_tz *tz = len ? new_tz(ctx, name, len, 0) : new_tz(ctx, "UTC", 3, 0);
        if (!tz)
            return WEIR_ENOMEM;
        *out = tz;
        return WEIR_OK;
    }
    if (len > WEIR_TZ_MAX_NAME_BYTES || !zone_name(name, len))
        return WEIR_EINVAL;
    const char *dir = getenv("TZDIR");
    if (!dir || !*dir)
        dir = DEFAULT_TZDIR;
    size_t dir_len = strlen(dir);
    if (dir_len > TZ_MAX_PATH_BYTES - 1 - len)
        return WEIR_EIO;
    char path[TZ_MAX_PATH_BYTES + 1];
    memcpy(path, dir, dir_len);
    path[dir_len] = '/';
    memcpy(path + dir_len + 1, name, len + 1);

    uint8_t *buf;
    size_t n;
    weir_file_error why;
    weir_status st = weir__read_file(ctx, path, WEIR_TZ_MAX_FILE_BYTES, &buf, &n, &why);
    if (st != WEIR_OK)
        return st;
    st = parse(ctx, name, len, buf, n, out);
    weir__free(ctx, buf);
    return st;
}

void weir_tz_free(weir_tz *tz)
{
    if (tz)
        weir__free(tz->ctx, tz);
}

const char *weir_tz_name(const weir_tz *tz)
{
    return tz ? tz->name : "UTC";
}

int32_t weir__tz_segment(const weir_tz *tz, int64_t t, int64_t *next)
{
    uint32_t n = tz->n_trans;
    if (n == 0 || t >= tz->trans[n - 1].at) {
        if (tz->has_rule)
            return weir__tz_rule_segment(&tz->rule, t, next);
        *next = INT64_MAX;
        return n ? tz->trans[n - 1].off : tz->first_off;
    }
    /* the first transition after t: trans[n - 1] is one */
    uint32_t lo = 0, hi = n - 1;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (tz->trans[mid].at > t)
            hi = mid;
        else
            lo = mid + 1;
    }
    *next = tz->trans[lo].at;
    return lo ? tz->trans[lo - 1].off : tz->first_off;
}

int32_t weir_tz_offset(const weir_tz *tz, int64_t utc_s)
{
    if (!tz)
        return 0;
    if (utc_s > TZ_INSTANT_BOUND)
        utc_s = TZ_INSTANT_BOUND;
    if (utc_s < -TZ_INSTANT_BOUND)
        utc_s = -TZ_INSTANT_BOUND;
    int64_t next;
    return weir__tz_segment(tz, utc_s, &next);
}
