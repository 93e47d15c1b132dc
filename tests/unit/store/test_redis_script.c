/*
 * test_redis_script.c - the Redis store's script and codec against the C
 * step functions, on a real redis-server.
 *
 * Every trace runs twice: through the script (the argument vector of
 * weir__redis_encode(), sent with hiredis, the reply read back with
 * weir__redis_decode()) and through weir_step()/weir_check()/
 * weir_release() on states the test holds, with an atomic batch run as the
 * memory store's run_atomic() runs it (checked against weir_memstore_run()
 * itself on monotone times). Every status and every result field must be
 * equal. The random traces print their seed; replay a failure with
 * WEIR_TEST_SEED=<seed>.
 *
 * The script's keys expire on Redis's own clock, reset_after after a
 * charge, while the traces move a clock of their own: a key could vanish
 * between two calls although the trace says it is not at rest. So the
 * traces make their keys persistent in the same transaction as the call
 * (MULTI ... EXEC, in which Redis's clock stands still); the TTLs are
 * tested on their own.
 */
#define _GNU_SOURCE

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fake.h"
#include "redis_support.h"
#include "store/redis/codec.h"
#include "weir/weir.h"

#define S ((int64_t)1000000)
#define MIN (60 * S)
#define HOUR (3600 * S)
#define DAY (86400 * S)
#define YEAR (31557600 * S) /* 365.25 days */
#define P51 ((int64_t)1 << 51)
#define P52 ((int64_t)1 << 52)
#define P53 ((int64_t)1 << 53)
#define T0 ((int64_t)1700000040000000)   /* 2023-11-14 22:14, a whole minute */
#define TDAY ((int64_t)1699920000000000) /* its day's start, 00:00 UTC */

#define MAX_BATCHES 4
#define MAX_OPS 6 /* per batch */
#define MAX_KEYS 4

static redis_server g_srv;
static redisContext *g_c;
static char g_sha[41];
static bool g_fcall; /* call the function library, not the script */
static bool g_args;  /* format 3: the keys among the arguments (a cluster node's calls) */

/* ------------------------------------------------------------------ setup */

/* A group setup that fails is not torn down: stop the server first. */
static void setup_check(bool ok, const char *what, const redisReply *r)
{
    if (ok)
        return;
    char msg[512];
    snprintf(msg, sizeof(msg), "%s: %s", what, r && r->str ? r->str : "no reply");
    if (g_c)
        redisFree(g_c);
    g_c = NULL;
    redis_stop(&g_srv);
    fail_msg("%s", msg);
}

static int group_setup(void **unused)
{
    (void)unused;
    redis_start(&g_srv, NULL, NULL);
    g_c = redis_connect(&g_srv);
    redisReply *r =
        redisCommand(g_c, "SCRIPT LOAD %b", weir__redis_script, (size_t)weir__redis_script_len);
    setup_check(r && r->type == REDIS_REPLY_STRING && r->len == 40, "SCRIPT LOAD", r);
    memcpy(g_sha, r->str, 41);
    freeReplyObject(r);
    /* and the same source as a function library */
    size_t head = strlen(WEIR__REDIS_LIBRARY_HEAD);
    char *lib = malloc(head + weir__redis_script_len);
    assert_non_null(lib);
    memcpy(lib, WEIR__REDIS_LIBRARY_HEAD, head);
    memcpy(lib + head, weir__redis_script, weir__redis_script_len);
    r = redisCommand(g_c, "FUNCTION LOAD REPLACE %b", lib, head + weir__redis_script_len);
    free(lib);
    setup_check(r && r->type == REDIS_REPLY_STRING, "FUNCTION LOAD", r);
    freeReplyObject(r);
    return 0;
}

static int group_teardown(void **unused)
{
    (void)unused;
    if (g_c)
        redisFree(g_c);
    g_c = NULL;
    redis_stop(&g_srv);
    return 0;
}

static redisReply *command(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(g_c, fmt, ap);
    va_end(ap);
    assert_non_null(r);
    return r;
}

static void flushall(void)
{
    freeReplyObject(command("FLUSHALL"));
}

static long long integer_reply(const char *fmt, const char *key)
{
    redisReply *r = command(fmt, key);
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    long long v = r->integer;
    freeReplyObject(r);
    return v;
}

static weir_limit compile4(weir_algorithm a, uint64_t limit, int64_t window, uint64_t burst,
                           uint32_t k)
{
    weir_limit_spec sp = {
        .algorithm = a, .limit = limit, .window_us = window, .burst = burst, .sub_windows = k};
    weir_limit lim;
    assert_int_equal(weir_limit_compile(&sp, &lim), WEIR_OK);
    assert_int_equal(weir__redis_limit_fits(&lim), WEIR_OK);
    return lim;
}

/* A token bucket with a warm-up. */
static weir_limit warm(uint64_t limit, int64_t window, uint64_t burst, int64_t warmup_us,
                       uint32_t cold_factor)
{
    weir_limit_spec sp = {.algorithm = WEIR_ALGO_TOKEN_BUCKET,
                          .limit = limit,
                          .window_us = window,
                          .burst = burst,
                          .warmup_us = warmup_us,
                          .cold_factor = cold_factor};
    weir_limit lim;
    assert_int_equal(weir_limit_compile(&sp, &lim), WEIR_OK);
    assert_int_equal(weir__redis_limit_fits(&lim), WEIR_OK);
    return lim;
}

static weir_limit compile(weir_algorithm a, uint64_t limit, int64_t window)
{
    return compile4(a, limit, window, 0, 0);
}

/* --------------------------------------------------------- the script call */

static size_t ops_in(const weir__redis_batch *b, size_t nb)
{
    size_t n = 0;
    for (size_t j = 0; j < nb; j++)
        n += b[j].n;
    return n;
}

/*
 * Run the batches through the script: their ops' statuses and results
 * come from its reply. With @persist the ops' keys lose their TTL in the
 * same transaction. Returns weir__redis_decode()'s status.
 */
static weir_status script_call(weir__redis_batch *b, size_t nb, bool persist, int64_t *redis_now)
{
    size_t nops = ops_in(b, nb);
    size_t argc = weir__redis_argc(nb, nops);
    const char **argv = calloc(argc, sizeof(*argv));
    size_t *argvlen = calloc(argc, sizeof(*argvlen));
    char *num = malloc(weir__redis_numbuf_size(nb, nops));
    assert_true(argv && argvlen && num);
    if (g_fcall)
        argc = weir__redis_encode("FCALL", 5, WEIR__REDIS_FUNCTION, strlen(WEIR__REDIS_FUNCTION), b,
                                  nb, g_args, argv, argvlen, num);
    else
        argc = weir__redis_encode("EVALSHA", 7, g_sha, 40, b, nb, g_args, argv, argvlen, num);
    assert_true(argc <= weir__redis_argc(nb, nops));

    redisReply *r, *whole = NULL;
    if (!persist) {
        r = whole = redisCommandArgv(g_c, (int)argc, argv, argvlen);
        assert_non_null(r);
    } else {
        assert_int_equal(redisAppendCommand(g_c, "MULTI"), REDIS_OK);
        assert_int_equal(redisAppendCommandArgv(g_c, (int)argc, argv, argvlen), REDIS_OK);
        for (size_t j = 0; j < nb; j++)
            for (size_t i = 0; i < b[j].n; i++)
                assert_int_equal(
                    redisAppendCommand(g_c, "PERSIST %b", b[j].ops[i].key, b[j].ops[i].key_len),
                    REDIS_OK);
        assert_int_equal(redisAppendCommand(g_c, "EXEC"), REDIS_OK);
        for (size_t i = 0; i < 2 + nops; i++) {
            void *q;
            assert_int_equal(redisGetReply(g_c, &q), REDIS_OK);
            freeReplyObject(q);
        }
        void *q;
        assert_int_equal(redisGetReply(g_c, &q), REDIS_OK);
        whole = q;
        assert_int_equal(whole->type, REDIS_REPLY_ARRAY);
        assert_int_equal(whole->elements, 1 + nops);
        r = whole->element[0];
    }
    if (r->type == REDIS_REPLY_ERROR)
        print_error("script error: %s\n", r->str);
    weir_status st = weir__redis_decode(r, b, nb, redis_now);
    freeReplyObject(whole);
    free(argv);
    free(argvlen);
    free(num);
    return st;
}

/* One op alone in a call. */
static weir_op one(const char *key, const weir_limit *lim, weir_op_kind kind, int64_t now,
                   uint64_t hits, uint64_t lease)
{
    weir_op op = {.key = key,
                  .key_len = strlen(key),
                  .limit = lim,
                  .hits = hits,
                  .lease = lease,
                  .kind = kind};
    weir__redis_batch b = {&op, 1, now, 0};
    assert_int_equal(script_call(&b, 1, true, NULL), WEIR_OK);
    return op;
}

/* -------------------------------------------------------------- reference */

/* A key the test holds the C state of. */
typedef struct tkey {
    char name[48];
    weir_limit lim;
    void *state;
} tkey;

typedef struct expect {
    weir_status st;
    weir_result r;
} expect;

static tkey *key_of(tkey *keys, size_t nkeys, const weir_op *op)
{
    for (size_t k = 0; k < nkeys; k++)
        if (op->key == keys[k].name)
            return &keys[k];
    fail_msg("op on a key the test does not hold");
    return NULL;
}

static bool same_key(const weir_op *a, const weir_op *b)
{
    return a->key_len == b->key_len && memcmp(a->key, b->key, a->key_len) == 0;
}

static void key_init(tkey *k, const char *name, weir_limit lim)
{
    char copy[sizeof(k->name)];
    snprintf(copy, sizeof(copy), "%s", name); /* name may be k->name */
    memcpy(k->name, copy, sizeof(copy));
    k->lim = lim;
    k->state = calloc(1, weir_state_size(&lim) ? weir_state_size(&lim) : 16);
    assert_non_null(k->state);
}

static void key_fini(tkey *k)
{
    free(k->state);
    k->state = NULL;
}

/* weir_step() as the script steps a key: a concurrency key made afresh
 * by an acquire counts its lease ids from 256 per millisecond of the
 * time, at most ID_BASE_MAX (script.lua); the C state's id counter is its
 * first 8 bytes. */
static weir_status ref_step(tkey *k, int64_t now, uint64_t hits, uint64_t reserve, weir_result *r)
{
    uint64_t next;
    memcpy(&next, k->state, sizeof(next));
    bool fresh = k->lim.algorithm == WEIR_ALGO_CONCURRENCY && next == 0;
    if (fresh) {
        uint64_t base = (uint64_t)(now / 1000) * 256u;
        if (base > 1007194959773696u)
            base = 1007194959773696u;
        memcpy(k->state, &base, sizeof(base));
    }
    weir_status st = weir_step_reserve(&k->lim, k->state, now, hits, reserve, r);
    if (fresh && !(st == WEIR_OK && r->allowed && hits > 0))
        memcpy(k->state, &next, sizeof(next)); /* nothing acquired: still fresh */
    return st;
}

/* The C side of one batch, in weir_step() and friends. */
static void ref_batch(tkey *keys, size_t nkeys, const weir__redis_batch *b, expect *out)
{
    const weir_op *ops = b->ops;
    size_t n = b->n;
    int64_t now = b->now_us;
    if (!(b->flags & WEIR_BATCH_ATOMIC)) {
        for (size_t i = 0; i < n; i++) {
            tkey *k = key_of(keys, nkeys, &ops[i]);
            memset(&out[i], 0, sizeof(out[i]));
            switch (ops[i].kind) {
            case WEIR_OP_TAKE:
                out[i].st = ref_step(k, now, ops[i].hits, ops[i].reserve, &out[i].r);
                break;
            case WEIR_OP_CHECK:
                out[i].st = weir_check(&k->lim, k->state, now, ops[i].hits, &out[i].r);
                break;
            case WEIR_OP_REFUND:
                out[i].st = weir_refund(&k->lim, k->state, now, ops[i].hits, &out[i].r);
                break;
            case WEIR_OP_CHARGE:
                out[i].st = weir_charge(&k->lim, k->state, now, ops[i].hits, &out[i].r);
                break;
            default:
                out[i].st = weir_release(&k->lim, k->state, now, ops[i].lease, &out[i].r);
                break;
            }
        }
        return;
    }
    /* memstore.c, run_atomic(): an op but a TAKE or CHECK fails the batch;
     * every op decided first, a key's TAKE with its earlier TAKEs' hits
     * added; charged in order if every TAKE admits, else none (a look for
     * those that would). */
    for (size_t i = 0; i < n; i++) {
        memset(&out[i], 0, sizeof(out[i]));
        if (ops[i].kind != WEIR_OP_TAKE && ops[i].kind != WEIR_OP_CHECK) {
            for (size_t j = 0; j < n; j++) {
                memset(&out[j], 0, sizeof(out[j]));
                out[j].st = WEIR_EINVAL;
            }
            return;
        }
    }
    bool denied = false;
    for (size_t i = 0; i < n; i++) {
        tkey *k = key_of(keys, nkeys, &ops[i]);
        uint64_t hits = ops[i].hits;
        bool take = ops[i].kind == WEIR_OP_TAKE;
        for (size_t j = 0; take && j < i; j++)
            if (ops[j].kind == WEIR_OP_TAKE && same_key(&ops[j], &ops[i]))
                hits += ops[j].hits;
        /* a TAKE's reserve after its key's earlier TAKEs and its own hits */
        uint64_t reserve = take ? ops[i].reserve : 0;
        if (reserve > 0) {
            uint64_t cost = (hits ? hits : 1) + reserve;
            if (cost < reserve)
                cost = UINT64_MAX;
            out[i].st = weir_check(&k->lim, k->state, now, cost, &out[i].r);
        }
        if (reserve == 0 || (out[i].st == WEIR_OK && out[i].r.allowed))
            out[i].st = weir_check(&k->lim, k->state, now, hits, &out[i].r);
        if (out[i].st == WEIR_OK && take && !out[i].r.allowed)
            denied = true;
    }
    for (size_t i = 0; i < n; i++) {
        tkey *k = key_of(keys, nkeys, &ops[i]);
        bool take = ops[i].kind == WEIR_OP_TAKE;
        if (!denied && take)
            out[i].st = ref_step(k, now, ops[i].hits, ops[i].reserve, &out[i].r);
        else if (!denied)
            out[i].st = weir_check(&k->lim, k->state, now, ops[i].hits, &out[i].r);
        else if (take && out[i].st == WEIR_OK && out[i].r.allowed)
            out[i].st = weir_check(&k->lim, k->state, now, 0, &out[i].r);
    }
}

static const char *kind_name(weir_op_kind k)
{
    static const char *const names[] = {"TAKE", "CHECK", "RELEASE", "RESET", "REFUND", "CHARGE"};
    return (unsigned)k < 6u ? names[k] : "?";
}

