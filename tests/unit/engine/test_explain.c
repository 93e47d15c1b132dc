/*
 * test_explain.c - weir_engine_explain(): how each descriptor walks the
 * rules (exact, pattern, default), every way a walk reaches no limit
 * (unknown domain, key, value, too deep, too shallow, a whitelist), the
 * rules a decision's callback explains, refusals; and the explanation
 * rendered with a decision's verdicts (JSON and text): admitted, denied,
 * replaced, unlimited, and a descriptor's own limit.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api/api.h"
#include "rules_support.h"
#include "weir/weir.h"

static const char *const rules_yaml =
    "domain: api\n"
    "descriptors:\n"
    "  - key: remote_address\n" /* line 3 */
    "    rate_limit: {name: per_ip, unit: minute, requests_per_unit: 2}\n"
    "    descriptors:\n"
    "      - key: path\n"
    "        value: /login\n" /* line 7 */
    "        rate_limit: {unit: minute, requests_per_unit: 1}\n"
    "  - key: user\n"
    "    value: \"vip*\"\n" /* line 10 */
    "    descriptors:\n"
    "      - key: plan\n"
    "        rate_limit: {unit: second, requests_per_unit: 5}\n"
    "  - key: free\n" /* line 14 */
    "  - key: tier\n"
    "    value: gold\n"
    "    rate_limits:\n"
    "      - {name: big, unit: second, requests_per_unit: 9, replaces: [{name: small}]}\n"
    "      - {name: small, unit: second, requests_per_unit: 1}\n";

typedef struct world {
    weir_ctx *ctx;
    weir_store *store;
    weir_engine *engine;
    weir_engine_reader *reader;
} world;

static void open_world(world *w, const char *yaml)
{
    assert_int_equal(weir_ctx_new(NULL, &w->ctx), WEIR_OK);
    assert_int_equal(weir_memstore_new(w->ctx, NULL, &w->store), WEIR_OK);
    weir_engine_options eo = {.size = sizeof(eo), .store = w->store, .instances = 1};
    assert_int_equal(weir_engine_new(w->ctx, &eo, test_rules_parse(w->ctx, yaml), &w->engine),
                     WEIR_OK);
    assert_int_equal(weir_engine_reader_new(w->engine, &w->reader), WEIR_OK);
}

static void close_world(world *w)
{
    weir_engine_reader_free(w->reader);
    weir_engine_free(w->engine);
    weir_store_free(w->store);
    weir_ctx_free(w->ctx);
}

/* A request of one descriptor from "k=v" strings. */
typedef struct req1 {
    weir_entry e[4];
    weir_descriptor d;
    weir_request r;
} req1;

static void make_req(req1 *q, const char *domain, size_t n, const char *const *kv)
{
    memset(q, 0, sizeof(*q));
    for (size_t i = 0; i < n; i++) {
        const char *eq = strchr(kv[i], '=');
        q->e[i] = (weir_entry){kv[i], (size_t)(eq - kv[i]), eq + 1, strlen(eq + 1)};
    }
    q->d = (weir_descriptor){.entries = q->e, .n_entries = n};
    q->r = (weir_request){
        .domain = domain, .domain_len = strlen(domain), .descriptors = &q->d, .n_descriptors = 1};
}

static void copy_trace(void *arg, const weir_match_trace *t, size_t n)
{
    assert_int_equal(n, 1);
    *(weir_match_trace *)arg = t[0];
}

static weir_match_trace walk(world *w, const char *domain, size_t n, const char *const *kv)
{
    req1 q;
    make_req(&q, domain, n, kv);
    weir_match_trace t;
    memset(&t, 0xa5, sizeof(t));
    assert_int_equal(weir_engine_explain(w->reader, &q.r, copy_trace, &t), WEIR_OK);
    return t;
}

static uint32_t line_of(const weir_rule *r)
{
    const char *file;
    uint32_t line, column;
    weir_rule_location(r, &file, &line, &column);
    return line;
}

static void test_matches(void **unused)
{
    (void)unused;
    world w;
    open_world(&w, rules_yaml);
    const char *login[] = {"remote_address=10.0.0.1", "path=/login"};
    weir_match_trace t = walk(&w, "api", 2, login);
    assert_int_equal(t.miss, WEIR_MISS_NONE);
    assert_int_equal(t.depth, 2);
    assert_int_equal(t.levels[0].how, WEIR_MATCH_DEFAULT);
    assert_int_equal(line_of(t.levels[0].rule), 3);
    assert_int_equal(t.levels[1].how, WEIR_MATCH_EXACT);
    assert_int_equal(line_of(t.levels[1].rule), 6);

    const char *vip[] = {"user=vip7", "plan=x"};
    t = walk(&w, "api", 2, vip);
    assert_int_equal(t.miss, WEIR_MISS_NONE);
    assert_int_equal(t.levels[0].how, WEIR_MATCH_PATTERN);
    assert_int_equal(line_of(t.levels[0].rule), 9);
    assert_int_equal(t.levels[1].how, WEIR_MATCH_DEFAULT);
    close_world(&w);
}

