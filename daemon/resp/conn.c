/*
 * conn.c - one Redis-protocol client connection on a worker's loop: reads
 * into the command parser, runs each whole command (commands.c), and
 * sends the replies in command order, as many as are ready in one write.
 *
 * Input: commands are parsed straight from the worker's read buffer; only
 * the bytes of a command not yet whole are kept, in the connection's own
 * buffer (at most RESP_MAX_PENDING bytes: past that the command is
 * refused and the connection closed, so a client cannot make the server
 * hold an arbitrary amount for it).
 *
 * Backpressure: reading pauses while --max-pipelined decisions are in
 * flight (the bytes read and not yet run are kept), or while more than
 * MAX_QUEUED_OUT bytes of replies wait on a client that is not reading.
 *
 * Timeouts: as Redis, an idle connection stays open (client pools keep
 * theirs for long; --resp-idle-timeout closes them); a command begun must
 * arrive whole within --request-timeout; a client that does not take its
 * replies is closed after --idle-timeout.
 */
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "log.h"
#include "proto_resp.h"
#include "session.h"

/* How long a closing connection is drained after its last reply. */
#define LINGER_MS 2000
/* Queued reply bytes above which reading pauses until they are written. */
#define MAX_QUEUED_OUT (1u << 20)
/* Most bytes of one command held while it arrives. */
#define RESP_MAX_PENDING (1u << 20)

enum { T_IDLE, T_REQUEST, T_SEND };

static void conn_free(conn *base)
{
    resp_conn *c = (resp_conn *)base;
    conn_writer_free(&c->wr);
    for (int pass = 0; pass < 2; pass++)
        for (resp_slot *s = pass ? c->spare : c->head, *next; s; s = next) {
            next = s->next;
            weir_buf_free(&s->bytes);
            free(s);
        }
    weir_buf_free(&c->in);
    weir_resp_parser_free(c->parser);
    free(c);
}

static void on_timer(uv_timer_t *t);
static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);
static void pump(resp_conn *c);

static void arm(resp_conn *c, int mode, int64_t ms)
{
    c->tmode = mode;
    if (ms > 0)
        uv_timer_start(&c->base.timer, on_timer, (uint64_t)ms, 0);
    else
        uv_timer_stop(&c->base.timer);
}

/* The timer for what the connection waits for: the rest of a command
 * begun (from its first byte), or the next one. */
static void arm_for_input(resp_conn *c)
{
    const serve_options *o = &c->base.w->srv->opt;
    if (c->in.len > 0) {
        if (c->tmode != T_REQUEST)
            arm(c, T_REQUEST, o->request_timeout_ms);
    } else {
        arm(c, T_IDLE, o->resp_idle_timeout_ms);
    }
}

/* ------------------------------------------------------------ replies */

static resp_slot *slot_new(resp_conn *c, bool ready)
{
    resp_slot *s = c->spare;
    if (s) {
        c->spare = s->next;
        weir_buf_clear(&s->bytes);
    } else {
        if (!(s = malloc(sizeof(*s))))
            return NULL;
        weir_buf_init(&s->bytes, SIZE_MAX);
    }
    s->next = NULL;
    s->conn = c;
    s->ready = ready;
    s->close_after = false;
    if (c->tail)
        c->tail->next = s;
    else
        c->head = s;
    c->tail = s;
    return s;
}

/* When out of memory for a slot, replies go nowhere: the connection is
 * closed (a client must not get replies out of order). */
static weir_buf g_nowhere = {NULL, 0, 0, 0, true};

weir_buf *resp_out(resp_conn *c)
{
    if (!c->head)
        return conn_writer_buf(&c->wr);
    if (c->tail->ready && !c->tail->close_after)
        return &c->tail->bytes;
    resp_slot *s = slot_new(c, true);
    if (!s) {
        conn_close(&c->base);
        return &g_nowhere;
    }
    return &s->bytes;
}

resp_slot *resp_hold(resp_conn *c)
{
    resp_slot *s = slot_new(c, false);
    if (s)
        c->held++;
    return s;
}

