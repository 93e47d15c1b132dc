/*
 * xds.c - the xDS subscription's connection on the main loop: resolve,
 * connect, one ADS stream (frontends/xds/ads.c) carrying the subscription
 * and the ACKs and NACKs, every response loaded as rules (server.c), and
 * the waits before trying again.
 *
 * States: idle (a wait is running, or nothing: stopped) -> resolving ->
 * connecting -> streaming -> idle. A failure to resolve or connect waits
 * --xds-connect-retry; a stream that ends waits the backoff, which
 * doubles from --xds-backoff-initial up to --xds-backoff-max and starts
 * over once a stream has delivered a response. The version last taken is
 * kept across connections, so a new stream tells the server what is in
 * force already.
 *
 * Invariant: the codec is freed only outside its own callbacks (they set
 * stream_over, and settle() acts on it), and the socket handle is reused
 * only after its close callback.
 */
#include "xds/xds.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "xds/ads.h"
#include "xds/discovery.h"

/* A connection not made by then is given up (and tried again). */
#define CONNECT_TIMEOUT_MS 10000u
#define KEEPALIVE_S 60u
/* The most of a NACK's text sent (the loader's errors, "; " between). */
#define MAX_NACK_BYTES 4000u
#define MAX_HEADERS 16u

typedef enum xstate { X_IDLE, X_RESOLVING, X_CONNECTING, X_STREAMING } xstate;

struct xds_client {
    server *srv;
    uv_loop_t *loop;
    xstate state;
    bool stopping;
    uv_timer_t timer; /* the wait before the next attempt, or the connect timeout */
    uv_getaddrinfo_t gai;
    uv_connect_t creq;
    uv_tcp_t tcp;
    bool tcp_live;    /* initialised, not closed yet */
    bool tcp_closing; /* uv_close() called, its callback not yet run */
    uv_write_t wreq;
    bool writing;
    weir_buf wbuf; /* the bytes being written */
    weir_xds_ads *ads;
    bool stream_over;  /* the codec said the stream ended */
    bool got_response; /* this stream delivered a response */
    unsigned failures; /* streams ended in a row without a response */
    uint64_t rng;
    double random_factor;
    char host[SERVE_ADDR_BYTES];
    char port[16];
    weir_xds_metadata meta;
    weir_xds_node node;
    char header_text[sizeof(((serve_options *)0)->xds_headers)];
    const char *header_name[MAX_HEADERS];
    const char *header_value[MAX_HEADERS];
    size_t n_headers;
    char user_agent[64];
    char version[WEIR_XDS_MAX_TEXT + 1]; /* the version in force ("" = none yet) */
    char rbuf[64 * 1024];
};

static void connect_now(xds_client *x);
static void settle(xds_client *x);

/* ------------------------------------------------------------ waits */

static double random01(xds_client *x)
{
    x->rng ^= x->rng << 13;
    x->rng ^= x->rng >> 7;
    x->rng ^= x->rng << 17;
    return (double)(x->rng >> 11) / (double)(UINT64_C(1) << 53);
}

/* @ms moved by up to @factor of itself at random (when jitter is on). */
static uint64_t jittered(xds_client *x, uint64_t ms, double factor)
{
    if (!x->srv->opt.xds_backoff_jitter || factor <= 0)
        return ms;
    double d = (double)ms * (1.0 + factor * (2.0 * random01(x) - 1.0));
    return d < 1.0 ? 1 : (uint64_t)d;
}

static void on_timer(uv_timer_t *t)
{
    xds_client *x = t->data;
    if (x->stopping)
        return;
    if (x->tcp_closing) { /* the old socket's close is still to come */
        uv_timer_start(&x->timer, on_timer, 10, 0);
        return;
    }
    connect_now(x);
}

