/*
 * fuzz_sim_json.c - fuzzes the simulator's endpoint (daemon/admin/sim.h):
 * any bytes as the body of POST /admin/v1/sim, decided and rendered.
 *
 * An accepted body must give a JSON object the project's parser reads,
 * with one result per algorithm asked for, each with one verdict per
 * arrival, accepted + denied = arrivals; and the same body again must give
 * the same bytes (nothing is kept between two requests). A refusal must
 * carry a status of 400, 413 or 500, a NUL-terminated field and a detail,
 * and render as a JSON problem. A broken invariant aborts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "admin/sim.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
    if (!ok)
        abort();
}

static weir_json parser, reader;
static weir_buf out, again;

static void cleanup(void)
{
    weir_json_release(&parser);
    weir_json_release(&reader);
    weir_buf_free(&out);
    weir_buf_free(&again);
}

/* The member @name of object @obj, or NULL. */
static const weir_json_node *member(const weir_json_node *obj, const char *name)
{
    const weir_json_node *key = obj + 1;
    for (uint32_t i = 0; i < obj->n; i++, key = weir_json_next(key + 1))
        if (key->n == strlen(name) && memcmp(key->s, name, key->n) == 0)
            return key + 1;
    return NULL;
}

static uint64_t number(const weir_json_node *v)
{
    check(v && v->type == WEIR_JSON_NUMBER && v->integer && v->s[0] != '-');
    return strtoull(v->s, NULL, 10);
}

static void check_answer(void)
{
    check(weir_buf_ok(&out));
    weir_json_error je;
    check(weir_json_parse(&reader, out.p, out.len, 0, &je) == WEIR_JSON_OK);
    const weir_json_node *top = &reader.nodes[0];
    check(top->type == WEIR_JSON_OBJECT);
    const weir_json_node *t = member(top, "t_ms"), *results = member(top, "results");
    check(t && t->type == WEIR_JSON_ARRAY && t->n <= SIM_MAX_ARRIVALS);
    check(results && results->type == WEIR_JSON_ARRAY);
    check(results->n >= 1 && results->n <= 8);
    const weir_json_node *r = results + 1;
    for (uint32_t i = 0; i < results->n; i++, r = weir_json_next(r)) {
        check(r->type == WEIR_JSON_OBJECT);
        check(number(member(r, "accepted")) + number(member(r, "denied")) == t->n);
        static const char *const columns[] = {"allowed", "remaining", "retry_after_ms", "delay_ms",
                                              "in_window"};
        for (size_t c = 0; c < sizeof(columns) / sizeof(columns[0]); c++) {
            const weir_json_node *col = member(r, columns[c]);
            check(col && col->type == WEIR_JSON_ARRAY && col->n == t->n);
        }
        const weir_json_node *steps = member(r, "steps");
        check(steps && steps->type == WEIR_JSON_ARRAY && steps->n <= SIM_MAX_STATE_STEPS);
        const weir_json_node *state = member(r, "state");
        check(state && state->type == WEIR_JSON_OBJECT && member(state, "numbers"));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool registered;
    if (!registered) {
        atexit(cleanup);
        weir_buf_init(&out, (size_t)256 << 20);
        weir_buf_init(&again, (size_t)256 << 20);
        registered = true;
    }
    const char *body = size ? (const char *)data : NULL;
    sim_error err;
    weir_buf_clear(&out);
    if (!sim_answer(&parser, body, size, &out, &err)) {
        check(err.status == 400 || err.status == 413 || err.status == 500);
        check(memchr(err.field, '\0', sizeof(err.field)) != NULL);
        check(memchr(err.detail, '\0', sizeof(err.detail)) != NULL && err.detail[0]);
        weir_buf_clear(&out);
        sim_render_problem(&out, &err);
        weir_json_error je;
        check(weir_buf_ok(&out) &&
              weir_json_parse(&reader, out.p, out.len, 0, &je) == WEIR_JSON_OK);
        return 0;
    }
    check_answer();
    weir_buf_clear(&again);
    check(sim_answer(&parser, body, size, &again, &err));
    check(again.len == out.len && memcmp(again.p, out.p, out.len) == 0);
    return 0;
}
