/*
 * jsonw.h - the JSON writing the API's renderers share (private to
 * frontends/api, and used by the quota admin codec, daemon/quota, too):
 * objects written member by member straight into a weir_buf, strings
 * escaped.
 */
#ifndef WEIR_FRONTENDS_API_JSONW_H
#define WEIR_FRONTENDS_API_JSONW_H

#include <stdbool.h>
#include <string.h>

#include "common/buf.h"

/* Writes the key of an object member, with the comma the member before
 * it needs. */
typedef struct obj {
    weir_buf *b;
    bool first;
} obj;

static inline obj obj_open(weir_buf *b)
{
    weir_buf_putc(b, '{');
    return (obj){b, true};
}

/* @member is `,"key":`; the first member goes without its comma. One
 * append per member: the keys are literals, so their lengths are known. */
static inline void obj_member(obj *o, const char *member, size_t n)
{
    size_t skip = o->first ? 1 : 0;
    weir_buf_put(o->b, member + skip, n - skip);
    o->first = false;
}

#define obj_key(o, key) obj_member((o), ",\"" key "\":", sizeof(",\"" key "\":") - 1)

static inline void obj_close(obj *o)
{
    weir_buf_putc(o->b, '}');
}

static inline void put_str(weir_buf *b, const char *s, size_t n)
{
    weir_buf_putc(b, '"');
    weir_buf_put_json_str(b, s, n);
    weir_buf_putc(b, '"');
}

/* A NUL-terminated string, or null for NULL. */
static inline void put_cstr(weir_buf *b, const char *s)
{
    if (s)
        put_str(b, s, strlen(s));
    else
        weir_buf_puts(b, "null");
}

static inline void put_bool(weir_buf *b, bool v)
{
    weir_buf_puts(b, v ? "true" : "false");
}

#endif /* WEIR_FRONTENDS_API_JSONW_H */
