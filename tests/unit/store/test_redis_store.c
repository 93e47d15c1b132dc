/*
 * test_redis_store.c - the Redis store's sessions on a real libuv loop
 * against a real redis-server: batches gathered into one call, the unix
 * socket and SELECT, NOSCRIPT, the over-limit cache, timeouts and the
 * breaker with Redis paused, a session freed with calls in flight.
 */
#define _GNU_SOURCE /* kill(), and what uv.h needs */

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <uv.h>

#include <cmocka.h>

#include "redis_support.h"
#include "weir/adapters/libuv.h"
#include "weir/weir.h"

typedef struct rig {
    redis_server srv;
    weir_ctx *ctx;
    weir_store *store;
    uv_loop_t loop;
    weir_store_session *ss;
    weir_limit lim;
} rig;

typedef struct done {
    int calls;
    weir_status status;
} done;

static void on_done(void *arg, weir_op *ops, size_t n, weir_status status)
{
    (void)ops, (void)n;
    done *d = arg;
    d->calls++;
    d->status = status;
}

static void rig_open(rig *r, weir_redis_options *o, bool unix_socket)
{
    redis_start(&r->srv, NULL, NULL);
    assert_int_equal(weir_ctx_new(NULL, &r->ctx), WEIR_OK);
    if (unix_socket)
        o->unix_path = r->srv.sock;
    else
        o->host = "127.0.0.1";
    o->port = r->srv.port;
    assert_int_equal(weir_redis_store_new(r->ctx, o, &r->store), WEIR_OK);
    assert_int_equal(weir_store_caps(r->store), WEIR_STORE_SHARED_KEYS);
    char msg[256];
    assert_int_equal(weir_redis_ping(r->store, msg, sizeof(msg)), WEIR_OK);
    assert_int_equal(uv_loop_init(&r->loop), 0);
    weir_loop_adapter a = weir_libuv_adapter(&r->loop);
    assert_int_equal(weir_store_session_new(r->store, &a, &r->ss), WEIR_OK);
    weir_limit_spec spec = {
        .algorithm = WEIR_ALGO_TOKEN_BUCKET, .limit = 3, .window_us = 3600 * 1000000LL};
    assert_int_equal(weir_limit_compile(&spec, &r->lim), WEIR_OK);
}

static void rig_close(rig *r)
{
    weir_store_session_free(r->ss);
    uv_run(&r->loop, UV_RUN_DEFAULT); /* the handles' close callbacks */
    assert_int_equal(uv_loop_close(&r->loop), 0);
    weir_store_free(r->store);
    weir_ctx_free(r->ctx);
    redis_stop(&r->srv);
}

/* Run the loop until every @d has completed, or fail after @ms. */
static void run_until(rig *r, done *d, size_t n, int ms)
{
    uint64_t end = uv_hrtime() + (uint64_t)ms * 1000000u;
    for (;;) {
        bool all = true;
        for (size_t i = 0; i < n; i++)
            all &= d[i].calls > 0;
        if (all)
            return;
        if (uv_hrtime() > end)
            fail_msg("batches not completed within %d ms", ms);
        uv_run(&r->loop, UV_RUN_NOWAIT);
    }
}

static weir_op take(const char *key, const weir_limit *lim)
{
    weir_op op;
    memset(&op, 0, sizeof(op));
    op.key = key;
    op.key_len = strlen(key);
    op.limit = lim;
    op.hits = 1;
    op.kind = WEIR_OP_TAKE;
    return op;
}

/* Wait for the session's connection (decisions before it wait for it).
 * With a short timeout the first call (the connection, the script's
 * load) can take longer on a busy machine: asked again until answered. */
static void connected(rig *r)
{
    uint64_t end = uv_hrtime() + 10000u * 1000000u;
    for (;;) {
        weir_op op = take("weir:test:warmup", &r->lim);
        done d = {0};
        assert_int_equal(weir_store_session_submit(r->ss, &op, 1, 0, 0, on_done, &d), WEIR_OK);
        run_until(r, &d, 1, 5000);
        if (d.status == WEIR_OK)
            return;
        assert_true(uv_hrtime() < end);
    }
}

