/*
 * test_call.c - a decision in flight in the daemon (daemon/call.c), on a
 * real libuv loop and the deferred test store: it completes exactly once,
 * from the loop; a deadline that passes first answers instead and the
 * decision's late completion is then ignored; a call whose connection
 * closed answers nothing, and the connection is freed with its last call;
 * a refused request runs nothing; the request is the call's own copy.
 */
#define _GNU_SOURCE /* libuv headers need the POSIX types */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "call.h"
#include "deferred_store.h"
#include "rules_support.h"
#include "weir/adapters/libuv.h"

static const char *rules = "domain: api\n"
                           "descriptors:\n"
                           "  - key: user\n"
                           "    rate_limit: {unit: minute, requests_per_unit: 3}\n";

typedef struct world {
    weir_ctx *ctx;
    weir_store *store;
    weir_engine *engine;
    weir_store_session *session;
    server srv;
    worker w;
    listener l;
    conn cn;
    int freed;
} world;

typedef struct seen {
    int decided, expired, done;
    weir_code overall;
    uint64_t remaining;
    char user[16];
} seen;

static void no_kick(conn *c)
{
    (void)c;
}

static const proto test_proto = {.name = "test", .kick = no_kick};

static void count_free(conn *c)
{
    world *wd = (void *)((char *)c - offsetof(world, cn));
    wd->freed++;
}

static void open_world(world *wd, const char *spec)
{
    memset(wd, 0, sizeof(*wd));
    assert_int_equal(weir_ctx_new(NULL, &wd->ctx), WEIR_OK);
    weir_store *mem;
    assert_int_equal(weir_memstore_new(wd->ctx, NULL, &mem), WEIR_OK);
    weir_deferred_options o;
    assert_int_equal(weir_deferred_options_parse(spec, &o), WEIR_OK);
    assert_int_equal(weir_deferred_store_new(wd->ctx, mem, &o, &wd->store), WEIR_OK);
    weir_engine_options eo = {.size = sizeof(eo), .store = wd->store};
    assert_int_equal(weir_engine_new(wd->ctx, &eo, test_rules_parse(wd->ctx, rules), &wd->engine),
                     WEIR_OK);
    worker *w = &wd->w;
    assert_int_equal(uv_loop_init(&w->loop), 0);
    weir_loop_adapter a = weir_libuv_adapter(&w->loop);
    assert_int_equal(weir_store_session_new(wd->store, &a, &wd->session), WEIR_OK);
    assert_int_equal(weir_engine_reader_new_session(wd->engine, wd->session, &w->reader), WEIR_OK);
    uv_timer_init(&w->loop, &w->deadlines);
    w->deadlines.data = w;
    w->srv = &wd->srv;
    wd->l.w = w;
    wd->l.proto = &test_proto;
    wd->cn.w = w;
    wd->cn.l = &wd->l;
    wd->cn.free_fn = count_free;
}

static void close_world(world *wd)
{
    worker *w = &wd->w;
    weir_engine_reader_free(w->reader);
    weir_store_session_free(wd->session);
    uv_close((uv_handle_t *)&w->deadlines, NULL);
    uv_run(&w->loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&w->loop), 0);
    for (unsigned i = 0; i < w->n_call_blocks; i++)
        free(w->call_blocks[i]);
    weir_engine_free(wd->engine);
    weir_store_free(wd->store);
    weir_ctx_free(wd->ctx);
}

static void on_decided(call *c, weir_code overall, const weir_descriptor_status *st, size_t n)
{
    seen *s = *(seen **)c->data;
    assert_int_equal(n, 1);
    s->decided++;
    s->overall = overall;
    s->remaining = st[0].remaining;
    /* the request is the call's own */
    const weir_entry *e = &c->req.descriptors[0].entries[0];
    snprintf(s->user, sizeof(s->user), "%.*s", (int)e->value_len, e->value);
}

static void on_expired(call *c)
{
    (*(seen **)c->data)->expired++;
}

static void on_done(call *c)
{
    (*(seen **)c->data)->done++;
}

static const call_ops ops = {on_decided, on_expired, on_done, NULL};

