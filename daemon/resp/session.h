/*
 * session.h - one Redis-protocol client connection as the commands see
 * it: its protocol version, its authentication and name, and where a
 * reply goes. Replies leave in command order: a command answered at once
 * writes to resp_out(); one whose decision completes later takes a slot
 * (resp_hold()) and fills it when it can, and the replies behind it wait
 * in slots of their own until it is sent.
 */
#ifndef WEIR_DAEMON_RESP_SESSION_H
#define WEIR_DAEMON_RESP_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "conn.h"
#include "replies.h"
#include "resp/resp.h"

/* Longest CLIENT SETNAME. */
#define RESP_NAME_MAX 128u

typedef struct resp_slot resp_slot;
typedef struct resp_conn resp_conn;

struct resp_slot {
    reply_slot slot; /* first: its bytes, readiness, place in the queue */
    resp_conn *conn;
};

struct resp_conn {
    conn base; /* first: a resp_conn is a conn */
    weir_resp_parser *parser;
    replies r;                /* replies waiting behind one not ready (resp_slot) */
    weir_buf in;              /* bytes of a command not yet whole (or kept) */
    unsigned held;            /* slots not ready (decisions in flight) */
    uint64_t id;              /* CLIENT ID */
    char name[RESP_NAME_MAX]; /* CLIENT SETNAME */
    size_t name_len;
    int tmode;
    bool resp3;
    bool authed;
    bool no_more; /* QUIT or a protocol error: parse no more */
};

/** Where the reply of a command answered now goes. */
weir_buf *resp_out(resp_conn *c);

/** A slot for a reply made later (resp_slot_ready() when written); NULL
 *  when out of memory. */
resp_slot *resp_hold(resp_conn *c);

/** @s holds its whole reply: send it, and what waited behind it. */
void resp_slot_ready(resp_slot *s, bool from_loop);

/** The connection ends once the replies so far are sent (QUIT). */
void resp_close_after(resp_conn *c);

#endif /* WEIR_DAEMON_RESP_SESSION_H */