static void wait_then_retry(xds_client *x, uint64_t ms)
{
    x->state = X_IDLE;
    if (x->stopping)
        return;
    char delay[24];
    snprintf(delay, sizeof(delay), "%llums", (unsigned long long)ms);
    dlog(WEIR_LOG_INFO, "xds_retry", "server", x->srv->opt.xds_server, "after", delay, NULL);
    uv_timer_start(&x->timer, on_timer, ms, 0);
}

/* The wait after a stream that ended: initial * 2^failures, at most max. */
static uint64_t stream_backoff(xds_client *x)
{
    const serve_options *o = &x->srv->opt;
    if (x->got_response)
        x->failures = 0;
    uint64_t ms = (uint64_t)o->xds_backoff_initial_ms, max = (uint64_t)o->xds_backoff_max_ms;
    for (unsigned i = 0; i < x->failures && ms < max; i++)
        ms *= 2;
    if (x->failures < 64)
        x->failures++;
    ms = jittered(x, ms < max ? ms : max, x->random_factor);
    return ms < max ? ms : max;
}

/* ------------------------------------------------------------ the connection */

static void on_tcp_closed(uv_handle_t *h)
{
    xds_client *x = h->data;
    x->tcp_live = false;
    x->tcp_closing = false;
}

static void close_conn(xds_client *x)
{
    weir_xds_ads_free(x->ads);
    x->ads = NULL;
    x->stream_over = false;
    if (x->tcp_live && !x->tcp_closing) {
        x->tcp_closing = true;
        uv_close((uv_handle_t *)&x->tcp, on_tcp_closed);
    }
}

/* A failure to resolve or connect: log, close, try again later. */
static void connect_failed(xds_client *x, const char *what, int status)
{
    dlog(WEIR_LOG_WARN, "xds_connect_failed", "server", x->srv->opt.xds_server, "step", what,
         "error", uv_strerror(status), NULL);
    close_conn(x);
    wait_then_retry(x, jittered(x, (uint64_t)x->srv->opt.xds_connect_retry_ms, 0.5));
}

/* The stream or its connection ended. */
static void lost(xds_client *x)
{
    close_conn(x);
    wait_then_retry(x, stream_backoff(x));
}

static void on_written(uv_write_t *req, int status)
{
    xds_client *x = req->data;
    x->writing = false;
    weir_buf_clear(&x->wbuf);
    if (x->stopping || status == UV_ECANCELED || x->state != X_STREAMING)
        return;
    if (status < 0) {
        dlog(WEIR_LOG_WARN, "xds_disconnected", "server", x->srv->opt.xds_server, "error",
             uv_strerror(status), NULL);
        lost(x);
        return;
    }
    settle(x);
}

/* Writes what the codec has for the server (one write at a time). */
static void flush(xds_client *x)
{
    if (!x->ads || x->writing || !x->tcp_live || x->tcp_closing)
        return;
    if (!weir_xds_ads_send(x->ads, &x->wbuf)) {
        x->stream_over = true;
        return;
    }
    if (!x->wbuf.len)
        return;
    uv_buf_t b = uv_buf_init(x->wbuf.p, (unsigned)x->wbuf.len);
    x->wreq.data = x;
    int rc = uv_write(&x->wreq, (uv_stream_t *)&x->tcp, &b, 1, on_written);
    if (rc < 0) {
        weir_buf_clear(&x->wbuf);
        dlog(WEIR_LOG_WARN, "xds_disconnected", "server", x->srv->opt.xds_server, "error",
             uv_strerror(rc), NULL);
        x->stream_over = true;
        return;
    }
    x->writing = true;
}

/* After anything the codec may have reacted to: drop the stream when it
 * ended, else send what it has. */
static void settle(xds_client *x)
{
    if (x->state != X_STREAMING)
        return;
    if (!x->stream_over)
        flush(x);
    if (x->stream_over)
        lost(x);
}

/* ------------------------------------------------------------ responses */