/* A call for user @user, started with @timeout_ms; returns the status. */
static weir_status start(world *wd, const char *user, seen *s, int64_t timeout_ms)
{
    char value[16];
    snprintf(value, sizeof(value), "%s", user);
    weir_entry e = {"user", 4, value, strlen(value)};
    weir_descriptor d = {&e, 1, false, 0, NULL};
    weir_request req = {"api", 3, &d, 1, 0, 0};
    call *c = call_new(&wd->cn, &ops, &req, sizeof(seen *), 0);
    assert_non_null(c);
    memcpy(c->data, &s, sizeof(s));
    memset(value, 'X', sizeof(value)); /* the caller's bytes go: the call has its copy */
    weir_status st = call_decide(c, &wd->w, 0, timeout_ms);
    if (st != WEIR_OK)
        call_free(c);
    return st;
}

static void completes_once_from_the_loop(void **unused)
{
    (void)unused;
    world wd;
    open_world(&wd, "order=reverse");
    seen a = {0}, b = {0};
    assert_int_equal(start(&wd, "ann", &a, 1000), WEIR_OK);
    assert_int_equal(start(&wd, "ann", &b, 1000), WEIR_OK);
    assert_int_equal(wd.cn.calls, 2);
    assert_int_equal(a.decided + b.decided, 0); /* not before the loop runs */
    uv_run(&wd.w.loop, UV_RUN_DEFAULT);
    assert_int_equal(a.decided, 1);
    assert_int_equal(b.decided, 1);
    assert_int_equal(a.done + b.done, 2);
    assert_int_equal(a.expired + b.expired, 0);
    assert_string_equal(a.user, "ann");
    /* reversed: the second decision was made first */
    assert_int_equal(b.remaining, 2);
    assert_int_equal(a.remaining, 1);
    assert_int_equal(wd.cn.calls, 0);
    assert_int_equal(wd.freed, 0);
    close_world(&wd);
}

static void deadline_answers_first(void **unused)
{
    (void)unused;
    world wd;
    open_world(&wd, "delay_ms=150");
    seen a = {0}, b = {0};
    assert_int_equal(start(&wd, "bo", &a, 20), WEIR_OK);   /* expires */
    assert_int_equal(start(&wd, "bo", &b, 5000), WEIR_OK); /* decided */
    uv_run(&wd.w.loop, UV_RUN_DEFAULT);
    assert_int_equal(a.expired, 1);
    assert_int_equal(a.decided, 0); /* its late decision answers nothing */
    assert_int_equal(a.done, 1);
    assert_int_equal(b.expired, 0);
    assert_int_equal(b.decided, 1);
    assert_int_equal(b.remaining, 1); /* a's decision still charged */
    assert_int_equal(wd.cn.calls, 0);
    close_world(&wd);
}

static void closed_connection_answers_nothing(void **unused)
{
    (void)unused;
    world wd;
    open_world(&wd, "");
    seen a = {0};
    assert_int_equal(start(&wd, "cy", &a, 1000), WEIR_OK);
    wd.cn.closed = true; /* its handles are closed already: only the call holds it */
    assert_int_equal(wd.freed, 0);
    uv_run(&wd.w.loop, UV_RUN_DEFAULT);
    assert_int_equal(a.decided + a.expired, 0);
    assert_int_equal(a.done, 1);
    assert_int_equal(wd.freed, 1); /* with its last call */
    close_world(&wd);
}

static void refused_runs_nothing(void **unused)
{
    (void)unused;
    world wd;
    open_world(&wd, "");
    seen a = {0};
    weir_descriptor d = {NULL, 0, false, 0, NULL};
    weir_request req = {"api", 3, &d, 1, 0, 0};
    call *c = call_new(&wd.cn, &ops, &req, sizeof(seen *), 0);
    assert_non_null(c);
    seen *p = &a;
    memcpy(c->data, &p, sizeof(p));
    assert_int_equal(call_decide(c, &wd.w, 0, 1000), WEIR_EINVAL);
    assert_int_equal(weir_engine_refusal(wd.w.reader).code, WEIR_REFUSAL_NO_ENTRIES);
    call_free(c);
    uv_run(&wd.w.loop, UV_RUN_DEFAULT);
    assert_int_equal(a.decided + a.expired + a.done, 0);
    assert_int_equal(wd.cn.calls, 0);
    close_world(&wd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(completes_once_from_the_loop),
        cmocka_unit_test(deadline_answers_first),
        cmocka_unit_test(closed_connection_answers_nothing),
        cmocka_unit_test(refused_runs_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
