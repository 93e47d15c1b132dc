/*
 * conn.c - one HTTP/1.1 client connection on a worker's loop: reads into
 * the codec, hands whole requests to the routes, and sends the answers in
 * request order. Each request gets an answer in the connection's queue;
 * answers are sent as soon as every one before them is ready, so
 * pipelined requests whose decisions complete out of order are still
 * answered in order, several in one write.
 *
 * Backpressure: reading pauses while more than --max-pipelined answers
 * wait (the bytes read and not yet parsed are kept), or while more than
 * 1 MiB of answers wait on a client that is not reading (replies.h).
 *
 * Timeouts: a connection idle between requests is closed after
 * --idle-timeout; a request must arrive whole within --request-timeout
 * from its first byte, however slowly it trickles (a slowloris gets 408).
 * A connection that ends after an error is half-closed and drained for a
 * moment before it is closed, so the client reads the answer instead of a
 * reset.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http.h"
#include "log.h"
#include "replies.h"
#include "routes.h"

/* Route number of requests that match none (the last route name). */
#define ROUTE_OTHER (routes_count - 1)

/* What the connection's one timer measures. */
typedef enum timer_mode {
    T_IDLE,    /* between requests: --idle-timeout */
    T_REQUEST, /* from a request's first byte to its end: --request-timeout */
    T_SEND,    /* reading paused until the client takes its answers: --idle-timeout */
    T_GRACE,   /* closing: a last moment for a request already on its way */
} timer_mode;

/* When the service closes, an idle keep-alive connection waits this long
 * before it ends: a request its client sent just then is read and
 * answered (with Connection: close) instead of meeting a closed socket. */
#define CLOSE_GRACE_MS 250

typedef struct http_conn {
    conn base; /* first: an http_conn is a conn */
    weir_http1 *parser;
    void *parser_mem; /* the parser and its request buffer, one block */
    replies r;        /* its answers (http_answer slots), in request order */
    char *stash;      /* bytes read and not yet parsed (reading paused) */
    size_t stash_len;
    timer_mode tmode;
    bool no_more; /* a request ends the connection: parse no more */
} http_conn;

static void conn_free(conn *base)
{
    http_conn *c = (http_conn *)base;
    replies_free(&c->r);
    free(c->stash);
    free(c->parser_mem);
    free(c);
}

static void on_timer(uv_timer_t *t);
static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);
static bool http_idle(const conn *base);