/* Queues a DiscoveryRequest: an ACK (@error NULL) or a NACK of @nonce. */
static void answer(xds_client *x, const char *nonce, const char *error)
{
    weir_buf b;
    weir_buf_init(&b, SIZE_MAX);
    if (!weir_xds_request(&b, &x->node, x->version, nonce, error) ||
        !weir_xds_ads_queue(x->ads, b.p, b.len))
        x->stream_over = true;
    weir_buf_free(&b);
}

static void nack(xds_client *x, const weir_xds_response *r, const char *why)
{
    char text[MAX_NACK_BYTES + 1];
    snprintf(text, sizeof(text), "%s", why);
    metrics_reload(x->srv->metrics, false, server_now_us(x->srv), text[0] ? text : NULL);
    dlog(WEIR_LOG_ERROR, "xds_rejected", "version", r->version, "nonce", r->nonce, "error", text,
         "kept", x->version[0] ? x->version : "the rules in force", NULL);
    for (size_t i = 0; i < r->n_docs && dlog_enabled(WEIR_LOG_DEBUG); i++)
        dlog(WEIR_LOG_DEBUG, "xds_resource", "name", r->docs[i].name, "yaml",
             (const char *)r->docs[i].data, NULL);
    answer(x, r->nonce, text[0] ? text : "rules refused");
}

static void apply(xds_client *x, const weir_xds_response *r)
{
    weir_buf why;
    weir_buf_init(&why, SIZE_MAX);
    weir_rules *rules = server_parse_rules(x->srv, r->docs, r->n_docs, &why);
    weir_buf_putc(&why, '\0');
    const char *text = weir_buf_ok(&why) ? why.p : "out of memory";
    if (!rules) {
        nack(x, r, text);
    } else if (!server_put_rules(x->srv, rules, "xds")) {
        nack(x, r, "out of memory");
    } else {
        snprintf(x->version, sizeof(x->version), "%s", r->version);
        char n[24];
        snprintf(n, sizeof(n), "%zu", r->n_docs);
        dlog(WEIR_LOG_INFO, "xds_accepted", "version", r->version, "nonce", r->nonce, "resources",
             n, NULL);
        answer(x, r->nonce, NULL);
    }
    weir_buf_free(&why);
}

static void on_message(void *arg, const uint8_t *msg, size_t len)
{
    xds_client *x = arg;
    weir_xds_response r;
    weir_xds_result res = weir_xds_response_decode(msg, len, &r);
    switch (res) {
    case WEIR_XDS_OK:
        x->got_response = true;
        if (strcmp(r.type_url, WEIR_XDS_RLS_TYPE_URL) != 0)
            dlog(WEIR_LOG_WARN, "xds_ignored", "type_url", r.type_url, "detail",
                 "not the rule type subscribed to", NULL);
        else
            apply(x, &r);
        break;
    case WEIR_XDS_BAD_RESOURCE:
        x->got_response = true;
        nack(x, &r, r.error);
        break;
    case WEIR_XDS_MALFORMED:
    case WEIR_XDS_NOMEM:
        dlog(WEIR_LOG_ERROR, "xds_bad_response", "server", x->srv->opt.xds_server, "error", r.error,
             NULL);
        x->stream_over = true;
        break;
    }
    weir_xds_response_free(&r);
}

static void on_end(void *arg, int grpc_status, const char *message)
{
    xds_client *x = arg;
    char st[16];
    snprintf(st, sizeof(st), "%d", grpc_status);
    dlog(WEIR_LOG_WARN, "xds_stream_ended", "server", x->srv->opt.xds_server, "grpc_status", st,
         "message", message, NULL);
    x->stream_over = true;
}

/* ------------------------------------------------------------ connecting */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    xds_client *x = h->data;
    *buf = uv_buf_init(x->rbuf, sizeof(x->rbuf));
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    xds_client *x = s->data;
    if (x->state != X_STREAMING || !x->ads)
        return;
    if (nread > 0) {
        weir_xds_ads_recv(x->ads, (const uint8_t *)buf->base, (size_t)nread);
    } else if (nread < 0) {
        if (!weir_xds_ads_ended(x->ads))
            dlog(WEIR_LOG_WARN, "xds_disconnected", "server", x->srv->opt.xds_server, "error",
                 uv_strerror((int)nread), NULL);
        x->stream_over = true;
    }
    settle(x);
}

