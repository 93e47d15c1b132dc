/*
 * codec.h - HTTP/1.1 request codec: bytes in, whole requests out. It does
 * no I/O and allocates nothing after weir_http1_init(): the connection owns
 * the bytes, feeds them in, and gets back one complete request at a time
 * (pipelined requests come out one by one, in order).
 *
 * Tokenising is http-parser's (Debian's libhttp-parser); this file adds
 * weir's caps, collects the request into one flat buffer and maps every
 * malformed input to the HTTP status a server should answer with.
 *
 * Threads: a parser belongs to one connection.
 */
#ifndef WEIR_FRONTENDS_HTTP1_CODEC_H
#define WEIR_FRONTENDS_HTTP1_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/** Most headers kept per request; more is 431. */
#define WEIR_HTTP1_MAX_HEADERS 64u

typedef struct weir_http1_limits {
    /** Request line plus every header line (431 / 414 beyond). */
    size_t max_header_bytes;
    /** Body bytes, declared or chunked (413 beyond). */
    size_t max_body_bytes;
} weir_http1_limits;

typedef enum weir_http1_method {
    WEIR_HTTP1_GET,
    WEIR_HTTP1_HEAD,
    WEIR_HTTP1_POST,
    WEIR_HTTP1_PUT,    /* the admin API's */
    WEIR_HTTP1_DELETE, /* the admin API's */
    WEIR_HTTP1_OTHER   /* any other valid method: the router answers 405 */
} weir_http1_method;

/** A view into the parser's buffer: valid until the next weir_http1_feed()
 *  or weir_http1_reset(). Not NUL-terminated. */
typedef struct weir_http1_str {
    const char *p;
    size_t n;
} weir_http1_str;

typedef struct weir_http1_header {
    weir_http1_str name;  /* as sent; compare case-insensitively */
    weir_http1_str value; /* leading and trailing blanks removed */
} weir_http1_header;

typedef struct weir_http1_request {
    weir_http1_method method;
    weir_http1_str method_name;
    /** The request target as sent, then split at the first '?': path
     *  (percent-escapes left as they are; for an absolute-form target,
     *  "http://host/p?q", the part from the '/' after the authority, empty
     *  when there is none) and query (without the '?'; empty when none). */
    weir_http1_str target, path, query;
    unsigned version_minor; /* HTTP/1.<minor>: 0 or 1 */
    weir_http1_header headers[WEIR_HTTP1_MAX_HEADERS];
    size_t n_headers;
    /** The body, de-chunked. */
    weir_http1_str body;
    /** Whether the connection may carry another request after this one's
     *  answer (HTTP/1.1 default, HTTP/1.0 keep-alive, Connection: close). */
    bool keep_alive;
} weir_http1_request;

typedef enum weir_http1_result {
    WEIR_HTTP1_NEED_MORE, /* every byte consumed, no whole request yet */
    WEIR_HTTP1_REQUEST,   /* *req holds one whole request */
    WEIR_HTTP1_ERROR      /* *err says what to answer; close afterwards */
} weir_http1_result;

typedef struct weir_http1_error {
    /** 400, 413, 414, 431, 501 (unsupported transfer coding), 505. */
    int status;
    /** A short static description, e.g. "header section too large". */
    const char *message;
} weir_http1_error;

typedef struct weir_http1 weir_http1;

/** Size of a parser, for callers that embed it: weir_http1_size() bytes. */
size_t weir_http1_size(void);

/**
 * weir_http1_init() - prepare a parser in @mem (weir_http1_size() bytes)
 * with @buf of @cap bytes as its request buffer (it must hold the largest
 * request: max_header_bytes + max_body_bytes is enough). Returns the parser.
 *
 * @mem must be aligned as malloc() aligns; the parser holds no pointer to
 * itself, so it may be moved between calls. A smaller @buf is safe: requests
 * that do not fit fail (431, 414 or 413). Returns NULL if @mem or @limits is
 * NULL. The limits are copied.
 */
weir_http1 *weir_http1_init(void *mem, const weir_http1_limits *limits, char *buf, size_t cap);

/**
 * weir_http1_feed() - parse @len bytes of @data.
 *
 * Consumes bytes up to the end of the first whole request or all of them,
 * and sets *@consumed to how many; the caller keeps the rest and feeds it
 * again after answering (pipelining). Returns WEIR_HTTP1_REQUEST with *@req
 * filled, WEIR_HTTP1_NEED_MORE, or WEIR_HTTP1_ERROR with *@err filled
 * (the parser then stays in error until weir_http1_reset()).
 *
 * Feeding zero bytes after a REQUEST returns the next buffered state (for
 * the caller's convenience; nothing changes). Never reads past @len.
 *
 * The result does not depend on how the bytes are split across calls. Each
 * request starts afresh, even after one without keep-alive: whether to read
 * on is the caller's decision (req->keep_alive). Upgrade and CONNECT
 * requests come out as ordinary requests. Trailer fields of a chunked body
 * are dropped. Beyond the caps, 400 also answers obsolete line folding, a
 * '#' fragment in the target, Content-Length with Transfer-Encoding,
 * and whitespace between a header name and its colon (RFC 9112 5.1); 501
 * any Transfer-Encoding but a single "chunked"; 505 any version but 1.0/1.1.
 */
weir_http1_result weir_http1_feed(weir_http1 *parser, const char *data, size_t len,
                                  size_t *consumed, weir_http1_request *req, weir_http1_error *err);

/** Whether the request in progress asked for "HTTP/1.1 100 Continue"
 *  (Expect: 100-continue, its header section whole, its body to come):
 *  true once per request, after the feed that completed its headers. */
bool weir_http1_take_continue(weir_http1 *parser);

/** Whether a request has begun but not completed (for idle timeouts:
 *  a connection between requests is idle; one mid-request is slow). */
bool weir_http1_in_request(const weir_http1 *parser);

/** Forget any partial request and any error; the buffer is reused. */
void weir_http1_reset(weir_http1 *parser);

/** The value of the first header named @name (ASCII case-insensitive), or
 *  a view with p == NULL. */
weir_http1_str weir_http1_header_get(const weir_http1_request *req, const char *name);

#endif /* WEIR_FRONTENDS_HTTP1_CODEC_H */
