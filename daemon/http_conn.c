/*
 * http_conn.c - one HTTP/1.1 client connection on a worker's loop: reads
 * into the codec, hands whole requests to the routes, writes the answers
 * in order (pipelined answers go out in one write), and enforces the
 * timeouts: a connection idle between requests is closed after
 * --idle-timeout; a request must arrive whole within --request-timeout
 * from its first byte, however slowly it trickles (a slowloris gets 408).
 * A connection that ends after an error is half-closed and drained for a
 * moment before it is closed, so the client reads the answer instead of a
 * reset.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "conn.h"
#include "http.h"
#include "log.h"

/* How long a closing connection is drained after its last answer. */
#define LINGER_MS 2000
/* Queued answer bytes above which reading pauses until they are written. */
#define MAX_QUEUED_OUT (1u << 20)
/* Route number of requests that match none (the last route name). */
#define ROUTE_OTHER (routes_count - 1)

/* What the connection's one timer measures. */
typedef enum timer_mode {
    T_IDLE,    /* between requests: --idle-timeout */
    T_REQUEST, /* from a request's first byte to its end: --request-timeout */
    T_SEND,    /* reading paused until the client takes its answers: --idle-timeout */
} timer_mode;

struct http_conn {
    conn base; /* first: an http_conn is a conn */
    weir_http1 *parser;
    void *parser_mem; /* the parser and its request buffer, one block */
    weir_buf out[2];  /* out[cur] collects answers; the other may be in flight */
    int cur;
    bool writing;
    uv_write_t wreq;
    /* the request being answered */
    bool keep_alive, head, http10, answered;
    size_t route;
    uint64_t t0_ns;
    /* state */
    timer_mode tmode; /* what the timer measures */
    bool close_after_write;
    bool paused; /* reading stopped until queued answers are written */
};

worker *http_worker(http_conn *c)
{
    return c->base.w;
}

void http_set_route(http_conn *c, size_t route)
{
    c->route = route;
}

static void conn_free(conn *base)
{
    http_conn *c = (http_conn *)base;
    weir_buf_free(&c->out[0]);
    weir_buf_free(&c->out[1]);
    free(c->parser_mem);
    free(c);
}

void http_conn_close(http_conn *c)
{
    conn_close(&c->base);
}

static void on_timer(uv_timer_t *t);
static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

static void arm(http_conn *c, timer_mode mode, int64_t ms)
{
    c->tmode = mode;
    uv_timer_start(&c->base.timer, on_timer, (uint64_t)ms, 0);
}

/* After the last answer: half-close, then linger. */
static void finish(http_conn *c)
{
    conn_finish(&c->base, LINGER_MS);
}

static void flush(http_conn *c);
static void arm_for_input(http_conn *c);

static void on_write(uv_write_t *req, int status)
{
    http_conn *c = req->data;
    c->writing = false;
    weir_buf_clear(&c->out[c->cur ^ 1]);
    if (c->base.closed)
        return;
    if (status < 0) {
        http_conn_close(c);
        return;
    }
    flush(c);
}

static void flush(http_conn *c)
{
    if (c->writing || c->base.closed)
        return;
    weir_buf *b = &c->out[c->cur];
    if (b->len) {
        uv_buf_t ub = uv_buf_init(b->p, (unsigned)b->len);
        int n = uv_try_write((uv_stream_t *)&c->base.tcp, &ub, 1);
        if (n == (int)b->len) {
            weir_buf_clear(b);
        } else if (n < 0 && n != UV_EAGAIN) {
            http_conn_close(c);
            return;
        } else {
            size_t done = n > 0 ? (size_t)n : 0;
            ub = uv_buf_init(b->p + done, (unsigned)(b->len - done));
            c->wreq.data = c;
            c->writing = true;
            c->cur ^= 1;
            if (uv_write(&c->wreq, (uv_stream_t *)&c->base.tcp, &ub, 1, on_write) < 0) {
                c->writing = false;
                http_conn_close(c);
            }
            return;
        }
    }
    if (c->close_after_write) {
        finish(c);
        return;
    }
    if (c->paused) {
        c->paused = false;
        c->tmode = T_IDLE; /* a request held up by the pause starts afresh */
        arm_for_input(c);
        uv_read_start((uv_stream_t *)&c->base.tcp, conn_alloc_rbuf, on_read);
    }
}