static void print_result(const char *who, weir_status st, const weir_result *r)
{
    print_message("  %-6s status %d allowed %d limit %llu remaining %llu reset %lld retry %lld "
                  "delay %lld lease %llu\n",
                  who, (int)st, (int)r->allowed, (unsigned long long)r->limit,
                  (unsigned long long)r->remaining, (long long)r->reset_after_us,
                  (long long)r->retry_after_us, (long long)r->delay_us,
                  (unsigned long long)r->lease);
}

static bool same_result(weir_status st_a, const weir_result *a, weir_status st_b,
                        const weir_result *b, bool lease_too)
{
    if (st_a != st_b)
        return false;
    if (st_a != WEIR_OK)
        return true;
    return a->allowed == b->allowed && a->limit == b->limit && a->remaining == b->remaining &&
           a->reset_after_us == b->reset_after_us && a->retry_after_us == b->retry_after_us &&
           a->delay_us == b->delay_us && (!lease_too || a->lease == b->lease);
}

/* Fail, with everything needed to see why, unless the op's result (the
 * script's) is the C side's. */
static void compare(const char *trace, uint64_t seed, size_t step, const weir__redis_batch *b,
                    size_t i, const expect *want)
{
    const weir_op *op = &b->ops[i];
    if (same_result(op->status, &op->result, want->st, &want->r, true))
        return;
    const weir_limit *l = op->limit;
    print_message("%s: mismatch (seed %llu, call %zu), batch at %lld flags %u, op %zu of %zu\n",
                  trace, (unsigned long long)seed, step, (long long)b->now_us, b->flags, i, b->n);
    print_message("  key %.*s: %s hits %llu lease %llu reserve %llu; %s limit %llu window %lld "
                  "burst %llu k %u unit %lld rate %lld capacity %lld\n",
                  (int)op->key_len, (const char *)op->key, kind_name(op->kind),
                  (unsigned long long)op->hits, (unsigned long long)op->lease,
                  (unsigned long long)op->reserve, weir_algorithm_name(l->algorithm),
                  (unsigned long long)l->limit, (long long)l->window_us,
                  (unsigned long long)l->burst, l->sub_windows, (long long)l->unit,
                  (long long)l->rate, (long long)l->capacity);
    print_result("C", want->st, &want->r);
    print_result("script", op->status, &op->result);
    fail_msg("the script and the C step functions disagree (seed %llu)", (unsigned long long)seed);
}

/* Run a call's batches through the C side and the script; compare all. */
static void both(const char *trace, uint64_t seed, size_t step, tkey *keys, size_t nkeys,
                 weir__redis_batch *b, size_t nb)
{
    expect want[MAX_BATCHES][MAX_OPS];
    assert_true(nb <= MAX_BATCHES);
    for (size_t j = 0; j < nb; j++) {
        assert_true(b[j].n <= MAX_OPS);
        ref_batch(keys, nkeys, &b[j], want[j]);
    }
    assert_int_equal(script_call(b, nb, true, NULL), WEIR_OK);
    for (size_t j = 0; j < nb; j++)
        for (size_t i = 0; i < b[j].n; i++)
            compare(trace, seed, step, &b[j], i, &want[j][i]);
}

/* ---------------------------------------------------------------- golden */

/* One step of a hand-derived trace: the op, and what it must give (-2: not
 * checked). The C step functions must agree too. */
typedef struct gstep {
    int64_t at; /* from the trace's start */
    weir_op_kind kind;
    uint64_t hits;
    uint64_t lease;
    int allowed;
    long long remaining, retry, reset, delay, lease_out;
    weir_status st;
} gstep;

#define NC (-2) /* not checked */

static void golden(const char *name, weir_limit lim, int64_t start, const gstep *steps, size_t n)
{
    tkey k;
    key_init(&k, name, lim);
    /* lease ids are written from 1: a fresh key counts them from its
     * first acquire's time (ref_step()) */
    long long base = lim.algorithm == WEIR_ALGO_CONCURRENCY ? (start / 1000) * 256 : 0;
    for (size_t s = 0; s < n; s++) {
        weir_op op = {.key = k.name,
                      .key_len = strlen(k.name),
                      .limit = &k.lim,
                      .hits = steps[s].hits,
                      .lease = steps[s].lease ? (uint64_t)(base + steps[s].lease) : 0,
                      .kind = steps[s].kind};
        weir__redis_batch b = {&op, 1, start + steps[s].at, 0};
        both(name, 0, s, &k, 1, &b, 1);
        const gstep *g = &steps[s];
        if (op.status != g->st)
            fail_msg("%s step %zu: status %d, want %d", name, s, op.status, g->st);
        if (g->st != WEIR_OK)
            continue;
        const weir_result *r = &op.result;
        bool ok =
            r->allowed == (g->allowed != 0) &&
            (g->remaining == NC || (long long)r->remaining == g->remaining) &&
            (g->retry == NC || r->retry_after_us == g->retry) &&
            (g->reset == NC || r->reset_after_us == g->reset) &&
            (g->delay == NC || r->delay_us == g->delay) &&
            (g->lease_out == NC || (long long)r->lease == (g->lease_out ? base : 0) + g->lease_out);
        if (!ok) {
            print_result("got", op.status, r);
            fail_msg("%s step %zu: not the hand-derived result", name, s);
        }
    }
    key_fini(&k);
}

#define TAKE(at, hits, ok, rem, retry, reset)                                        \
    {                                                                                \
        (at), WEIR_OP_TAKE, (hits), 0, (ok), (rem), (retry), (reset), 0, NC, WEIR_OK \
    }

/* docs/ALGORITHMS.md's worked examples */
static void golden_token_bucket(void **unused)
{
    (void)unused;
    flushall();
    gstep s[14];
    size_t n = 0;
    for (int i = 0; i < 10; i++)
        s[n++] = (gstep)TAKE(0, 1, 1, 9 - i, 0, NC);
    s[n++] = (gstep)TAKE(0, 1, 0, 0, 100000, 1000000);
    s[n++] = (gstep)TAKE(99999, 1, 0, 0, 1, NC);
    s[n++] = (gstep)TAKE(100000, 1, 1, 0, 0, 1000000);
    s[n++] = (gstep)TAKE(100000, 11, 0, 0, WEIR_NEVER, NC);
    golden("golden:token_bucket", compile(WEIR_ALGO_TOKEN_BUCKET, 10, S), T0, s, n);
}

static void golden_leaky(void **unused)
{
    (void)unused;
    flushall();
    const gstep p[] = {TAKE(0, 1, 1, 0, 0, 100000), TAKE(50000, 1, 0, 0, 50000, 50000),
                       TAKE(100000, 1, 1, 0, 0, 100000)};
    golden("golden:leaky_bucket", compile(WEIR_ALGO_LEAKY_BUCKET, 10, S), T0, p, 3);
    gstep sh[] = {TAKE(0, 1, 1, 2, 0, S), TAKE(0, 1, 1, 1, 0, 2 * S), TAKE(0, 1, 1, 0, 0, 3 * S),
                  TAKE(0, 1, 0, 0, S, 3 * S)};
    sh[1].delay = S;
    sh[2].delay = 2 * S;
    golden("golden:leaky_bucket_shaper", compile4(WEIR_ALGO_LEAKY_SHAPER, 1, S, 3, 0), T0, sh, 4);
}

static void golden_gcra(void **unused)
{
    (void)unused;
    flushall();
    const gstep g[] = {TAKE(0, 1, 1, 0, 0, 600000), TAKE(100000, 1, 0, 0, 500000, 500000),
                       TAKE(600000, 1, 1, 0, 0, 600000)};
    golden("golden:gcra", compile(WEIR_ALGO_GCRA, 100, MIN), T0, g, 3);
    const gstep b[] = {TAKE(0, 1, 1, 4, 0, 600000),        TAKE(0, 1, 1, 3, 0, 1200000),
                       TAKE(0, 1, 1, 2, 0, 1800000),       TAKE(0, 1, 1, 1, 0, 2400000),
                       TAKE(0, 1, 1, 0, 0, 3000000),       TAKE(0, 1, 0, 0, 600000, 3000000),
                       TAKE(600000, 1, 1, 0, 0, 3000000),  TAKE(600000, 6, 0, 0, WEIR_NEVER, NC),
                       TAKE(-600000, 1, 0, 0, 1800000, NC)};
    golden("golden:gcra_burst", compile4(WEIR_ALGO_GCRA, 100, MIN, 5, 0), T0, b, 9);
    /* a third of a microsecond per request: the TAT between microseconds */
    const gstep t[] = {TAKE(0, 1, 1, 2, 0, 1), TAKE(0, 1, 1, 1, 0, 1), TAKE(0, 1, 1, 0, 0, 2),
                       TAKE(0, 1, 0, 0, 1, 2), TAKE(1, 1, 1, 1, 0, 1)};
    golden("golden:gcra_ns", compile4(WEIR_ALGO_GCRA, 3, 1, 3, 0), T0, t, 5);
}

static void golden_fixed_window(void **unused)
{
    (void)unused;
    flushall();
    const gstep s[] = {TAKE(10 * S, 1, 1, 4, 0, 50 * S), TAKE(20 * S, 1, 1, 3, 0, 40 * S),
                       TAKE(30 * S, 1, 1, 2, 0, 30 * S), TAKE(40 * S, 1, 1, 1, 0, 20 * S),
                       TAKE(50 * S, 1, 1, 0, 0, 10 * S), TAKE(59 * S, 1, 0, 0, S, S),
                       TAKE(60 * S, 1, 1, 4, 0, 60 * S), TAKE(59 * S, 1, 1, 3, 0, S + MIN)};
    golden("golden:fixed_window", compile(WEIR_ALGO_FIXED_WINDOW, 5, MIN), T0, s, 8);
}

static void golden_sliding_log(void **unused)
{
    (void)unused;
    flushall();
    const gstep s[] = {TAKE(0, 1, 1, 2, 0, 10 * S),      TAKE(2 * S, 1, 1, 1, 0, 10 * S),
                       TAKE(4 * S, 1, 1, 0, 0, 10 * S),  TAKE(5 * S, 1, 0, 0, 5 * S, 9 * S),
                       TAKE(10 * S, 1, 1, 0, 0, 10 * S), TAKE(10 * S, 2, 0, 0, 4 * S, 10 * S),
                       TAKE(14 * S, 2, 1, 0, 0, 10 * S), TAKE(14 * S, 4, 0, 0, WEIR_NEVER, NC)};
    golden("golden:sliding_window_log", compile(WEIR_ALGO_SLIDING_LOG, 3, 10 * S), T0, s, 8);
}

static void golden_sliding_counter(void **unused)
{
    (void)unused;
    flushall();
    gstep s[16];
    size_t n = 0;
    for (int i = 0; i < 10; i++)
        s[n++] = (gstep)TAKE(i * S, 1, 1, 9 - i, 0, 2 * MIN - i * S);
    s[n++] = (gstep)TAKE(MIN + 15 * S, 1, 1, NC, 0, NC);
    s[n++] = (gstep)TAKE(MIN + 15 * S, 1, 1, NC, 0, NC);
    s[n++] = (gstep)TAKE(MIN + 15 * S, 1, 0, NC, 3 * S, NC);
    s[n++] = (gstep)TAKE(MIN + 18 * S, 1, 1, 0, 0, NC);
    golden("golden:sliding_window_counter", compile(WEIR_ALGO_SLIDING_COUNTER, 10, MIN), T0, s, n);
    /* 1,000,000 per day: the weighted count's products pass 2^53 */
    flushall();
    const int64_t mid = DAY + DAY / 2; /* the old day weighs 999999 / 2, rounded up */
    const gstep d[] = {TAKE(0, 999999, 1, 1, 0, 2 * DAY), TAKE(mid, 500000, 1, 0, 0, NC),
                       TAKE(mid, 1, 0, 0, 43201, NC), TAKE(mid + 43200, 1, 0, 0, 1, NC),
                       TAKE(mid + 43201, 1, 1, 0, 0, NC)};
    golden("golden:sliding_counter_day", compile(WEIR_ALGO_SLIDING_COUNTER, 1000000, DAY), TDAY, d,
           5);
}

static void golden_concurrency(void **unused)
{
    (void)unused;
    flushall();
    const weir_status OK = WEIR_OK;
    const gstep s[] = {
        {0, WEIR_OP_TAKE, 1, 0, 1, 1, 0, 30 * S, 0, 1, OK},
        {0, WEIR_OP_TAKE, 1, 0, 1, 0, 0, 30 * S, 0, 2, OK},
        {0, WEIR_OP_TAKE, 1, 0, 0, 0, 30 * S, 30 * S, 0, 0, OK},
        {S, WEIR_OP_RELEASE, 0, 1, 1, 1, 0, 29 * S, 0, 0, OK},
        {S, WEIR_OP_RELEASE, 0, 1, 0, 0, 0, 0, 0, 0, WEIR_ENOLEASE},
        {S, WEIR_OP_RELEASE, 0, 77, 0, 0, 0, 0, 0, 0, WEIR_ENOLEASE},
        {2 * S, WEIR_OP_CHECK, 1, 0, 1, 0, 0, 30 * S, 0, 0, OK},
        {2 * S, WEIR_OP_TAKE, 1, 0, 1, 0, 0, 30 * S, 0, 3, OK},
        {3 * S, WEIR_OP_TAKE, 0, 0, 0, 0, 27 * S, 29 * S, 0, 0, OK},
        /* lease 2 expires at 30 s: then it is gone, and lease 3 holds */
        {30 * S, WEIR_OP_RELEASE, 0, 2, 0, 0, 0, 0, 0, 0, WEIR_ENOLEASE},
        {30 * S, WEIR_OP_TAKE, 2, 0, 0, 1, 2 * S, 2 * S, 0, 0, OK},
        {30 * S, WEIR_OP_TAKE, 1, 0, 1, 0, 0, 30 * S, 0, 4, OK},
        {33 * S, WEIR_OP_TAKE, 2, 0, 0, 1, 27 * S, 27 * S, 0, 0, OK},
        {33 * S, WEIR_OP_TAKE, 3, 0, 0, 1, WEIR_NEVER, 27 * S, 0, 0, OK},
        {33 * S, WEIR_OP_TAKE, 1, 0, 1, 0, 0, 30 * S, 0, 5, OK},
    };
    golden("golden:concurrency", compile(WEIR_ALGO_CONCURRENCY, 2, 30 * S), T0, s,
           sizeof(s) / sizeof(s[0]));
}

/* A REFUND or CHARGE: allowed (for a refund: something given back),
 * remaining and reset after it; never a retry time. */
#define REFUND(at, hits, ok, rem, reset)                                        \
    {                                                                           \
        (at), WEIR_OP_REFUND, (hits), 0, (ok), (rem), 0, (reset), 0, 0, WEIR_OK \
    }
