/*
 * codec.c - the script call's argument vector and its reply (codec.h).
 *
 * Numbers become decimal text in the caller's buffer; the reply is checked
 * whole before any op is filled, so a reply that is not the script's
 * (WEIR_EIO) leaves every op as it was. No I/O, no allocation.
 */
#include "store/redis/codec.h"

#include <hiredis/hiredis.h>
#include <string.h>

#define P51 ((int64_t)1 << 51)
#define P52 ((int64_t)1 << 52)
#define P53 ((int64_t)1 << 53)

/* ---------------------------------------------------------------- encode */

typedef struct argv_out {
    const char **argv;
    size_t *argvlen;
    size_t n;
    char *num; /* where the next number's text goes */
} argv_out;

static void arg(argv_out *o, const char *s, size_t len)
{
    o->argv[o->n] = s;
    o->argvlen[o->n] = len;
    o->n++;
}

static void arg_u64(argv_out *o, uint64_t v)
{
    char tmp[20];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10u);
        v /= 10u;
    } while (v);
    for (size_t i = 0; i < n; i++)
        o->num[i] = tmp[n - 1 - i];
    arg(o, o->num, n);
    o->num += n;
}

/* Every signed field the script is sent is >= 0 for a compiled limit; a
 * negative one (not a compiled limit) goes as 0, which the script refuses
 * or decides as a ban, never as a huge number. */
static void arg_i64(argv_out *o, int64_t v)
{
    arg_u64(o, v > 0 ? (uint64_t)v : 0u);
}

size_t weir__redis_encode(const char *cmd, size_t cmd_len, const char *body, size_t body_len,
                          const weir__redis_batch *b, size_t nb, const char **argv, size_t *argvlen,
                          char *numbuf)
{
    argv_out o = {argv, argvlen, 0, numbuf};
    size_t nops = 0;
    for (size_t j = 0; j < nb; j++)
        nops += b[j].n;

    arg(&o, cmd, cmd_len);
    arg(&o, body, body_len);
    arg_u64(&o, nops);
    for (size_t j = 0; j < nb; j++)
        for (size_t i = 0; i < b[j].n; i++)
            arg(&o, b[j].ops[i].key, b[j].ops[i].key_len);
    arg(&o, "1", 1); /* the wire format */
    arg_u64(&o, nb);
    for (size_t j = 0; j < nb; j++) {
        if (b[j].now_us < 0)
            arg(&o, "-", 1);
        else
            arg_u64(&o, (uint64_t)b[j].now_us);
        arg(&o, (b[j].flags & WEIR_BATCH_ATOMIC) ? "1" : "0", 1);
        arg_u64(&o, b[j].n);
        for (size_t i = 0; i < b[j].n; i++) {
            const weir_op *op = &b[j].ops[i];
            const weir_limit *l = op->limit;
            arg_u64(&o, (uint64_t)op->kind);
            arg_u64(&o, op->hits);
            arg_u64(&o, op->lease);
            arg_u64(&o, (uint64_t)l->algorithm);
            arg_u64(&o, l->limit);
            arg_i64(&o, l->window_us);
            arg_u64(&o, l->burst);
            arg_u64(&o, l->sub_windows);
            arg_i64(&o, l->unit);
            arg_i64(&o, l->rate);
            arg_i64(&o, l->capacity);
        }
    }
    return o.n;
}

/* ---------------------------------------------------------------- decode */

static bool known_status(long long st)
{
    return st == WEIR_OK || st == WEIR_EINVAL || st == WEIR_ERANGE || st == WEIR_ENOLEASE ||
           st == WEIR_EALGO;
}

/* One op's 8 integers: what the C step functions can answer, and nothing
 * but zeros beside a failure. */
static bool op_reply_ok(redisReply *const *e)
{
    long long st = e[0]->integer, allowed = e[1]->integer, limit = e[2]->integer;
    long long remaining = e[3]->integer, reset = e[4]->integer, retry = e[5]->integer;
    long long delay = e[6]->integer, lease = e[7]->integer;
    if (!known_status(st))
        return false;
    if (st != WEIR_OK)
        return (allowed | limit | remaining | reset | retry | delay | lease) == 0;
    if (allowed != 0 && allowed != 1)
        return false;
    if (limit < 0 || limit > (long long)WEIR_MAX_LIMIT || remaining < 0 || remaining > limit)
        return false;
    if (reset < 0 || retry < WEIR_NEVER || delay < 0 || lease < 0)
        return false;
    /* a result admits with no retry, or denies with no delay or lease */
    return allowed ? retry == 0 : delay == 0 && lease == 0;
}