static void on_connected(uv_connect_t *req, int status)
{
    xds_client *x = req->data;
    if (x->stopping || status == UV_ECANCELED || x->state != X_CONNECTING)
        return;
    uv_timer_stop(&x->timer);
    if (status < 0) {
        connect_failed(x, "connect", status);
        return;
    }
    uv_tcp_nodelay(&x->tcp, 1);
    uv_tcp_keepalive(&x->tcp, 1, KEEPALIVE_S);
    weir_xds_ads_options o = {x->srv->opt.xds_server,
                              WEIR_XDS_ADS_PATH,
                              x->user_agent,
                              x->header_name,
                              x->header_value,
                              x->n_headers,
                              (size_t)x->srv->opt.xds_max_message_bytes};
    weir_xds_ads_callbacks cb = {on_message, on_end};
    x->ads = weir_xds_ads_new(&o, &cb, x);
    x->got_response = false;
    x->state = X_STREAMING;
    if (!x->ads) {
        dlog(WEIR_LOG_ERROR, "xds_stream_ended", "error", "out of memory", NULL);
        lost(x);
        return;
    }
    dlog(WEIR_LOG_INFO, "xds_connected", "server", x->srv->opt.xds_server, "node",
         x->srv->opt.xds_node_id, "version", x->version[0] ? x->version : "none", NULL);
    answer(x, "", NULL); /* the subscription, with the version in force */
    int rc = uv_read_start((uv_stream_t *)&x->tcp, on_alloc, on_read);
    if (rc < 0) {
        connect_failed(x, "read", rc);
        return;
    }
    settle(x);
}

static void on_connect_timeout(uv_timer_t *t)
{
    xds_client *x = t->data;
    if (!x->stopping && x->state == X_CONNECTING)
        connect_failed(x, "connect", UV_ETIMEDOUT);
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
    xds_client *x = req->data;
    if (x->stopping || x->state != X_RESOLVING) {
        uv_freeaddrinfo(res);
        return;
    }
    if (status < 0) {
        connect_failed(x, "resolve", status);
        return;
    }
    uv_tcp_init(x->loop, &x->tcp);
    x->tcp.data = x;
    x->tcp_live = true;
    x->creq.data = x;
    x->state = X_CONNECTING;
    int rc = uv_tcp_connect(&x->creq, &x->tcp, res->ai_addr, on_connected);
    uv_freeaddrinfo(res);
    if (rc < 0) {
        connect_failed(x, "connect", rc);
        return;
    }
    uv_timer_start(&x->timer, on_connect_timeout, CONNECT_TIMEOUT_MS, 0);
}

static void connect_now(xds_client *x)
{
    struct addrinfo hints;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    x->state = X_RESOLVING;
    x->gai.data = x;
    dlog(WEIR_LOG_DEBUG, "xds_connecting", "server", x->srv->opt.xds_server, NULL);
    int rc = uv_getaddrinfo(x->loop, &x->gai, on_resolved, x->host, x->port, &hints);
    if (rc < 0)
        connect_failed(x, "resolve", rc);
}

/* ------------------------------------------------------------ settings */

/* HOST:PORT (or [V6]:PORT) into x->host and x->port. */
static bool split_server(xds_client *x, const char *addr)
{
    const char *colon = strrchr(addr, ':');
    size_t n = (size_t)(colon - addr);
    if (n >= 2 && addr[0] == '[' && addr[n - 1] == ']') {
        addr++;
        n -= 2;
    }
    if (!n || n >= sizeof(x->host) || strlen(colon + 1) >= sizeof(x->port))
        return false;
    memcpy(x->host, addr, n);
    x->host[n] = '\0';
    snprintf(x->port, sizeof(x->port), "%s", colon + 1);
    for (const char *p = x->port; *p; p++)
        if (!isdigit((unsigned char)*p))
            return false;
    return true;
}

