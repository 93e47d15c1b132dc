/*
 * codec.c - the HTTP/1.1 request codec: http-parser tokenises, this file
 * enforces weir's caps, copies each request into the caller's flat buffer
 * and maps every malformed input to the status a server should answer.
 *
 * The parser is paused at three points of every request, so each call to
 * http_parser_execute() covers one phase only and every byte count is exact
 * however the input is split:
 *
 *   message begin     the first byte of the method: the request starts here
 *                     (blank lines before it are skipped and are not part of
 *                     it);
 *   headers complete  at the LF that ends the header section: its size is
 *                     known, so the section, the version, the framing and a
 *                     declared Content-Length are checked before any body
 *                     byte is read;
 *   message complete  the request is whole: feed() returns it.
 *
 * While the header section is being read, http-parser is never given more
 * than one byte past max_header_bytes, so an oversized section is refused
 * the same way whether it arrives at once or byte by byte.
 *
 * Buffer layout for one request: method, target, then each header's name and
 * value, then the de-chunked body. Every copy is checked against the buffer's
 * capacity, so a buffer smaller than advised only makes requests fail.
 * Trailer fields after a chunked body are parsed and dropped. A chunked
 * body's framing is checked beside http-parser (chunked.h): CRLF after
 * each chunk's data and every line, the trailer section within
 * max_header_bytes.
 *
 * Deliberately refused beyond the caps: obsolete line folding and a '#'
 * fragment in the target (400), any Transfer-Encoding but a lone "chunked"
 * (501), and Content-Length together with Transfer-Encoding (400).
 */
#include "codec.h"

#include <http_parser.h>

#include "chunked.h"
#include <string.h>

/* Where http-parser was paused, seen by feed() after execute returns. */
enum h1_pause { PAUSE_NONE, PAUSE_BEGIN, PAUSE_HEADERS, PAUSE_COMPLETE };

/* Which header callback ran last: a field after a value starts a header. */
enum h1_last { LAST_NONE, LAST_FIELD, LAST_VALUE };

/* One header as offsets into the request buffer. */
struct h1_field {
    size_t name_off, name_len;
    size_t value_off, value_len;
};

struct weir_http1 {
    http_parser hp;
    http_parser_settings settings;
    weir_http1_limits limits;

    char *buf;
    size_t cap;
    size_t used; /* bytes of buf holding the current request */

    /* The execute call in progress: its first byte is byte req_bytes of the
     * request, so a callback's pointer gives its position in the request. */
    const char *chunk;
    size_t req_bytes;  /* request bytes consumed so far (from the method) */
    size_t header_end; /* size of the header section, once complete */
    enum h1_pause pause;

    size_t method_off, method_len;
    size_t url_off, url_len;
    bool have_url;

    struct h1_field fields[WEIR_HTTP1_MAX_HEADERS];
    size_t n_fields;
    bool too_many; /* a header beyond the last kept: 431 once all are read */
    enum h1_last last;
    size_t value_end; /* request position just past the last value piece */

    size_t body_off, body_len;

    bool in_request;
    bool headers_done;
    bool keep_alive;
    bool want_continue; /* Expect: 100-continue, not yet reported */
    /* The header section's bytes as they pass (strict_scan()) */
    bool prev_cr, prev_sp, in_request_line;
    /* A chunked body's framing as it passes (chunked.h) */
    bool chunked;
    weir__chunked ck;

    /* An error found inside a callback, reported once execute returns. */
    int pending_status;
    const char *pending_message;

    /* The sticky error. */
    bool failed;
    int err_status;
    const char *err_message;
};

/* "malformed request: <http-parser's description>", one per http_errno. */
#define H1_MALFORMED(name, text) "malformed request: " text,
static const char *const malformed[] = {HTTP_ERRNO_MAP(H1_MALFORMED)};
#undef H1_MALFORMED

static const char msg_header_large[] = "header section too large";
static const char msg_target_long[] = "request target too long";
static const char msg_body_large[] = "request body too large";
static const char msg_too_many[] = "too many header fields";
static const char msg_version[] = "HTTP version not supported";
static const char msg_coding[] = "transfer coding not supported (only chunked)";
static const char msg_smuggle[] = "both Content-Length and Transfer-Encoding";
static const char msg_dup_length[] = "duplicate Content-Length";
static const char msg_length_conflict[] =
    "duplicate Content-Length, or Content-Length with Transfer-Encoding";