#define CHARGE(at, hits, rem, reset)                                         \
    {                                                                        \
        (at), WEIR_OP_CHARGE, (hits), 0, 1, (rem), 0, (reset), 0, 0, WEIR_OK \
    }

/* docs/ALGORITHMS.md, "Reserve, refund and charge" */
static void golden_refund_and_charge(void **unused)
{
    (void)unused;
    flushall();
    /* reserve 8, use 3, overrun by 4, then more than the window holds */
    const gstep fw[] = {
        TAKE(0, 8, 1, 2, 0, 60 * S),   REFUND(10 * S, 5, 1, 7, 50 * S),
        CHARGE(20 * S, 4, 3, 40 * S),  CHARGE(20 * S, 100, 0, 40 * S),
        REFUND(20 * S, 100, 1, 10, 0), TAKE(30 * S, 1, 1, 9, 0, 30 * S),
        REFUND(60 * S, 1, 0, 10, 0), /* the window is over */
        REFUND(61 * S, 0, 0, 10, 0),
    };
    golden("golden:refund:fixed_window", compile(WEIR_ALGO_FIXED_WINDOW, 10, MIN), T0, fw,
           sizeof(fw) / sizeof(fw[0]));
    /* GCRA, 100 ms intervals, 500 ms tolerance: back no further than now */
    const gstep g[] = {
        TAKE(0, 3, 1, 2, 0, 300000),     REFUND(0, 1, 1, 3, 200000),   REFUND(150000, 9, 1, 5, 0),
        REFUND(150000, 1, 0, 5, 0),      CHARGE(150000, 7, 0, 500000), CHARGE(150000, 1, 0, 500000),
        REFUND(250000, 2, 1, 3, 200000),
    };
    golden("golden:refund:gcra", compile4(WEIR_ALGO_GCRA, 10, S, 5, 0), T0, g,
           sizeof(g) / sizeof(g[0]));
    const gstep tb[] = {CHARGE(0, 6, 0, S), REFUND(500000, 1, 1, 3, 250000),
                        REFUND(2 * S, 1, 0, 4, 0)};
    golden("golden:refund:token_bucket", compile(WEIR_ALGO_TOKEN_BUCKET, 4, S), T0, tb,
           sizeof(tb) / sizeof(tb[0]));
    /* the log's newest entries go */
    const gstep lg[] = {TAKE(0, 1, 1, 2, 0, 10 * S), TAKE(4 * S, 2, 1, 0, 0, 10 * S),
                        REFUND(5 * S, 2, 1, 2, 5 * S), CHARGE(6 * S, 5, 0, 10 * S)};
    golden("golden:refund:sliding_log", compile(WEIR_ALGO_SLIDING_LOG, 3, 10 * S), T0, lg,
           sizeof(lg) / sizeof(lg[0]));
    /* the counter's newest sub-window, while it counts */
    const gstep sc[] = {TAKE(0, 4, 1, 6, 0, 80 * S), REFUND(25 * S, 4, 1, 10, 0),
                        CHARGE(25 * S, 12, 0, 75 * S), REFUND(100 * S, 1, 0, 10, 0)};
    golden("golden:refund:sliding_counter", compile4(WEIR_ALGO_SLIDING_COUNTER, 10, MIN, 0, 3), T0,
           sc, sizeof(sc) / sizeof(sc[0]));
    /* a lease goes back by RELEASE */
    const gstep cc[] = {
        {0, WEIR_OP_REFUND, 1, 0, 0, 0, 0, 0, 0, 0, WEIR_EALGO},
        {0, WEIR_OP_CHARGE, 1, 0, 0, 0, 0, 0, 0, 0, WEIR_EALGO},
    };
    golden("golden:refund:concurrency", compile(WEIR_ALGO_CONCURRENCY, 2, S), T0, cc, 2);
}

/* limit 0 bans: denied "never", limit and remaining 0, no key */
static void bans(void **unused)
{
    (void)unused;
    flushall();
    for (int a = 1; a <= WEIR_ALGORITHM_COUNT; a++) {
        weir_limit lim = compile((weir_algorithm)a, 0, MIN);
        for (int kind = 0; kind < 2; kind++) {
            weir_op op = one("ban", &lim, (weir_op_kind)kind, T0, 1, 0);
            assert_int_equal(op.status, WEIR_OK);
            assert_false(op.result.allowed);
            assert_int_equal(op.result.retry_after_us, WEIR_NEVER);
            assert_int_equal(op.result.limit, 0);
            assert_int_equal(op.result.remaining, 0);
            assert_int_equal(op.result.reset_after_us, 0);
        }
        weir_op op = one("ban", &lim, WEIR_OP_RELEASE, T0, 0, 1);
        assert_int_equal(op.status, a == WEIR_ALGO_CONCURRENCY ? WEIR_ENOLEASE : WEIR_EALGO);
        assert_int_equal(integer_reply("EXISTS %s", "ban"), 0);
    }
}

/* RESET deletes its key, whatever holds it (a string state, a sorted
 * set), also one this call wrote and has yet to write back; the ops after
 * it see a fresh key; an atomic batch refuses it whole. */
static void reset_forgets_a_key(void **unused)
{
    (void)unused;
    flushall();
    weir_limit gcra = compile4(WEIR_ALGO_GCRA, 3, S, 3, 0);
    weir_limit slog = compile(WEIR_ALGO_SLIDING_LOG, 3, S);
    const weir_limit *lims[] = {&gcra, &slog};
    for (size_t l = 0; l < 2; l++) {
        weir_op op = one("r", lims[l], WEIR_OP_TAKE, T0, 1, 0);
        assert_true(op.result.allowed);
        assert_int_equal(integer_reply("EXISTS %s", "r"), 1);
        op = one("r", lims[l], WEIR_OP_RESET, T0, 0, 0);
        assert_int_equal(op.status, WEIR_OK);
        assert_true(op.result.allowed);
        assert_int_equal(integer_reply("EXISTS %s", "r"), 0);
        op = one("r", lims[l], WEIR_OP_RESET, T0, 0, 0);
        assert_false(op.result.allowed);

        /* take, reset, take in one call: the last take finds it fresh */
        weir_op ops[3] = {
            {.key = "r", .key_len = 1, .limit = lims[l], .hits = 1, .kind = WEIR_OP_TAKE},
            {.key = "r", .key_len = 1, .limit = lims[l], .kind = WEIR_OP_RESET},
            {.key = "r", .key_len = 1, .limit = lims[l], .hits = 1, .kind = WEIR_OP_TAKE}};
        weir__redis_batch b = {ops, 3, T0, 0};
        assert_int_equal(script_call(&b, 1, false, NULL), WEIR_OK);
        assert_true(ops[1].result.allowed);
        assert_int_equal(ops[2].result.remaining, 2);
        assert_int_equal(integer_reply("EXISTS %s", "r"), 1);
        /* take then reset: nothing is written back */
        b.n = 2;
        assert_int_equal(script_call(&b, 1, false, NULL), WEIR_OK);
        assert_true(ops[1].result.allowed);
        assert_int_equal(integer_reply("EXISTS %s", "r"), 0);
        /* not in an atomic batch */
        b.flags = WEIR_BATCH_ATOMIC;
        assert_int_equal(script_call(&b, 1, false, NULL), WEIR_OK);
        assert_int_equal(ops[0].status, WEIR_EINVAL);
        assert_int_equal(ops[1].status, WEIR_EINVAL);
        assert_int_equal(integer_reply("EXISTS %s", "r"), 0);
    }
}

/* ----------------------------------------------------------------- traces */

typedef struct trace {
    const char *name;
    uint64_t seed;
    test_rng rng;
    tkey keys[MAX_KEYS];
    size_t nkeys;
    int64_t now;
    bool monotone;
    int64_t max_now; /* 0: 2^52 */
    /* leases given out, per key, for RELEASE ops */
    uint64_t leases[MAX_KEYS][32];
    size_t nleases[MAX_KEYS];
} trace;

static uint64_t pick(test_rng *rng, const uint64_t *v, size_t n)
{
    return v[rng_below(rng, n)];
}

/* Token buckets: with a warm-up always (the warm-up traces), else half
 * the time. */
static bool g_warmup;

/* A random limit of algorithm @a that compiles and fits. */
static weir_limit random_limit(test_rng *rng, weir_algorithm a)
{
    static const int64_t warmups[] = {1, 7, 1000, S, 10 * S, MIN, HOUR, DAY};
    static const uint32_t factors[] = {0, 1, 2, 3, 3, 10, 100};
    static const uint64_t limits[] = {1, 1, 2, 3, 5, 7, 10, 60, 100, 1000, 999999, 1000000};
    static const uint64_t small[] = {1, 1, 2, 3, 4, 5, 7, 10, 32, 100};
    static const uint64_t windows[] = {1,      3,     7,       1000, 999,      S,
                                       7 * S,  MIN,   HOUR,    DAY,  30 * DAY, YEAR,
                                       10 * S, S + 1, 3 * DAY, 100,  60 * HOUR};
    static const uint64_t subs[] = {1, 1, 2, 3, 4, 5, 6, 10, 60, 1024};
    for (;;) {
        weir_limit_spec sp = {.algorithm = a};
        bool log_like = a == WEIR_ALGO_SLIDING_LOG || a == WEIR_ALGO_CONCURRENCY;
        sp.limit = log_like ? pick(rng, small, 10) : pick(rng, limits, 12);
        if (rng_below(rng, 25) == 0)
            sp.limit = 0;
        sp.window_us = (int64_t)pick(rng, windows, 17);
        if (rng_below(rng, 3) == 0)
            sp.burst = 1 + rng_below(rng, 2 * (sp.limit ? sp.limit : 1) + 3);
        if (a == WEIR_ALGO_SLIDING_COUNTER) {
            sp.sub_windows = (uint32_t)pick(rng, subs, 10);
            if (sp.window_us % sp.sub_windows != 0)
                continue;
        }
        if (a == WEIR_ALGO_TOKEN_BUCKET && (g_warmup || rng_below(rng, 2))) {
            /* a warm-up of a few windows, or one of the list */
            int64_t w = rng_below(rng, 2) && sp.window_us <= DAY
                            ? sp.window_us * (1 + (int64_t)rng_below(rng, 5))
                            : warmups[rng_below(rng, 8)];
            sp.warmup_us = w < DAY ? w : DAY;
            sp.cold_factor = factors[rng_below(rng, 7)];
        }
        weir_limit lim;
        if (weir_limit_compile(&sp, &lim) != WEIR_OK || weir__redis_limit_fits(&lim) != WEIR_OK)
            continue;
        return lim;
    }
}

static uint64_t most_at_once(const weir_limit *l)
{
    return l->burst ? l->burst : l->limit;
}

static uint64_t random_hits(test_rng *rng, const weir_limit *l)
{
    uint64_t most = most_at_once(l);
    switch (rng_below(rng, 12)) {
    case 0:
    case 1:
        return 0;
    case 2:
        return 2;
    case 3:
        return most;
    case 4:
        return most + 1;
    case 5:
        return 1 + rng_below(rng, most < 2000 ? most + 1 : 2000);
    case 6:
        return rng_below(rng, 3) == 0 ? ((uint64_t)1 << 60) : 3;
    default:
        return 1;
    }
}

static int64_t pmod(int64_t a, int64_t m)
{
    return ((a % m) + m) % m;
}

/* The trace's next time: steps sized to the window, its edges, the
 * emission interval, stalls, and steps back. */
static int64_t next_time(trace *t, const weir_limit *l)
{
    test_rng *rng = &t->rng;
    int64_t w = l->window_us, span = l->span_us ? l->span_us : w;
    int64_t per = w / (int64_t)(l->limit ? l->limit : 1);
    int64_t now = t->now, d;
    switch (rng_below(rng, 16)) {
    case 0:
    case 1:
        d = 0;
        break;
    case 2:
        d = 1;
        break;
    case 3:
        d = (int64_t)rng_below(rng, (uint64_t)per + 2);
        break;
    case 4:
        d = (int64_t)rng_below(rng, (uint64_t)w + 1);
        break;
    case 5: /* the last microsecond of a window, its first, and past */
        d = w - pmod(now, w) - 1 + (int64_t)rng_below(rng, 3);
        break;
    case 6:
        d = span - pmod(now, span) - 1 + (int64_t)rng_below(rng, 3);
        break;
    case 7:
        d = (int64_t)rng_below(rng, 3 * (uint64_t)w + 1);
        break;
    case 8:
        d = per;
        break;
    case 9:
        d = (int64_t)rng_below(rng, 1000);
        break;
    case 10:
        d = -(int64_t)rng_below(rng, (uint64_t)w + 1);
        break;
    case 11:
        d = -(int64_t)rng_below(rng, 1000) - 1;
        break;
    case 12:
        d = (int64_t)rng_below(rng, 12 * (uint64_t)w);
        break;
    default:
        d = (int64_t)rng_below(rng, (uint64_t)per / 4 + 1);
        break;
    }
    if (t->monotone && d < 0)
        d = -d;
    now += d;
    if (now < 0)
        now = 0;
    int64_t max_now = t->max_now ? t->max_now : P52;
    if (now > max_now)
        now = t->monotone ? max_now : max_now - (int64_t)rng_below(rng, (uint64_t)w + 1);
    t->now = now;
    return now;
}

static size_t key_index(const trace *t, const tkey *k)
{
    return (size_t)(k - t->keys);
}

static void random_op(trace *t, weir_op *op, bool atomic)
{
    tkey *k = &t->keys[rng_below(&t->rng, t->nkeys)];
    memset(op, 0, sizeof(*op));
    op->key = k->name;
    op->key_len = strlen(k->name);
    op->limit = &k->lim;
    op->hits = random_hits(&t->rng, &k->lim);
    uint64_t r = rng_below(&t->rng, 40);
    bool conc = k->lim.algorithm == WEIR_ALGO_CONCURRENCY;
    if (r < 5) {
        op->kind = WEIR_OP_CHECK;
    } else if ((conc && !atomic && r < 14) || r == 39) {
        op->kind = WEIR_OP_RELEASE;
        size_t ki = key_index(t, k), n = t->nleases[ki];
        uint64_t u = rng_below(&t->rng, 8);
        op->lease = n == 0 || u == 0 ? rng_below(&t->rng, 3) * 1000 : t->leases[ki][u % n];
        if (u == 1 && n)
            op->lease = t->leases[ki][n - 1] + 1; /* not given out yet */
    } else if (r >= 30 && r < 34 && (!atomic || rng_below(&t->rng, 8) == 0)) {
        op->kind = WEIR_OP_REFUND; /* in an atomic batch, it fails the batch */
    } else if (r >= 34 && r < 37 && (!atomic || rng_below(&t->rng, 8) == 0)) {
        op->kind = WEIR_OP_CHARGE;
    } else {
        op->kind = WEIR_OP_TAKE;
        /* now and then a reserve to keep free */
        if (rng_below(&t->rng, 4) == 0)
            op->reserve = rng_below(&t->rng, 4) ? random_hits(&t->rng, &k->lim) : 1;
    }
}

