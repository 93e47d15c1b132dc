/*
 * call.h - one decision in flight for a connection: its own copy of the
 * request and its own statuses, a counted hold on the connection, and a
 * deadline. It completes exactly once: when the engine's callback runs
 * (inline, before call_decide() returns, with the memory store; later,
 * from the worker's loop, with a store that completes later) or when its
 * deadline passes first, whichever comes first; the other is then
 * ignored. A call whose connection closed completes into nothing.
 *
 * The protocol says how to answer: decided() renders the decision (the
 * statuses and what they point to are valid only during it), expired()
 * answers that no decision came in time. Neither runs once the connection
 * has closed. The protocol's own bytes for the call (its answer slot, its
 * stream) follow the call (call_data()).
 */
#ifndef WEIR_DAEMON_CALL_H
#define WEIR_DAEMON_CALL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "conn.h"

typedef struct call call;

typedef struct call_ops {
    void (*decided)(call *c, weir_code overall, const weir_descriptor_status *st, size_t n);
    void (*expired)(call *c);
    /** Optional: the call the engine took is about to be freed, answered
     *  or not (its connection may have closed). */
    void (*done)(call *c);
    /** Instead of decided(): a call on a counter the caller names
     *  (call_new_key()) completed. */
    void (*key_decided)(call *c, const weir_key_outcome *out);
} call_ops;

struct call {
    conn *conn;
    const call_ops *ops;
    weir_request req; /* the call's own copy */
    /* or an op on a counter the caller names, or a lease to give back,
     * with its own copies of the name and the limit */
    bool keyed;
    bool release;
    /* a settlement of the request to `cost` (weir_engine_settle()) */
    bool settle;
    uint64_t cost;
    weir_key_op key;
    weir_limit key_limit;
    weir_lease lease;
    weir_descriptor_status *st;
    int64_t now_us;    /* the decision's time */
    uint64_t t0_ns;    /* when the request was whole, for the latency metrics */
    uint64_t due_ms;   /* its deadline on the loop's clock (uv_now) */
    call *prev, *next; /* the worker's calls with a deadline, by due_ms */
    bool waiting;      /* on that list */
    size_t block;      /* bytes of its memory */
    bool answered;     /* decided() or expired() ran (or the connection went) */
    bool deciding;     /* inside weir_engine_decide(): an answer made now goes
                          out with the connection's own (no kick needed) */
    bool completed;    /* the engine's callback ran */
    void *data;        /* the protocol's bytes */
};

/**
 * call_new() - a call for @c deciding a copy of @req, with @data_bytes of
 * zeroed bytes of the protocol's. NULL when out of memory (nothing held).
 */
call *call_new(conn *c, const call_ops *ops, const weir_request *req, size_t data_bytes,
               uint64_t t0_ns);

/**
 * call_new_key() - a call running @op (weir_engine_decide_key()) on a copy
 * of its name and limit; its answer comes to ops->key_decided(). NULL when
 * out of memory.
 */
call *call_new_key(conn *c, const call_ops *ops, const weir_key_op *op, size_t data_bytes,
                   uint64_t t0_ns);

/**
 * call_new_release() - a call giving back @lease (weir_engine_release()),
 * on a copy of its key; its answer comes to ops->key_decided(). NULL when
 * out of memory.
 */
call *call_new_release(conn *c, const call_ops *ops, const weir_lease *lease, size_t data_bytes,
                       uint64_t t0_ns);

/**
 * call_decide() - start the decision at @now_us; answer by @timeout_ms
 * from now at the latest (0: no deadline of the daemon's).
 *
 * Returns WEIR_OK: the call is the engine's and completes as described
 * above; the caller must not touch it any more (it may be freed already).
 * Otherwise the engine refused the request (the status says why), nothing
 * ran, and the caller answers and frees the call with call_free().
 */
weir_status call_decide(call *c, worker *w, int64_t now_us, int64_t timeout_ms);

/** Free a call that call_decide() did not take (done() does not run). */
void call_free(call *c);

/** uv_timer_cb of the worker's `deadlines` timer: answers the calls whose
 *  deadline has come. */
void call_run_deadlines(uv_timer_t *t);

#endif /* WEIR_DAEMON_CALL_H */