static const char msg_fold[] = "obsolete line folding in header";
static const char msg_fragment[] = "fragment in request target";
static const char msg_chunk_line[] = "chunk line or trailer too long";
static const char msg_internal[] = "malformed request";
static const char msg_name_space[] = "whitespace between header name and colon";
static const char msg_bare_lf[] = "a line of the header section ends in LF without CR";
static const char msg_spaces[] = "more than one space between the parts of the request line";

/* An empty buffer for parsers given none, so views never offset NULL. */
static char no_buf[1];

size_t weir_http1_size(void)
{
    return sizeof(struct weir_http1);
}

/* The codec owning @hp: its first member, so the codec may be moved between
 * feeds (nothing in it points into itself). */
static weir_http1 *self(http_parser *hp)
{
    return (weir_http1 *)(void *)hp;
}

/* Record an error found in a callback; the return value stops http-parser. */
static int fail(weir_http1 *p, int status, const char *message)
{
    if (p->pending_status == 0) {
        p->pending_status = status;
        p->pending_message = message;
    }
    return 1;
}

/* Position in the request of @at, a pointer into the current chunk. */
static size_t rel(const weir_http1 *p, const char *at)
{
    return p->req_bytes + (size_t)(at - p->chunk);
}

/* Copy @n bytes to the end of the request buffer; false when full. */
static bool append(weir_http1 *p, const char *at, size_t n)
{
    if (n > p->cap - p->used)
        return false;
    if (n > 0)
        memcpy(p->buf + p->used, at, n);
    p->used += n;
    return true;
}

static bool is_blank(char c)
{
    return c == ' ' || c == '\t';
}

static char ascii_lower(char c)
{
    return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
}

/* Case-insensitive ASCII equality of @a (@n bytes) and NUL-terminated @b. */
static bool name_eq(const char *a, size_t n, const char *b)
{
    size_t i = 0;
    for (; i < n; i++) {
        if (b[i] == '\0' || ascii_lower(a[i]) != ascii_lower(b[i]))
            return false;
    }
    return b[i] == '\0';
}

/* A header's value without leading and trailing blanks. */
static weir_http1_str field_value(const weir_http1 *p, const struct h1_field *f)
{
    const char *s = p->buf + f->value_off;
    size_t n = f->value_len;
    while (n > 0 && is_blank(s[0])) {
        s++;
        n--;
    }
    while (n > 0 && is_blank(s[n - 1]))
        n--;
    return (weir_http1_str){s, n};
}

/* How many headers (so far) are named @name. */
static size_t count_fields(const weir_http1 *p, const char *name)
{
    size_t n = 0;
    for (size_t i = 0; i < p->n_fields; i++) {
        if (name_eq(p->buf + p->fields[i].name_off, p->fields[i].name_len, name))
            n++;
    }
    return n;
}

/* Forget the previous request: a new one starts at the buffer's start. */
static void start_request(weir_http1 *p)
{
    p->used = 0;
    p->req_bytes = 0;
    p->header_end = 0;
    p->method_off = p->method_len = 0;
    p->url_off = p->url_len = 0;
    p->have_url = false;
    p->n_fields = 0;
    p->too_many = false;
    p->last = LAST_NONE;
    p->value_end = 0;
    p->body_off = p->body_len = 0;
    p->want_continue = false;
    p->prev_cr = p->prev_sp = false;
    p->in_request_line = true;
    p->headers_done = false;
    p->keep_alive = false;
    p->chunked = false;
}

/* ---------------------------------------------------------------- callbacks */

static int on_message_begin(http_parser *hp)
{
    weir_http1 *p = self(hp);
    start_request(p);
    p->in_request = true;
    p->pause = PAUSE_BEGIN;
    http_parser_pause(hp, 1);
    return 0;
}

