/*
 * grpc_conn.c - one gRPC (HTTP/2 cleartext) client connection on a
 * worker's loop: reads go into the HTTP/2 codec, whose calls go to the
 * handlers; what the codec has to send leaves in as few writes as
 * possible. Reading pauses while a write is stuck (the client is not
 * reading: backpressure). One timer per connection: incomplete requests'
 * deadlines, the idle timeout (no call open, nothing received), the
 * round trip of a graceful GOAWAY, and the time a stuck client gets.
 * Draining sends GOAWAY twice (a notice, then after a PING round trip the
 * last stream that will be answered), answers the calls in flight and
 * closes. A connection that ends is half-closed and drained for a moment
 * first, so the client reads the GOAWAY instead of a reset.
 */
#include <stdlib.h>
#include <string.h>

#include "calls.h"
#include "conn_write.h"
#include "grpc.h"
#include "log.h"

/* How long a closing connection is drained after its last bytes. */
#define LINGER_MS 1000
/* How long the PING of a graceful GOAWAY may take to come back. */
#define GOAWAY_RTT_MS 250
/* Bytes taken from the codec per write. */
#define WRITE_BUDGET (256u * 1024u)

typedef struct grpc_conn {
    conn base; /* first: a grpc_conn is a conn */
    weir_grpc_h2 *h2;
    conn_writer wr;
    int64_t last_read_ns; /* for the idle timeout */
    int64_t drain_ns;     /* when the GOAWAY notice went out; 0 = not draining */
    bool final_sent;      /* the final GOAWAY is asked for */
    bool ending;          /* no more input: send what is left, then finish */
    bool paused;          /* reading stopped until the stuck write completes */
    bool in_recv;         /* inside weir_grpc_h2_recv(): the codec sends after */
    bool heard;           /* a byte came: until then --request-timeout, not idle */
    /* the last time no call was open or one closed: calls open with none
     * closing for --idle-timeout are answers the client does not take
     * (its flow control window shut), whatever else it sends */
    int64_t progress_ns;
    uint64_t closed_seen;
    int64_t paused_ns;
} grpc_conn;

static int64_t now_ns(void)
{
    return (int64_t)uv_hrtime();
}

static int64_t ms_to_ns(int64_t ms)
{
    return ms > INT64_MAX / 1000000 ? INT64_MAX : ms * 1000000;
}

static void conn_free(conn *base)
{
    grpc_conn *c = (grpc_conn *)base;
    weir_grpc_h2_free(c->h2);
    conn_writer_free(&c->wr);
    free(c);
}

static void grpc_conn_close(grpc_conn *c)
{
    conn_close(&c->base);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);
static void on_timer(uv_timer_t *t);
static void pump(grpc_conn *c);

/* ------------------------------------------------------------ the end */

/* Everything is sent: half-close, then linger. */
static void finish(grpc_conn *c)
{
    conn_finish(&c->base, LINGER_MS);
}

/* Notes whether the calls moved on since the last look. */
static void note_progress(grpc_conn *c, int64_t now)
{
    uint64_t closed = weir_grpc_h2_closed_streams(c->h2);
    if (closed != c->closed_seen || weir_grpc_h2_open_streams(c->h2) == 0) {
        c->closed_seen = closed;
        c->progress_ns = now;
    }
}

/* ------------------------------------------------------------ the timer */

/* How long the connection may stay silent: --idle-timeout, or
 * --request-timeout when it is shorter and nothing came yet (a socket
 * that sent nothing holds one of --max-connections for nothing). */
static int64_t idle_wait_ns(const grpc_conn *c, const serve_options *o)
{
    int64_t ms = o->idle_timeout_ms;
    if (!c->heard && o->request_timeout_ms < ms)
        ms = o->request_timeout_ms;
    return ms_to_ns(ms);
}

/* Arms the timer for the first thing due: a request's deadline, the
 * graceful GOAWAY's round trip, the idle timeout, or a stuck client. Each
 * is in the future once handled, so the timer never spins. */
