/*
 * test_redis_sentinel.c - the Redis store on Sentinel, the parts that need
 * no sentinel: the parsers of what sentinels and masters answer (each
 * field at its cap), the breaker letting a new master be probed at once,
 * and the store with no sentinel to ask (or a plain Redis where one
 * should be): its start-up check and a session failing fast.
 */
#define _GNU_SOURCE /* what uv.h needs */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <uv.h>

#include <cmocka.h>

#include "redis_support.h"
#include "store/redis/breaker.h"
#include "store/redis/sentinel/sentinel.h"
#include "weir/adapters/libuv.h"
#include "weir/weir.h"

/* ------------------------------------------------------------ replies */

static redisReply str(const char *s)
{
    redisReply r;
    memset(&r, 0, sizeof(r));
    r.type = REDIS_REPLY_STRING;
    r.str = (char *)s;
    r.len = strlen(s);
    return r;
}

static redisReply array(redisReply **elems, size_t n)
{
    redisReply r;
    memset(&r, 0, sizeof(r));
    r.type = REDIS_REPLY_ARRAY;
    r.element = elems;
    r.elements = n;
    return r;
}

static int addr_of(const char *host, const char *port, weir__redis_seed *out)
{
    redisReply h = str(host), p = str(port);
    redisReply *e[2] = {&h, &p};
    redisReply r = array(e, 2);
    char err[64] = "";
    return weir__sentinel_addr_parse(&r, out, err, sizeof(err));
}