static void arm(http_conn *c, timer_mode mode, int64_t ms)
{
    c->tmode = mode;
    uv_timer_start(&c->base.timer, on_timer, (uint64_t)ms, 0);
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

/* A new answer at the end of the queue; NULL when out of memory. */
static http_answer *answer_new(http_conn *c)
{
    http_answer *a = (http_answer *)replies_add(&c->r, false);
    if (!a)
        return NULL;
    a->conn = &c->base;
    a->keep_alive = false;
    a->head = false;
    a->http10 = false;
    a->route = ROUTE_OTHER;
    a->t0_ns = uv_hrtime();
    a->priority = -1;
    return a;
}

/* ------------------------------------------------------------ reading */

static size_t host_count(const weir_http1_request *req)
{
    size_t n = 0;
    for (size_t i = 0; i < req->n_headers; i++)
        n += req->headers[i].name.n == 4 && strncasecmp(req->headers[i].name.p, "host", 4) == 0;
    return n;
}

/* Keeps @n bytes not yet parsed for when reading resumes; false when out
 * of memory (the connection is then closed). */
static bool stash(http_conn *c, const char *data, size_t n)
{
    char *p = malloc(n);
    if (!p) {
        conn_close(&c->base);
        return false;
    }
    memcpy(p, data, n);
    c->stash = p;
    c->stash_len = n;
    return true;
}

/* "100 Continue" to a client that waits for it before sending its body.
 * It must not pass answers to earlier requests: with any still to come,
 * none is sent (the client sends its body after a while anyway, as RFC
 * 9110 10.1.1 has it). */
static void send_continue(http_conn *c)
{
    static const char line[] = "HTTP/1.1 100 Continue\r\n\r\n";
    if (c->r.head || c->r.wr.writing || conn_writer_queued(&c->r.wr))
        return;
    weir_buf_put(conn_writer_buf(&c->r.wr), line, sizeof(line) - 1);
    conn_writer_flush(&c->r.wr);
}

/* Feeds @n bytes to the codec and hands every whole request in them to
 * the routes, until too many answers wait (the rest is stashed). */
static void process(http_conn *c, const char *data, size_t n)
{
    worker *w = c->base.w;
    size_t max_queued = (size_t)w->srv->opt.max_pipelined;
    size_t off = 0;
    c->r.processing = true;
    while (off < n && !c->no_more && !c->base.closed) {
        if (c->r.queued >= max_queued)
            replies_collect(&c->r); /* the answers made already go to the writer */
        if (c->r.queued >= max_queued) {
            /* Too many answers wait for their decisions: the rest waits in
             * memory, and the socket's next bytes in the kernel, until
             * they go. */
            replies_pause(&c->r);
            stash(c, data + off, n - off);
            break;
        }
        size_t used = 0;
        weir_http1_request req;
        weir_http1_error err;
        weir_http1_result r = weir_http1_feed(c->parser, data + off, n - off, &used, &req, &err);
        off += used;
        if (r == WEIR_HTTP1_NEED_MORE) {
            if (weir_http1_take_continue(c->parser))
                send_continue(c);
            break;
        }
        http_answer *a = answer_new(c);
        if (!a) {
            conn_close(&c->base);
            break;
        }
        if (r == WEIR_HTTP1_ERROR) {
            c->no_more = true;
            http_answer_problem(a, err.status, err.message);
            break;
        }
        a->keep_alive = req.keep_alive;
        a->head = req.method == WEIR_HTTP1_HEAD;
        a->http10 = req.version_minor == 0;
        c->no_more = !req.keep_alive;
        c->tmode = T_IDLE; /* the next request gets its own deadline */
        size_t hosts = host_count(&req);
        if ((!a->http10 && hosts == 0) || hosts > 1) {
            /* RFC 9112 3.2: a server MUST answer 400 */
            a->keep_alive = false;
            c->no_more = true;
            http_answer_problem(a, 400,
                                hosts ? "more than one Host header" : "missing Host header");
            break;
        }
        routes_handle(c->base.l->state, a, &req);
        if (used == 0)
            break; /* cannot happen with a whole request; never spin */
    }
    c->r.processing = false;
}

/* Reading resumes once the answers waiting are few enough: the stashed
 * bytes first (true when some were parsed: their answers may be ready to
 * send), then the socket. */
static bool resume(replies *r)
{
    http_conn *c = (http_conn *)r->c;
    if (r->queued >= c->base.w->srv->opt.max_pipelined)
        return false;
    r->paused = false;
    if (c->stash) {
        char *p = c->stash;
        size_t n = c->stash_len;
        c->stash = NULL;
        c->stash_len = 0;
        process(c, p, n);
        free(p);
        if (c->base.closed || r->paused)
            return true;
    }
    c->tmode = T_IDLE; /* a request held up by the pause starts afresh */
    arm_for_input(c);
    uv_read_start((uv_stream_t *)&c->base.tcp, conn_alloc_rbuf, on_read);
    return true;
}

static void stalled(replies *r)
{
    http_conn *c = (http_conn *)r->c;
    arm(c, T_SEND, c->base.w->srv->opt.idle_timeout_ms);
}

static const replies_ops http_replies = {resume, stalled};

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    http_conn *c = s->data;
    if (nread < 0) {
        conn_close(&c->base);
        return;
    }
    if (nread == 0)
        return;
    conn_touch(&c->base);
    process(c, buf->base, (size_t)nread);
    if (c->base.closed)
        return;
    if (!c->r.paused)
        arm_for_input(c);
    replies_pump(&c->r);
}