static void rearm(grpc_conn *c, int64_t now)
{
    if (c->base.closed || c->base.lingering)
        return;
    const serve_options *o = &c->base.w->srv->opt;
    note_progress(c, now);
    int64_t due;
    if (c->paused) {
        due = c->paused_ns + ms_to_ns(o->idle_timeout_ms);
    } else {
        due = weir_grpc_h2_expire(c->h2, now);
        if (c->drain_ns && !c->final_sent && due > c->drain_ns + ms_to_ns(GOAWAY_RTT_MS))
            due = c->drain_ns + ms_to_ns(GOAWAY_RTT_MS);
        /* requests still arriving have their own deadlines */
        if (!weir_grpc_h2_incomplete_streams(c->h2)) {
            int64_t idle = c->last_read_ns + idle_wait_ns(c, o);
            if (idle < due)
                due = idle;
            int64_t stuck = c->progress_ns + ms_to_ns(o->idle_timeout_ms);
            if (weir_grpc_h2_open_streams(c->h2) && stuck < due)
                due = stuck;
        }
    }
    int64_t ms = due <= now ? 0 : (due - now + 999999) / 1000000;
    uv_timer_start(&c->base.timer, on_timer, (uint64_t)ms, 0);
}

static void final_goaway(grpc_conn *c)
{
    c->final_sent = true;
    weir_grpc_h2_goaway(c->h2);
}

static void on_timer(uv_timer_t *t)
{
    grpc_conn *c = t->data;
    if (c->base.lingering || c->base.closed) {
        grpc_conn_close(c);
        return;
    }
    const serve_options *o = &c->base.w->srv->opt;
    int64_t now = now_ns();
    if (c->paused) {
        if (now >= c->paused_ns + ms_to_ns(o->idle_timeout_ms)) {
            grpc_conn_close(c); /* the client has not read for that long */
            return;
        }
    } else {
        weir_grpc_h2_expire(c->h2, now); /* answers what is late */
        note_progress(c, now);
        if (weir_grpc_h2_open_streams(c->h2) && !weir_grpc_h2_incomplete_streams(c->h2) &&
            now >= c->progress_ns + ms_to_ns(o->idle_timeout_ms)) {
            /* every call answered, none taken for that long: the client
             * keeps its window shut (PINGs or not), holding the answers */
            dlog(WEIR_LOG_INFO, "connection_stalled", "proto", "grpc", "detail",
                 "answers not taken for --idle-timeout: closed", NULL);
            grpc_conn_close(c);
            return;
        }
        if (c->drain_ns && !c->final_sent && now >= c->drain_ns + ms_to_ns(GOAWAY_RTT_MS))
            final_goaway(c);
        if (!weir_grpc_h2_incomplete_streams(c->h2) &&
            now >= c->last_read_ns + idle_wait_ns(c, o)) {
            /* Nothing heard for that long. With no call open, a GOAWAY ends
             * the connection cleanly; answers the client will not take (its
             * flow control window closed), or a GOAWAY it ignored, end it
             * at once. */
            if (weir_grpc_h2_open_streams(c->h2) || c->final_sent) {
                grpc_conn_close(c);
                return;
            }
            final_goaway(c);
            c->last_read_ns = now;
        }
    }
    pump(c);
    rearm(c, now);
}

/* ------------------------------------------------------------ writing */

static void on_written(conn_writer *wr)
{
    grpc_conn *c = (grpc_conn *)wr->c;
    pump(c);
    if (!c->base.closed && c->paused && !c->wr.writing) {
        c->paused = false;
        uv_read_start((uv_stream_t *)&c->base.tcp, conn_alloc_rbuf, on_read);
        rearm(c, now_ns());
    }
}

/* Moves what the codec has to send to the socket; finishes the
 * connection when the codec is done or the connection is ending. */
static void pump(grpc_conn *c)
{
    while (!c->wr.writing && !c->base.closed) {
        weir_buf *b = conn_writer_buf(&c->wr);
        if (!weir_grpc_h2_send(c->h2, b, WRITE_BUDGET)) {
            grpc_conn_close(c);
            return;
        }
        if (!b->len)
            break;
        if (!conn_writer_flush(&c->wr))
            return;
    }
    if (c->base.closed || c->wr.writing)
        return;
    if (c->ending || weir_grpc_h2_done(c->h2))
        finish(c);
}

