/*
 * call.c - decisions in flight (call.h): the request copied into one
 * block with the statuses, and the engine's completion and the deadline
 * racing to answer first; the block goes when the engine is done with it.
 */
#include "call.h"

#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decision_log.h"

static size_t align_up(size_t n)
{
    return (n + alignof(max_align_t) - 1) & ~(alignof(max_align_t) - 1);
}

/* Entries of @d that can be copied (none without an array: the engine
 * refuses such a descriptor). */
static size_t entries_of(const weir_descriptor *d)
{
    return d->entries ? d->n_entries : 0;
}

/* Bytes of the copy of @req past the call itself: descriptors, entries,
 * overrides, then the strings. */
static size_t copy_bytes(const weir_request *req, size_t *strings)
{
    size_t entries = 0, overrides = 0, bytes = req->domain ? req->domain_len : 0;
    size_t nd = req->descriptors ? req->n_descriptors : 0; /* none: the engine refuses it */
    for (size_t d = 0; d < nd; d++) {
        const weir_descriptor *ds = &req->descriptors[d];
        entries += entries_of(ds);
        overrides += ds->limit != NULL;
        for (size_t k = 0; k < entries_of(ds); k++)
            bytes += (ds->entries[k].key ? ds->entries[k].key_len : 0) +
                     (ds->entries[k].value ? ds->entries[k].value_len : 0);
    }
    *strings = bytes;
    return nd * (sizeof(weir_descriptor) + sizeof(weir_descriptor_status)) +
           entries * sizeof(weir_entry) + overrides * sizeof(weir_limit_override);
}

/* Copies @n bytes to *@at and returns the copy (NULL stays NULL). */
static const char *put(char **at, const char *p, size_t n)
{
    if (!p)
        return NULL;
    char *out = *at;
    if (n)
        memcpy(out, p, n);
    *at += n;
    return out;
}

/* The copy's layout from @mem (max_align_t-aligned): the statuses, the
 * descriptors, the entries, the overrides, then the strings; each array's
 * elements are a multiple of the next one's alignment in size, so every
 * array starts aligned. */
_Static_assert(sizeof(weir_descriptor_status) % _Alignof(weir_descriptor) == 0 &&
                   sizeof(weir_descriptor) % _Alignof(weir_entry) == 0 &&
                   sizeof(weir_entry) % _Alignof(weir_limit_override) == 0,
               "the arrays of a call's copy stay aligned");

static void copy_request(call *c, const weir_request *req, unsigned char *mem)
{
    size_t nd = req->descriptors ? req->n_descriptors : 0, ne = 0;
    for (size_t d = 0; d < nd; d++)
        ne += entries_of(&req->descriptors[d]);
    weir_descriptor_status *st = (void *)mem;
    weir_descriptor *descs = (void *)(st + nd);
    weir_entry *entries = (void *)(descs + nd);
    weir_limit_override *ovr = (void *)(entries + ne);
    char *strings = (char *)ovr;
    for (size_t d = 0; d < nd; d++)
        strings += req->descriptors[d].limit ? sizeof(weir_limit_override) : 0;
    c->req = *req;
    c->req.domain = put(&strings, req->domain, req->domain_len);
    c->req.descriptors = req->descriptors ? descs : NULL;
    c->st = st;
    for (size_t d = 0; d < nd; d++) {
        const weir_descriptor *in = &req->descriptors[d];
        descs[d] = *in;
        descs[d].entries = in->entries ? entries : NULL;
        for (size_t k = 0; k < entries_of(in); k++) {
            const weir_entry *e = &in->entries[k];
            entries[k].key = put(&strings, e->key, e->key_len);
            entries[k].key_len = e->key_len;
            entries[k].value = put(&strings, e->value, e->value_len);
            entries[k].value_len = e->value_len;
        }
        entries += entries_of(in);
        if (in->limit) {
            *ovr = *in->limit;
            descs[d].limit = ovr++;
        }
    }
}

/* Calls of up to this many bytes (a request of a few descriptors) reuse
 * the worker's freed blocks: a decision then costs no malloc. */
#define CALL_BLOCK 2048u
#define CALL_BLOCKS_KEPT (sizeof(((worker *)0)->call_blocks) / sizeof(void *))

static call *alloc_call(worker *w, size_t size)
{
    if (size <= CALL_BLOCK && w->n_call_blocks > 0)
        return w->call_blocks[--w->n_call_blocks];
    return malloc(size <= CALL_BLOCK ? CALL_BLOCK : size);
}

call *call_new(conn *cn, const call_ops *ops, const weir_request *req, size_t data_bytes,
               uint64_t t0_ns)
{
    size_t strings;
    size_t head = align_up(sizeof(call));
    size_t data = align_up(data_bytes);
    size_t size = head + data + copy_bytes(req, &strings) + strings;
    call *c = alloc_call(cn->w, size);
    if (!c)
        return NULL;
    memset(c, 0, head + data);
    c->block = size <= CALL_BLOCK ? CALL_BLOCK : size;
    c->conn = cn;
    c->ops = ops;
    c->t0_ns = t0_ns;
    c->data = data_bytes ? (unsigned char *)c + head : NULL;
    copy_request(c, req, (unsigned char *)c + head + data);
    conn_call_begin(cn);
    return c;
}

/* A call with no request, and a copy of @n bytes of @name after the
 * protocol's bytes (*@copy). */
static call *call_with_name(conn *cn, const call_ops *ops, size_t data_bytes, const void *name,
                            size_t n, uint64_t t0_ns, const char **copy)
{
    weir_request none = {0};
    call *c = call_new(cn, ops, &none, data_bytes + n, t0_ns);
    if (!c)
        return NULL;
    char *p = (char *)c + align_up(sizeof(call)) + data_bytes;
    memcpy(p, name, n);
    *copy = p;
    return c;
}

