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

/* v's decimal digits at o->num; returns their count */
static size_t put_u64(argv_out *o, uint64_t v)
{
    char tmp[20];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10u);
        v /= 10u;
    } while (v);
    for (size_t i = 0; i < n; i++)
        o->num[i] = tmp[n - 1 - i];
    o->num += n;
    return n;
}

static void arg_u64(argv_out *o, uint64_t v)
{
    const char *s = o->num;
    arg(o, s, put_u64(o, v));
}

/* Every signed field the script is sent is >= 0 for a compiled limit; a
 * negative one (not a compiled limit) goes as 0, which the script refuses
 * or decides as a ban, never as a huge number. */
static uint64_t nonneg(int64_t v)
{
    return v > 0 ? (uint64_t)v : 0u;
}

/* A limit's argument: its 8 fields, a space apart, and 2 more for a
 * warm-up. */
static void arg_limit(argv_out *o, const weir_limit *l)
{
    const uint64_t f[10] = {
        (uint64_t)l->algorithm, l->limit,        nonneg(l->window_us), l->burst,
        l->sub_windows,         nonneg(l->unit), nonneg(l->rate),      nonneg(l->capacity),
        nonneg(l->warmup_us),   l->cold_factor};
    const char *s = o->num;
    size_t n = 0;
    for (size_t i = 0; i < (l->warmup_us > 0 ? 10u : 8u); i++) {
        if (i) {
            *o->num++ = ' ';
            n++;
        }
        n += put_u64(o, f[i]);
    }
    arg(o, s, n);
}

/* The call's distinct limits, for their index in its limit table: an open
 * hash table keyed by the fields sent, so that limits compiled apart but
 * alike share an entry too. Once it is 3/4 full, a limit not in it gets a
 * table entry of its own at each op (the script decides alike). */
#define LIMIT_SLOTS 128u

typedef struct limit_slot {
    const weir_limit *lim; /* NULL: free */
    size_t index;          /* 1 .. L */
} limit_slot;

typedef struct limit_set {
    limit_slot slot[LIMIT_SLOTS];
    size_t used;
} limit_set;

static bool same_limit(const weir_limit *a, const weir_limit *b)
{
    return a == b ||
           (a->algorithm == b->algorithm && a->limit == b->limit && a->window_us == b->window_us &&
            a->burst == b->burst && a->sub_windows == b->sub_windows && a->unit == b->unit &&
            a->rate == b->rate && a->capacity == b->capacity && a->warmup_us == b->warmup_us &&
            a->cold_factor == b->cold_factor);
}

static size_t limit_hash(const weir_limit *l)
{
    const uint64_t f[7] = {
        l->limit,          (uint64_t)l->window_us, l->burst, l->sub_windows, (uint64_t)l->unit,
        (uint64_t)l->rate, (uint64_t)l->capacity};
    uint64_t h = (uint64_t)l->algorithm;
    for (size_t i = 0; i < 7; i++)
        h = (h ^ f[i]) * 0x9e3779b97f4a7c15u;
    return (size_t)(h >> 57); /* 7 bits: LIMIT_SLOTS */
}

/* @l's index in the table, or 0 after making @slot the place for it (NULL
 * when the table is too full to take it). */
static size_t limit_find(limit_set *set, const weir_limit *l, limit_slot **slot)
{
    *slot = NULL;
    for (size_t i = limit_hash(l);; i = (i + 1) % LIMIT_SLOTS) {
        limit_slot *e = &set->slot[i];
        if (!e->lim) {
            if (set->used < LIMIT_SLOTS / 4u * 3u)
                *slot = e;
            return 0;
        }
        if (same_limit(e->lim, l))
            return e->index;
    }
}

size_t weir__redis_encode(const char *cmd, size_t cmd_len, const char *body, size_t body_len,
                          const weir__redis_batch *b, size_t nb, bool keys_in_args,
                          const char **argv, size_t *argvlen, char *numbuf)
{
    argv_out o = {argv, argvlen, 0, numbuf};
    size_t nops = 0;
    for (size_t j = 0; j < nb; j++)
        nops += b[j].n;

    arg(&o, cmd, cmd_len);
    arg(&o, body, body_len);
    if (keys_in_args) {
        /* no keys declared: "3", k, the keys, then as format 2 */
        arg(&o, "0", 1);
        arg(&o, "3", 1);
        arg_u64(&o, nops);
    } else {
        arg_u64(&o, nops);
    }
    for (size_t j = 0; j < nb; j++)
        for (size_t i = 0; i < b[j].n; i++)
            arg(&o, b[j].ops[i].key, b[j].ops[i].key_len);
    if (!keys_in_args)
        arg(&o, "2", 1); /* the wire format */
    size_t at_nl = o.n++, at_lim = o.n;

    /* the batches go after room for a limit per op, and move down to the
     * table's end when it is known */
    argv_out t = {argv, argvlen, at_lim, numbuf}; /* the limit table */
    limit_set set;
    memset(&set, 0, sizeof(set));
    o.n = at_lim + nops;
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
            limit_slot *slot;
            size_t index = limit_find(&set, op->limit, &slot);
            if (!index) {
                t.num = o.num;
                arg_limit(&t, op->limit);
                o.num = t.num;
                index = t.n - at_lim;
                if (slot) {
                    *slot = (limit_slot){op->limit, index};
                    set.used++;
                }
            }
            arg_u64(&o, (uint64_t)op->kind);
            arg_u64(&o, op->hits);
            /* the lease field carries a TAKE's reserve (codec.h) */
            arg_u64(&o, op->kind == WEIR_OP_TAKE ? op->reserve : op->lease);
            arg_u64(&o, index);
        }
    }
    size_t nl = t.n - at_lim, end = o.n;
    memmove(&argv[t.n], &argv[at_lim + nops], (end - at_lim - nops) * sizeof(*argv));
    memmove(&argvlen[t.n], &argvlen[at_lim + nops], (end - at_lim - nops) * sizeof(*argvlen));
    o.n = at_nl;
    arg_u64(&o, nl);
    return end - (nops - nl);
}

