/*
 * codec.h - the Redis store's one script and its wire format: how a batch
 * of weir_ops becomes the argument vector of one EVALSHA (or EVAL), and how
 * the script's reply becomes the ops' results. No I/O here: the
 * connection (conn.c) sends what this builds and hands back what Redis
 * answered.
 *
 * The script (script.lua, compiled into the library) runs every algorithm
 * of weir/algo.h on state kept in Redis, with the same verdicts, remaining
 * counts and reset times as the C step functions for every limit that
 * weir__redis_limit_fits() accepts (Lua numbers are doubles: every
 * quantity the script holds stays below 2^53 and every division is exact).
 *
 * One call carries one or more batches (the decisions a worker's loop
 * gathered in one iteration), each with its own time and flags, so Redis
 * pays its per-command cost once for all of them.
 *
 * Wire format, version 2:
 *
 *   EVALSHA <sha1> <k> key_1 .. key_k  2 <L> limit_1 .. limit_L  <m>
 *           batch_1 .. batch_m
 *   (or FCALL weir_v2 <k> ..., see WEIR__REDIS_FUNCTION)
 *
 *   k        the number of ops of every batch together; key_i is op i's
 *            key, ops numbered across the batches in order
 *   L        the number of limits: the call's distinct limits, each sent
 *            once (1 <= L <= k)
 *   limit_l  one argument, weir_limit's fields in decimal, one space
 *            apart: "algorithm limit window_us burst sub_windows unit rate
 *            capacity", then " warmup_us cold_factor" for a token bucket
 *            with a warm-up (the script keeps what it parsed from call to
 *            call, by this text)
 *   m        the number of batches
 *   batch_j  3 arguments, then 4 per op of the batch:
 *              now_us  decimal microseconds, or "-" for Redis's own clock
 *                      (TIME, read once per call)
 *              flags   decimal: 1 = atomic (check every TAKE of the batch,
 *                      charge all or none), 0 = each op on its own
 *              n       the batch's number of ops (>= 1)
 *            an op: kind hits lease l (weir_op's fields, decimal, and the
 *            index 1 .. L of its limit); a TAKE (kind 0), which has no
 *            lease, sends its reserve there instead (weir_op.reserve, 0
 *            for none: admitted only if hits + reserve would be)
 *
 * Format 3 is format 2 with the keys moved among the arguments, for a
 * Redis Cluster node, where a call's declared keys must share one hash
 * slot but a script may touch any key the node serves:
 *
 *   FCALL weir_v2 0  3 <k> key_1 .. key_k  <L> limit_1 .. (as format 2)
 *
 * The script then reads every key before it writes any, so that a key the
 * node does not serve (the slot map moved on) fails the call with nothing
 * charged ("Script attempted to access a non local key").
 *
 * The reply is a flat array of integers: Redis's time in microseconds when
 * a batch asked for it (else 0), then each op's result, in order, in 1 to
 * 6 integers (Redis pays for every integer of a reply):
 *   head            < 0: the op failed with this status (a negative
 *                   weir_status), and nothing follows; else limit x 8 +
 *                   flags: 1 = allowed, 2 = a delay follows, 4 = a lease
 *                   follows (2 and 4 only with 1)
 *   remaining       then, for a head >= 0: the result's fields,
 *   reset_after_us
 *   retry_after_us  only when not allowed
 *   delay_us        only with flag 2 (> 0: else no flag)
 *   lease           only with flag 4 (> 0: else no flag)
 * so that an admission takes 3 and a denial 4. A RESET (kind 3) deletes
 * its key: "allowed" when there was a state, with nothing remaining and
 * no times. A REFUND (kind 4, weir_refund(); also the cluster store's
 * refund of a batch denied on another node, cluster/span.c) and a CHARGE
 * (kind 5, weir_charge()) report the key after them as a look does, with
 * "allowed" saying whether the refund gave something back (a charge is
 * always allowed) and no retry time. Statuses: WEIR_ENOLEASE (a
 * RELEASE of a lease not held, or of a banned concurrency limit),
 * WEIR_EALGO (a RELEASE under another algorithm; a REFUND or CHARGE of a
 * concurrency limit), WEIR_EINVAL (an unknown kind or algorithm; and
 * every op of an atomic batch that holds a RELEASE, RESET, REFUND or
 * CHARGE or such an op, which then charges nothing, as the memory store
 * refuses such a batch whole).
 *
 * The script keeps one key per op (script.lua's header gives each
 * algorithm's layout); it expires when the key is back at rest. The caller
 * sends only ops that weir__redis_op_ok() accepts.
 */
#ifndef WEIR_STORE_REDIS_CODEC_H
#define WEIR_STORE_REDIS_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "weir/store.h"

struct redisReply;

/* The script's source, and its length (no NUL counted). */
extern const char weir__redis_script[];
extern const size_t weir__redis_script_len;

/* The same source is a Redis 7 function library: FUNCTION LOAD REPLACE
 * with WEIR__REDIS_LIBRARY_HEAD and then the source, and the call is
 * FCALL WEIR__REDIS_FUNCTION <k> ... (weir__redis_encode() with "FCALL"
 * and the function's name in place of EVALSHA and the sha1; an unknown
 * function is "ERR Function not found"). A library sets its helpers up
 * once where a script does it at every call: about 7 us less per call. */
#define WEIR__REDIS_LIBRARY_HEAD "#!lua name=weir_v2\n"
#define WEIR__REDIS_FUNCTION "weir_v2"

/* Arguments per op after the keys and the limits. */
#define WEIR__REDIS_OP_ARGS 4u
/* Arguments of a batch before its ops: now, flags, n. */
#define WEIR__REDIS_BATCH_ARGS 3u
/* Bytes of a limit's text: 10 numbers of up to 20 digits, 9 spaces (8
 * and 7 but for a warm-up). */