static void batches_share_one_call(void **unused)
{
    (void)unused;
    rig r;
    weir_redis_options o;
    weir_redis_options_init(&o);
    o.redis_clock = false;
    o.timeout_us = 2000000;
    o.db = 3;
    rig_open(&r, &o, true);
    connected(&r);
    weir_redis_stats before;
    assert_int_equal(weir_redis_stats_get(r.store, &before), WEIR_OK);
    enum { N = 20 };
    weir_op ops[N];
    done d[N];
    memset(d, 0, sizeof(d));
    int64_t now = 1700000000000000;
    for (int i = 0; i < N; i++) {
        ops[i] = take("weir:test:shared", &r.lim);
        assert_int_equal(weir_store_session_submit(r.ss, &ops[i], 1, now, 0, on_done, &d[i]),
                         WEIR_OK);
        assert_int_equal(d[i].calls, 0); /* never from inside submit */
    }
    run_until(&r, d, N, 5000);
    int allowed = 0;
    for (int i = 0; i < N; i++) {
        assert_int_equal(d[i].status, WEIR_OK);
        assert_int_equal(ops[i].status, WEIR_OK);
        allowed += ops[i].result.allowed;
    }
    assert_int_equal(allowed, 3);
    weir_redis_stats after;
    assert_int_equal(weir_redis_stats_get(r.store, &after), WEIR_OK);
    assert_int_equal(after.batches - before.batches, N);
    assert_int_equal(after.calls - before.calls, 1); /* one round trip for all */
    assert_int_equal(after.connections, 1);
    /* SELECT 3 took: the key is in database 3 */
    redisContext *c = redis_connect(&r.srv);
    redisReply *rep = redisCommand(c, "SELECT 3");
    freeReplyObject(rep);
    rep = redisCommand(c, "EXISTS weir:test:shared");
    assert_int_equal(rep->integer, 1);
    freeReplyObject(rep);
    /* the library gone (FUNCTION FLUSH): it is loaded again and the next
     * call sent again */
    rep = redisCommand(c, "FUNCTION FLUSH");
    freeReplyObject(rep);
    redisFree(c);
    weir_op again = take("weir:test:other", &r.lim);
    done da = {0};
    assert_int_equal(weir_store_session_submit(r.ss, &again, 1, now, 0, on_done, &da), WEIR_OK);
    run_until(&r, &da, 1, 5000);
    assert_int_equal(da.status, WEIR_OK);
    assert_true(again.result.allowed);
    assert_int_equal(weir_redis_stats_get(r.store, &after), WEIR_OK);
    assert_int_equal(after.script_reloads, 1);
    rig_close(&r);
}

static void over_limit_cache_answers_denials(void **unused)
{
    (void)unused;
    rig r;
    weir_redis_options o;
    weir_redis_options_init(&o);
    o.timeout_us = 2000000;
    rig_open(&r, &o, false);
    connected(&r);
    weir_op op;
    done d;
    for (int i = 0; i < 4; i++) {
        op = take("weir:test:abuser", &r.lim);
        memset(&d, 0, sizeof(d));
        assert_int_equal(weir_store_session_submit(r.ss, &op, 1, 0, 0, on_done, &d), WEIR_OK);
        run_until(&r, &d, 1, 5000);
        assert_int_equal(op.result.allowed, i < 3);
    }
    int64_t retry = op.result.retry_after_us;
    assert_true(retry > 0);
    weir_redis_stats before, after;
    assert_int_equal(weir_redis_stats_get(r.store, &before), WEIR_OK);
    for (int i = 0; i < 10; i++) {
        op = take("weir:test:abuser", &r.lim);
        memset(&d, 0, sizeof(d));
        assert_int_equal(weir_store_session_submit(r.ss, &op, 1, 0, 0, on_done, &d), WEIR_OK);
        assert_int_equal(d.calls, 0);
        run_until(&r, &d, 1, 5000);
        assert_int_equal(d.status, WEIR_OK);
        assert_false(op.result.allowed);
        assert_int_equal(op.result.remaining, 0);
        assert_true(op.result.retry_after_us > 0 && op.result.retry_after_us <= retry);
    }
    assert_int_equal(weir_redis_stats_get(r.store, &after), WEIR_OK);
    assert_int_equal(after.cached - before.cached, 10);
    assert_int_equal(after.calls, before.calls); /* no round trip at all */
    rig_close(&r);
}

static void paused_redis_times_out_and_opens_the_breaker(void **unused)
{
    (void)unused;
    rig r;
    weir_redis_options o;
    weir_redis_options_init(&o);
    o.timeout_us = 20000;
    o.breaker_failures = 3;
    o.breaker_cooldown_us = 200000;
    rig_open(&r, &o, false);
    connected(&r);
    kill(r.srv.pid, SIGSTOP);
    weir_op ops[6];
    done d[6];
    memset(d, 0, sizeof(d));
    for (int i = 0; i < 6; i++) {
        char key[32];
        snprintf(key, sizeof(key), "weir:test:p%d", i);
        ops[i] = take(key, &r.lim);
        uint64_t t0 = uv_hrtime();
        assert_int_equal(weir_store_session_submit(r.ss, &ops[i], 1, 0, 0, on_done, &d[i]),
                         WEIR_OK);
        run_until(&r, &d[i], 1, 2000);
        /* answered within the timeout and a margin, never held */
        assert_true(uv_hrtime() - t0 < 500u * 1000000u);
        assert_true(d[i].status == WEIR_ETIMEDOUT || d[i].status == WEIR_EUNAVAIL);
    }
    weir_redis_stats st;
    assert_int_equal(weir_redis_stats_get(r.store, &st), WEIR_OK);
    assert_int_equal(st.breaker, WEIR_REDIS_OPEN);
    assert_true(st.timeouts >= 3);
    assert_true(st.rejected >= 1);
    kill(r.srv.pid, SIGCONT);
    /* after the cooldown a probe gets through and the breaker closes */
    uint64_t end = uv_hrtime() + 10000u * 1000000u;
    for (;;) {
        weir_op op = take("weir:test:back", &r.lim);
        done dd = {0};
        assert_int_equal(weir_store_session_submit(r.ss, &op, 1, 0, 0, on_done, &dd), WEIR_OK);
        run_until(&r, &dd, 1, 5000);
        if (dd.status == WEIR_OK)
            break;
        if (uv_hrtime() > end)
            fail_msg("Redis did not come back");
        uv_sleep(50);
    }
    assert_int_equal(weir_redis_stats_get(r.store, &st), WEIR_OK);
    assert_int_equal(st.breaker, WEIR_REDIS_CLOSED);
    rig_close(&r);
}