/* "HTTP/1.1 NNN Reason\r\n" without printf: it is on every answer. */
static void put_status_line(weir_buf *o, int status)
{
    char line[16] = "HTTP/1.1 000 ";
    int v = status < 100 || status > 999 ? 500 : status;
    line[9] = (char)('0' + v / 100);
    line[10] = (char)('0' + v / 10 % 10);
    line[11] = (char)('0' + v % 10);
    weir_buf_put(o, line, 13);
    weir_buf_puts(o, weir_api_reason(v));
    weir_buf_put(o, "\r\n", 2);
}

void http_respond(http_conn *c, int status, const char *content_type, const weir_buf *extra,
                  const char *body, size_t len)
{
    worker *w = c->base.w;
    if (c->answered)
        return;
    c->answered = true;
    if (atomic_load_explicit(&w->srv->closing, memory_order_relaxed))
        c->keep_alive = false;
    weir_buf *o = &c->out[c->cur];
    put_status_line(o, status);
    weir_buf_puts(o, w->date);
    if (content_type) {
        weir_buf_puts(o, "Content-Type: ");
        weir_buf_puts(o, content_type);
        weir_buf_puts(o, "\r\n");
    }
    weir_buf_puts(o, "Content-Length: ");
    weir_buf_put_u64(o, len);
    weir_buf_puts(o, "\r\n");
    if (!c->keep_alive)
        weir_buf_puts(o, "Connection: close\r\n");
    else if (c->http10)
        weir_buf_puts(o, "Connection: keep-alive\r\n");
    if (extra)
        weir_buf_put(o, extra->p, extra->len);
    weir_buf_puts(o, "\r\n");
    if (!c->head)
        weir_buf_put(o, body, len);
    if (!weir_buf_ok(o)) {
        /* out of memory for the answer: nothing sensible can follow */
        dlog(WEIR_LOG_ERROR, "response_dropped", "reason", "out of memory", NULL);
        weir_buf_clear(o);
        c->keep_alive = false;
    }
    if (!c->keep_alive)
        c->close_after_write = true;
    metrics_request(w->metrics, PROTO_HTTP, (int64_t)(uv_hrtime() - c->t0_ns), c->route, status);
}

/* Answers a codec or routing error with a problem+json body. */
static void respond_error(http_conn *c, int status, const char *detail)
{
    worker *w = c->base.w;
    weir_buf_clear(&w->body);
    weir_api_render_error(&w->body, status, detail);
    http_respond(c, status, "application/problem+json", NULL, w->body.p, w->body.len);
}

static size_t host_count(const weir_http1_request *req)
{
    size_t n = 0;
    for (size_t i = 0; i < req->n_headers; i++)
        n += req->headers[i].name.n == 4 && strncasecmp(req->headers[i].name.p, "host", 4) == 0;
    return n;
}

/* Arms the timer for what the connection waits for from the client: the
 * rest of a request begun (its deadline runs from its first byte), or the
 * next one. */
static void arm_for_input(http_conn *c)
{
    const serve_options *o = &c->base.w->srv->opt;
    if (weir_http1_in_request(c->parser)) {
        if (c->tmode != T_REQUEST)
            arm(c, T_REQUEST, o->request_timeout_ms);
    } else {
        arm(c, T_IDLE, o->idle_timeout_ms);
    }
}