#define WEIR__REDIS_LIMIT_BYTES 209u
/* Integers in the reply: one, then at most this many per op. */
#define WEIR__REDIS_REPLY_MAX_PER_OP 6u

/* One batch of a call. */
typedef struct weir__redis_batch {
    weir_op *ops;
    size_t n;       /* >= 1 */
    int64_t now_us; /* < 0: Redis's clock */
    unsigned flags; /* WEIR_BATCH_*: only ATOMIC is sent */
} weir__redis_batch;

/* Argument vector entries, at most, for @nb batches of @nops ops in all:
 * the command, the script (sha or source), numkeys, the keys, the
 * version, L, the limits (one per op at most), m, then each batch's head
 * and ops. */
static inline size_t weir__redis_argc(size_t nb, size_t nops)
{
    return 4u + nops + 2u + nops + 1u + nb * WEIR__REDIS_BATCH_ARGS + nops * WEIR__REDIS_OP_ARGS;
}

/* Bytes of text weir__redis_encode() may write for them. */
static inline size_t weir__redis_numbuf_size(size_t nb, size_t nops)
{
    return 24u * (4u + nb * WEIR__REDIS_BATCH_ARGS + nops * WEIR__REDIS_OP_ARGS) +
           WEIR__REDIS_LIMIT_BYTES * nops;
}

/**
 * weir__redis_encode() - the argument vector of one script call.
 *
 * @cmd, @cmd_len:   "EVALSHA" or "EVAL"
 * @body, @body_len: the sha1 (40 hex digits) or the script's source
 * @b, @nb:          the batches (nb >= 1), their ops valid (a key, a limit;
 *                   RELEASE ops carry their lease)
 * @keys_in_args:    format 3 (a cluster node's call): no key declared, the
 *                   keys as arguments (see the format above)
 * @argv, @argvlen:  weir__redis_argc(nb, ops in all) entries, filled up
 *                   to the count returned
 * @numbuf:          weir__redis_numbuf_size(nb, ops in all) bytes: the
 *                   numbers' and limits' text, which argv points into
 *                   (keys and body are borrowed)
 *
 * Ops share a limit entry when their limits are the same object or have
 * the same fields; a call of very many distinct limits may send some of
 * them more than once (the script decides alike either way).
 *
 * Returns the number of entries filled (weir__redis_argc() at most).
 */
size_t weir__redis_encode(const char *cmd, size_t cmd_len, const char *body, size_t body_len,
                          const weir__redis_batch *b, size_t nb, bool keys_in_args,
                          const char **argv, size_t *argvlen, char *numbuf);

/**
 * weir__redis_decode() - fill every op's status and result from the
 * script's reply.
 *
 * Returns WEIR_OK (each op's status says how it went; an op's result is
 * written only when its status is WEIR_OK), or WEIR_EIO when the reply is
 * not the script's: not an array of integers that holds exactly one
 * result per op, an unknown status, or a value no step function gives
 * (remaining above limit, a negative time, a delay or lease with a
 * denial, ...); then no op is written, and none is to be trusted. An error reply is
 * WEIR_EIO too. @redis_now_us, when not NULL, receives Redis's time (0 when
 * no batch asked for it) on success.
 */
weir_status weir__redis_decode(const struct redisReply *r, const weir__redis_batch *b, size_t nb,
                               int64_t *redis_now_us);

/**
 * weir__redis_limit_fits() - whether the script decides @lim exactly as
 * the C step does: WEIR_OK, or WEIR_ERANGE when a quantity the script
 * would hold for it reaches 2^53 (such a limit is refused when the rules
 * load, with the reason; docs/OPERATIONS.md lists the bounds). WEIR_EINVAL
 * for NULL or an unknown algorithm. A ban (limit 0) always fits. The
 * bounds, for a compiled limit:
 *   token_bucket, leaky_bucket, leaky_bucket_shaper: capacity < 2^52
 *     (burst x window / gcd(limit, window) units)
 *   gcra: capacity <= 2^51 us (71 years, in ns: 2^51 x 1000) and
 *     capacity / gcd(unit, 1000) <= 2^53 - 1001 (ticks of that many ns)
 *   sliding_window_counter: window_us + window_us / k < 2^52 (k = 1: a
 *     window below 2^51 us, 71 years)
 *   fixed_window, sliding_window_log, concurrency: every compiled limit.
 */
weir_status weir__redis_limit_fits(const weir_limit *lim);

/**
 * weir__redis_op_ok() - whether @op, in a batch at @now_us (< 0: Redis's
 * clock), can be sent: WEIR_OK; WEIR_EINVAL for a NULL op, key or limit, a
 * key of 0 or more than WEIR_MAX_KEY_BYTES bytes, an unknown kind or
 * algorithm; WEIR_ERANGE for a limit weir__redis_limit_fits() refuses or a
 * time past WEIR__REDIS_MAX_NOW_US. The caller completes a refused op with
 * that status and leaves it out of the call (the format has no way to skip
 * one). Whether a RELEASE may sit in an atomic batch is the caller's to
 * check (the script fails such a batch whole with WEIR_EINVAL).
 */
weir_status weir__redis_op_ok(const weir_op *op, int64_t now_us);

/* Times the script accepts: 0 .. this (2^52 microseconds, the year 2112
 * from the Unix epoch); a later time is refused (WEIR_ERANGE per op). */
#define WEIR__REDIS_MAX_NOW_US ((int64_t)1 << 52)

#endif /* WEIR_STORE_REDIS_CODEC_H */