/* "name:value,name2:value2" (upstream's map syntax): names in lower case,
 * HTTP token characters, not a pseudo-header nor one the stream sets. */
static bool parse_headers(xds_client *x, const char *s)
{
    static const char *const reserved[] = {"content-type", "te",   "user-agent",
                                           "grpc-timeout", "host", "connection"};
    snprintf(x->header_text, sizeof(x->header_text), "%s", s);
    for (char *e = x->header_text; e && *e;) {
        char *comma = strchr(e, ',');
        if (comma)
            *comma = '\0';
        char *colon = strchr(e, ':');
        if (!colon || colon == e || x->n_headers == MAX_HEADERS)
            return false;
        *colon = '\0';
        for (char *p = e; *p; p++) {
            *p = (char)tolower((unsigned char)*p);
            if (!isalnum((unsigned char)*p) && !strchr("-_.!#$%&'*+^`|~", *p))
                return false;
        }
        for (size_t i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++)
            if (!strcmp(e, reserved[i]))
                return false;
        x->header_name[x->n_headers] = e;
        x->header_value[x->n_headers] = colon + 1;
        x->n_headers++;
        e = comma ? comma + 1 : NULL;
    }
    return true;
}

xds_client *xds_start(server *s, uv_loop_t *loop, char *err, size_t err_cap)
{
    xds_client *x = calloc(1, sizeof(*x));
    if (!x) {
        snprintf(err, err_cap, "out of memory");
        return NULL;
    }
    x->srv = s;
    x->loop = loop;
    weir_buf_init(&x->wbuf, SIZE_MAX);
    if (!split_server(x, s->opt.xds_server)) {
        snprintf(err, err_cap, "--xds-server '%s': HOST:PORT", s->opt.xds_server);
        free(x);
        return NULL;
    }
    if (!weir_xds_metadata_parse(s->opt.xds_node_metadata, &x->meta)) {
        snprintf(err, err_cap, "--xds-node-metadata: at most %u key=value pairs",
                 WEIR_XDS_MAX_METADATA);
        free(x);
        return NULL;
    }
    if (!parse_headers(x, s->opt.xds_headers)) {
        snprintf(err, err_cap,
                 "--xds-headers '%s': at most %u name:value pairs, names of token characters, "
                 "not one the stream sets itself",
                 s->opt.xds_headers, MAX_HEADERS);
        free(x);
        return NULL;
    }
    x->random_factor = strtod(s->opt.xds_backoff_random_factor, NULL);
    snprintf(x->user_agent, sizeof(x->user_agent), "weir/%s", weir_version());
    x->node.id = s->opt.xds_node_id;
    x->node.metadata = &x->meta;
    x->node.version = weir_version();
    x->rng = uv_hrtime() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)x;
    if (!x->rng)
        x->rng = 1;
    uv_timer_init(loop, &x->timer);
    x->timer.data = x;
    dlog(WEIR_LOG_INFO, "xds_starting", "server", s->opt.xds_server, "node", s->opt.xds_node_id,
         "type_url", WEIR_XDS_RLS_TYPE_URL, NULL);
    connect_now(x);
    return x;
}

void xds_stop(xds_client *x)
{
    if (x->stopping)
        return;
    x->stopping = true;
    if (x->state == X_RESOLVING)
        uv_cancel((uv_req_t *)&x->gai);
    close_conn(x);
    x->state = X_IDLE;
    uv_close((uv_handle_t *)&x->timer, NULL);
}

void xds_free(xds_client *x)
{
    if (!x)
        return;
    weir_xds_ads_free(x->ads);
    weir_buf_free(&x->wbuf);
    free(x);
}