call *call_new_key(conn *cn, const call_ops *ops, const weir_key_op *op, size_t data_bytes,
                   uint64_t t0_ns)
{
    const char *name;
    call *c = call_with_name(cn, ops, data_bytes, op->name, op->name_len, t0_ns, &name);
    if (!c)
        return NULL;
    c->keyed = true;
    c->key = *op;
    c->key.name = name;
    if (op->limit) {
        c->key_limit = *op->limit;
        c->key.limit = &c->key_limit;
    }
    return c;
}

call *call_new_release(conn *cn, const call_ops *ops, const weir_lease *lease, size_t data_bytes,
                       uint64_t t0_ns)
{
    const char *key;
    call *c = call_with_name(cn, ops, data_bytes, lease->key, lease->key_len, t0_ns, &key);
    if (!c)
        return NULL;
    c->release = true;
    c->lease = *lease;
    c->lease.key = key;
    return c;
}

/* ------------------------------------------------------------ deadlines */

/* The calls of a worker that wait with a deadline are one list, earliest
 * first, under one timer: most share --decision-timeout, so a new one
 * goes at the end, and a gRPC call's own shorter deadline walks back a
 * few. A call costs no handle of its own, and leaves the list the moment
 * it completes. */
static void arm(worker *w)
{
    if (!w->waiting_head) {
        uv_timer_stop(&w->deadlines);
        return;
    }
    uint64_t now = uv_now(&w->loop), due = w->waiting_head->due_ms;
    uv_timer_start(&w->deadlines, call_run_deadlines, due > now ? due - now : 0, 0);
}

static void wait_for(worker *w, call *c, int64_t timeout_ms)
{
    c->due_ms = uv_now(&w->loop) + (uint64_t)timeout_ms;
    call *after = w->waiting_tail;
    while (after && after->due_ms > c->due_ms)
        after = after->prev;
    c->prev = after;
    c->next = after ? after->next : w->waiting_head;
    if (c->next)
        c->next->prev = c;
    else
        w->waiting_tail = c;
    if (after)
        after->next = c;
    else
        w->waiting_head = c;
    c->waiting = true;
    if (w->waiting_head == c)
        arm(w);
}

static void stop_waiting(call *c)
{
    worker *w = c->conn->w;
    if (!c->waiting)
        return;
    c->waiting = false;
    if (c->prev)
        c->prev->next = c->next;
    else
        w->waiting_head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    else
        w->waiting_tail = c->prev;
    /* the timer stays armed for an earlier due time; it finds nothing then */
}

void call_run_deadlines(uv_timer_t *t)
{
    worker *w = t->data;
    uint64_t now = uv_now(&w->loop);
    while (w->waiting_head && w->waiting_head->due_ms <= now) {
        call *c = w->waiting_head;
        stop_waiting(c);
        if (c->answered)
            continue;
        c->answered = true;
        if (!c->conn->closed)
            c->ops->expired(c);
    }
    arm(w);
}

void call_free(call *c)
{
    conn *cn = c->conn;
    worker *w = cn->w;
    stop_waiting(c);
    if (c->block == CALL_BLOCK && w->n_call_blocks < CALL_BLOCKS_KEPT)
        w->call_blocks[w->n_call_blocks++] = c;
    else
        free(c);
    conn_call_end(cn);
}

/* The engine is done with a call it took. */
static void release(call *c)
{
    if (c->ops->done)
        c->ops->done(c);
    call_free(c);
}

static void on_decided(void *arg, weir_code overall, weir_descriptor_status *st, size_t n)
{
    call *c = arg;
    c->completed = true;
    decision_log(c->conn->w, &c->req, overall, st, n);
    if (!c->answered && !c->conn->closed) {
        c->answered = true;
        c->ops->decided(c, overall, st, n);
    }
    c->answered = true;
    /* inline, call_decide() frees it once weir_engine_decide() returned */
    if (!c->deciding)
        release(c);
}

static void on_key_decided(void *arg, const weir_key_outcome *out)
{
    call *c = arg;
    c->completed = true;
    if (!c->answered && !c->conn->closed) {
        c->answered = true;
        c->ops->key_decided(c, out);
    }
    c->answered = true;
    if (!c->deciding)
        release(c);
}

/* WEIR_TEST_DECISION_COST_US (server.h): the worker kept busy */
static void test_cost(const worker *w)
{
    uint64_t until = uv_hrtime() + (uint64_t)w->srv->decision_cost_us * 1000u;
    while (uv_hrtime() < until)
        ;
}

weir_status call_decide(call *c, worker *w, int64_t now_us, int64_t timeout_ms)
{
    if (w->srv->decision_cost_us)
        test_cost(w);
    c->now_us = now_us;
    c->deciding = true;
    weir_status st;
    if (c->keyed)
        st = weir_engine_decide_key(w->reader, &c->key, now_us, on_key_decided, c);
    else if (c->release)
        st = weir_engine_release(w->reader, &c->lease, now_us, on_key_decided, c);
    else if (c->settle)
        st = weir_engine_settle(w->reader, &c->req, c->cost, now_us, c->st, on_decided, c);
    else
        st = weir_engine_decide(w->reader, &c->req, now_us, c->st, on_decided, c);
    c->deciding = false;
    if (st != WEIR_OK)
        return st;
    if (c->completed) {
        release(c);
        return WEIR_OK;
    }
    if (timeout_ms > 0)
        wait_for(w, c, timeout_ms);
    return WEIR_OK;
}