/* ------------------------------------------------------------ reading */

static void on_call(void *arg, weir_grpc_h2 *h2, const weir_grpc_call *call)
{
    grpc_conn *c = arg;
    grpc_calls_handle(c->base.l->state, &c->base, h2, call);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    grpc_conn *c = s->data;
    if (nread < 0) {
        grpc_conn_close(c); /* the client is gone: nobody to answer */
        return;
    }
    if (nread == 0)
        return;
    int64_t now = now_ns();
    c->last_read_ns = now;
    c->heard = true;
    conn_touch(&c->base);
    c->in_recv = true;
    bool ok = weir_grpc_h2_recv(c->h2, (const uint8_t *)buf->base, (size_t)nread, now);
    c->in_recv = false;
    if (!ok) {
        c->ending = true; /* a connection error: its GOAWAY goes out, then close */
        uv_read_stop((uv_stream_t *)&c->base.tcp);
    }
    pump(c);
    if (c->base.closed || c->base.lingering)
        return;
    if (c->wr.writing && !c->paused && !c->ending) {
        /* The socket takes no more: stop reading until it does, so a
         * client that sends calls but reads no answers holds only what
         * one read produced. */
        c->paused = true;
        c->paused_ns = now;
        uv_read_stop((uv_stream_t *)&c->base.tcp);
    }
    rearm(c, now);
}

/* ------------------------------------------------------------ the protocol */

static void grpc_kick(conn *base)
{
    grpc_conn *c = (grpc_conn *)base;
    if (c->in_recv || base->closed || base->lingering)
        return; /* on_read sends what the codec has once recv returns */
    pump(c);
    rearm(c, now_ns());
}

static bool grpc_idle(const conn *base)
{
    const grpc_conn *c = (const grpc_conn *)base;
    return !c->ending && !c->drain_ns && !c->paused && !c->wr.writing &&
           !conn_writer_queued(&c->wr) && weir_grpc_h2_open_streams(c->h2) == 0;
}

static void grpc_drain(conn *base)
{
    grpc_conn *c = (grpc_conn *)base;
    if (c->base.closed || c->base.lingering || c->drain_ns)
        return;
    c->drain_ns = now_ns();
    weir_grpc_h2_shutdown(c->h2);
    pump(c);
    rearm(c, c->drain_ns);
}

static void grpc_accept(listener *l)
{
    server *srv = l->w->srv;
    grpc_conn *c = (grpc_conn *)conn_accept(l, sizeof(grpc_conn), conn_free);
    if (!c)
        return;
    conn_writer_init(&c->wr, &c->base, on_written);
    const serve_options *o = &srv->opt;
    weir_grpc_h2_limits lim = {
        .max_streams = (uint32_t)o->grpc_max_streams,
        .max_message = (size_t)o->grpc_max_message_bytes,
        .max_header_list =
            o->max_header_bytes > UINT32_MAX ? UINT32_MAX : (uint32_t)o->max_header_bytes,
        .request_timeout_ns = ms_to_ns(o->request_timeout_ms),
        .max_unsent = (size_t)o->max_unsent_bytes,
    };
    c->h2 = weir_grpc_h2_new(&lim, on_call, c);
    if (!c->h2) {
        grpc_conn_close(c);
        return;
    }
    uv_tcp_nodelay(&c->base.tcp, 1);
    c->last_read_ns = c->progress_ns = now_ns();
    pump(c); /* our SETTINGS */
    if (c->base.closed)
        return;
    uv_read_start((uv_stream_t *)&c->base.tcp, conn_alloc_rbuf, on_read);
    rearm(c, c->last_read_ns);
}

static void *grpc_worker_new(listener *l)
{
    return grpc_calls_new(&l->w->srv->opt);
}

static void grpc_worker_free(void *state)
{
    grpc_calls_free(state);
}

const proto grpc_proto = {
    .name = "grpc",
    .scheme = "http",
    .metric = PROTO_GRPC,
    .worker_new = grpc_worker_new,
    .worker_free = grpc_worker_free,
    .accept = grpc_accept,
    .drain = grpc_drain,
    .idle = grpc_idle,
    .kick = grpc_kick,
};