weir_status weir__redis_decode(const struct redisReply *r, const weir__redis_batch *b, size_t nb,
                               int64_t *redis_now_us)
{
    size_t nops = 0;
    for (size_t j = 0; j < nb; j++)
        nops += b[j].n;
    if (!r || r->type != REDIS_REPLY_ARRAY || !r->element ||
        r->elements != 1u + WEIR__REDIS_REPLY_PER_OP * nops)
        return WEIR_EIO;
    for (size_t i = 0; i < r->elements; i++)
        if (!r->element[i] || r->element[i]->type != REDIS_REPLY_INTEGER)
            return WEIR_EIO;
    if (r->element[0]->integer < 0)
        return WEIR_EIO;
    for (size_t k = 0; k < nops; k++)
        if (!op_reply_ok(&r->element[1u + WEIR__REDIS_REPLY_PER_OP * k]))
            return WEIR_EIO;

    redisReply *const *e = &r->element[1];
    for (size_t j = 0; j < nb; j++) {
        for (size_t i = 0; i < b[j].n; i++, e += WEIR__REDIS_REPLY_PER_OP) {
            weir_op *op = &b[j].ops[i];
            op->status = (weir_status)e[0]->integer;
            if (op->status != WEIR_OK)
                continue;
            weir_result *res = &op->result;
            res->allowed = e[1]->integer != 0;
            res->limit = (uint64_t)e[2]->integer;
            res->remaining = (uint64_t)e[3]->integer;
            res->reset_after_us = e[4]->integer;
            res->retry_after_us = e[5]->integer;
            res->delay_us = e[6]->integer;
            res->lease = (uint64_t)e[7]->integer;
        }
    }
    if (redis_now_us)
        *redis_now_us = r->element[0]->integer;
    return WEIR_OK;
}

/* ---------------------------------------------------------------- bounds */

static int64_t gcd64(int64_t a, int64_t b)
{
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

weir_status weir__redis_limit_fits(const weir_limit *lim)
{
    if (!lim || (unsigned)lim->algorithm - 1u >= WEIR_ALGORITHM_COUNT)
        return WEIR_EINVAL;
    if (lim->limit == 0)
        return WEIR_OK;
    switch (lim->algorithm) {
    case WEIR_ALGO_TOKEN_BUCKET:
    case WEIR_ALGO_LEAKY_BUCKET:
    case WEIR_ALGO_LEAKY_SHAPER:
        /* the level and every drain time below 2^52, so that one plus a
         * clock's step back (< 2^52) stays below 2^53 */
        return lim->capacity < P52 ? WEIR_OK : WEIR_ERANGE;
    case WEIR_ALGO_GCRA: {
        /* the TAT, up to 2^52 us + the capacity, below 2^53 us (and, as in
         * C, TAT + cost never past INT64_MAX ns); the capacity in ticks of
         * gcd(unit, 1000) ns, plus a tick's worth of sub-microsecond, too */
        if (lim->capacity > P51 * 1000)
            return WEIR_ERANGE;
        int64_t d = gcd64(1000, lim->unit % 1000);
        return lim->capacity / d <= P53 - 1001 ? WEIR_OK : WEIR_ERANGE;
    }
    case WEIR_ALGO_SLIDING_COUNTER:
        /* the rest time, (newest sub-window + k + 1) x span, below 2^53 */
        return lim->window_us + lim->span_us < P52 ? WEIR_OK : WEIR_ERANGE;
    default:
        /* windows up to 100 years after times up to 2^52 stay below 2^53 */
        return WEIR_OK;
    }
}

weir_status weir__redis_op_ok(const weir_op *op, int64_t now_us)
{
    if (!op || !op->key || op->key_len == 0 || op->key_len > WEIR_MAX_KEY_BYTES || !op->limit ||
        (unsigned)op->kind > (unsigned)WEIR_OP_RELEASE)
        return WEIR_EINVAL;
    weir_status st = weir__redis_limit_fits(op->limit);
    if (st != WEIR_OK)
        return st;
    return now_us > WEIR__REDIS_MAX_NOW_US ? WEIR_ERANGE : WEIR_OK;
}