static void test_misses(void **unused)
{
    (void)unused;
    world w;
    open_world(&w, rules_yaml);
    const char *one[] = {"remote_address=1"};
    weir_match_trace t = walk(&w, "nope", 1, one);
    assert_int_equal(t.miss, WEIR_MISS_DOMAIN);
    assert_int_equal(t.depth, 0);

    const char *key[] = {"remote_address=1", "verb=GET"};
    t = walk(&w, "api", 2, key);
    assert_int_equal(t.miss, WEIR_MISS_KEY);
    assert_int_equal(t.depth, 1); /* stopped at entry 1 */

    const char *value[] = {"user=bob"};
    t = walk(&w, "api", 1, value);
    assert_int_equal(t.miss, WEIR_MISS_VALUE);
    assert_int_equal(t.depth, 0);

    const char *deep[] = {"free=1", "more=2"};
    t = walk(&w, "api", 2, deep);
    assert_int_equal(t.miss, WEIR_MISS_TOO_DEEP);
    assert_int_equal(t.depth, 1);

    const char *shallow[] = {"user=vip1"};
    t = walk(&w, "api", 1, shallow);
    assert_int_equal(t.miss, WEIR_MISS_SHALLOW);
    assert_int_equal(t.depth, 1);

    const char *white[] = {"free=1"};
    t = walk(&w, "api", 1, white);
    assert_int_equal(t.miss, WEIR_MISS_NO_LIMIT);
    assert_int_equal(t.depth, 1);

    const char *unknown[] = {"nothing=here"};
    t = walk(&w, "api", 1, unknown);
    assert_int_equal(t.miss, WEIR_MISS_KEY);
    assert_int_equal(t.depth, 0);
    close_world(&w);
}

static void never(void *arg, const weir_match_trace *t, size_t n)
{
    (void)arg, (void)t, (void)n;
    fail();
}

static void test_refusals(void **unused)
{
    (void)unused;
    world w;
    open_world(&w, rules_yaml);
    const char *one[] = {"remote_address=1"};
    req1 q;
    make_req(&q, "api", 1, one);
    assert_int_equal(weir_engine_explain(NULL, &q.r, never, NULL), WEIR_EINVAL);
    assert_int_equal(weir_engine_explain(w.reader, NULL, never, NULL), WEIR_EINVAL);
    assert_int_equal(weir_engine_explain(w.reader, &q.r, NULL, NULL), WEIR_EINVAL);
    q.r.n_descriptors = 0;
    assert_int_equal(weir_engine_explain(w.reader, &q.r, never, NULL), WEIR_EINVAL);
    q.r.n_descriptors = 1;
    q.d.n_entries = 0;
    assert_int_equal(weir_engine_explain(w.reader, &q.r, never, NULL), WEIR_EINVAL);
    q.d.n_entries = 1;
    q.e[0].value = NULL;
    assert_int_equal(weir_engine_explain(w.reader, &q.r, never, NULL), WEIR_EINVAL);
    close_world(&w);
}

/* ------------------------------------------------------------ with a decision */

typedef struct told {
    weir_engine_reader *reader;
    const weir_request *req;
    weir_descriptor_status *st;
    weir_buf json, text;
    bool called;
} told;

static void render_both(void *arg, const weir_match_trace *traces, size_t n)
{
    told *t = arg;
    assert_int_equal(n, t->req->n_descriptors);
    weir_code overall = WEIR_CODE_OK;
    for (size_t i = 0; i < n; i++)
        if (t->st[i].code == WEIR_CODE_OVER_LIMIT)
            overall = WEIR_CODE_OVER_LIMIT;
    weir_api_decision dec = {overall, t->st, n};
    weir_api_render_explain(&t->json, t->req, &dec, traces);
    weir_api_explain_text(&t->text, t->req, &dec, traces);
    weir_buf_putc(&t->json, '\0');
    weir_buf_putc(&t->text, '\0');
}

/* Explained inside the decision's callback, as the daemon does. */
static void on_decided(void *arg, weir_code overall, weir_descriptor_status *st, size_t n)
{
    (void)overall, (void)st, (void)n;
    told *t = arg;
    t->called = true;
    assert_int_equal(weir_engine_explain(t->reader, t->req, render_both, t), WEIR_OK);
}