static void note_leases(trace *t, const weir__redis_batch *b, size_t nb)
{
    for (size_t j = 0; j < nb; j++)
        for (size_t i = 0; i < b[j].n; i++) {
            const weir_op *op = &b[j].ops[i];
            if (op->status != WEIR_OK || op->result.lease == 0)
                continue;
            for (size_t k = 0; k < t->nkeys; k++)
                if (op->key == t->keys[k].name) {
                    size_t *n = &t->nleases[k];
                    if (*n == 32) {
                        memmove(t->leases[k], t->leases[k] + 16, 16 * sizeof(uint64_t));
                        *n = 16;
                    }
                    t->leases[k][(*n)++] = op->result.lease;
                }
        }
}

static void trace_init(trace *t, const char *name, weir_algorithm a, size_t nkeys, bool mixed)
{
    memset(t, 0, sizeof(*t));
    t->name = name;
    t->seed = test_seed(name);
    t->rng.s = t->seed;
    t->nkeys = nkeys;
    for (size_t k = 0; k < nkeys; k++) {
        char kn[48];
        snprintf(kn, sizeof(kn), "{%s}:%zu", name, k);
        weir_algorithm ka =
            mixed ? (weir_algorithm)(1 + rng_below(&t->rng, WEIR_ALGORITHM_COUNT)) : a;
        key_init(&t->keys[k], kn, random_limit(&t->rng, ka));
    }
    static const int64_t starts[] = {T0, T0, T0, 0, 5, P52 - 10 * S, T0 + 59 * S};
    t->now = starts[rng_below(&t->rng, 7)];
}

static void trace_fini(trace *t)
{
    for (size_t k = 0; k < t->nkeys; k++)
        key_fini(&t->keys[k]);
}

/* A call of 1..4 batches of 1..4 ops, atomic or not. */
static size_t random_call(trace *t, weir__redis_batch *b, weir_op ops[][MAX_OPS], bool atomic_only)
{
    size_t nb = 1 + (rng_below(&t->rng, 3) == 0 ? rng_below(&t->rng, MAX_BATCHES) : 0);
    for (size_t j = 0; j < nb; j++) {
        bool atomic = atomic_only || rng_below(&t->rng, 3) == 0;
        size_t n = 1 + (rng_below(&t->rng, 2) ? rng_below(&t->rng, 4) : 0);
        const weir_limit *l = &t->keys[rng_below(&t->rng, t->nkeys)].lim;
        b[j] = (weir__redis_batch){ops[j], n, next_time(t, l), atomic ? WEIR_BATCH_ATOMIC : 0u};
        for (size_t i = 0; i < n; i++)
            random_op(t, &ops[j][i], atomic);
    }
    return nb;
}

static void random_trace(const char *name, weir_algorithm a, size_t calls, bool mixed)
{
    flushall();
    trace t;
    trace_init(&t, name, a, 1 + (size_t)(a * 7) % 3, mixed);
    weir__redis_batch b[MAX_BATCHES];
    weir_op ops[MAX_BATCHES][MAX_OPS];
    for (size_t c = 0; c < calls; c++) {
        /* now and then a fresh limit for the keys, state and all */
        if (c > 0 && c % 100 == 0) {
            flushall();
            for (size_t k = 0; k < t.nkeys; k++) {
                weir_algorithm ka = mixed ? (weir_algorithm)(1 + rng_below(&t.rng, 8)) : a;
                key_fini(&t.keys[k]);
                key_init(&t.keys[k], t.keys[k].name, random_limit(&t.rng, ka));
                t.nleases[k] = 0;
            }
        }
        size_t nb = random_call(&t, b, ops, false);
        both(name, t.seed, c, t.keys, t.nkeys, b, nb);
        note_leases(&t, b, nb);
    }
    trace_fini(&t);
}

#define CALLS 500

static void random_token_bucket(void **unused)
{
    (void)unused;
    random_trace("random:token_bucket", WEIR_ALGO_TOKEN_BUCKET, CALLS, false);
}

static void random_token_bucket_warmup(void **unused)
{
    (void)unused;
    g_warmup = true;
    random_trace("random:token_bucket_warmup", WEIR_ALGO_TOKEN_BUCKET, 2 * CALLS, false);
    g_warmup = false;
}

static void random_gcra(void **unused)
{
    (void)unused;
    random_trace("random:gcra", WEIR_ALGO_GCRA, CALLS, false);
}

static void random_leaky_bucket(void **unused)
{
    (void)unused;
    random_trace("random:leaky_bucket", WEIR_ALGO_LEAKY_BUCKET, CALLS, false);
}

static void random_leaky_shaper(void **unused)
{
    (void)unused;
    random_trace("random:leaky_bucket_shaper", WEIR_ALGO_LEAKY_SHAPER, CALLS, false);
}

static void random_fixed_window(void **unused)
{
    (void)unused;
    random_trace("random:fixed_window", WEIR_ALGO_FIXED_WINDOW, CALLS, false);
}

static void random_sliding_log(void **unused)
{
    (void)unused;
    random_trace("random:sliding_window_log", WEIR_ALGO_SLIDING_LOG, CALLS, false);
}

static void random_sliding_counter(void **unused)
{
    (void)unused;
    random_trace("random:sliding_window_counter", WEIR_ALGO_SLIDING_COUNTER, 2 * CALLS, false);
}

static void random_concurrency(void **unused)
{
    (void)unused;
    random_trace("random:concurrency", WEIR_ALGO_CONCURRENCY, 2 * CALLS, false);
}

static void random_mixed(void **unused)
{
    (void)unused;
    random_trace("random:mixed", WEIR_ALGO_TOKEN_BUCKET, 2 * CALLS, true);
}

/* The same source loaded as a function library, called with FCALL. */
static void random_mixed_function(void **unused)
{
    (void)unused;
    g_fcall = true;
    random_trace("random:mixed_function", WEIR_ALGO_TOKEN_BUCKET, 2 * CALLS, true);
    g_fcall = false;
}

/* Format 3 (a cluster node's calls: the keys among the arguments, read
 * one by one), by script and by function. */
static void random_mixed_keys_in_args(void **unused)
{
    (void)unused;
    g_args = true;
    random_trace("random:mixed_args", WEIR_ALGO_TOKEN_BUCKET, CALLS, true);
    g_fcall = true;
    random_trace("random:mixed_args_function", WEIR_ALGO_TOKEN_BUCKET, CALLS, true);
    g_fcall = false;
    g_args = false;
}

/*
 * The reference's atomic batches are the memory store's own: on monotone
 * times (the store keeps a clock per shard that never goes back), the same
 * calls through weir_memstore_run() give the same results. Lease ids are
 * the store's own (it starts a key's ids from the time), so they are
 * compared through a map, and releases name the store's id. (The store
 * counts rest times in 32-bit ticks of 2^20 us, which saturate in the
 * last second before 2^52 us, the year 2112: the trace stays well before.)
 */
static void atomic_batches_match_the_memory_store(void **unused)
{
    (void)unused;
    flushall();
    weir_ctx *ctx;
    weir_store *ms;
    assert_int_equal(weir_ctx_new(NULL, &ctx), WEIR_OK);
    weir_memstore_options o = {.size = sizeof(o), .shards = 4, .seed = 7};
    assert_int_equal(weir_memstore_new(ctx, &o, &ms), WEIR_OK);

    trace t;
    trace_init(&t, "memstore", WEIR_ALGO_TOKEN_BUCKET, 3, true);
    t.monotone = true;
    t.max_now = P51;
    if (t.now > P51)
        t.now = T0;
    /* ref lease -> store lease, for the current keys (whose ids differ) */
    static uint64_t map_ref[8192], map_mem[8192];
    static const void *map_key[8192];
    size_t nmap = 0;
    weir__redis_batch b[MAX_BATCHES];
    weir_op ops[MAX_BATCHES][MAX_OPS], mops[MAX_OPS];
    for (size_t c = 0; c < 2 * CALLS; c++) {
        if (c > 0 && c % 200 == 0) {
            /* new limits: new key names, so the store starts them fresh */
            for (size_t k = 0; k < t.nkeys; k++) {
                char kn[48];
                snprintf(kn, sizeof(kn), "{memstore}:%zu:%zu", k, c);
                key_fini(&t.keys[k]);
                key_init(&t.keys[k], kn,
                         random_limit(&t.rng, (weir_algorithm)(1 + rng_below(&t.rng, 8))));
                t.nleases[k] = 0;
            }
            nmap = 0;
        }
        size_t nb = random_call(&t, b, ops, rng_below(&t.rng, 4) != 0);
        for (size_t j = 0; j < nb; j++) {
            /* the store refuses a RELEASE, REFUND or CHARGE in an atomic
             * batch outright */
            for (size_t i = 0; i < b[j].n && (b[j].flags & WEIR_BATCH_ATOMIC); i++)
                if (ops[j][i].kind != WEIR_OP_TAKE)
                    ops[j][i].kind = WEIR_OP_CHECK;
        }
        expect want[MAX_BATCHES][MAX_OPS];
        for (size_t j = 0; j < nb; j++) {
            ref_batch(t.keys, t.nkeys, &b[j], want[j]);
            memcpy(mops, ops[j], b[j].n * sizeof(weir_op));
            /* an atomic batch at once; the ops of another one by one, each
             * RELEASE naming the store's id for a lease maybe just given */
            bool atomic = (b[j].flags & WEIR_BATCH_ATOMIC) != 0;
            for (size_t i = 0; i < b[j].n; i++) {
                if (mops[i].kind == WEIR_OP_RELEASE) {
                    uint64_t id = 0; /* never a store's id */
                    for (size_t m = 0; m < nmap; m++)
                        if (map_ref[m] == mops[i].lease && map_key[m] == mops[i].key)
                            id = map_mem[m];
                    mops[i].lease = id;
                }
                if (!atomic || i == 0)
                    assert_int_equal(weir_memstore_run(ms, &mops[i], atomic ? b[j].n : 1,
                                                       b[j].now_us, b[j].flags),
                                     WEIR_OK);
                const expect *w = &want[j][i];
                bool conc = mops[i].limit->algorithm == WEIR_ALGO_CONCURRENCY;
                if (!same_result(mops[i].status, &mops[i].result, w->st, &w->r, !conc)) {
                    print_result("C", w->st, &w->r);
                    print_result("memory", mops[i].status, &mops[i].result);
                    fail_msg("memory store mismatch (seed %llu, call %zu, batch %zu op %zu)",
                             (unsigned long long)t.seed, c, j, i);
                }
                if (conc && w->st == WEIR_OK && w->r.lease) {
                    assert_true(nmap < 8192);
                    map_key[nmap] = mops[i].key;
                    map_ref[nmap] = w->r.lease;
                    map_mem[nmap++] = mops[i].result.lease;
                }
            }
        }
        assert_int_equal(script_call(b, nb, true, NULL), WEIR_OK);
        for (size_t j = 0; j < nb; j++)
            for (size_t i = 0; i < b[j].n; i++)
                compare(t.name, t.seed, c, &b[j], i, &want[j][i]);
        note_leases(&t, b, nb);
    }
    trace_fini(&t);
    weir_store_free(ms);
    weir_ctx_free(ctx);
}

/* ------------------------------------------------------- atomic, by hand */

static void atomic_denial_charges_nothing(void **unused)
{
    (void)unused;
    flushall();
    tkey k[2];
    key_init(&k[0], "{a}:room", compile(WEIR_ALGO_FIXED_WINDOW, 1, MIN));
    key_init(&k[1], "{a}:full", compile(WEIR_ALGO_FIXED_WINDOW, 1, MIN));
    weir_op ops[3] = {
        {.key = k[1].name, .key_len = strlen(k[1].name), .limit = &k[1].lim, .hits = 1},
    };
    weir__redis_batch b = {ops, 1, T0, 0};
    both("atomic", 0, 0, k, 2, &b, 1); /* fills "full" */
    ops[0] =
        (weir_op){.key = k[0].name, .key_len = strlen(k[0].name), .limit = &k[0].lim, .hits = 1};
    ops[1] =
        (weir_op){.key = k[1].name, .key_len = strlen(k[1].name), .limit = &k[1].lim, .hits = 1};
    b = (weir__redis_batch){ops, 2, T0 + S, WEIR_BATCH_ATOMIC};
    both("atomic", 0, 1, k, 2, &b, 1);
    assert_true(ops[0].result.allowed); /* a look: it would have been admitted */
    assert_int_equal(ops[0].result.remaining, 1);
    assert_false(ops[1].result.allowed);
    assert_int_equal(integer_reply("EXISTS %s", k[0].name), 0);
    /* the same key twice: decided with both costs, charged in order */
    ops[0].hits = 1;
    ops[1] = ops[0];
    b = (weir__redis_batch){ops, 2, T0 + 2 * S, WEIR_BATCH_ATOMIC};
    both("atomic", 0, 2, k, 2, &b, 1);
    assert_true(ops[0].result.allowed);
    assert_false(ops[1].result.allowed);
    assert_int_equal(ops[1].result.retry_after_us, WEIR_NEVER); /* 2 > limit 1 */
    assert_int_equal(integer_reply("EXISTS %s", k[0].name), 0);
    /* a RELEASE fails the whole batch */
    ops[2] = (weir_op){.key = k[0].name,
                       .key_len = strlen(k[0].name),
                       .limit = &k[0].lim,
                       .kind = WEIR_OP_RELEASE,
                       .lease = 1};
    ops[1] = ops[0];
    ops[1].kind = WEIR_OP_CHECK;
    b = (weir__redis_batch){ops, 3, T0 + 3 * S, WEIR_BATCH_ATOMIC};
    both("atomic", 0, 3, k, 2, &b, 1);
    for (int i = 0; i < 3; i++)
        assert_int_equal(ops[i].status, WEIR_EINVAL);
    assert_int_equal(integer_reply("EXISTS %s", k[0].name), 0);
    /* all admitted: charged, in order */
    ops[1] =
        (weir_op){.key = k[1].name, .key_len = strlen(k[1].name), .limit = &k[1].lim, .hits = 1};
    b = (weir__redis_batch){ops, 2, T0 + MIN, WEIR_BATCH_ATOMIC};
    both("atomic", 0, 4, k, 2, &b, 1);
    assert_true(ops[0].result.allowed && ops[1].result.allowed);
    assert_int_equal(ops[0].result.remaining, 0);
    key_fini(&k[0]);
    key_fini(&k[1]);
}

/* ---------------------------------------------------------- limits at edges */

/* A limit run through a few hundred random steps, times near 0 and 2^52
 * included: the script must stay exact at its bounds. */