/* ---------------------------------------------------------------- decode */

static bool failed_status(long long st)
{
    return st == WEIR_EINVAL || st == WEIR_ERANGE || st == WEIR_ENOLEASE || st == WEIR_EALGO;
}

/* The head's flags (codec.h) */
#define R_ALLOWED 1
#define R_DELAY 2
#define R_LEASE 4

/*
 * One op's result from e[0 .. avail - 1]: its status, and its result when
 * WEIR_OK. Returns the integers it takes, or 0 when they are not the
 * script's: too few, an unknown status, a value no step function gives
 * (remaining above limit, a negative time, a delay or lease on a denial,
 * ...).
 */
static size_t op_reply(redisReply *const *e, size_t avail, weir_status *st, weir_result *res)
{
    if (avail < 1)
        return 0;
    long long head = e[0]->integer;
    if (head < 0) {
        if (!failed_status(head))
            return 0;
        *st = (weir_status)head;
        return 1;
    }
    unsigned flags = (unsigned)(head & 7);
    long long limit = head >> 3;
    if (!(flags & R_ALLOWED) && flags != 0)
        return 0;
    size_t need = 3u + ((flags & R_ALLOWED) ? 0u : 1u) + ((flags & R_DELAY) ? 1u : 0u) +
                  ((flags & R_LEASE) ? 1u : 0u);
    if (avail < need)
        return 0;
    long long remaining = e[1]->integer, reset = e[2]->integer;
    if (limit > (long long)WEIR_MAX_LIMIT || remaining < 0 || remaining > limit || reset < 0)
        return 0;
    weir_result r = {.allowed = (flags & R_ALLOWED) != 0,
                     .limit = (uint64_t)limit,
                     .remaining = (uint64_t)remaining,
                     .reset_after_us = reset};
    size_t k = 3;
    if (!r.allowed) {
        r.retry_after_us = e[k++]->integer;
        if (r.retry_after_us < WEIR_NEVER)
            return 0;
    }
    if (flags & R_DELAY) {
        r.delay_us = e[k++]->integer;
        if (r.delay_us <= 0)
            return 0;
    }
    if (flags & R_LEASE) {
        long long lease = e[k++]->integer;
        if (lease <= 0)
            return 0;
        r.lease = (uint64_t)lease;
    }
    *st = WEIR_OK;
    *res = r;
    return k;
}

weir_status weir__redis_decode(const struct redisReply *r, const weir__redis_batch *b, size_t nb,
                               int64_t *redis_now_us)
{
    size_t nops = 0;
    for (size_t j = 0; j < nb; j++)
        nops += b[j].n;
    if (!r || r->type != REDIS_REPLY_ARRAY || !r->element || r->elements < 1u + nops ||
        r->elements > 1u + WEIR__REDIS_REPLY_MAX_PER_OP * nops)
        return WEIR_EIO;
    for (size_t i = 0; i < r->elements; i++)
        if (!r->element[i] || r->element[i]->type != REDIS_REPLY_INTEGER)
            return WEIR_EIO;
    if (r->element[0]->integer < 0)
        return WEIR_EIO;
    /* the whole reply checked before any op is written */
    size_t at = 1;
    weir_status st;
    weir_result res;
    for (size_t k = 0; k < nops; k++) {
        size_t used = op_reply(&r->element[at], r->elements - at, &st, &res);
        if (!used)
            return WEIR_EIO;
        at += used;
    }
    if (at != r->elements)
        return WEIR_EIO;

    at = 1;
    for (size_t j = 0; j < nb; j++) {
        for (size_t i = 0; i < b[j].n; i++) {
            weir_op *op = &b[j].ops[i];
            at += op_reply(&r->element[at], r->elements - at, &op->status, &res);
            if (op->status == WEIR_OK)
                op->result = res;
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
         * clock's step back (< 2^52) stays below 2^53; a warm-up's cost,
         * up to cold_factor x the capacity, too (cold_factor x warmup_us
         * is below 2^43, and its heat below 2^37) */
        if (lim->warmup_us > 0)
            return lim->capacity <= (P52 - 1) / (int64_t)lim->cold_factor ? WEIR_OK : WEIR_ERANGE;
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
        (unsigned)op->kind > (unsigned)WEIR_OP_CHARGE)
        return WEIR_EINVAL;
    weir_status st = weir__redis_limit_fits(op->limit);
    if (st != WEIR_OK)
        return st;
    return now_us > WEIR__REDIS_MAX_NOW_US ? WEIR_ERANGE : WEIR_OK;
}