void resp_close_after(resp_conn *c)
{
    c->no_more = true;
    if (!c->head) {
        c->close_after_write = true;
        return;
    }
    resp_slot *s = c->tail->ready ? c->tail : slot_new(c, true);
    if (!s) {
        conn_close(&c->base);
        return;
    }
    s->close_after = true;
}

void resp_slot_ready(resp_slot *s, bool from_loop)
{
    resp_conn *c = s->conn;
    s->ready = true;
    c->held--;
    if (from_loop)
        conn_kick(&c->base);
}

/* Moves the ready replies at the head of the queue to the writer. */
static void send_ready(resp_conn *c)
{
    while (c->head && c->head->ready && !c->close_after_write) {
        resp_slot *s = c->head;
        weir_buf_put(conn_writer_buf(&c->wr), s->bytes.p, s->bytes.len);
        c->close_after_write = s->close_after;
        c->head = s->next;
        if (!c->head)
            c->tail = NULL;
        s->next = c->spare;
        c->spare = s;
    }
}

/* ------------------------------------------------------------ reading */

static void pause_reading(resp_conn *c)
{
    if (!c->paused) {
        c->paused = true;
        uv_read_stop((uv_stream_t *)&c->base.tcp);
    }
}

/* Answers a protocol error as Redis does ("-ERR Protocol error: ...")
 * and ends the connection after it. */
static void protocol_error(resp_conn *c, const char *msg)
{
    weir_resp_errorf(resp_out(c), "ERR %s", msg);
    resp_close_after(c);
}

/* Runs every whole command in @data[0 .. n), until too many decisions are
 * in flight or the connection is to end. Returns the bytes consumed. */
static size_t run_commands(resp_conn *c, const char *data, size_t n)
{
    size_t max_held = (size_t)c->base.w->srv->opt.max_pipelined;
    size_t off = 0;
    while (off < n && !c->no_more && !c->base.closed) {
        if (c->held >= max_held) {
            pause_reading(c);
            break;
        }
        size_t used = 0;
        weir_resp_command cmd;
        const char *err = NULL;
        weir_resp_result r = weir_resp_parse(c->parser, data + off, n - off, &used, &cmd, &err);
        if (r == WEIR_RESP_NEED_MORE)
            break; /* the parser consumed nothing: the tail is kept */
        off += used;
        if (r == WEIR_RESP_ERROR) {
            protocol_error(c, err);
            break;
        }
        resp_command_run(c, &cmd);
    }
    return off;
}

/* Keeps @data[0 .. n) for later, after what is kept already; false when
 * that passes the cap or memory (the connection is then closed). */
static bool keep(resp_conn *c, const char *data, size_t n)
{
    if (c->in.len + n > RESP_MAX_PENDING) {
        protocol_error(c, "Protocol error: command too big");
        return false;
    }
    weir_buf_put(&c->in, data, n);
    if (!weir_buf_ok(&c->in)) {
        conn_close(&c->base);
        return false;
    }
    return true;
}

/* The bytes of one read: straight from the read buffer when nothing is
 * kept, else after what is. */
static void process(resp_conn *c, const char *data, size_t n)
{
    c->processing = true;
    if (c->in.len == 0) {
        size_t used = run_commands(c, data, n);
        if (used < n && !c->no_more && !c->base.closed)
            keep(c, data + used, n - used);
    } else if (keep(c, data, n)) {
        size_t used = run_commands(c, c->in.p, c->in.len);
        if (used > 0) {
            memmove(c->in.p, c->in.p + used, c->in.len - used);
            c->in.len -= used;
        }
    }
    c->processing = false;
}

/* Reading resumes once the decisions in flight and the replies waiting
 * are few enough: the kept bytes first (true when some commands ran: their
 * replies may be ready to send), then the socket. */