static void exact_at(const char *name, weir_limit lim)
{
    trace t;
    memset(&t, 0, sizeof(t));
    t.name = name;
    t.seed = test_seed(name);
    t.rng.s = t.seed;
    t.nkeys = 1;
    key_init(&t.keys[0], name, lim);
    t.now = T0;
    weir__redis_batch b[MAX_BATCHES];
    weir_op ops[MAX_BATCHES][MAX_OPS];
    for (size_t c = 0; c < 120; c++) {
        if (c == 40)
            t.now = P52 - 3;
        if (c == 80)
            t.now = 0;
        size_t nb = random_call(&t, b, ops, false);
        both(name, t.seed, c, t.keys, 1, b, nb);
        note_leases(&t, b, nb);
    }
    key_fini(&t.keys[0]);
}

static weir_limit raw(weir_algorithm a, uint64_t limit, int64_t window, uint64_t burst,
                      int64_t unit, int64_t capacity, uint32_t k)
{
    weir_limit l;
    memset(&l, 0, sizeof(l));
    l.algorithm = a;
    l.limit = limit;
    l.window_us = window;
    l.burst = burst;
    l.unit = unit;
    l.capacity = capacity;
    l.sub_windows = k;
    l.span_us = k > 1 ? window / k : window;
    return l;
}

static weir_status fits_spec(weir_algorithm a, uint64_t limit, int64_t window, uint64_t burst,
                             uint32_t k)
{
    weir_limit_spec sp = {
        .algorithm = a, .limit = limit, .window_us = window, .burst = burst, .sub_windows = k};
    weir_limit lim;
    weir_status st = weir_limit_compile(&sp, &lim);
    if (st != WEIR_OK)
        return st;
    return weir__redis_limit_fits(&lim);
}

static void limits_fit_at_their_bounds(void **unused)
{
    (void)unused;
    flushall();
    /* buckets: capacity < 2^52; limit 1 makes it burst x window */
    const int64_t third = (P52 - 1) / 3; /* 2^52 - 1 = 3 x 1501199875790165 */
    for (int a = WEIR_ALGO_TOKEN_BUCKET; a <= WEIR_ALGO_LEAKY_SHAPER; a++) {
        if (a == WEIR_ALGO_GCRA)
            continue;
        assert_int_equal(fits_spec((weir_algorithm)a, 1, third, 3, 0), WEIR_OK);
        assert_int_equal(fits_spec((weir_algorithm)a, 1, P51, 2, 0), WEIR_ERANGE);
    }
    exact_at("edge:token_bucket", compile4(WEIR_ALGO_TOKEN_BUCKET, 1, third, 3, 0));
    /* a warm-up: cold_factor x capacity < 2^52 too (2^52 - 1 = 3 x 5 x ...) */
    weir_limit_spec ws = {.algorithm = WEIR_ALGO_TOKEN_BUCKET,
                          .limit = 1,
                          .window_us = (P52 - 1) / 15,
                          .burst = 3,
                          .warmup_us = DAY,
                          .cold_factor = 5};
    weir_limit wl;
    assert_int_equal(weir_limit_compile(&ws, &wl), WEIR_OK);
    assert_int_equal(weir__redis_limit_fits(&wl), WEIR_OK);
    exact_at("edge:token_bucket_warmup", wl);
    ws.cold_factor = 6;
    assert_int_equal(weir_limit_compile(&ws, &wl), WEIR_OK);
    assert_int_equal(weir__redis_limit_fits(&wl), WEIR_ERANGE);
    exact_at("edge:leaky_shaper", compile4(WEIR_ALGO_LEAKY_SHAPER, 1, third, 3, 0));

    /* GCRA: capacity <= 2^51 us, and below 2^53 ticks of gcd(unit, 1000) ns */
    assert_int_equal(fits_spec(WEIR_ALGO_GCRA, 1, P51, 1, 0), WEIR_OK);
    assert_int_equal(fits_spec(WEIR_ALGO_GCRA, 1, P51 + 1, 1, 0), WEIR_ERANGE);
    assert_int_equal(fits_spec(WEIR_ALGO_GCRA, 1, P51 / 4, 4, 0), WEIR_OK);
    assert_int_equal(fits_spec(WEIR_ALGO_GCRA, 1, P51 / 4, 5, 0), WEIR_ERANGE);
    weir_limit g = raw(WEIR_ALGO_GCRA, 1, 1, 1, 1001, P53 - 1001, 0);
    assert_int_equal(weir__redis_limit_fits(&g), WEIR_OK);
    g.capacity++;
    assert_int_equal(weir__redis_limit_fits(&g), WEIR_ERANGE);
    g = raw(WEIR_ALGO_GCRA, 1, 1, 1, 1002, (P53 - 1001) * 2, 0); /* ticks of 2 ns */
    assert_int_equal(weir__redis_limit_fits(&g), WEIR_OK);
    g.capacity += 2;
    assert_int_equal(weir__redis_limit_fits(&g), WEIR_ERANGE);
    exact_at("edge:gcra_us", compile4(WEIR_ALGO_GCRA, 1, P51, 1, 0));
    /* 7 per 10^12 us: a unit of 142857142857143 ns, ticks of 1 ns; burst
     * 63 puts the capacity just under 2^53 ns */
    weir_limit g7 = compile4(WEIR_ALGO_GCRA, 7, 1000000000000, 63, 0);
    assert_true(g7.capacity > P53 - 142857142857143 - 1001);
    exact_at("edge:gcra_ns", g7);
    assert_int_equal(fits_spec(WEIR_ALGO_GCRA, 7, 1000000000000, 64, 0), WEIR_ERANGE);

    /* the sliding counter: window + window / k < 2^52 */
    assert_int_equal(fits_spec(WEIR_ALGO_SLIDING_COUNTER, 10, P51 - 1, 0, 1), WEIR_OK);
    assert_int_equal(fits_spec(WEIR_ALGO_SLIDING_COUNTER, 10, P51, 0, 1), WEIR_ERANGE);
    assert_int_equal(fits_spec(WEIR_ALGO_SLIDING_COUNTER, 10, 2 * third, 0, 2), WEIR_OK);
    assert_int_equal(fits_spec(WEIR_ALGO_SLIDING_COUNTER, 10, 2 * third + 2, 0, 2), WEIR_ERANGE);
    exact_at("edge:sliding_counter",
             compile4(WEIR_ALGO_SLIDING_COUNTER, 4294967295u, P51 - 1, 0, 1));
    exact_at("edge:sliding_counter_k",
             compile4(WEIR_ALGO_SLIDING_COUNTER, 1000000, 2 * third, 0, 2));

    /* the rest: every compiled limit, 100 years and the largest limits */
    const int64_t century = 3155760000000000;
    assert_int_equal(fits_spec(WEIR_ALGO_FIXED_WINDOW, 4294967295u, century, 0, 0), WEIR_OK);
    assert_int_equal(fits_spec(WEIR_ALGO_SLIDING_LOG, 65536, century, 0, 0), WEIR_OK);
    assert_int_equal(fits_spec(WEIR_ALGO_CONCURRENCY, 65536, century, 0, 0), WEIR_OK);
    exact_at("edge:fixed_window", compile(WEIR_ALGO_FIXED_WINDOW, 4294967295u, century));
    exact_at("edge:sliding_log", compile(WEIR_ALGO_SLIDING_LOG, 3, century));
    exact_at("edge:concurrency", compile(WEIR_ALGO_CONCURRENCY, 3, century));

    /* bans always fit; an unknown algorithm does not */
    for (int a = 1; a <= WEIR_ALGORITHM_COUNT; a++)
        assert_int_equal(fits_spec((weir_algorithm)a, 0, century, 0, 0), WEIR_OK);
    weir_limit bad = raw((weir_algorithm)9, 1, 1, 1, 1, 1, 0);
    assert_int_equal(weir__redis_limit_fits(&bad), WEIR_EINVAL);
    assert_int_equal(weir__redis_limit_fits(NULL), WEIR_EINVAL);
}

/* Every algorithm at 1, 7, 100, 1000, 999999 and 1000000 per second,
 * minute, hour and day fits (where C compiles it), with default bursts and
 * with a burst of the limit. Longer periods are printed where they do not. */
static void realistic_limits_fit(void **unused)
{
    (void)unused;
    static const uint64_t limits[] = {1, 7, 100, 1000, 999999, 1000000};
    static const int64_t windows[] = {S, MIN, HOUR, DAY};
    static const char *const wname[] = {"second", "minute", "hour", "day"};
    for (int a = 1; a <= WEIR_ALGORITHM_COUNT; a++)
        for (size_t l = 0; l < 6; l++)
            for (size_t w = 0; w < 4; w++)
                for (uint32_t k = 1; k <= (a == WEIR_ALGO_SLIDING_COUNTER ? 60u : 1u); k++) {
                    if (k > 1 && k != 10 && k != 60)
                        continue;
                    weir_limit_spec sp = {.algorithm = (weir_algorithm)a,
                                          .limit = limits[l],
                                          .window_us = windows[w],
                                          .sub_windows = k};
                    weir_limit lim;
                    if (weir_limit_compile(&sp, &lim) != WEIR_OK)
                        continue;
                    if (weir__redis_limit_fits(&lim) != WEIR_OK)
                        fail_msg("%s %llu per %s does not fit",
                                 weir_algorithm_name((weir_algorithm)a),
                                 (unsigned long long)limits[l], wname[w]);
                }
    /* with a burst of the limit too */
    for (int a = 1; a <= WEIR_ALGO_LEAKY_SHAPER; a++)
        for (size_t l = 0; l < 6; l++)
            for (size_t w = 0; w < 4; w++) {
                weir_limit_spec sp = {.algorithm = (weir_algorithm)a,
                                      .limit = limits[l],
                                      .window_us = windows[w],
                                      .burst = limits[l]};
                weir_limit lim;
                assert_int_equal(weir_limit_compile(&sp, &lim), WEIR_OK);
                if (weir__redis_limit_fits(&lim) != WEIR_OK)
                    fail_msg("%s %llu per %s, burst %llu does not fit",
                             weir_algorithm_name((weir_algorithm)a), (unsigned long long)limits[l],
                             wname[w], (unsigned long long)limits[l]);
            }
    /* a week, 30 days, a year (365.25 days): only a limit with few common
     * factors with the window, 999999, runs out of bits, in the buckets
     * (past a week) and in GCRA with a burst of the limit (a year) */
    static const int64_t longer[] = {7 * DAY, 30 * DAY, YEAR};
    int refused = 0;
    for (int a = 1; a <= WEIR_ALGORITHM_COUNT; a++)
        for (size_t l = 0; l < 6; l++)
            for (size_t w = 0; w < 3; w++)
                for (int burst = 0; burst < 2; burst++) {
                    weir_limit_spec sp = {.algorithm = (weir_algorithm)a,
                                          .limit = limits[l],
                                          .window_us = longer[w],
                                          .burst = burst ? limits[l] : 0};
                    weir_limit lim;
                    if (weir_limit_compile(&sp, &lim) != WEIR_OK ||
                        weir__redis_limit_fits(&lim) == WEIR_OK)
                        continue;
                    assert_int_equal(limits[l], 999999);
                    assert_true(w > 0);
                    assert_true(a != WEIR_ALGO_GCRA || (burst && w == 2));
                    refused++;
                }
    assert_int_equal(refused, 11);
}

/* ------------------------------------------------------------------ codec */

static void op_ok_refuses_what_cannot_be_sent(void **unused)
{
    (void)unused;
    weir_limit lim = compile(WEIR_ALGO_TOKEN_BUCKET, 10, S);
    weir_op op = {.key = "k", .key_len = 1, .limit = &lim, .hits = 1};
    assert_int_equal(weir__redis_op_ok(&op, T0), WEIR_OK);
    assert_int_equal(weir__redis_op_ok(&op, -1), WEIR_OK); /* Redis's clock */
    assert_int_equal(weir__redis_op_ok(&op, WEIR__REDIS_MAX_NOW_US), WEIR_OK);
    assert_int_equal(weir__redis_op_ok(&op, WEIR__REDIS_MAX_NOW_US + 1), WEIR_ERANGE);
    weir_limit big;
    weir_limit_spec sp = {
        .algorithm = WEIR_ALGO_TOKEN_BUCKET, .limit = 1, .window_us = P51, .burst = 2};
    assert_int_equal(weir_limit_compile(&sp, &big), WEIR_OK);
    op.limit = &big;
    assert_int_equal(weir__redis_op_ok(&op, T0), WEIR_ERANGE);
    op.limit = NULL;
    assert_int_equal(weir__redis_op_ok(&op, T0), WEIR_EINVAL);
    op.limit = &lim;
    op.key_len = 0;
    assert_int_equal(weir__redis_op_ok(&op, T0), WEIR_EINVAL);
    op.key_len = WEIR_MAX_KEY_BYTES + 1;
    assert_int_equal(weir__redis_op_ok(&op, T0), WEIR_EINVAL);
    op.key_len = 1;
    /* REFUND and CHARGE may be sent; no kind past them */
    op.kind = WEIR_OP_REFUND;
    assert_int_equal(weir__redis_op_ok(&op, T0), WEIR_OK);
    op.kind = WEIR_OP_CHARGE;
    assert_int_equal(weir__redis_op_ok(&op, T0), WEIR_OK);
    op.kind = (weir_op_kind)(WEIR_OP_CHARGE + 1);
    assert_int_equal(weir__redis_op_ok(&op, T0), WEIR_EINVAL);
    assert_int_equal(weir__redis_op_ok(NULL, T0), WEIR_EINVAL);
}

/* One op alone in a call at T0 (format 3, as a cluster node gets it). */
static weir_op one_op(const char *key, const weir_limit *lim, int kind, uint64_t hits)
{
    weir_op op = {
        .key = key, .key_len = strlen(key), .limit = lim, .kind = (weir_op_kind)kind, .hits = hits};
    weir__redis_batch b = {&op, 1, T0 + 5 * S, 0};
    g_args = true;
    assert_int_equal(script_call(&b, 1, false, NULL), WEIR_OK);
    g_args = false;
    assert_int_equal(op.status, WEIR_OK);
    return op;
}

/* The cluster store's REFUND gives back what a TAKE charged, for every
 * algorithm but the concurrency limiter's (whose leases go back by
 * RELEASE): a look after the refund sees what it saw before the take. */
