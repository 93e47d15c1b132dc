/*
 * test_redis_parts.c - the Redis store's parts that need no Redis: the URL
 * parser, the circuit breaker (on times the test gives) and the local
 * over-limit cache.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "store/redis/breaker.h"
#include "store/redis/deny_cache.h"
#include "store/redis/redis_internal.h"
#include "weir/weir.h"

/* ------------------------------------------------------------ URLs */

typedef struct parsed {
    weir_status st;
    weir_redis_options o;
    char buf[2048];
    char err[256];
} parsed;

static parsed *parse(const char *url)
{
    static parsed p;
    memset(&p, 0, sizeof(p));
    weir_redis_options_init(&p.o);
    p.st = weir_redis_url_parse(url, &p.o, p.buf, sizeof(p.buf), p.err, sizeof(p.err));
    return &p;
}

static void test_url_tcp(void **state)
{
    (void)state;
    parsed *p = parse("redis://127.0.0.1");
    assert_int_equal(p->st, WEIR_OK);
    assert_string_equal(p->o.host, "127.0.0.1");
    assert_int_equal(p->o.port, 6379);
    assert_int_equal(p->o.db, 0);
    assert_null(p->o.password);
    assert_null(p->o.user);
    assert_null(p->o.unix_path);

    p = parse("redis://:s3cret@localhost:6380/7");
    assert_int_equal(p->st, WEIR_OK);
    assert_string_equal(p->o.host, "localhost");
    assert_int_equal(p->o.port, 6380);
    assert_int_equal(p->o.db, 7);
    assert_string_equal(p->o.password, "s3cret");
    assert_null(p->o.user);

    /* an ACL user; '@' and ':' in the password, percent-encoded or not */
    p = parse("redis://weir:p%40ss:w@rd@10.0.0.1:1");
    assert_int_equal(p->st, WEIR_OK);
    assert_string_equal(p->o.user, "weir");
    assert_string_equal(p->o.password, "p@ss:w@rd");
    assert_string_equal(p->o.host, "10.0.0.1");
    assert_int_equal(p->o.port, 1);

    p = parse("redis://[::1]:6390/2");
    assert_int_equal(p->st, WEIR_OK);
    assert_string_equal(p->o.host, "::1");
    assert_int_equal(p->o.port, 6390);
    assert_int_equal(p->o.db, 2);
}

static void test_url_unix(void **state)
{
    (void)state;
    parsed *p = parse("redis+unix:///run/redis.sock");
    assert_int_equal(p->st, WEIR_OK);
    assert_string_equal(p->o.unix_path, "/run/redis.sock");
    assert_null(p->o.host);
    p = parse("redis+unix://:pw@/tmp/r.sock?db=4");
    assert_int_equal(p->st, WEIR_OK);
    assert_string_equal(p->o.unix_path, "/tmp/r.sock");
    assert_string_equal(p->o.password, "pw");
    assert_int_equal(p->o.db, 4);
}