static int on_url(http_parser *hp, const char *at, size_t n)
{
    weir_http1 *p = self(hp);
    if (!p->have_url) {
        /* The method is known once the target starts; keep its name too. */
        const char *m = http_method_str((enum http_method)hp->method);
        size_t mlen = strlen(m);
        p->method_off = p->used;
        if (!append(p, m, mlen))
            return fail(p, 431, msg_header_large);
        p->method_len = mlen;
        p->url_off = p->used;
        p->have_url = true;
    }
    /* Bytes first, then length: each piece of a split target is judged as
     * the whole target would be. */
    if (memchr(at, '#', n) != NULL)
        return fail(p, 400, msg_fragment);
    if (rel(p, at) + n > p->limits.max_header_bytes)
        return fail(p, 414, msg_target_long);
    if (!append(p, at, n))
        return fail(p, 414, msg_target_long);
    p->url_len += n;
    return 0;
}

static int on_header_field(http_parser *hp, const char *at, size_t n)
{
    weir_http1 *p = self(hp);
    if (p->headers_done)
        return 0; /* a trailer field (after a chunked body): not kept */
    if (p->too_many)
        return 0;
    if (p->last != LAST_FIELD) {
        if (p->n_fields == WEIR_HTTP1_MAX_HEADERS) {
            /* Refused when the section ends, not here: a piece of this name
             * may arrive before a malformed byte in it, or may not, and the
             * answer must not depend on how the input was split. */
            p->too_many = true;
            return 0;
        }
        struct h1_field *f = &p->fields[p->n_fields++];
        f->name_off = p->used;
        f->name_len = 0;
        f->value_off = p->used;
        f->value_len = 0;
        p->last = LAST_FIELD;
    }
    if (!append(p, at, n))
        return fail(p, 431, msg_header_large);
    p->fields[p->n_fields - 1].name_len += n;
    return 0;
}

static int on_header_value(http_parser *hp, const char *at, size_t n)
{
    weir_http1 *p = self(hp);
    if (p->headers_done || p->too_many)
        return 0; /* a trailer field's value, or a header not kept */
    if (p->n_fields == 0 || p->last == LAST_NONE)
        return fail(p, 400, msg_internal);
    struct h1_field *f = &p->fields[p->n_fields - 1];
    if (p->last == LAST_FIELD) {
        f->value_off = p->used;
        f->value_len = 0;
        p->last = LAST_VALUE;
    } else if (rel(p, at) != p->value_end) {
        /* A piece that does not continue the last one: a folded line. */
        return fail(p, 400, msg_fold);
    }
    p->value_end = rel(p, at) + n;
    if (!append(p, at, n))
        return fail(p, 431, msg_header_large);
    f->value_len += n;
    return 0;
}

static int on_headers_complete(http_parser *hp)
{
    weir_http1 *p = self(hp);
    /* Upgrade and CONNECT are answered as ordinary requests: without this
     * http-parser would stop parsing the connection after them. */
    hp->upgrade = 0;
    p->headers_done = true;
    p->body_off = p->used;
    p->pause = PAUSE_HEADERS;
    http_parser_pause(hp, 1);
    return 0;
}

static int on_chunk_header(http_parser *hp)
{
    weir_http1 *p = self(hp);
    /* Refuse an oversized chunk before its data arrives. */
    if (hp->content_length > p->limits.max_body_bytes - p->body_len ||
        hp->content_length > p->cap - p->used)
        return fail(p, 413, msg_body_large);
    return 0;
}

static int on_body(http_parser *hp, const char *at, size_t n)
{
    weir_http1 *p = self(hp);
    if (n > p->limits.max_body_bytes - p->body_len || !append(p, at, n))
        return fail(p, 413, msg_body_large);
    p->body_len += n;
    return 0;
}

static int on_message_complete(http_parser *hp)
{
    weir_http1 *p = self(hp);
    p->keep_alive = http_should_keep_alive(hp) != 0;
    p->pause = PAUSE_COMPLETE;
    http_parser_pause(hp, 1);
    return 0;
}

/* ---------------------------------------------------------------- feeding */

static void parser_restart(weir_http1 *p)
{
    http_parser_init(&p->hp, HTTP_REQUEST);
}

static void set_error(weir_http1 *p, int status, const char *message)
{
    p->failed = true;
    p->err_status = status;
    p->err_message = message;
}