static void refund_gives_back_a_take(void **unused)
{
    (void)unused;
    flushall();
    const weir_limit lims[] = {
        compile4(WEIR_ALGO_TOKEN_BUCKET, 10, S, 20, 0),
        compile4(WEIR_ALGO_GCRA, 10, S, 20, 0),
        compile4(WEIR_ALGO_GCRA, 7, 3 * S, 5, 0),
        compile4(WEIR_ALGO_LEAKY_BUCKET, 10, S, 20, 0),
        compile4(WEIR_ALGO_LEAKY_SHAPER, 10, S, 20, 0),
        compile(WEIR_ALGO_FIXED_WINDOW, 10, HOUR),
        compile(WEIR_ALGO_SLIDING_LOG, 10, MIN),
        compile4(WEIR_ALGO_SLIDING_COUNTER, 10, MIN, 0, 3),
    };
    for (size_t i = 0; i < sizeof(lims) / sizeof(lims[0]); i++) {
        char key[32];
        snprintf(key, sizeof(key), "refund:%zu", i);
        /* some use first, so there is a state to undo into */
        if (!one_op(key, &lims[i], WEIR_OP_TAKE, 1).result.allowed)
            fail_msg("%s: the first take is denied", key);
        weir_op before = one_op(key, &lims[i], WEIR_OP_CHECK, 1);
        weir_op take = one_op(key, &lims[i], WEIR_OP_TAKE, 3);
        if (!take.result.allowed)
            fail_msg("%s: the take is denied", key);
        assert_true(take.result.remaining < before.result.remaining);
        weir_op back = one_op(key, &lims[i], WEIR_OP_REFUND, 3);
        assert_true(back.result.allowed); /* there was a state */
        weir_op after = one_op(key, &lims[i], WEIR_OP_CHECK, 1);
        if (after.result.remaining != before.result.remaining)
            fail_msg("%s: remaining %llu before the take, %llu after its refund", key,
                     (unsigned long long)before.result.remaining,
                     (unsigned long long)after.result.remaining);
        /* the key keeps a TTL: it still goes when at rest */
        redisReply *r = redisCommand(g_c, "PTTL %s", key);
        assert_true(r && r->type == REDIS_REPLY_INTEGER && r->integer > 0);
        freeReplyObject(r);
    }
    /* nothing to undo on a key that is not there */
    assert_false(one_op("refund:none", &lims[0], WEIR_OP_REFUND, 1).result.allowed);
    /* a warm-up's cost depends on the heat it was charged at: neither
     * undone nor charged after the fact, as weir_refund() says */
    weir_limit w = warm(10, S, 20, MIN, 3);
    assert_true(one_op("refund:warm", &w, WEIR_OP_TAKE, 1).result.allowed);
    for (int kind = WEIR_OP_REFUND; kind <= WEIR_OP_CHARGE; kind++) {
        weir_op op = {.key = "refund:warm",
                      .key_len = 11,
                      .limit = &w,
                      .kind = (weir_op_kind)kind,
                      .hits = 1};
        weir__redis_batch b = {&op, 1, T0 + 5 * S, 0};
        assert_int_equal(script_call(&b, 1, false, NULL), WEIR_OK);
        assert_int_equal(op.status, WEIR_EALGO);
        _Alignas(8) unsigned char st[WEIR_STATE_WARMUP_BYTES] = {0};
        weir_result r;
        assert_int_equal(kind == WEIR_OP_REFUND ? weir_refund(&w, st, T0, 1, &r)
                                                : weir_charge(&w, st, T0, 1, &r),
                         WEIR_EALGO);
    }
}

/* An argument vector joined by '|', NUL as '_'. */
static void join_argv(const char **argv, const size_t *argvlen, size_t argc, char *out, size_t size)
{
    size_t g = 0;
    for (size_t i = 0; i < argc; i++) {
        for (size_t j = 0; j < argvlen[i]; j++) {
            assert_true(g + 2 < size);
            out[g++] = argv[i][j] ? argv[i][j] : '_';
        }
        out[g++] = '|';
    }
    out[g ? g - 1 : 0] = '\0';
}

static void encode_follows_the_wire_format(void **unused)
{
    (void)unused;
    weir_limit tb = compile4(WEIR_ALGO_TOKEN_BUCKET, 10, S, 20, 0);
    weir_limit sc = compile4(WEIR_ALGO_SLIDING_COUNTER, 6, MIN, 0, 3);
    weir_limit tb2 = tb; /* another object, the same limit: the same entry */
    weir_op a[2] = {
        {.key = "ka", .key_len = 2, .limit = &tb, .hits = 3},
        {.key = "k\0b", .key_len = 3, .limit = &sc, .kind = WEIR_OP_CHECK, .hits = UINT64_MAX}};
    weir_op c[1] = {{.key = "kc",
                     .key_len = 2,
                     .limit = &tb2,
                     .kind = WEIR_OP_RELEASE,
                     .lease = 12345678901234ull}};
    weir__redis_batch b[2] = {{a, 2, 1234567, WEIR_BATCH_ATOMIC | WEIR_BATCH_DIGESTS},
                              {c, 1, -1, 0}};
    size_t argc = weir__redis_argc(2, 3);
    assert_int_equal(argc, 4 + 3 + 2 + 3 + 1 + 2 * 3 + 3 * 4);
    const char *argv[64];
    size_t argvlen[64];
    char num[2048];
    assert_true(weir__redis_numbuf_size(2, 3) <= sizeof(num));
    /* two limits, not three */
    assert_int_equal(weir__redis_encode("EVAL", 4, "return 0", 8, b, 2, false, argv, argvlen, num),
                     argc - 2);
    char want_tb[128], want_sc[128];
    snprintf(want_tb, sizeof(want_tb), "1 10 1000000 20 0 %lld %lld %lld", (long long)tb.unit,
             (long long)tb.rate, (long long)tb.capacity);
    snprintf(want_sc, sizeof(want_sc), "7 6 60000000 6 3 0 0 0");
    char want[1024];
    snprintf(want, sizeof(want),
             "EVAL|return 0|3|ka|k_b|kc|2|2|%s|%s|2|1234567|1|2|"
             "0|3|0|1|1|18446744073709551615|0|2|"
             "-|0|1|2|0|12345678901234|1",
             want_tb, want_sc);
    char got[1024];
    join_argv(argv, argvlen, argc - 2, got, sizeof(got));
    assert_string_equal(got, want);
    assert_ptr_equal(argv[4], a[1].key); /* keys are borrowed */

    /* format 3: no key declared, the keys after "3" and their count */
    assert_int_equal(weir__redis_encode("EVAL", 4, "return 0", 8, b, 2, true, argv, argvlen, num),
                     argc - 1);
    snprintf(want, sizeof(want),
             "EVAL|return 0|0|3|3|ka|k_b|kc|2|%s|%s|2|1234567|1|2|"
             "0|3|0|1|1|18446744073709551615|0|2|"
             "-|0|1|2|0|12345678901234|1",
             want_tb, want_sc);
    join_argv(argv, argvlen, argc - 1, got, sizeof(got));
    assert_string_equal(got, want);
}

/* The number argument i of a vector (its text is not NUL-terminated). */
static size_t num_arg(const char **argv, const size_t *argvlen, size_t i)
{
    char buf[24];
    assert_true(argvlen[i] > 0 && argvlen[i] < sizeof(buf));
    memcpy(buf, argv[i], argvlen[i]);
    buf[argvlen[i]] = '\0';
    return (size_t)strtoull(buf, NULL, 10);
}

/* A call of many ops and many distinct limits: every limit goes once, in
 * the order of its first op, up to the encoder's table (3/4 of 128 slots);
 * past it, a new limit goes once per op. */
static void encode_sends_each_limit_once(void **unused)
{
    (void)unused;
    enum { NOPS = 512, NLIM = 200 };
    static weir_limit lims[NLIM];
    static weir_op ops[NOPS];
    static char keys[NOPS][16];
    for (size_t l = 0; l < NLIM; l++)
        lims[l] = compile4(l % 2 ? WEIR_ALGO_GCRA : WEIR_ALGO_FIXED_WINDOW, 1 + l, MIN, 0, 0);
    test_rng rng = {.s = 11};
    for (size_t i = 0; i < NOPS; i++) {
        snprintf(keys[i], sizeof(keys[i]), "k%zu", i);
        /* the first 80 ops: limits 0..39 twice; then any of them */
        size_t l = i < 80 ? i % 40 : rng_below(&rng, NLIM);
        ops[i] =
            (weir_op){.key = keys[i], .key_len = strlen(keys[i]), .limit = &lims[l], .hits = 1};
    }
    weir__redis_batch b[8];
    for (size_t j = 0; j < 8; j++)
        b[j] = (weir__redis_batch){&ops[j * 64], 64, T0, j % 2 ? WEIR_BATCH_ATOMIC : 0u};
    size_t cap = weir__redis_argc(8, NOPS);
    const char **argv = calloc(cap, sizeof(*argv));
    size_t *argvlen = calloc(cap, sizeof(*argvlen));
    char *num = malloc(weir__redis_numbuf_size(8, NOPS));
    assert_true(argv && argvlen && num);
    size_t argc = weir__redis_encode("FCALL", 5, "f", 1, b, 8, false, argv, argvlen, num);
    assert_true(argc <= cap);
    /* the head: FCALL f k keys 2 L */
    size_t at = 3 + NOPS;
    assert_int_equal(argvlen[at], 1);
    assert_memory_equal(argv[at], "2", 1);
    size_t nl = num_arg(argv, argvlen, at + 1), lim0 = at + 2;
    assert_true(nl >= 96 && nl <= NOPS);
    assert_int_equal(argc, lim0 + nl + 1 + 8 * 3 + NOPS * 4);
    /* each op's limit entry holds its limit's fields */
    size_t a = lim0 + nl + 1, i = 0, seen_twice = 0;
    for (size_t j = 0; j < 8; j++) {
        a += 3;
        for (size_t k = 0; k < 64; k++, i++, a += 4) {
            size_t idx = num_arg(argv, argvlen, a + 3);
            assert_true(idx >= 1 && idx <= nl);
            const weir_limit *l = ops[i].limit;
            char want[WEIR__REDIS_LIMIT_BYTES + 1];
            snprintf(want, sizeof(want), "%d %llu %lld %llu %u %lld %lld %lld", (int)l->algorithm,
                     (unsigned long long)l->limit, (long long)l->window_us,
                     (unsigned long long)l->burst, l->sub_windows, (long long)l->unit,
                     (long long)l->rate, (long long)l->capacity);
            const char *e = argv[lim0 + idx - 1];
            if (argvlen[lim0 + idx - 1] != strlen(want) || memcmp(e, want, strlen(want)) != 0)
                fail_msg("op %zu: limit %zu is %.*s, want %s", i, idx, (int)argvlen[lim0 + idx - 1],
                         e, want);
            if (i < 40)
                assert_int_equal(idx, i + 1); /* in the order of first use */
            else if (i < 80)
                assert_int_equal(idx, i - 40 + 1), seen_twice++;
        }
    }
    assert_int_equal(seen_twice, 40);
    free(argv);
    free(argvlen);
    free(num);
}

/* A reply built from RESP text by hiredis's own reader. */
static redisReply *parse(const char *resp)
{
    redisReader *rd = redisReaderCreate();
    assert_non_null(rd);
    assert_int_equal(redisReaderFeed(rd, resp, strlen(resp)), REDIS_OK);
    void *r = NULL;
    assert_int_equal(redisReaderGetReply(rd, &r), REDIS_OK);
    assert_non_null(r);
    redisReaderFree(rd);
    return r;
}

/* "*N" and the integers of @v as RESP */
static redisReply *parse_ints(const long long *v, size_t n)
{
    char buf[2048];
    int len = snprintf(buf, sizeof(buf), "*%zu\r\n", n);
    for (size_t i = 0; i < n; i++)
        len += snprintf(buf + len, sizeof(buf) - (size_t)len, ":%lld\r\n", v[i]);
    return parse(buf);
}

static weir_status decode_ints(const long long *v, size_t n, weir_op *ops, size_t nops,
                               int64_t *now)
{
    weir__redis_batch b = {ops, nops, 0, 0};
    redisReply *r = parse_ints(v, n);
    weir_status st = weir__redis_decode(r, &b, 1, now);
    freeReplyObject(r);
    return st;
}

static void decode_refuses_what_the_script_cannot_say(void **unused)
{
    (void)unused;
    weir_op ops[3];
    memset(ops, 0, sizeof(ops));
    /* an admission with a delay, a failure, a denial */
    const long long good[10] = {42, 10 * 8 + 1 + 2, 9, 100000, 5, -4, 20 * 8, 3, 7000, 250};
    int64_t now = -7;
    assert_int_equal(decode_ints(good, 10, ops, 3, &now), WEIR_OK);
    assert_int_equal(now, 42);
    assert_int_equal(ops[0].status, WEIR_OK);
    assert_true(ops[0].result.allowed);
    assert_int_equal(ops[0].result.limit, 10);
    assert_int_equal(ops[0].result.remaining, 9);
    assert_int_equal(ops[0].result.reset_after_us, 100000);
    assert_int_equal(ops[0].result.retry_after_us, 0);
    assert_int_equal(ops[0].result.delay_us, 5);
    assert_int_equal(ops[0].result.lease, 0);
    assert_int_equal(ops[1].status, WEIR_ENOLEASE);
    assert_int_equal(ops[2].status, WEIR_OK);
    assert_false(ops[2].result.allowed);
    assert_int_equal(ops[2].result.limit, 20);
    assert_int_equal(ops[2].result.remaining, 3);
    assert_int_equal(ops[2].result.reset_after_us, 7000);
    assert_int_equal(ops[2].result.retry_after_us, 250);
    assert_int_equal(ops[2].result.delay_us, 0);

    /* a lease, a delay and a lease, a plain admission, a denial "never" */
    const long long more[15] = {0, 5 * 8 + 1 + 4, 4, 60000000, 77, 6 * 8 + 7, 0, 1, 2,
                                3, 7 * 8 + 1,     7, 0,        0,  0};
    const long long never[5] = {0, 0, 0, 0, WEIR_NEVER};
    assert_int_equal(decode_ints(more, 13, ops, 3, NULL), WEIR_OK);
    assert_int_equal(ops[0].result.lease, 77);
    assert_int_equal(ops[0].result.delay_us, 0);
    assert_int_equal(ops[1].result.delay_us, 2);
    assert_int_equal(ops[1].result.lease, 3);
    assert_int_equal(ops[1].result.limit, 6);
    assert_true(ops[2].result.allowed);
    assert_int_equal(ops[2].result.remaining, 7);
    assert_int_equal(ops[2].result.lease, 0);
    assert_int_equal(decode_ints(never, 5, ops, 1, NULL), WEIR_OK);
    assert_int_equal(ops[0].result.retry_after_us, WEIR_NEVER);
    assert_int_equal(ops[0].result.limit, 0); /* a ban's */

    /* each field out of its range in turn: the reply is refused, nothing
     * is written */
    struct {
        size_t at;
        long long v;
    } bad[] = {{0, -1},
               {1, 10 * 8 + 1 + 2 + 4},                      /* a lease that is not there */
               {1, 20 * 8 + 2},                              /* a delay with a denial */
               {1, 20 * 8 + 4},                              /* a lease with a denial */
               {1, ((long long)WEIR_MAX_LIMIT + 1) * 8 + 3}, /* limit */
               {2, 11},                                      /* remaining above limit */
               {2, -1},
               {3, -1},
               {4, 0}, /* a delay flagged: > 0 */
               {4, -3},
               {5, -2}, /* not a failed op's status */
               {5, -11},
               {5, -5},
               {6, 2 * 8},
               {8, -1},
               {9, -2}};
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        long long v[10];
        memcpy(v, good, sizeof(v));
        v[bad[k].at] = bad[k].v;
        memset(ops, 0, sizeof(ops));
        ops[0].status = (weir_status)99;
        now = -7;
        if (decode_ints(v, 10, ops, 3, &now) != WEIR_EIO)
            fail_msg("reply field %zu = %lld was accepted", bad[k].at, bad[k].v);
        assert_int_equal(ops[0].status, 99);
        assert_int_equal(now, -7);
    }
    /* a flagged lease of 0 */
    long long v[15];
    memcpy(v, more, sizeof(v));
    v[4] = 0;
    assert_int_equal(decode_ints(v, 13, ops, 3, NULL), WEIR_EIO);
    /* wrong lengths: one short, one over, a result too few or too many */
    assert_int_equal(decode_ints(good, 9, ops, 3, NULL), WEIR_EIO);
    assert_int_equal(decode_ints(more, 14, ops, 3, NULL), WEIR_EIO);
    assert_int_equal(decode_ints(good, 10, ops, 2, NULL), WEIR_EIO);
    assert_int_equal(decode_ints(good, 10, ops, 4, NULL), WEIR_EIO);
    assert_int_equal(decode_ints(good, 1, ops, 0, NULL), WEIR_OK);
    /* wrong types */
    weir__redis_batch b = {ops, 1, 0, 0};
    static const char *const wrong[] = {":0\r\n",
                                        "-ERR oops\r\n",
                                        "-NOSCRIPT No matching script\r\n",
                                        "$2\r\nok\r\n",
                                        "+OK\r\n",
                                        "*-1\r\n",
                                        "*4\r\n:0\r\n:9\r\n:1\r\n$1\r\n0\r\n",
                                        "*4\r\n:0\r\n:9\r\n:1\r\n$-1\r\n",
                                        "*4\r\n:0\r\n:9\r\n*0\r\n:0\r\n",
                                        "*3\r\n:0\r\n:9\r\n:1\r\n",
                                        "*5\r\n:0\r\n:9\r\n:1\r\n:0\r\n:0\r\n"};
    for (size_t k = 0; k < sizeof(wrong) / sizeof(wrong[0]); k++) {
        redisReply *r = parse(wrong[k]);
        if (weir__redis_decode(r, &b, 1, NULL) != WEIR_EIO)
            fail_msg("reply %zu was accepted", k);
        freeReplyObject(r);
    }
    redisReply *r = parse("*4\r\n:0\r\n:9\r\n:1\r\n:0\r\n");
    assert_int_equal(weir__redis_decode(r, &b, 1, NULL), WEIR_OK); /* the same, right */
    freeReplyObject(r);
    assert_int_equal(weir__redis_decode(NULL, &b, 1, NULL), WEIR_EIO);
}

