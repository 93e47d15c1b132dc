/*
 * commands.h - the Redis-protocol commands weir answers, from one table
 * (name, arity, flags, handler, one-line doc): the connection commands
 * here (commands.c), the rate limit commands in limits.c. COMMAND,
 * COMMAND COUNT and COMMAND DOCS describe the same table.
 */
#ifndef WEIR_DAEMON_RESP_COMMANDS_H
#define WEIR_DAEMON_RESP_COMMANDS_H

#include <stddef.h>
#include <stdint.h>

#include "resp/resp.h"
#include "server.h"
#include "session.h"

/* The parser's caps: a WEIR.CHECK of 64 descriptors of 64 entries fits;
 * an argument holds a counter's name (at most 4000 bytes) with room. */
#define RESP_MAX_ARGS 16384u
#define RESP_MAX_BULK (64u * 1024u)
#define RESP_MAX_INLINE (64u * 1024u)

/* WEIR.CHECK's request is built in the worker's scratch (the listener's
 * state) before the call copies it. */
#define RESP_MAX_DESCRIPTORS WEIR_ENGINE_MAX_DESCRIPTORS
#define RESP_MAX_ENTRIES (WEIR_ENGINE_MAX_DESCRIPTORS * WEIR_ENGINE_MAX_ENTRIES)

typedef struct resp_scratch {
    weir_descriptor descs[RESP_MAX_DESCRIPTORS];
    weir_entry entries[RESP_MAX_ENTRIES];
    bool peek_all;
} resp_scratch;

/* Command flags. */
#define RESP_CMD_NOAUTH 1u   /* allowed before AUTH */
#define RESP_CMD_WRITE 2u    /* may change a counter */
#define RESP_CMD_READONLY 4u /* reads only */

typedef void (*resp_handler)(resp_conn *c, const weir_resp_arg *argv, size_t argc);

typedef struct resp_command {
    const char *name; /* lower case, as COMMAND lists it */
    int arity;        /* Redis's: n exactly, -n at least n (the name counts) */
    unsigned flags;
    resp_handler handler;
    const char *summary; /* COMMAND DOCS */
    const char *usage;   /* its arguments, as the docs write them */
    int first_key, last_key, key_step;
} resp_command;

/** Run one parsed command: look it up, check its arity and the
 *  connection's authentication, and call its handler. */
void resp_command_run(resp_conn *c, const weir_resp_command *cmd);

/** A new CLIENT ID (unique in the process). */
uint64_t resp_next_client_id(server *srv);

/* The rate limit commands (limits.c). */
void resp_cl_throttle(resp_conn *c, const weir_resp_arg *argv, size_t argc);
void resp_gcra(resp_conn *c, const weir_resp_arg *argv, size_t argc);
void resp_weir_check(resp_conn *c, const weir_resp_arg *argv, size_t argc);
void resp_weir_peek(resp_conn *c, const weir_resp_arg *argv, size_t argc);
void resp_weir_reset(resp_conn *c, const weir_resp_arg *argv, size_t argc);
void resp_del(resp_conn *c, const weir_resp_arg *argv, size_t argc);

void resp_weir_acquire(resp_conn *c, const weir_resp_arg *argv, size_t argc);
void resp_weir_settle(resp_conn *c, const weir_resp_arg *argv, size_t argc);
void resp_weir_release(resp_conn *c, const weir_resp_arg *argv, size_t argc);

/* Where a decision's reply goes (limits.c): its slot when the store
 * completes later, else straight out (the decision completes before its
 * command returns, so nothing can come between). */
typedef struct resp_target {
    resp_conn *conn;
    resp_slot *slot;
} resp_target;

/** A target for a command's reply; false (an error written) when out of
 *  memory. */
bool resp_target_for(resp_conn *c, resp_target *t);
weir_buf *resp_target_buf(const resp_target *t);
/** The reply of a command begun at @t0_ns is written: count its time
 *  (weir_request_duration_seconds with proto="resp"), and send it when it
 *  was held. */
void resp_target_done(const resp_target *t, uint64_t t0_ns, bool from_loop);

/** Whether @a is @lit, ignoring ASCII case. */
bool resp_arg_is(const weir_resp_arg *a, const char *lit);
/** @a as a decimal int64: an optional sign and digits, nothing else
 *  (what redis-cell's parse::<i64>() takes). */
bool resp_arg_i64(const weir_resp_arg *a, int64_t *out);

#endif /* WEIR_DAEMON_RESP_COMMANDS_H */