/* Map http-parser's error (or ours, from a callback) to a status. */
static void parse_error(weir_http1 *p, enum http_errno e)
{
    if (p->pending_status != 0) {
        set_error(p, p->pending_status, p->pending_message);
        return;
    }
    switch (e) {
    case HPE_HEADER_OVERFLOW:
        if (p->headers_done)
            set_error(p, 400, msg_chunk_line);
        else
            set_error(p, 431, msg_header_large);
        return;
    case HPE_UNEXPECTED_CONTENT_LENGTH:
        if (count_fields(p, "transfer-encoding") > 0)
            set_error(p, 400, msg_smuggle);
        else if (p->too_many) /* the culprit may be among those not kept */
            set_error(p, 400, msg_length_conflict);
        else
            set_error(p, 400, msg_dup_length);
        return;
    case HPE_INVALID_TRANSFER_ENCODING:
        set_error(p, 501, msg_coding);
        return;
    default:
        break;
    }
    size_t i = (size_t)e;
    set_error(p, 400, i < sizeof(malformed) / sizeof(malformed[0]) ? malformed[i] : msg_internal);
}

/* The checks made once the header section is whole, before any body byte;
 * false (with the error set) when the request must be refused. */
static bool check_headers(weir_http1 *p)
{
    p->header_end = p->req_bytes + 1; /* the LF http-parser stopped at */
    if (p->header_end > p->limits.max_header_bytes) {
        set_error(p, 431, msg_header_large);
        return false;
    }
    if (p->too_many) {
        set_error(p, 431, msg_too_many);
        return false;
    }
    if (p->hp.http_major != 1 || p->hp.http_minor > 1) {
        set_error(p, 505, msg_version);
        return false;
    }
    /* RFC 9112 5.1: whitespace before the colon MUST be refused (proxies
     * disagree on such names). */
    for (size_t i = 0; i < p->n_fields; i++) {
        const struct h1_field *f = &p->fields[i];
        char last = f->name_len ? p->buf[f->name_off + f->name_len - 1] : ' ';
        if (last == ' ' || last == '\t') {
            set_error(p, 400, msg_name_space);
            return false;
        }
    }

    size_t n_te = count_fields(p, "transfer-encoding");
    if (n_te > 0 && count_fields(p, "content-length") > 0) {
        set_error(p, 400, msg_smuggle);
        return false;
    }
    if (n_te > 0) {
        /* Only one coding is implemented: a lone "chunked". */
        bool ok = n_te == 1 && (p->hp.flags & F_CHUNKED);
        for (size_t i = 0; ok && i < p->n_fields; i++) {
            const struct h1_field *f = &p->fields[i];
            if (name_eq(p->buf + f->name_off, f->name_len, "transfer-encoding")) {
                weir_http1_str v = field_value(p, f);
                ok = name_eq(v.p, v.n, "chunked");
            }
        }
        if (!ok) {
            set_error(p, 501, msg_coding);
            return false;
        }
        /* http-parser hands over the header section's last LF with the body */
        p->chunked = true;
        weir__chunked_init(&p->ck, 1);
    } else if (p->hp.content_length != UINT64_MAX &&
               (p->hp.content_length > p->limits.max_body_bytes ||
                p->hp.content_length > p->cap - p->used)) {
        set_error(p, 413, msg_body_large);
        return false;
    }
    /* RFC 9110 10.1.1: an HTTP/1.1 client waiting for 100 Continue before
     * it sends its body (curl does, past 1 KiB); only a request with a
     * body to come is told to go on */
    bool body = n_te > 0 || (p->hp.content_length != UINT64_MAX && p->hp.content_length > 0);
    for (size_t i = 0; body && p->hp.http_minor == 1 && i < p->n_fields; i++) {
        const struct h1_field *f = &p->fields[i];
        if (name_eq(p->buf + f->name_off, f->name_len, "expect")) {
            weir_http1_str v = field_value(p, f);
            p->want_continue = name_eq(v.p, v.n, "100-continue");
        }
    }
    return true;
}

static weir_http1_method map_method(unsigned m)
{
    switch (m) {
    case HTTP_GET:
        return WEIR_HTTP1_GET;
    case HTTP_HEAD:
        return WEIR_HTTP1_HEAD;
    case HTTP_POST:
        return WEIR_HTTP1_POST;
    case HTTP_PUT:
        return WEIR_HTTP1_PUT;
    case HTTP_DELETE:
        return WEIR_HTTP1_DELETE;
    default:
        return WEIR_HTTP1_OTHER;
    }
}