/* ------------------------------------------------------------------- TTLs */

static long long pttl(const char *key)
{
    return integer_reply("PTTL %s", key);
}

/* within 2 s under the TTL the script set (the time since the call): the
 * reset rounded up to a millisecond */
static void assert_ttl(const char *key, int64_t reset_us)
{
    long long want = (reset_us + 999) / 1000, got = pttl(key);
    if (got > want || got < want - 2000)
        fail_msg("%s: PTTL %lld, want about %lld (reset_after %lld us)", key, got, want,
                 (long long)reset_us);
}

static weir_op plain(const char *key, const weir_limit *lim, weir_op_kind kind, int64_t now,
                     uint64_t hits, uint64_t lease)
{
    weir_op op = {.key = key,
                  .key_len = strlen(key),
                  .limit = lim,
                  .hits = hits,
                  .lease = lease,
                  .kind = kind};
    weir__redis_batch b = {&op, 1, now, 0};
    assert_int_equal(script_call(&b, 1, false, NULL), WEIR_OK);
    assert_int_equal(op.status, WEIR_OK);
    return op;
}

static void keys_expire_at_rest(void **unused)
{
    (void)unused;
    flushall();
    for (int a = 1; a <= WEIR_ALGORITHM_COUNT; a++) {
        weir_limit lim = compile((weir_algorithm)a, 5, 7 * MIN + 1);
        char key[32];
        snprintf(key, sizeof(key), "ttl:%d", a);
        /* a check, a peek and a denial create no key */
        assert_true(plain(key, &lim, WEIR_OP_CHECK, T0, 1, 0).result.allowed);
        assert_true(plain(key, &lim, WEIR_OP_TAKE, T0, 0, 0).result.allowed);
        assert_false(plain(key, &lim, WEIR_OP_TAKE, T0, 6, 0).result.allowed);
        assert_int_equal(integer_reply("EXISTS %s", key), 0);
        weir_op op = plain(key, &lim, WEIR_OP_TAKE, T0 + 12345, 1, 0);
        assert_true(op.result.allowed);
        assert_ttl(key, op.result.reset_after_us);
        uint64_t first_lease = op.result.lease;
        op = plain(key, &lim, WEIR_OP_TAKE, T0 + 3 * MIN + 7, 1, 0);
        assert_ttl(key, op.result.reset_after_us);
        /* a check leaves the TTL alone */
        long long before = pttl(key);
        op = plain(key, &lim, WEIR_OP_CHECK, T0 + 4 * MIN, 1, 0);
        long long after = pttl(key);
        assert_true(after <= before && after > before - 2000);
        if (a == WEIR_ALGO_CONCURRENCY) {
            /* a release leaves it as the last acquire set it */
            op = plain(key, &lim, WEIR_OP_RELEASE, T0 + 5 * MIN, 0, first_lease);
            assert_true(pttl(key) <= before && pttl(key) > before - 2000);
        }
    }
}

/* A concurrency key made again after it expired with its leases gives out
 * other lease ids: a token of a lease that timed out never gives back a
 * lease of the new key. */
static void lease_ids_outlive_their_key(void **unused)
{
    (void)unused;
    flushall();
    weir_limit lim = compile(WEIR_ALGO_CONCURRENCY, 2, 30 * S);
    weir_op op = plain("aba", &lim, WEIR_OP_TAKE, T0, 1, 0);
    uint64_t old = op.result.lease;
    assert_true(op.result.allowed && old > 1);
    /* the key expires with its leases (Redis's TTL, here at once) */
    assert_int_equal(integer_reply("DEL %s", "aba"), 1);
    op = plain("aba", &lim, WEIR_OP_TAKE, T0 + 31 * S, 1, 0);
    assert_true(op.result.allowed && op.result.lease > old);
    weir_op rel = {
        .key = "aba", .key_len = 3, .limit = &lim, .lease = old, .kind = WEIR_OP_RELEASE};
    weir__redis_batch b = {&rel, 1, T0 + 32 * S, 0};
    assert_int_equal(script_call(&b, 1, false, NULL), WEIR_OK);
    assert_int_equal(rel.status, WEIR_ENOLEASE);
    assert_int_equal(plain("aba", &lim, WEIR_OP_RELEASE, T0 + 32 * S, 0, op.result.lease).status,
                     WEIR_OK);
}

/* A key that changes type within one call expires as its last op says:
 * a string's TTL when a string replaced the sorted set, the set's when it
 * replaced the string, and a read of the set (as a fresh string state)
 * leaves the set's. */
static void ttls_of_a_key_changing_type_in_a_call(void **unused)
{
    (void)unused;
    flushall();
    weir_limit tb = compile(WEIR_ALGO_TOKEN_BUCKET, 4, 7 * MIN);
    weir_limit log = compile(WEIR_ALGO_SLIDING_LOG, 4, 3 * MIN);
    const weir_limit *order[3][2] = {{&log, &tb}, {&tb, &log}, {&log, &tb}};
    const weir_op_kind second[3] = {WEIR_OP_TAKE, WEIR_OP_TAKE, WEIR_OP_CHECK};
    const char *const type[3] = {"string", "zset", "zset"};
    for (int c = 0; c < 3; c++) {
        char key[16];
        snprintf(key, sizeof(key), "swap:%d", c);
        weir_op ops[2] = {{.key = key, .key_len = strlen(key), .limit = order[c][0], .hits = 1},
                          {.key = key,
                           .key_len = strlen(key),
                           .limit = order[c][1],
                           .hits = 1,
                           .kind = second[c]}};
        weir__redis_batch b[2] = {{&ops[0], 1, T0, 0}, {&ops[1], 1, T0 + S, 0}};
        assert_int_equal(script_call(b, 2, false, NULL), WEIR_OK);
        assert_true(ops[0].status == WEIR_OK && ops[0].result.allowed);
        assert_true(ops[1].status == WEIR_OK && ops[1].result.allowed);
        redisReply *r = command("TYPE %s", key);
        assert_string_equal(r->str, type[c]);
        freeReplyObject(r);
        /* the TTL of the op that wrote last, from its batch's time */
        const weir_op *last = second[c] == WEIR_OP_TAKE ? &ops[1] : &ops[0];
        assert_ttl(key, last->result.reset_after_us);
    }
}

/* --------------------------------------------------------- Redis's clock */

static int64_t wall_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * S + ts.tv_nsec / 1000;
}

static void redis_clock(void **unused)
{
    (void)unused;
    flushall();
    tkey k;
    key_init(&k, "clock", compile(WEIR_ALGO_FIXED_WINDOW, 3, HOUR));
    for (int i = 0; i < 6; i++) {
        g_fcall = i % 2 == 1;
        weir_op ops[2] = {{.key = k.name, .key_len = strlen(k.name), .limit = &k.lim, .hits = 1},
                          {.key = k.name, .key_len = strlen(k.name), .limit = &k.lim, .hits = 1}};
        weir__redis_batch b[2] = {{&ops[0], 1, -1, 0}, {&ops[1], 1, -1, WEIR_BATCH_ATOMIC}};
        int64_t before = wall_us(), at = 0;
        assert_int_equal(script_call(b, 2, true, &at), WEIR_OK);
        int64_t after = wall_us();
        /* one clock read for the call, the wall clock's (within a second) */
        assert_true(at > before - S && at < after + S);
        for (int j = 0; j < 2; j++) {
            expect want;
            weir__redis_batch one_b = b[j];
            one_b.now_us = at;
            ref_batch(&k, 1, &one_b, &want);
            compare("clock", 0, (size_t)i, &b[j], 0, &want);
        }
    }
    g_fcall = false;
    /* no batch asked: 0 */
    weir_op op = {.key = k.name, .key_len = strlen(k.name), .limit = &k.lim};
    weir__redis_batch b = {&op, 1, T0, 0};
    int64_t at = -1;
    assert_int_equal(script_call(&b, 1, true, &at), WEIR_OK);
    assert_int_equal(at, 0);
    key_fini(&k);
}

/* ------------------------------------------------------------- the server */

/* The support's server: on a unix socket and on loopback TCP, with extra
 * arguments; stopped, its directory is gone. */
static void a_second_server_with_a_password(void **unused)
{
    (void)unused;
    redis_server rs;
    const char *const extra[] = {"--requirepass", "s3cret", NULL};
    redis_start(&rs, extra, "s3cret");
    assert_true(rs.port > 0 && rs.port != g_srv.port);
    redisContext *c = redis_connect_tcp(&rs);
    redisReply *r = redisCommand(c, "PING");
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_ERROR); /* NOAUTH */
    freeReplyObject(r);
    r = redisCommand(c, "AUTH s3cret");
    assert_int_equal(r->type, REDIS_REPLY_STATUS);
    freeReplyObject(r);
    r = redisCommand(c, "CONFIG GET bind");
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    assert_int_equal(r->elements, 2);
    assert_string_equal(r->element[1]->str, "127.0.0.1");
    freeReplyObject(r);
    redisFree(c);
    char dir[sizeof(rs.dir)];
    memcpy(dir, rs.dir, sizeof(dir));
    redis_stop(&rs);
    assert_int_equal(access(dir, F_OK), -1);
    redis_stop(&rs); /* idempotent */
}

/* ------------------------------------------------------ state not its own */

static void foreign_state_is_a_fresh_key(void **unused)
{
    (void)unused;
    flushall();
    static const char *const junk[] = {"SET %s x", "SET %s 12345678901234567", "RPUSH %s a b",
                                       "ZADD %s 1 abcdefgh", "HSET %s f v"};
    for (int a = 1; a <= WEIR_ALGORITHM_COUNT; a++) {
        weir_limit lim = compile4((weir_algorithm)a, 4, MIN, 0, 0);
        for (size_t j = 0; j < sizeof(junk) / sizeof(junk[0]); j++) {
            const char *key = "junk";
            freeReplyObject(command("DEL %s", key));
            freeReplyObject(command(junk[j], key));
            tkey k;
            key_init(&k, key, lim);
            weir_op op = {
                .key = k.name, .key_len = 4, .limit = &k.lim, .hits = 1, .kind = WEIR_OP_CHECK};
            weir__redis_batch b = {&op, 1, T0, 0};
            both("foreign", 0, j, &k, 1, &b, 1); /* decided as fresh, not written */
            assert_int_equal(integer_reply("EXISTS %s", key), 1);
            for (int i = 0; i < 6; i++) {
                op.kind = WEIR_OP_TAKE;
                b.now_us = T0 + i;
                both("foreign", 0, j, &k, 1, &b, 1);
            }
            key_fini(&k);
        }
    }
    /* a state from another algorithm, and one out of range for the limit */
    weir_limit tb = compile(WEIR_ALGO_TOKEN_BUCKET, 100, MIN);
    weir_limit fw = compile(WEIR_ALGO_FIXED_WINDOW, 100, MIN);
    weir_limit small = compile(WEIR_ALGO_FIXED_WINDOW, 2, MIN);
    flushall();
    for (int i = 0; i < 50; i++)
        plain("swap", &fw, WEIR_OP_TAKE, T0, 1, 0);
    weir_op op = plain("swap", &tb, WEIR_OP_TAKE, T0, 1, 0);
    assert_int_equal(op.result.remaining, 99);
    op = plain("swap", &small, WEIR_OP_TAKE, T0, 1, 0); /* 1 (token bucket) is fresh too */
    assert_int_equal(op.result.remaining, 1);
    for (int i = 0; i < 50; i++)
        plain("swap", &fw, WEIR_OP_TAKE, T0, 1, 0);
    op = plain("swap", &small, WEIR_OP_TAKE, T0, 1, 0); /* 51 > 2: fresh */
    assert_int_equal(op.result.remaining, 1);
}

/* ------------------------------------------------------ one call as many */

/* Fail unless keys @a and @b hold the same: type, and value for a string
 * or a sorted set. */