static bool resume_reading(resp_conn *c)
{
    const serve_options *o = &c->base.w->srv->opt;
    if (!c->paused || c->close_after_write || c->no_more || c->base.closed || c->wr.writing ||
        c->held >= o->max_pipelined)
        return false;
    c->paused = false;
    size_t before = c->in.len;
    if (before > 0) {
        c->processing = true;
        size_t used = run_commands(c, c->in.p, c->in.len);
        memmove(c->in.p, c->in.p + used, c->in.len - used);
        c->in.len -= used;
        c->processing = false;
        if (c->base.closed || c->paused || c->no_more)
            return true;
    }
    c->tmode = T_IDLE;
    arm_for_input(c);
    uv_read_start((uv_stream_t *)&c->base.tcp, conn_alloc_rbuf, on_read);
    return before > 0;
}

/* Sends what is ready; ends the connection after a reply that ends it;
 * resumes reading once nothing holds it back. */
static void pump(resp_conn *c)
{
    for (;;) {
        if (c->base.closed || c->base.lingering)
            return;
        send_ready(c);
        if (!conn_writer_flush(&c->wr))
            return;
        if (c->wr.writing) {
            if (conn_writer_queued(&c->wr) > MAX_QUEUED_OUT && !c->paused) {
                pause_reading(c);
                arm(c, T_SEND, c->base.w->srv->opt.idle_timeout_ms);
            }
            return;
        }
        if (c->close_after_write) {
            conn_finish(&c->base, LINGER_MS);
            return;
        }
        if (!c->paused || !resume_reading(c))
            return;
    }
}

static void on_written(conn *base)
{
    pump((resp_conn *)base);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    resp_conn *c = s->data;
    if (nread < 0) {
        conn_close(&c->base);
        return;
    }
    if (nread == 0)
        return;
    process(c, buf->base, (size_t)nread);
    if (c->base.closed)
        return;
    if (!c->paused && !c->no_more)
        arm_for_input(c);
    pump(c);
}

static void on_timer(uv_timer_t *t)
{
    resp_conn *c = t->data;
    if (c->tmode != T_REQUEST) {
        conn_close(&c->base);
        return;
    }
    /* a command begun and not finished in time: as a protocol error */
    uv_read_stop((uv_stream_t *)&c->base.tcp);
    weir_buf_clear(&c->in);
    protocol_error(c, "the command did not arrive whole in time");
    pump(c);
}

/* ------------------------------------------------------------ the protocol */

static void resp_kick(conn *base)
{
    resp_conn *c = (resp_conn *)base;
    if (!c->processing)
        pump(c);
}

static void resp_drain(conn *base)
{
    resp_conn *c = (resp_conn *)base;
    if (base->closed || base->lingering || c->close_after_write)
        return;
    /* a connection between commands goes now; one with replies to come
     * goes after them */
    if (!c->head && c->in.len == 0 && !c->wr.writing && !conn_writer_queued(&c->wr)) {
        conn_close(base);
        return;
    }
    resp_close_after(c);
    if (!c->processing)
        pump(c);
}

static void resp_accept(listener *l)
{
    server *srv = l->w->srv;
    resp_conn *c = (resp_conn *)conn_accept(l, sizeof(resp_conn), conn_free);
    if (!c)
        return;
    conn_writer_init(&c->wr, &c->base, on_written);
    weir_buf_init(&c->in, SIZE_MAX);
    weir_resp_limits lim = {RESP_MAX_ARGS, RESP_MAX_BULK, RESP_MAX_INLINE};
    if (!(c->parser = weir_resp_parser_new(&lim))) {
        conn_close(&c->base);
        return;
    }
    c->id = resp_next_client_id(srv);
    c->authed = !srv->opt.resp_password[0];
    uv_tcp_nodelay(&c->base.tcp, 1);
    arm(c, T_IDLE, srv->opt.resp_idle_timeout_ms);
    uv_read_start((uv_stream_t *)&c->base.tcp, conn_alloc_rbuf, on_read);
}

static void *resp_worker_new(listener *l)
{
    (void)l;
    return malloc(sizeof(resp_scratch));
}

static void resp_worker_free(void *state)
{
    free(state);
}

const proto resp_proto = {
    .name = "resp",
    .scheme = "redis",
    .metric = PROTO_RESP,
    .worker_new = resp_worker_new,
    .worker_free = resp_worker_free,
    .accept = resp_accept,
    .drain = resp_drain,
    .kick = resp_kick,
};