static void decide_told(world *w, const weir_request *req, told *t)
{
    memset(t, 0, sizeof(*t));
    t->reader = w->reader;
    t->req = req;
    t->st = calloc(req->n_descriptors, sizeof(*t->st));
    weir_buf_init(&t->json, 1 << 20);
    weir_buf_init(&t->text, 1 << 20);
    assert_int_equal(weir_engine_decide(w->reader, req, 1000000, t->st, on_decided, t), WEIR_OK);
    assert_true(t->called);
}

static void free_told(told *t)
{
    free(t->st);
    weir_buf_free(&t->json);
    weir_buf_free(&t->text);
}

static void test_verdicts(void **unused)
{
    (void)unused;
    world w;
    open_world(&w, rules_yaml);
    const char *login[] = {"remote_address=10.0.0.1", "path=/login"};
    req1 q;
    make_req(&q, "api", 2, login);
    told t;
    decide_told(&w, &q.r, &t);
    assert_non_null(strstr(t.json.p, "\"verdict\":\"admitted\",\"remaining\":0"));
    free_told(&t);
    decide_told(&w, &q.r, &t);
    assert_non_null(strstr(t.json.p, "\"matched\":\"default\""));
    assert_non_null(strstr(t.json.p, "\"matched\":\"exact\""));
    assert_non_null(strstr(t.json.p, "\"verdict\":\"denied\""));
    assert_non_null(strstr(t.text.p, "path=/login  matched exact: path=/login (test.yaml:6:9)"));
    assert_non_null(strstr(t.text.p, "-> denied, 0 left"));
    free_told(&t);

    /* the limit another names in replaces: not tested */
    const char *gold[] = {"tier=gold"};
    make_req(&q, "api", 1, gold);
    decide_told(&w, &q.r, &t);
    assert_non_null(strstr(t.json.p, "\"name\":\"big\""));
    assert_non_null(strstr(t.json.p, "\"name\":\"small\""));
    assert_non_null(strstr(t.json.p, "\"verdict\":\"replaced\""));
    assert_non_null(strstr(t.text.p, "limit small: 1 per second, fixed_window"));
    free_told(&t);

    /* no rule, but the descriptor's own limit */
    const char *orphan[] = {"other=1"};
    make_req(&q, "api", 1, orphan);
    weir_limit_override ovr = {3, WEIR_UNIT_HOUR};
    q.d.limit = &ovr;
    decide_told(&w, &q.r, &t);
    assert_non_null(strstr(t.json.p, "\"miss\":\"unknown_key\""));
    assert_non_null(strstr(t.json.p, "\"override\":true"));
    assert_non_null(
        strstr(t.json.p, "\"path\":\"override\",\"requests_per_unit\":3,\"unit\":\"hour\""));
    assert_non_null(strstr(t.text.p, "the request gives its own limit (override)"));
    free_told(&t);

    /* a whitelist: no limits, and why */
    const char *white[] = {"free=x"};
    make_req(&q, "api", 1, white);
    decide_told(&w, &q.r, &t);
    assert_non_null(strstr(t.json.p, "\"miss\":\"no_limit\",\"reason\":\"the rule reached has "
                                     "no rate_limit: always allowed\",\"limits\":[]"));
    free_told(&t);
    close_world(&w);
}

static void test_unlimited(void **unused)
{
    (void)unused;
    world w;
    open_world(&w, "domain: d\n"
                   "descriptors:\n"
                   "  - key: k\n"
                   "    rate_limit: {unlimited: true}\n");
    const char *one[] = {"k=v"};
    req1 q;
    make_req(&q, "d", 1, one);
    told t;
    decide_told(&w, &q.r, &t);
    assert_non_null(strstr(t.json.p, "\"verdict\":\"unlimited\""));
    assert_non_null(strstr(t.text.p, "-> unlimited"));
    free_told(&t);
    close_world(&w);
    /* a limit by window, not unit: its length, in milliseconds */
    open_world(&w, "domain: d\n"
                   "descriptors:\n"
                   "  - key: k\n"
                   "    rate_limit: {window: 90s, requests_per_unit: 4}\n");
    decide_told(&w, &q.r, &t);
    assert_non_null(strstr(t.json.p, "\"requests_per_unit\":4,\"window_ms\":90000,"));
    assert_null(strstr(t.json.p, "\"unit\""));
    assert_non_null(strstr(t.text.p, "4 per 90000 ms, fixed_window"));
    free_told(&t);
    close_world(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches),   cmocka_unit_test(test_misses),
        cmocka_unit_test(test_refusals),  cmocka_unit_test(test_verdicts),
        cmocka_unit_test(test_unlimited),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