static void same_stored(const char *a, const char *b, uint64_t seed, size_t step)
{
    redisReply *ta = command("TYPE %s", a), *tb = command("TYPE %s", b);
    if (strcmp(ta->str, tb->str) != 0)
        fail_msg("%s is a %s, %s a %s (seed %llu, call %zu)", a, ta->str, b, tb->str,
                 (unsigned long long)seed, step);
    const char *fmt = !strcmp(ta->str, "string") ? "GET %s"
                      : !strcmp(ta->str, "zset") ? "ZRANGE %s 0 -1 WITHSCORES"
                                                 : NULL;
    freeReplyObject(ta);
    freeReplyObject(tb);
    if (!fmt)
        return;
    redisReply *va = command(fmt, a), *vb = command(fmt, b);
    bool same = va->type == vb->type && va->len == vb->len && va->elements == vb->elements &&
                (va->type != REDIS_REPLY_STRING || memcmp(va->str, vb->str, va->len) == 0);
    for (size_t i = 0; same && va->type == REDIS_REPLY_ARRAY && i < va->elements; i++)
        same = va->element[i]->len == vb->element[i]->len &&
               memcmp(va->element[i]->str, vb->element[i]->str, va->element[i]->len) == 0;
    freeReplyObject(va);
    freeReplyObject(vb);
    if (!same)
        fail_msg("%s and %s hold different values (seed %llu, call %zu)", a, b,
                 (unsigned long long)seed, step);
}

/*
 * A call's batches give what they give sent one per call: the script
 * reads every key once (MGET) and writes each once at the end, so this
 * checks that a key's later ops see what its earlier ones wrote, across
 * batches and algorithms (a key that one op holds as a string and the
 * next as a sorted set, or that holds something else), that an atomic
 * batch a TAKE denies leaves nothing written, and that what is stored in
 * the end is the same. Two sets of keys, {w} for whole calls and {s} for
 * split ones, see the same ops; each op takes a limit of any algorithm.
 */
static void a_call_is_its_batches_one_by_one(void **unused)
{
    (void)unused;
    flushall();
    enum { NK = 3, NL = 11, NCALLS = 400 };
    weir_limit pool[NL] = {
        compile(WEIR_ALGO_TOKEN_BUCKET, 5, S),
        compile4(WEIR_ALGO_GCRA, 4, S, 2, 0),
        compile(WEIR_ALGO_LEAKY_BUCKET, 3, S),
        compile4(WEIR_ALGO_LEAKY_SHAPER, 3, S, 4, 0),
        compile(WEIR_ALGO_FIXED_WINDOW, 4, 2 * S),
        compile(WEIR_ALGO_SLIDING_LOG, 3, S),
        compile4(WEIR_ALGO_SLIDING_COUNTER, 5, 3 * S, 0, 3),
        compile(WEIR_ALGO_CONCURRENCY, 2, 2 * S),
        compile(WEIR_ALGO_TOKEN_BUCKET, 2, 300000),
        compile(WEIR_ALGO_FIXED_WINDOW, 0, S), /* a ban */
        compile4(WEIR_ALGO_SLIDING_COUNTER, 2, S, 0, 1),
    };
    char wk[NK][16], sk[NK][16];
    for (size_t k = 0; k < NK; k++) {
        snprintf(wk[k], sizeof(wk[k]), "{w}:%zu", k);
        snprintf(sk[k], sizeof(sk[k]), "{s}:%zu", k);
    }
    static const char *const junk[] = {"SET %s x", "RPUSH %s a", "HSET %s f v",
                                       "ZADD %s 1 abcdefgh", "SET %s 0123456789abcdefg"};
    uint64_t seed = test_seed("one_call_as_many");
    test_rng rng = {seed};
    uint64_t leases[NK][8] = {{0}};
    int64_t now = T0;
    for (size_t c = 0; c < NCALLS; c++) {
        if (rng_below(&rng, 25) == 0) {
            size_t k = rng_below(&rng, NK);
            const char *j = junk[rng_below(&rng, 5)];
            freeReplyObject(command("DEL %s %s", wk[k], sk[k]));
            freeReplyObject(command(j, wk[k]));
            freeReplyObject(command(j, sk[k]));
        }
        weir_op w[MAX_BATCHES][MAX_OPS], sp[MAX_BATCHES][MAX_OPS];
        size_t ki[MAX_BATCHES][MAX_OPS]; /* the ops' keys */
        weir__redis_batch bw[MAX_BATCHES], bs[MAX_BATCHES];
        size_t nb = 1 + rng_below(&rng, MAX_BATCHES);
        for (size_t j = 0; j < nb; j++) {
            bool atomic = rng_below(&rng, 2) == 0;
            size_t n = 1 + rng_below(&rng, 4);
            now += (int64_t)rng_below(&rng, 400000) - 50000;
            for (size_t i = 0; i < n; i++) {
                size_t k = ki[j][i] = rng_below(&rng, NK);
                const weir_limit *l = &pool[rng_below(&rng, NL)];
                weir_op op = {.limit = l, .hits = rng_below(&rng, 4) ? 1 : rng_below(&rng, 4)};
                uint64_t r = rng_below(&rng, 10);
                if (r == 0)
                    op.kind = WEIR_OP_CHECK;
                else if (r == 1 && !atomic) {
                    op.kind = WEIR_OP_RELEASE;
                    op.lease = leases[k][rng_below(&rng, 8)];
                }
                w[j][i] = sp[j][i] = op;
                w[j][i].key = wk[k];
                sp[j][i].key = sk[k];
                w[j][i].key_len = sp[j][i].key_len = strlen(wk[k]);
            }
            unsigned flags = atomic ? WEIR_BATCH_ATOMIC : 0u;
            bw[j] = (weir__redis_batch){w[j], n, now, flags};
            bs[j] = (weir__redis_batch){sp[j], n, now, flags};
        }
        assert_int_equal(script_call(bw, nb, true, NULL), WEIR_OK);
        for (size_t j = 0; j < nb; j++)
            assert_int_equal(script_call(&bs[j], 1, true, NULL), WEIR_OK);
        for (size_t j = 0; j < nb; j++)
            for (size_t i = 0; i < bw[j].n; i++) {
                const weir_op *a = &w[j][i], *b = &sp[j][i];
                if (!same_result(a->status, &a->result, b->status, &b->result, true)) {
                    print_result("whole", a->status, &a->result);
                    print_result("split", b->status, &b->result);
                    fail_msg("batch %zu op %zu (%s, %s) differs (seed %llu, call %zu)", j, i,
                             kind_name(a->kind), weir_algorithm_name(a->limit->algorithm),
                             (unsigned long long)seed, c);
                }
                if (a->status == WEIR_OK && a->result.lease)
                    leases[ki[j][i]][rng_below(&rng, 8)] = a->result.lease;
            }
        for (size_t k = 0; k < NK; k++)
            same_stored(wk[k], sk[k], seed, c);
    }
}

/*
 * One call of many ops under many limits (more distinct ones than the
 * encoder's table holds, some alike but apart), on many keys, atomic
 * batches with shared keys among them: decided as the C step functions
 * decide.
 */
static void many_limits_in_one_call(void **unused)
{
    (void)unused;
    flushall();
    enum { NKEYS = 160, NB = 4, NOPS = 64, NCALLS = 25 };
    static tkey keys[NKEYS];
    static weir_op ops[NB][NOPS];
    static expect want[NB][NOPS];
    uint64_t seed = test_seed("many_limits");
    test_rng rng = {seed};
    for (size_t k = 0; k < NKEYS; k++) {
        char name[32];
        snprintf(name, sizeof(name), "{many}:%zu", k);
        key_init(&keys[k], name,
                 random_limit(&rng, (weir_algorithm)(1 + rng_below(&rng, WEIR_ALGORITHM_COUNT))));
    }
    int64_t now = T0;
    for (size_t c = 0; c < NCALLS; c++) {
        weir__redis_batch b[NB];
        for (size_t j = 0; j < NB; j++) {
            bool atomic = j % 2 == 1;
            now += (int64_t)rng_below(&rng, 3 * S);
            b[j] = (weir__redis_batch){ops[j], NOPS, now, atomic ? WEIR_BATCH_ATOMIC : 0u};
            for (size_t i = 0; i < NOPS; i++) {
                tkey *k = &keys[rng_below(&rng, NKEYS)];
                weir_op *op = &ops[j][i];
                *op = (weir_op){.key = k->name,
                                .key_len = strlen(k->name),
                                .limit = &k->lim,
                                .hits = random_hits(&rng, &k->lim)};
                if (rng_below(&rng, 8) == 0)
                    op->kind = WEIR_OP_CHECK;
            }
        }
        for (size_t j = 0; j < NB; j++)
            ref_batch(keys, NKEYS, &b[j], want[j]);
        assert_int_equal(script_call(b, NB, true, NULL), WEIR_OK);
        for (size_t j = 0; j < NB; j++)
            for (size_t i = 0; i < NOPS; i++)
                compare("many_limits", seed, c, &b[j], i, &want[j][i]);
    }
    for (size_t k = 0; k < NKEYS; k++)
        key_fini(&keys[k]);
}

/* A call of more keys than one MGET reads (the script reads them 1000 at a
 * time): a batch of WEIR_MAX_BATCH ops, atomic or not, on keys seen before
 * and not. */
static void more_keys_than_one_mget(void **unused)
{
    (void)unused;
    flushall();
    enum { NKEYS = 1500, NOPS = WEIR_MAX_BATCH };
    static tkey keys[NKEYS];
    static weir_op ops[NOPS];
    static expect want[NOPS];
    uint64_t seed = test_seed("more_keys_than_one_mget");
    test_rng rng = {seed};
    weir_limit lims[3] = {compile(WEIR_ALGO_TOKEN_BUCKET, 3, S), compile(WEIR_ALGO_GCRA, 2, S),
                          compile4(WEIR_ALGO_SLIDING_COUNTER, 2, S, 0, 2)};
    for (size_t k = 0; k < NKEYS; k++) {
        char name[32];
        snprintf(name, sizeof(name), "{mget}:%zu", k);
        key_init(&keys[k], name, lims[k % 3]);
    }
    for (size_t c = 0; c < 3; c++) {
        for (size_t i = 0; i < NOPS; i++) {
            tkey *k = &keys[rng_below(&rng, c == 0 ? NKEYS / 2 : NKEYS)];
            ops[i] =
                (weir_op){.key = k->name, .key_len = strlen(k->name), .limit = &k->lim, .hits = 1};
        }
        weir__redis_batch b = {ops, NOPS, T0 + (int64_t)c * 100000,
                               c == 1 ? WEIR_BATCH_ATOMIC : 0u};
        ref_batch(keys, NKEYS, &b, want);
        assert_int_equal(script_call(&b, 1, true, NULL), WEIR_OK);
        for (size_t i = 0; i < NOPS; i++)
            compare("more_keys_than_one_mget", seed, c, &b, i, &want[i]);
    }
    for (size_t k = 0; k < NKEYS; k++)
        key_fini(&keys[k]);
}

/* --------------------------------------------------------------- big costs */

/* Costs that add thousands of members to the sorted sets at once. */
static void big_costs(void **unused)
{
    (void)unused;
    flushall();
    tkey k[2];
    key_init(&k[0], "{big}:log", compile(WEIR_ALGO_SLIDING_LOG, 65536, MIN));
    key_init(&k[1], "{big}:conc", compile(WEIR_ALGO_CONCURRENCY, 65536, MIN));
    static const uint64_t hits[] = {1200, 65536, 1, 30000, 35536, 1, 0, 65537, 40000};
    static const int64_t at[] = {0, 0, S, 30 * S, 40 * S, 61 * S, 62 * S, 62 * S, 95 * S};
    for (size_t s = 0; s < sizeof(hits) / sizeof(hits[0]); s++) {
        weir_op ops[2];
        for (int i = 0; i < 2; i++)
            ops[i] = (weir_op){.key = k[i].name,
                               .key_len = strlen(k[i].name),
                               .limit = &k[i].lim,
                               .hits = hits[s]};
        weir__redis_batch b = {ops, 2, T0 + at[s], 0};
        both("big", 0, s, k, 2, &b, 1);
    }
    weir_op rel = {.key = k[1].name,
                   .key_len = strlen(k[1].name),
                   .limit = &k[1].lim,
                   .kind = WEIR_OP_RELEASE,
                   .lease = 3};
    weir__redis_batch b = {&rel, 1, T0 + 96 * S, 0};
    both("big", 0, 99, k, 2, &b, 1);
    assert_true(integer_reply("ZCARD %s", k[0].name) <= 65536);
    key_fini(&k[0]);
    key_fini(&k[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(golden_token_bucket),
        cmocka_unit_test(golden_refund_and_charge),
        cmocka_unit_test(golden_leaky),
        cmocka_unit_test(golden_gcra),
        cmocka_unit_test(golden_fixed_window),
        cmocka_unit_test(golden_sliding_log),
        cmocka_unit_test(golden_sliding_counter),
        cmocka_unit_test(golden_concurrency),
        cmocka_unit_test(bans),
        cmocka_unit_test(atomic_denial_charges_nothing),
        cmocka_unit_test(random_token_bucket),
        cmocka_unit_test(random_token_bucket_warmup),
        cmocka_unit_test(random_gcra),
        cmocka_unit_test(random_leaky_bucket),
        cmocka_unit_test(random_leaky_shaper),
        cmocka_unit_test(random_fixed_window),
        cmocka_unit_test(random_sliding_log),
        cmocka_unit_test(random_sliding_counter),
        cmocka_unit_test(random_concurrency),
        cmocka_unit_test(random_mixed),
        cmocka_unit_test(random_mixed_function),
        cmocka_unit_test(random_mixed_keys_in_args),
        cmocka_unit_test(refund_gives_back_a_take),
        cmocka_unit_test(atomic_batches_match_the_memory_store),
        cmocka_unit_test(big_costs),
        cmocka_unit_test(limits_fit_at_their_bounds),
        cmocka_unit_test(realistic_limits_fit),
        cmocka_unit_test(op_ok_refuses_what_cannot_be_sent),
        cmocka_unit_test(encode_follows_the_wire_format),
        cmocka_unit_test(encode_sends_each_limit_once),
        cmocka_unit_test(decode_refuses_what_the_script_cannot_say),
        cmocka_unit_test(keys_expire_at_rest),
        cmocka_unit_test(lease_ids_outlive_their_key),
        cmocka_unit_test(ttls_of_a_key_changing_type_in_a_call),
        cmocka_unit_test(redis_clock),
        cmocka_unit_test(foreign_state_is_a_fresh_key),
        cmocka_unit_test(a_call_is_its_batches_one_by_one),
        cmocka_unit_test(reset_forgets_a_key),
        cmocka_unit_test(many_limits_in_one_call),
        cmocka_unit_test(more_keys_than_one_mget),
        cmocka_unit_test(a_second_server_with_a_password),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