static void master_address_replies(void **unused)
{
    (void)unused;
    weir__redis_seed a;
    assert_int_equal(addr_of("10.0.0.5", "6380", &a), 1);
    assert_string_equal(a.host, "10.0.0.5");
    assert_int_equal(a.port, 6380);
    assert_int_equal(addr_of("::1", "65535", &a), 1);
    assert_string_equal(a.host, "::1");
    char text[WEIR_REDIS_ADDR_BYTES];
    weir__sentinel_addr_format(&a, text, sizeof(text));
    assert_string_equal(text, "[::1]:65535");

    /* a host at the cap and one past it */
    char host[WEIR_REDIS_MAX_FIELD + 2];
    memset(host, 'h', sizeof(host) - 1);
    host[WEIR_REDIS_MAX_FIELD] = '\0';
    assert_int_equal(addr_of(host, "1", &a), 1);
    host[WEIR_REDIS_MAX_FIELD] = 'h';
    host[WEIR_REDIS_MAX_FIELD + 1] = '\0';
    assert_int_equal(addr_of(host, "1", &a), -1);

    const char *bad[][2] = {{"", "6379"},  {"h", ""},     {"h", "0"},      {"h", "65536"},
                            {"h", "63a9"}, {"h", "-1"},   {"h", "000001"}, {"a b", "1"},
                            {"a\nb", "1"}, {"\x7f", "1"}, {"h", " 1"},     {"h", "99999"}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (addr_of(bad[i][0], bad[i][1], &a) != -1)
            fail_msg("accepted [%s, %s]", bad[i][0], bad[i][1]);

    /* the sentinel does not know the name */
    redisReply nil;
    memset(&nil, 0, sizeof(nil));
    nil.type = REDIS_REPLY_NIL;
    char err[64] = "";
    assert_int_equal(weir__sentinel_addr_parse(&nil, &a, err, sizeof(err)), 0);
    /* an error keeps its text; shapes that are no address are refused */
    redisReply e = str("ERR unknown command 'SENTINEL'");
    e.type = REDIS_REPLY_ERROR;
    assert_int_equal(weir__sentinel_addr_parse(&e, &a, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "unknown command"));
    redisReply h = str("h"), p = str("1"), x = str("x");
    redisReply *three[3] = {&h, &p, &x};
    redisReply r3 = array(three, 3);
    assert_int_equal(weir__sentinel_addr_parse(&r3, &a, err, sizeof(err)), -1);
    redisReply n;
    memset(&n, 0, sizeof(n));
    n.type = REDIS_REPLY_INTEGER;
    redisReply *num[2] = {&h, &n};
    redisReply rn = array(num, 2);
    assert_int_equal(weir__sentinel_addr_parse(&rn, &a, err, sizeof(err)), -1);
    assert_int_equal(weir__sentinel_addr_parse(NULL, &a, err, sizeof(err)), -1);
}

static bool switched(const char *msg, const char *name, weir__redis_seed *out)
{
    return weir__sentinel_switch_parse(msg, strlen(msg), name, out);
}

static void switch_master_messages(void **unused)
{
    (void)unused;
    weir__redis_seed a;
    assert_true(switched("mymaster 127.0.0.1 6379 127.0.0.1 6380", "mymaster", &a));
    assert_string_equal(a.host, "127.0.0.1");
    assert_int_equal(a.port, 6380);
    assert_true(switched("m ::1 1 fe80::2 65535", "m", &a));
    assert_string_equal(a.host, "fe80::2");

    const char *bad[] = {
        "mymaster2 127.0.0.1 6379 127.0.0.1 6380", /* another master */
        "mymaste 127.0.0.1 6379 127.0.0.1 6380",     "mymaster 127.0.0.1 6379 127.0.0.1",
        "mymaster 127.0.0.1 6379 127.0.0.1 6380 x",  "mymaster 127.0.0.1 6379 127.0.0.1 6380 ",
        "mymaster  127.0.0.1 6379 127.0.0.1 6380",   "mymaster 127.0.0.1 6379 127.0.0.1 0",
        "mymaster 127.0.0.1 6379 127.0.0.1 65536",   "mymaster 127.0.0.1 x 127.0.0.1 6380",
        "mymaster 127.0.0.1 6379 127.0.\x01.1 6380", "",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (switched(bad[i], "mymaster", &a))
            fail_msg("accepted '%s'", bad[i]);
    /* a NUL inside is no part of a host */
    static const char nul[] = "mymaster 127.0.0.1 6379 127.0\0.0.1 6380";
    assert_false(weir__sentinel_switch_parse(nul, sizeof(nul) - 1, "mymaster", &a));

    /* the message's cap: a host at the field cap fits, anything longer
     * than the cap is refused before it is read */
    char msg[WEIR__SENTINEL_MAX_MESSAGE + 64];
    char host[WEIR_REDIS_MAX_FIELD + 1];
    memset(host, 'h', WEIR_REDIS_MAX_FIELD);
    host[WEIR_REDIS_MAX_FIELD] = '\0';
    snprintf(msg, sizeof(msg), "m %s 1 %s 2", host, host);
    assert_true(switched(msg, "m", &a));
    assert_int_equal(strlen(a.host), WEIR_REDIS_MAX_FIELD);
    memset(msg, 'x', sizeof(msg));
    memcpy(msg, "m ", 2);
    assert_false(weir__sentinel_switch_parse(msg, WEIR__SENTINEL_MAX_MESSAGE + 1, "m", &a));
}

static int sub_reply(const char *kind, const char *chan, const char *payload, weir__redis_seed *out)
{
    redisReply k = str(kind), c = str(chan), p = str(payload);
    redisReply *e[3] = {&k, &c, &p};
    redisReply r = array(e, 3);
    return weir__sentinel_switch_reply(&r, "mymaster", out);
}

static void subscription_replies(void **unused)
{
    (void)unused;
    weir__redis_seed a;
    assert_int_equal(sub_reply("message", "+switch-master", "mymaster h 1 g 2", &a), 1);
    assert_string_equal(a.host, "g");
    assert_int_equal(a.port, 2);
    /* the subscription's confirmation: its third element a number */
    redisReply k = str("subscribe"), c = str("+switch-master"), n;
    memset(&n, 0, sizeof(n));
    n.type = REDIS_REPLY_INTEGER;
    n.integer = 1;
    redisReply *e[3] = {&k, &c, &n};
    redisReply conf = array(e, 3);
    assert_int_equal(weir__sentinel_switch_reply(&conf, "mymaster", &a), 0);
    /* another master's failover */
    assert_int_equal(sub_reply("message", "+switch-master", "other h 1 g 2", &a), 0);
    assert_int_equal(sub_reply("message", "+switch-master", "mymaster2 h 1 g 2", &a), 0);
    /* ours, but unreadable; another channel; not a message at all */
    assert_int_equal(sub_reply("message", "+switch-master", "mymaster h 1 g", &a), -1);
    assert_int_equal(sub_reply("message", "+sdown", "mymaster h 1 g 2", &a), -1);
    redisReply *two[2] = {&k, &c};
    redisReply short_ = array(two, 2);
    assert_int_equal(weir__sentinel_switch_reply(&short_, "mymaster", &a), -1);
    assert_int_equal(weir__sentinel_switch_reply(NULL, "mymaster", &a), -1);
}

static int role_of(redisReply *first, char *role, size_t cap)
{
    redisReply *e[1] = {first};
    redisReply r = array(e, first ? 1 : 0);
    return weir__sentinel_role_parse(&r, role, cap);
}

static void role_replies(void **unused)
{
    (void)unused;
    char role[40] = "";
    redisReply m = str("master");
    assert_int_equal(role_of(&m, role, sizeof(role)), 1);
    redisReply s = str("slave");
    assert_int_equal(role_of(&s, role, sizeof(role)), 0);
    assert_string_equal(role, "slave");
    redisReply odd = str("a \"role\" longer than any Redis has, and longer still");
    assert_int_equal(role_of(&odd, role, sizeof(role)), 0);
    assert_int_equal(strlen(role), 32);
    assert_null(strpbrk(role, " \""));
    assert_int_equal(role_of(NULL, role, sizeof(role)), -1);
    redisReply err = str("NOPERM this user has no permissions to run the 'role' command");
    err.type = REDIS_REPLY_ERROR;
    assert_int_equal(weir__sentinel_role_parse(&err, role, sizeof(role)), -1);
}

/* ------------------------------------------------------------ the breaker */

static void a_new_master_is_probed_at_once(void **unused)
{
    (void)unused;
    breaker b;
    weir__breaker_init(&b, 1, 1000000, 5000000);
    bool probe;
    assert_true(weir__breaker_failure(&b, 100, false));
    assert_false(weir__breaker_allow(&b, 200, &probe));
    weir__breaker_retry_now(&b, 300);
    assert_true(weir__breaker_allow(&b, 300, &probe));
    assert_true(probe);
    /* only one probe; a closed breaker is left as it is */
    assert_false(weir__breaker_allow(&b, 301, &probe));
    weir__breaker_success(&b, true);
    weir__breaker_retry_now(&b, 400);
    assert_int_equal(weir__breaker_state(&b), WEIR_REDIS_CLOSED);
}

/* ------------------------------------------------------------ the store */

static weir_store *sentinel_store(weir_ctx *ctx, const char *url)
{
    weir_redis_options o;
    weir_redis_options_init(&o);
    static char buf[1024];
    char err[128];
    assert_int_equal(weir_redis_url_parse(url, &o, buf, sizeof(buf), err, sizeof(err)), WEIR_OK);
    o.connect_timeout_us = 200000;
    weir_store *s;
    assert_int_equal(weir_redis_store_new(ctx, &o, &s), WEIR_OK);
    return s;
}

static void on_done(void *arg, weir_op *ops, size_t n, weir_status status)
{
    (void)ops, (void)n;
    *(weir_status *)arg = status;
}

static void no_sentinel_to_ask(void **unused)
{
    (void)unused;
    weir_ctx *ctx;
    assert_int_equal(weir_ctx_new(NULL, &ctx), WEIR_OK);
    /* port 1: nothing listens */
    weir_store *s = sentinel_store(ctx, "redis+sentinel://:pw@mymaster@127.0.0.1:1,127.0.0.1:1");
    char msg[512];
    assert_int_equal(weir_redis_ping(s, msg, sizeof(msg)), WEIR_EUNAVAIL);
    assert_non_null(strstr(msg, "no sentinel answers; cannot reach sentinel 127.0.0.1:1"));
    weir_redis_sentinel_stats st = {.size = sizeof(st)};
    assert_int_equal(weir_redis_sentinel_stats_get(s, &st), WEIR_OK);
    assert_string_equal(st.master, "");
    st.size = sizeof(st) - 1;
    assert_int_equal(weir_redis_sentinel_stats_get(s, &st), WEIR_EINVAL);

    /* a session: batches fail at once while no master is known, and the
     * session goes with its sentinel connections still trying */
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    weir_loop_adapter a = weir_libuv_adapter(&loop);
    weir_store_session *ss;
    assert_int_equal(weir_store_session_new(s, &a, &ss), WEIR_OK);
    weir_limit_spec spec = {
        .algorithm = WEIR_ALGO_TOKEN_BUCKET, .limit = 3, .window_us = 3600 * 1000000LL};
    weir_limit lim;
    assert_int_equal(weir_limit_compile(&spec, &lim), WEIR_OK);
    weir_op op;
    memset(&op, 0, sizeof(op));
    op.key = "k";
    op.key_len = 1;
    op.limit = &lim;
    op.hits = 1;
    op.kind = WEIR_OP_TAKE;
    weir_status done = WEIR_OK + 1; /* not yet */
    uint64_t t0 = uv_hrtime();
    assert_int_equal(weir_store_session_submit(ss, &op, 1, 0, 0, on_done, &done), WEIR_OK);
    while (done == WEIR_OK + 1)
        uv_run(&loop, UV_RUN_ONCE);
    assert_int_equal(done, WEIR_EUNAVAIL);
    assert_true(uv_hrtime() - t0 < 100u * 1000000u);
    /* the sentinels tried, and failed */
    while (uv_hrtime() - t0 < 300u * 1000000u)
        uv_run(&loop, UV_RUN_NOWAIT);
    st.size = sizeof(st);
    assert_int_equal(weir_redis_sentinel_stats_get(s, &st), WEIR_OK);
    assert_true(st.sentinel_errors >= 1);
    weir_store_session_free(ss);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
    weir_store_free(s);

    /* the sentinel counters are a sentinel store's only */
    weir_redis_options o;
    weir_redis_options_init(&o);
    o.host = "127.0.0.1";
    assert_int_equal(weir_redis_store_new(ctx, &o, &s), WEIR_OK);
    assert_int_equal(weir_redis_sentinel_stats_get(s, &st), WEIR_EINVAL);
    weir_store_free(s);
    /* a sentinel store needs a master name */
    o.topology = WEIR_REDIS_SENTINEL;
    o.seeds = "127.0.0.1:26379";
    assert_int_equal(weir_redis_store_new(ctx, &o, &s), WEIR_EINVAL);
    weir_ctx_free(ctx);
}

static void a_redis_that_is_no_sentinel(void **unused)
{
    (void)unused;
    redis_server srv;
    redis_start(&srv, NULL, NULL);
    weir_ctx *ctx;
    assert_int_equal(weir_ctx_new(NULL, &ctx), WEIR_OK);
    char url[128];
    snprintf(url, sizeof(url), "redis+sentinel://mymaster@127.0.0.1:%d", srv.port);
    weir_store *s = sentinel_store(ctx, url);
    char msg[512];
    /* a configuration error, with Redis's answer */
    assert_int_equal(weir_redis_ping(s, msg, sizeof(msg)), WEIR_EINVAL);
    assert_non_null(strstr(msg, "refused"));
    assert_non_null(strstr(msg, "unknown command"));
    weir_store_free(s);
    weir_ctx_free(ctx);
    redis_stop(&srv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(master_address_replies),         cmocka_unit_test(switch_master_messages),
        cmocka_unit_test(subscription_replies),           cmocka_unit_test(role_replies),
        cmocka_unit_test(a_new_master_is_probed_at_once), cmocka_unit_test(no_sentinel_to_ask),
        cmocka_unit_test(a_redis_that_is_no_sentinel),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