static void test_url_errors(void **state)
{
    (void)state;
    static const struct {
        const char *url, *says;
    } bad[] = {
        {"rediss://127.0.0.1", "TLS"},
        {"redis://127.0.0.1:0", "port"},
        {"redis://127.0.0.1:65536", "port"},
        {"redis://127.0.0.1:x", "port"},
        {"redis://", "no host"},
        {"redis://user@host", "password"},
        {"redis://:%zz@h", "escaped"},
        {"redis://:%4@h", "escaped"},
        {"redis://:%00@h", "escaped"},
        {"redis://[::1", "IPv6"},
        {"redis://[::1]x", "IPv6"},
        {"redis://h/db", "database"},
        {"redis://h/1000001", "database"},
        {"redis+unix://relative.sock", "absolute"},
        {"redis+unix:///s.sock?database=1", "db=N"},
        {"http://h", "not a Redis URL"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        parsed *p = parse(bad[i].url);
        if (p->st != WEIR_EPARSE || !strstr(p->err, bad[i].says))
            fail_msg("%s: %s (%s)", bad[i].url, weir_status_name(p->st), p->err);
    }
    /* a field past the cap */
    char url[600] = "redis://:";
    memset(url + 9, 'x', 300);
    strcpy(url + 309, "@h");
    assert_int_equal(parse(url)->st, WEIR_EPARSE);
    /* the message never holds the password */
    parsed *p = parse("redis://:hunter2@h:99999");
    assert_int_equal(p->st, WEIR_EPARSE);
    assert_null(strstr(p->err, "hunter2"));
}

static void cluster_and_sentinel_urls(void **unused)
{
    (void)unused;
    parsed *p = parse("redis+cluster://:s3cret@127.0.0.1:7001,[::1]:7002,node3");
    assert_int_equal(p->st, WEIR_OK);
    assert_int_equal(p->o.topology, WEIR_REDIS_CLUSTER);
    assert_string_equal(p->o.seeds, "127.0.0.1:7001,[::1]:7002,node3:6379");
    assert_string_equal(p->o.host, "127.0.0.1");
    assert_int_equal(p->o.port, 7001);
    assert_string_equal(p->o.password, "s3cret");
    weir__redis_seed seeds[WEIR_REDIS_MAX_SEEDS];
    assert_int_equal(weir__redis_seed_split(p->o.seeds, seeds, WEIR_REDIS_MAX_SEEDS), 3);
    assert_string_equal(seeds[1].host, "::1");
    assert_int_equal(seeds[1].port, 7002);
    assert_string_equal(seeds[2].host, "node3");

    p = parse("redis+sentinel://app:pw@mymaster@10.0.0.1,10.0.0.2:5000/2");
    assert_int_equal(p->st, WEIR_OK);
    assert_int_equal(p->o.topology, WEIR_REDIS_SENTINEL);
    assert_string_equal(p->o.master_name, "mymaster");
    assert_string_equal(p->o.seeds, "10.0.0.1:26379,10.0.0.2:5000");
    assert_string_equal(p->o.user, "app");
    assert_string_equal(p->o.password, "pw");
    assert_int_equal(p->o.db, 2);
    p = parse("redis+sentinel://mymaster@h");
    assert_int_equal(p->st, WEIR_OK);
    assert_null(p->o.password);
    assert_string_equal(p->o.seeds, "h:26379");

    /* a single server's URL leaves the topology single */
    p = parse("redis://h:1");
    assert_int_equal(p->o.topology, WEIR_REDIS_SINGLE);
    assert_null(p->o.seeds);

    const char *bad[] = {
        "redis+cluster://",
        "redis+cluster://h:1/0",
        "redis+cluster://h:1,,h:2",
        "redis+cluster://h:0",
        "redis+cluster://h:1:2",
        "redis+cluster://[::1:7000",
        "redis+cluster://a:1,b:1,c:1,d:1,e:1,f:1,g:1,h:1,i:1,j:1,k:1,l:1,m:1,n:1,o:1,p:1,q:1",
        "redis+sentinel://h:26379",
        "redis+sentinel://@h:26379",
        "redis+sentinel://m@h:26379/x",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        p = parse(bad[i]);
        assert_int_equal(p->st, WEIR_EPARSE);
        assert_true(p->err[0] != '\0');
    }
    /* the password never shows in a message */
    p = parse("redis+cluster://:hunter2@h:1,,");
    assert_int_equal(p->st, WEIR_EPARSE);
    assert_null(strstr(p->err, "hunter2"));
}

/* ------------------------------------------------------------ the breaker */

static void test_breaker_opens_after_failures_in_window(void **state)
{
    (void)state;
    breaker b;
    weir__breaker_init(&b, 3, 1000, 500);
    bool probe;
    assert_true(weir__breaker_allow(&b, 0, &probe));
    assert_false(probe);
    assert_false(weir__breaker_failure(&b, 10, false));
    assert_false(weir__breaker_failure(&b, 20, false));
    /* a success in between ends the run */
    weir__breaker_success(&b, false);
    assert_false(weir__breaker_failure(&b, 30, false));
    assert_false(weir__breaker_failure(&b, 40, false));
    assert_int_equal(weir__breaker_state(&b), WEIR_REDIS_CLOSED);
    assert_true(weir__breaker_failure(&b, 50, false));
    assert_int_equal(weir__breaker_state(&b), WEIR_REDIS_OPEN);
    assert_int_equal(atomic_load(&b.opened), 1);
    /* open: nothing goes through until the cooldown */
    assert_false(weir__breaker_allow(&b, 100, &probe));
    assert_false(weir__breaker_allow(&b, 549, &probe));
    /* then one probe, and only one */
    assert_true(weir__breaker_allow(&b, 550, &probe));
    assert_true(probe);
    assert_int_equal(weir__breaker_state(&b), WEIR_REDIS_HALF_OPEN);
    assert_false(weir__breaker_allow(&b, 560, &probe));
    /* the probe fails: open again, for a whole cooldown */
    assert_true(weir__breaker_failure(&b, 600, true));
    assert_int_equal(weir__breaker_state(&b), WEIR_REDIS_OPEN);
    assert_false(weir__breaker_allow(&b, 1099, &probe));
    assert_true(weir__breaker_allow(&b, 1100, &probe));
    assert_true(probe);
    /* the probe succeeds: closed */
    weir__breaker_success(&b, true);
    assert_int_equal(weir__breaker_state(&b), WEIR_REDIS_CLOSED);
    assert_true(weir__breaker_allow(&b, 1101, &probe));
    assert_false(probe);
}

static void test_breaker_window_forgets_old_failures(void **state)
{
    (void)state;
    breaker b;
    weir__breaker_init(&b, 3, 1000, 500);
    assert_false(weir__breaker_failure(&b, 0, false));
    assert_false(weir__breaker_failure(&b, 10, false));
    /* past the window: a new count */
    assert_false(weir__breaker_failure(&b, 2000, false));
    assert_false(weir__breaker_failure(&b, 2010, false));
    assert_int_equal(weir__breaker_state(&b), WEIR_REDIS_CLOSED);
    assert_true(weir__breaker_failure(&b, 2020, false));
}

static void test_breaker_lost_probe(void **state)
{
    (void)state;
    breaker b;
    weir__breaker_init(&b, 1, 1000, 500);
    bool probe;
    assert_true(weir__breaker_failure(&b, 0, false));
    assert_true(weir__breaker_allow(&b, 500, &probe));
    assert_true(probe);
    /* the probe never reports (its session went): after a cooldown in
     * half-open, another caller probes */
    assert_false(weir__breaker_allow(&b, 900, &probe));
    assert_true(weir__breaker_allow(&b, 1000, &probe));
    assert_true(probe);
}

/* ------------------------------------------------------------ the cache */

static weir_limit limit_of(weir_algorithm algo, uint64_t limit)
{
    weir_limit_spec spec = {.algorithm = algo, .limit = limit, .window_us = 1000000};
    weir_limit l;
    assert_int_equal(weir_limit_compile(&spec, &l), WEIR_OK);
    return l;
}

static weir_op op_of(const char *key, const weir_limit *l, uint64_t hits, weir_op_kind kind)
{
    weir_op op;
    memset(&op, 0, sizeof(op));
    op.key = key;
    op.key_len = strlen(key);
    op.limit = l;
    op.hits = hits;
    op.kind = kind;
    return op;
}

static void test_deny_cache(void **state)
{
    (void)state;
    weir_ctx *ctx;
    assert_int_equal(weir_ctx_new(NULL, &ctx), WEIR_OK);
    deny_cache *c;
    assert_int_equal(weir__deny_cache_new(ctx, 16, &c), WEIR_OK);
    weir_limit tb = limit_of(WEIR_ALGO_TOKEN_BUCKET, 10);
    weir_limit conc = limit_of(WEIR_ALGO_CONCURRENCY, 10);

    /* a denial of cost 1 until 1000 + 400 */
    weir_op ops[2] = {op_of("k1", &tb, 1, WEIR_OP_TAKE), op_of("k2", &tb, 1, WEIR_OP_TAKE)};
    ops[0].result = (weir_result){false, 10, 0, 900, 400, 0, 0};
    ops[1].result = (weir_result){true, 10, 3, 700, 0, 0, 0};
    weir__deny_cache_note(c, ops, 2, 1000);

    weir_op q[2] = {op_of("k1", &tb, 1, WEIR_OP_TAKE), op_of("k1", &tb, 0, WEIR_OP_CHECK)};
    assert_true(weir__deny_cache_answer(c, q, 2, 1100));
    for (int i = 0; i < 2; i++) {
        assert_int_equal(q[i].status, WEIR_OK);
        assert_false(q[i].result.allowed);
        assert_int_equal(q[i].result.remaining, 0);
        assert_int_equal(q[i].result.limit, 10);
        assert_int_equal(q[i].result.retry_after_us, 300);
        assert_int_equal(q[i].result.reset_after_us, 800);
    }
    /* not past T */
    assert_false(weir__deny_cache_answer(c, q, 1, 1400));
    /* a refund that gave nothing back keeps the denial; one that did
     * drops it */
    weir_op back = op_of("k1", &tb, 1, WEIR_OP_REFUND);
    back.result = (weir_result){false, 10, 0, 900, 0, 0, 0};
    weir__deny_cache_note(c, &back, 1, 1100);
    assert_true(weir__deny_cache_answer(c, q, 2, 1100));
    back.result.allowed = true;
    back.result.remaining = 1;
    weir__deny_cache_note(c, &back, 1, 1100);
    assert_false(weir__deny_cache_answer(c, q, 2, 1100));
    weir__deny_cache_note(c, ops, 2, 1000);
    assert_true(weir__deny_cache_answer(c, q, 2, 1100));
    /* a batch with a key that was admitted goes to Redis */
    weir_op mixed[2] = {op_of("k1", &tb, 1, WEIR_OP_TAKE), op_of("k2", &tb, 1, WEIR_OP_TAKE)};
    assert_false(weir__deny_cache_answer(c, mixed, 2, 1100));
    /* a cost above 1 is not cached or answered */
    weir_op big = op_of("k1", &tb, 2, WEIR_OP_TAKE);
    assert_false(weir__deny_cache_answer(c, &big, 1, 1100));
    weir_op big_denied = op_of("k3", &tb, 5, WEIR_OP_TAKE);
    big_denied.result = (weir_result){false, 10, 2, 900, 400, 0, 0};
    weir__deny_cache_note(c, &big_denied, 1, 1000);
    big_denied.hits = 1;
    assert_false(weir__deny_cache_answer(c, &big_denied, 1, 1100));
    /* nor the concurrency limiter (a release may come before T), nor a
     * cost that can never fit (retry_after -1) */
    weir_op cop = op_of("k4", &conc, 1, WEIR_OP_TAKE);
    cop.result = (weir_result){false, 10, 0, 900, 400, 0, 0};
    weir__deny_cache_note(c, &cop, 1, 1000);
    assert_false(weir__deny_cache_answer(c, &cop, 1, 1100));
    /* nor a limit that asked to stay out (over_limit_cache: false) */
    weir_op out = op_of("k6", &tb, 1, WEIR_OP_TAKE);
    out.flags = WEIR_OP_NO_LOCAL_CACHE;
    out.result = (weir_result){false, 10, 0, 900, 400, 0, 0};
    weir__deny_cache_note(c, &out, 1, 1000);
    assert_false(weir__deny_cache_answer(c, &out, 1, 1100));
    out.flags = 0; /* not noted either */
    assert_false(weir__deny_cache_answer(c, &out, 1, 1100));
    weir_op never = op_of("k5", &tb, 1, WEIR_OP_TAKE);
    never.result = (weir_result){false, 10, 0, 900, WEIR_NEVER, 0, 0};
    weir__deny_cache_note(c, &never, 1, 1000);
    assert_false(weir__deny_cache_answer(c, &never, 1, 1100));
    weir__deny_cache_free(ctx, c);

    /* slots 0: no cache, nothing answered */
    assert_int_equal(weir__deny_cache_new(ctx, 0, &c), WEIR_OK);
    assert_null(c);
    weir__deny_cache_note(c, ops, 1, 1000);
    assert_false(weir__deny_cache_answer(c, q, 1, 1100));
    weir_ctx_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_url_tcp),
        cmocka_unit_test(test_url_unix),
        cmocka_unit_test(test_url_errors),
        cmocka_unit_test(cluster_and_sentinel_urls),
        cmocka_unit_test(test_breaker_opens_after_failures_in_window),
        cmocka_unit_test(test_breaker_window_forgets_old_failures),
        cmocka_unit_test(test_breaker_lost_probe),
        cmocka_unit_test(test_deny_cache),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