static void on_timer(uv_timer_t *t)
{
    http_conn *c = t->data;
    if (c->tmode == T_GRACE) {
        if (!http_idle(&c->base) || !conn_end_idle(&c->base))
            arm(c, T_GRACE, CLOSE_GRACE_MS); /* a request came: it is answered first */
        return;
    }
    if (c->tmode != T_REQUEST) {
        conn_close(&c->base);
        return;
    }
    http_answer *a = answer_new(c);
    if (!a) {
        conn_close(&c->base);
        return;
    }
    c->no_more = true;
    uv_read_stop((uv_stream_t *)&c->base.tcp);
    http_answer_problem(a, 408, "the request did not arrive in time");
    replies_pump(&c->r);
}

/* ------------------------------------------------------------ the protocol */

static void http_kick(conn *base)
{
    replies_kick(&((http_conn *)base)->r);
}

static bool http_idle(const conn *base)
{
    const http_conn *c = (const http_conn *)base;
    return !weir_http1_in_request(c->parser) && !c->stash && !c->r.head && !c->r.wr.writing &&
           !conn_writer_queued(&c->r.wr);
}

static void http_drain(conn *base)
{
    http_conn *c = (http_conn *)base;
    if (base->closed || base->lingering || c->r.close_after_write)
        return;
    if (http_idle(base))
        arm(c, T_GRACE, CLOSE_GRACE_MS);
    /* otherwise the answers in progress (and those to requests that
     * reached the socket) carry Connection: close */
}

static void http_accept(listener *l)
{
    server *srv = l->w->srv;
    http_conn *c = (http_conn *)conn_accept(l, sizeof(http_conn), conn_free);
    if (!c)
        return;
    replies_init(&c->r, &c->base, sizeof(http_answer), &http_replies,
                 (size_t)srv->opt.max_unsent_bytes);
    weir_http1_limits lim = {(size_t)srv->opt.max_header_bytes, (size_t)srv->opt.max_body_bytes};
    size_t cap = lim.max_header_bytes + lim.max_body_bytes;
    size_t psize = (weir_http1_size() + 15) & ~(size_t)15;
    c->parser_mem = malloc(psize + cap);
    if (!c->parser_mem) {
        conn_close(&c->base);
        return;
    }
    c->parser = weir_http1_init(c->parser_mem, &lim, (char *)c->parser_mem + psize, cap);
    uv_tcp_nodelay(&c->base.tcp, 1);
    /* a client that connects and sends nothing holds a socket: it gets
     * --request-timeout for its first byte, not --idle-timeout */
    int64_t first = srv->opt.request_timeout_ms;
    if (srv->opt.idle_timeout_ms < first)
        first = srv->opt.idle_timeout_ms;
    arm(c, T_IDLE, first);
    uv_read_start((uv_stream_t *)&c->base.tcp, conn_alloc_rbuf, on_read);
}

static void *http_worker_new(listener *l)
{
    return routes_state_new(&l->w->srv->opt, false);
}

static void *admin_worker_new(listener *l)
{
    return routes_state_new(&l->w->srv->opt, true);
}

static void http_worker_free(void *state)
{
    routes_state_free(state);
}

const proto http_proto = {
    .name = "http",
    .scheme = "http",
    .metric = PROTO_HTTP,
    .worker_new = http_worker_new,
    .worker_free = http_worker_free,
    .accept = http_accept,
    .drain = http_drain,
    .idle = http_idle,
    .kick = http_kick,
};

/* The admin API's listener: the same connections, the admin routes. */
const proto admin_proto = {
    .name = "admin",
    .scheme = "http",
    .metric = PROTO_HTTP,
    .worker_new = admin_worker_new,
    .worker_free = http_worker_free,
    .accept = http_accept,
    .drain = http_drain,
    .idle = http_idle,
    .kick = http_kick,
    .admin = true,
};