/* Feeds @n bytes to the codec and answers every whole request in them. */
static void process(http_conn *c, const char *data, size_t n)
{
    worker *w = c->base.w;
    size_t off = 0;
    while (off < n && !c->close_after_write) {
        size_t used = 0;
        weir_http1_request req;
        weir_http1_error err;
        weir_http1_result r = weir_http1_feed(c->parser, data + off, n - off, &used, &req, &err);
        off += used;
        if (r == WEIR_HTTP1_NEED_MORE)
            break;
        c->answered = false;
        c->route = ROUTE_OTHER;
        c->t0_ns = uv_hrtime();
        if (r == WEIR_HTTP1_ERROR) {
            c->keep_alive = false;
            c->head = false;
            c->http10 = false;
            respond_error(c, err.status, err.message);
            break;
        }
        c->keep_alive = req.keep_alive;
        c->head = req.method == WEIR_HTTP1_HEAD;
        c->http10 = req.version_minor == 0;
        c->tmode = T_IDLE; /* the next request gets its own deadline */
        size_t hosts = host_count(&req);
        if ((!c->http10 && hosts == 0) || hosts > 1) {
            /* RFC 9112 3.2: a server MUST answer 400 */
            c->keep_alive = false;
            respond_error(c, 400, hosts ? "more than one Host header" : "missing Host header");
            break;
        }
        routes_handle(c, &req);
        if (!c->answered)
            respond_error(c, 500, "no answer");
        if (used == 0)
            break; /* cannot happen with a whole request; never spin */
    }
    if (c->base.closed || c->close_after_write)
        return;
    if (c->out[c->cur].len + c->out[c->cur ^ 1].len > MAX_QUEUED_OUT && !c->paused) {
        /* The client is not taking its answers: stop reading. Its next
         * request waits in the socket, not on a deadline of its own. */
        c->paused = true;
        uv_read_stop((uv_stream_t *)&c->base.tcp);
        arm(c, T_SEND, w->srv->opt.idle_timeout_ms);
        return;
    }
    arm_for_input(c);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    http_conn *c = s->data;
    if (nread < 0) {
        http_conn_close(c);
        return;
    }
    if (nread > 0) {
        process(c, buf->base, (size_t)nread);
        flush(c);
    }
}

static void on_timer(uv_timer_t *t)
{
    http_conn *c = t->data;
    if (c->tmode != T_REQUEST) {
        http_conn_close(c);
        return;
    }
    c->answered = false;
    c->keep_alive = false;
    c->head = false;
    c->route = ROUTE_OTHER;
    c->t0_ns = uv_hrtime();
    respond_error(c, 408, "the request did not arrive in time");
    uv_read_stop((uv_stream_t *)&c->base.tcp);
    flush(c);
}

void http_conn_drain(http_conn *c)
{
    if (c->base.closed || c->base.lingering || c->close_after_write)
        return;
    if (!weir_http1_in_request(c->parser) && !c->writing && !c->out[c->cur].len)
        http_conn_close(c);
    /* otherwise the answer in progress carries Connection: close */
}

void http_conn_accept(worker *w)
{
    server *srv = w->srv;
    http_conn *c = (http_conn *)conn_accept(w, (uv_stream_t *)&w->http, sizeof(*c), PROTO_HTTP,
                                            &w->http_conns, conn_free);
    if (!c)
        return;
    weir_http1_limits lim = {(size_t)srv->opt.max_header_bytes, (size_t)srv->opt.max_body_bytes};
    size_t cap = lim.max_header_bytes + lim.max_body_bytes;
    size_t psize = (weir_http1_size() + 15) & ~(size_t)15;
    c->parser_mem = malloc(psize + cap);
    if (!c->parser_mem) {
        http_conn_close(c);
        return;
    }
    c->parser = weir_http1_init(c->parser_mem, &lim, (char *)c->parser_mem + psize, cap);
    weir_buf_init(&c->out[0], SIZE_MAX);
    weir_buf_init(&c->out[1], SIZE_MAX);
    uv_tcp_nodelay(&c->base.tcp, 1);
    arm(c, T_IDLE, srv->opt.idle_timeout_ms);
    uv_read_start((uv_stream_t *)&c->base.tcp, conn_alloc_rbuf, on_read);
}
