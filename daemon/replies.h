/*
 * replies.h - a connection's replies, in request order, and how they
 * leave; shared by the protocols that answer a stream of requests
 * (HTTP/1.1, RESP). Each request gets a slot in the queue as it is read;
 * a slot is filled at once, or when its decision completes; the ready
 * slots at the head go to the writer together, so a pipeline is answered
 * in order, however its decisions complete, in as few writes as can be.
 *
 * Backpressure: replies_pump() stops reading while more than 1 MiB of
 * replies wait on a client that does not read them (the protocol arms its
 * send timer), and once they are written asks the protocol to resume
 * (it runs what it kept, and reads again). After a reply that ends the
 * connection, it half-closes and drains it for a moment (conn_finish()),
 * so the client reads the reply instead of a reset.
 */
#ifndef WEIR_DAEMON_REPLIES_H
#define WEIR_DAEMON_REPLIES_H

#include <stdbool.h>
#include <stddef.h>

#include "conn.h"
#include "conn_write.h"

typedef struct reply_slot {
    struct reply_slot *next; /* the queue, or the free list */
    weir_buf bytes;          /* the whole reply */
    bool ready;
    bool close_after; /* the connection ends after this reply */
} reply_slot;

typedef struct replies replies;

typedef struct replies_ops {
    /** Nothing holds reading back any more (replies_may_resume()): run
     *  what was kept and read again (r->paused = false); true when that
     *  may have made replies to send. The protocol's own limits may keep
     *  it paused: then false. */
    bool (*resume)(replies *r);
    /** The client stopped taking its replies: reading is paused; arm the
     *  timer that closes such a client. */
    void (*stalled)(replies *r);
} replies_ops;

struct replies {
    conn *c;
    conn_writer wr;
    const replies_ops *ops;
    reply_slot *head, *tail; /* not yet sent, in request order */
    reply_slot *spare;       /* sent, kept for the next requests */
    size_t slot_size;        /* a protocol's slot starts with a reply_slot */
    size_t max_unsent;       /* queued reply bytes past which reading pauses */
    unsigned queued;         /* slots from head to tail */
    bool close_after_write;  /* a reply that ends the connection went to the writer */
    bool paused;             /* reading stopped */
    bool processing;         /* in the protocol's read: it pumps at the end */
};

/** Set up @r for @c: its writer's completions pump the replies. Reading
 *  pauses while more than @max_unsent reply bytes wait for the socket
 *  (--max-unsent-bytes). */
void replies_init(replies *r, conn *c, size_t slot_size, const replies_ops *ops, size_t max_unsent);
/** Free the slots and the writer, once the connection's handles closed. */
void replies_free(replies *r);

/** A new slot at the end of the queue (its bytes empty; the protocol's
 *  fields past the reply_slot are the protocol's to set); NULL when out
 *  of memory. */
reply_slot *replies_add(replies *r, bool ready);

/** Move the ready replies at the head of the queue to the writer's
 *  buffer, up to one that ends the connection (nothing is written yet):
 *  they no longer count in r->queued. */
void replies_collect(replies *r);

/** Stop reading (a no-op when stopped). */
void replies_pause(replies *r);

/** Whether reading, paused, may resume as far as the replies go: no
 *  reply that ends the connection is out, no write waits on the client. */
bool replies_may_resume(const replies *r);

/** Send what is ready; end the connection after a reply that ends it;
 *  resume reading once nothing holds it back. */
void replies_pump(replies *r);

/** A reply became ready outside the connection's own read: send it,
 *  unless the read in progress will. */
static inline void replies_kick(replies *r)
{
    if (!r->processing)
        replies_pump(r);
}

#endif /* WEIR_DAEMON_REPLIES_H */