/* Fill @req with views of the request just completed. */
static void fill_request(const weir_http1 *p, weir_http1_request *req)
{
    const char *b = p->buf;
    req->method = map_method(p->hp.method);
    req->method_name = (weir_http1_str){b + p->method_off, p->method_len};
    req->target = (weir_http1_str){b + p->url_off, p->url_len};
    /* absolute form (RFC 9112 3.2.2: "http://host/path?q"): the path
     * starts at the first '/' after the authority */
    weir_http1_str t = req->target;
    if (t.n > 0 && t.p[0] != '/') {
        const char *sep = t.n >= 3 ? memchr(t.p, ':', t.n) : NULL;
        if (sep && (size_t)(sep - t.p) + 3 <= t.n && sep[1] == '/' && sep[2] == '/') {
            const char *auth = sep + 3, *end = t.p + t.n;
            const char *slash = memchr(auth, '/', (size_t)(end - auth));
            const char *qm = memchr(auth, '?', (size_t)(end - auth));
            const char *from = slash && (!qm || slash < qm) ? slash : qm ? qm : end;
            t = (weir_http1_str){from, (size_t)(end - from)};
        }
    }
    const char *q = t.n > 0 ? memchr(t.p, '?', t.n) : NULL;
    if (q != NULL) {
        size_t plen = (size_t)(q - t.p);
        req->path = (weir_http1_str){t.p, plen};
        req->query = (weir_http1_str){q + 1, t.n - plen - 1};
    } else {
        req->path = t;
        req->query = (weir_http1_str){t.p + t.n, 0};
    }
    req->version_minor = p->hp.http_minor;
    for (size_t i = 0; i < p->n_fields; i++) {
        const struct h1_field *f = &p->fields[i];
        req->headers[i].name = (weir_http1_str){b + f->name_off, f->name_len};
        req->headers[i].value = field_value(p, f);
    }
    req->n_headers = p->n_fields;
    req->body = (weir_http1_str){b + p->body_off, p->body_len};
    req->keep_alive = p->keep_alive;
}

/* Bytes http-parser may see next while the header section is incomplete:
 * at most one past the cap, so an oversized section is noticed at once. */
static size_t header_budget(const weir_http1 *p)
{
    size_t max = p->limits.max_header_bytes;
    size_t left = p->req_bytes < max ? max - p->req_bytes : 0;
    return left < SIZE_MAX ? left + 1 : left;
}

weir_http1 *weir_http1_init(void *mem, const weir_http1_limits *limits, char *buf, size_t cap)
{
    if (mem == NULL || limits == NULL)
        return NULL;
    weir_http1 *p = mem;
    memset(p, 0, sizeof(*p));
    p->limits = *limits;
    if (buf == NULL) {
        buf = no_buf;
        cap = 0;
    }
    p->buf = buf;
    p->cap = cap;
    http_parser_settings_init(&p->settings);
    p->settings.on_message_begin = on_message_begin;
    p->settings.on_url = on_url;
    p->settings.on_header_field = on_header_field;
    p->settings.on_header_value = on_header_value;
    p->settings.on_headers_complete = on_headers_complete;
    p->settings.on_chunk_header = on_chunk_header;
    p->settings.on_body = on_body;
    p->settings.on_message_complete = on_message_complete;
    parser_restart(p);
    return p;
}

/* What http-parser lets through and a proxy in front may read otherwise
 * (request smuggling starts with such leniency): a line of the header
 * section ended by a bare LF, and runs of spaces in the request line
 * (RFC 9112 2.2 and 3). Runs over the header section's bytes as they are
 * consumed, in pieces; false after set_error(). */
static bool strict_scan(weir_http1 *p, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '\n') {
            if (!p->prev_cr) {
                set_error(p, 400, msg_bare_lf);
                return false;
            }
            p->in_request_line = false;
        } else if (c == ' ' && p->prev_sp && p->in_request_line) {
            set_error(p, 400, msg_spaces);
            return false;
        }
        p->prev_cr = c == '\r';
        p->prev_sp = c == ' ';
    }
    return true;
}

