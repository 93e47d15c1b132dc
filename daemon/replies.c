/*
 * replies.c - a connection's replies in request order (replies.h).
 */
#include "replies.h"

#include <stddef.h>
#include <stdlib.h>

/* A write handed to libuv completed: go on sending, or resume reading. */
static void written(conn_writer *wr)
{
    replies_pump((replies *)(void *)((char *)wr - offsetof(replies, wr)));
}

void replies_init(replies *r, conn *c, size_t slot_size, const replies_ops *ops, size_t max_unsent)
{
    r->c = c;
    r->max_unsent = max_unsent;
    r->ops = ops;
    r->slot_size = slot_size;
    conn_writer_init(&r->wr, c, written);
}

void replies_free(replies *r)
{
    conn_writer_free(&r->wr);
    for (int pass = 0; pass < 2; pass++)
        for (reply_slot *s = pass ? r->spare : r->head, *next; s; s = next) {
            next = s->next;
            weir_buf_free(&s->bytes);
            free(s);
        }
}

reply_slot *replies_add(replies *r, bool ready)
{
    reply_slot *s = r->spare;
    if (s) {
        r->spare = s->next;
        weir_buf_clear(&s->bytes);
    } else {
        if (!(s = malloc(r->slot_size)))
            return NULL;
        weir_buf_init(&s->bytes, SIZE_MAX);
    }
    s->next = NULL;
    s->ready = ready;
    s->close_after = false;
    if (r->tail)
        r->tail->next = s;
    else
        r->head = s;
    r->tail = s;
    r->queued++;
    return s;
}

void replies_pause(replies *r)
{
    if (!r->paused) {
        r->paused = true;
        uv_read_stop((uv_stream_t *)&r->c->tcp);
    }
}

bool replies_may_resume(const replies *r)
{
    return r->paused && !r->close_after_write && !r->c->closed && !r->wr.writing;
}

void replies_collect(replies *r)
{
    while (r->head && r->head->ready && !r->close_after_write) {
        reply_slot *s = r->head;
        weir_buf_put(conn_writer_buf(&r->wr), s->bytes.p, s->bytes.len);
        r->close_after_write = s->close_after;
        r->head = s->next;
        if (!r->head)
            r->tail = NULL;
        r->queued--;
        /* sent, so no call holds it any more (a call answers once) */
        s->next = r->spare;
        r->spare = s;
    }
}

void replies_pump(replies *r)
{
    conn *c = r->c;
    for (;;) {
        if (c->closed || c->lingering)
            return;
        replies_collect(r);
        if (!conn_writer_flush(&r->wr))
            return;
        if (r->wr.writing) {
            if (conn_writer_queued(&r->wr) > r->max_unsent && !r->paused) {
                /* The client is not taking its replies: stop reading. Its
                 * next requests wait in the socket, not on a deadline of
                 * their own. */
                replies_pause(r);
                r->ops->stalled(r);
            }
            return;
        }
        if (r->close_after_write) {
            conn_finish(c, CONN_LINGER_MS);
            return;
        }
        /* once resumed, the kept requests may have made replies */
        if (!r->paused || !replies_may_resume(r) || !r->ops->resume(r))
            return;
    }
}
