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
 * 1 MiB of replies wait on a client that is not reading (replies.h).
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

/* Most bytes of one command held while it arrives. */
#define RESP_MAX_PENDING (1u << 20)

enum { T_IDLE, T_REQUEST, T_SEND };

static void conn_free(conn *base)
{
    resp_conn *c = (resp_conn *)base;
    replies_free(&c->r);
    weir_buf_free(&c->in);
    weir_resp_parser_free(c->parser);
    free(c);
}

static void on_timer(uv_timer_t *t);
static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

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
    resp_slot *s = (resp_slot *)replies_add(&c->r, ready);
    if (s)
        s->conn = c;
    return s;
}

/* When out of memory for a slot, replies go nowhere: the connection is
 * closed (a client must not get replies out of order). */
static _Thread_local weir_buf g_nowhere = {NULL, 0, 0, 0, true};

weir_buf *resp_out(resp_conn *c)
{
    replies *r = &c->r;
    if (!r->head)
        return conn_writer_buf(&r->wr);
    if (r->tail->ready && !r->tail->close_after)
        return &r->tail->bytes;
    resp_slot *s = slot_new(c, true);
    if (!s) {
        conn_close(&c->base);
        return &g_nowhere;
    }
    return &s->slot.bytes;
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
    replies *r = &c->r;
    c->no_more = true;
    if (!r->head) {
        r->close_after_write = true;
        return;
    }
    reply_slot *s = r->tail->ready ? r->tail : (reply_slot *)slot_new(c, true);
    if (!s) {
        conn_close(&c->base);
        return;
    }
    s->close_after = true;
}

void resp_slot_ready(resp_slot *s, bool from_loop)
{
    resp_conn *c = s->conn;
    s->slot.ready = true;
    c->held--;
    if (from_loop)
        conn_kick(&c->base);
}

/* ------------------------------------------------------------ reading */

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
    c->r.processing = true;
    while (off < n && !c->no_more && !c->base.closed) {
        if (c->held >= max_held) {
            replies_pause(&c->r);
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
        c->tmode = T_IDLE; /* the next command gets its own deadline */
        resp_command_run(c, &cmd);
    }
    c->r.processing = false;
    return off;
}

/* Keeps @data[0 .. n) for later, after what is kept already; false when
 * that passes the cap or memory (the connection then ends). */
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

/* Runs the commands kept in c->in, and drops the bytes they took. */
static size_t run_kept(resp_conn *c)
{
    size_t used = run_commands(c, c->in.p, c->in.len);
    memmove(c->in.p, c->in.p + used, c->in.len - used);
    c->in.len -= used;
    return used;
}

/* The bytes of one read: straight from the read buffer when nothing is
 * kept, else after what is. */
static void process(resp_conn *c, const char *data, size_t n)
{
    if (c->in.len == 0) {
        size_t used = run_commands(c, data, n);
        if (used < n && !c->no_more && !c->base.closed)
            keep(c, data + used, n - used);
    } else if (keep(c, data, n)) {
        run_kept(c);
    }
}

/* Reading resumes once the decisions in flight are few enough: the kept
 * bytes first (true when some commands ran: their replies may be ready to
 * send), then the socket. */
static bool resume(replies *r)
{
    resp_conn *c = (resp_conn *)r->c;
    if (c->no_more || c->held >= c->base.w->srv->opt.max_pipelined)
        return false;
    r->paused = false;
    bool ran = c->in.len > 0 && run_kept(c) > 0;
    if (c->base.closed || r->paused || c->no_more)
        return true;
    c->tmode = T_IDLE;
    arm_for_input(c);
    uv_read_start((uv_stream_t *)&c->base.tcp, conn_alloc_rbuf, on_read);
    return ran;
}

static void stalled(replies *r)
{
    resp_conn *c = (resp_conn *)r->c;
    arm(c, T_SEND, c->base.w->srv->opt.idle_timeout_ms);
}

static const replies_ops resp_replies = {resume, stalled};

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    resp_conn *c = s->data;
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
    if (!c->r.paused && !c->no_more)
        arm_for_input(c);
    replies_pump(&c->r);
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
    replies_pump(&c->r);
}

/* ------------------------------------------------------------ the protocol */

static void resp_kick(conn *base)
{
    replies_kick(&((resp_conn *)base)->r);
}

static bool resp_idle(const conn *base)
{
    const resp_conn *c = (const resp_conn *)base;
    const replies *r = &c->r;
    return !r->head && c->in.len == 0 && !r->wr.writing && !conn_writer_queued(&r->wr);
}

static void resp_drain(conn *base)
{
    resp_conn *c = (resp_conn *)base;
    replies *r = &c->r;
    if (base->closed || base->lingering || r->close_after_write)
        return;
    /* a connection between commands goes now; one with replies to come
     * goes after them */
    if (resp_idle(base) && conn_end_idle(base))
        return;
    resp_close_after(c);
    replies_kick(r);
}

static void resp_accept(listener *l)
{
    server *srv = l->w->srv;
    resp_conn *c = (resp_conn *)conn_accept(l, sizeof(resp_conn), conn_free);
    if (!c)
        return;
    replies_init(&c->r, &c->base, sizeof(resp_slot), &resp_replies,
                 (size_t)srv->opt.max_unsent_bytes);
    weir_buf_init(&c->in, SIZE_MAX);
    weir_resp_limits lim = {RESP_MAX_ARGS, RESP_MAX_BULK, RESP_MAX_INLINE};
    if (!(c->parser = weir_resp_parser_new(&lim))) {
        conn_close(&c->base);
        return;
    }
    c->id = resp_next_client_id(srv);
    c->authed = !srv->opt.resp_password[0];
    weir_resp_parser_preauth(c->parser, !c->authed);
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
    .idle = resp_idle,
    .kick = resp_kick,
};