weir_http1_result weir_http1_feed(weir_http1 *p, const char *data, size_t len, size_t *consumed,
                                  weir_http1_request *req, weir_http1_error *err)
{
    size_t off = 0;
    weir_http1_result res = WEIR_HTTP1_NEED_MORE;
    if (data == NULL)
        len = 0;
    while (!p->failed && off < len) {
        size_t give = len - off;
        if (p->in_request && !p->headers_done) {
            size_t budget = header_budget(p);
            give = give < budget ? give : budget;
        }
        p->chunk = data + off;
        p->pause = PAUSE_NONE;
        p->pending_status = 0;
        p->pending_message = NULL;
        bool in_head = p->in_request && !p->headers_done;
        size_t n = http_parser_execute(&p->hp, &p->settings, data + off, give);
        enum http_errno e = HTTP_PARSER_ERRNO(&p->hp);
        if (n > give)
            n = give;
        /* the header section's bytes: all of them while it is read, and
         * the method's first byte when a request begins */
        if (in_head && !strict_scan(p, data + off, n))
            break;
        if (!in_head && e == HPE_PAUSED && p->pause == PAUSE_BEGIN && n > 0 &&
            !strict_scan(p, data + off + n - 1, 1))
            break;
        /* a chunked body's bytes (those of the next request's first byte
         * come after this one's end, where the scan stops) */
        if (!in_head && p->chunked && p->headers_done && n > 0 && p->pause != PAUSE_BEGIN) {
            int status;
            const char *why =
                weir__chunked_scan(&p->ck, data + off, n, p->limits.max_header_bytes, &status);
            if (why) {
                set_error(p, status, why);
                break;
            }
        }
        off += n;

        if (e == HPE_OK) {
            if (n < give) {
                /* Not expected from http-parser; never spin on it. */
                set_error(p, 400, msg_internal);
                break;
            }
            if (p->in_request)
                p->req_bytes += n;
            if (p->in_request && !p->headers_done && p->req_bytes > p->limits.max_header_bytes)
                set_error(p, 431, msg_header_large);
            continue;
        }
        if (e != HPE_PAUSED) {
            parse_error(p, e);
            break;
        }

        http_parser_pause(&p->hp, 0);
        if (p->pause == PAUSE_BEGIN) {
            /* http-parser consumed the method's first byte. */
            p->req_bytes = 1;
            if (p->req_bytes > p->limits.max_header_bytes)
                set_error(p, 431, msg_header_large);
        } else if (p->pause == PAUSE_HEADERS) {
            p->req_bytes += n;
            /* http-parser stopped at the LF that ends the section (consumed
             * with the body): the byte before it must be a CR */
            if (!p->prev_cr)
                set_error(p, 400, msg_bare_lf);
            else
                check_headers(p);
        } else if (p->pause == PAUSE_COMPLETE) {
            p->req_bytes += n;
            p->in_request = false;
            if (req != NULL)
                fill_request(p, req);
            /* A fresh http-parser for the next request, whatever this one's
             * Connection header said: closing is the caller's decision. */
            parser_restart(p);
            res = WEIR_HTTP1_REQUEST;
            break;
        } else {
            set_error(p, 400, msg_internal);
        }
    }
    if (consumed != NULL)
        *consumed = off;
    if (p->failed) {
        if (err != NULL) {
            err->status = p->err_status;
            err->message = p->err_message;
        }
        return WEIR_HTTP1_ERROR;
    }
    return res;
}

bool weir_http1_take_continue(weir_http1 *p)
{
    bool want = p->want_continue && p->in_request && !p->failed;
    p->want_continue = false;
    return want;
}

bool weir_http1_in_request(const weir_http1 *p)
{
    return p->in_request;
}

void weir_http1_reset(weir_http1 *p)
{
    start_request(p);
    p->in_request = false;
    p->pause = PAUSE_NONE;
    p->pending_status = 0;
    p->pending_message = NULL;
    p->failed = false;
    p->err_status = 0;
    p->err_message = NULL;
    parser_restart(p);
}

weir_http1_str weir_http1_header_get(const weir_http1_request *req, const char *name)
{
    for (size_t i = 0; i < req->n_headers && i < WEIR_HTTP1_MAX_HEADERS; i++) {
        if (name_eq(req->headers[i].name.p, req->headers[i].name.n, name))
            return req->headers[i].value;
    }
    return (weir_http1_str){NULL, 0};
}