static void session_freed_with_calls_in_flight(void **unused)
{
    (void)unused;
    rig r;
    weir_redis_options o;
    weir_redis_options_init(&o);
    o.timeout_us = 5000000;
    rig_open(&r, &o, false);
    connected(&r);
    kill(r.srv.pid, SIGSTOP);
    weir_op op = take("weir:test:inflight", &r.lim);
    done d = {0};
    assert_int_equal(weir_store_session_submit(r.ss, &op, 1, 0, 0, on_done, &d), WEIR_OK);
    /* sent, not answered */
    for (int i = 0; i < 20; i++)
        uv_run(&r.loop, UV_RUN_NOWAIT);
    assert_int_equal(d.calls, 0);
    weir_store_session_free(r.ss);
    r.ss = NULL;
    assert_int_equal(d.calls, 1);
    assert_int_equal(d.status, WEIR_ECLOSED);
    kill(r.srv.pid, SIGCONT);
    rig_close(&r);
}

static void refuses_what_it_cannot_do(void **unused)
{
    (void)unused;
    weir_ctx *ctx;
    assert_int_equal(weir_ctx_new(NULL, &ctx), WEIR_OK);
    weir_redis_options o;
    weir_redis_options_init(&o);
    weir_store *s;
    assert_int_equal(weir_redis_store_new(ctx, &o, &s), WEIR_EINVAL); /* nowhere */
    o.host = "127.0.0.1";
    o.port = 1;
    o.user = "u"; /* a user without a password */
    assert_int_equal(weir_redis_store_new(ctx, &o, &s), WEIR_EINVAL);
    o.user = NULL;
    o.batch_window_us = o.timeout_us + 1;
    assert_int_equal(weir_redis_store_new(ctx, &o, &s), WEIR_EINVAL);
    o.batch_window_us = 0;
    assert_int_equal(weir_redis_store_new(ctx, &o, &s), WEIR_OK);
    /* nothing listens on port 1: unavailable, not a configuration error */
    char msg[256];
    assert_int_equal(weir_redis_ping(s, msg, sizeof(msg)), WEIR_EUNAVAIL);
    assert_non_null(strstr(msg, "cannot reach Redis"));
    /* outside a session, and on a loop without fd hooks */
    weir_op op;
    memset(&op, 0, sizeof(op));
    assert_int_equal(weir_store_submit(s, &op, 1, 0, 0, on_done, NULL), WEIR_EINVAL);
    weir_store_stats stats;
    assert_int_equal(weir_store_stats_get(s, &stats), WEIR_EALGO);
    uv_loop_t loop;
    uv_loop_init(&loop);
    weir_loop_adapter a = weir_libuv_adapter(&loop);
    a.io_start = NULL;
    weir_store_session *ss;
    assert_int_equal(weir_store_session_new(s, &a, &ss), WEIR_EINVAL);
    assert_int_equal(weir_store_session_new(s, NULL, &ss), WEIR_EINVAL);
    /* no kind past CHARGE */
    a = weir_libuv_adapter(&loop);
    assert_int_equal(weir_store_session_new(s, &a, &ss), WEIR_OK);
    weir_limit lim;
    weir_limit_spec spec = {.algorithm = WEIR_ALGO_FIXED_WINDOW, .limit = 5, .window_us = 1000000};
    assert_int_equal(weir_limit_compile(&spec, &lim), WEIR_OK);
    op = (weir_op){.key = "k", .key_len = 1, .limit = &lim, .hits = 1, .kind = (weir_op_kind)6};
    assert_int_equal(weir_store_session_submit(ss, &op, 1, 0, 0, on_done, NULL), WEIR_EINVAL);
    weir_store_session_free(ss);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    weir_store_free(s);
    weir_ctx_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(batches_share_one_call),
        cmocka_unit_test(over_limit_cache_answers_denials),
        cmocka_unit_test(paused_redis_times_out_and_opens_the_breaker),
        cmocka_unit_test(session_freed_with_calls_in_flight),
        cmocka_unit_test(refuses_what_it_cannot_do),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
