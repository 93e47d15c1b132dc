/*
 * sim.c - the simulator's trace decided by the real algorithms (sim.h):
 * the body read into a request, then each algorithm run over the
 * arrivals on a fresh state and rendered in turn.
 *
 * The in-window count follows `weir sim` (tools/sim.c): a FIFO of the
 * admitted (time, units) in the last window, the shaper's at the time its
 * requests proceed; concurrency leases are released hold_ms after their
 * acquire, at that time, before any later step.
 */
#include "sim.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "api/decode_internal.h"
#include "api/jsonw.h"
#include "weir/algo.h"

#define US_PER_MS 1000

typedef const weir_json_node jnode;

typedef struct arrival {
    int64_t t_us;
    uint64_t hits;
    uint32_t order; /* in the body, for a stable sort */
} arrival;

typedef struct sim_request {
    uint64_t limit;
    int64_t window_ms;
    uint64_t burst;
    uint32_t sub_windows;
    int64_t hold_ms;
    weir_algorithm algos[WEIR_ALGORITHM_COUNT];
    size_t n_algos;
    arrival *arrivals;
    size_t n;
    int64_t now_ms;
    uint32_t state_steps;
} sim_request;

/* One arrival's verdict under one algorithm. */
typedef struct verdict {
    bool allowed;
    uint64_t remaining;
    int64_t retry_after_us;
    int64_t delay_us;
    uint64_t in_window;
} verdict;

/* ------------------------------------------------------------ errors */

static bool refuse(sim_error *e, int status, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static bool refuse(sim_error *e, int status, const char *field, const char *fmt, ...)
{
    e->status = status;
    snprintf(e->field, sizeof(e->field), "%s", field);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->detail, sizeof(e->detail), fmt, ap);
    va_end(ap);
    return false;
}

void sim_render_problem(weir_buf *out, const sim_error *err)
{
    weir_api_render_error_at(out, err->status, err->detail, err->field);
}

/* ------------------------------------------------------------ reading */

/* The members of object @obj by @names (NULL: absent or null); unknown and
 * repeated members refused. @where prefixes the field ("limit."). */
static bool members(sim_error *e, jnode *object, const char *where, const char *const *names,
                    size_t n, jnode **out)
{
    bool twice;
    jnode *key = weir_api_dec_members(object, names, n, out, &twice);
    if (!key)
        return true;
    char q[WEIR_API_QUOTE_MAX + 4], field[WEIR_API_QUOTE_MAX + 40];
    weir_api_dec_quote(q, key->s, key->n);
    snprintf(field, sizeof(field), "%s%s", where, q);
    return refuse(e, 400, field, twice ? "member '%s' given twice" : "unknown member '%s'", q);
}

/* An integer @min .. @max written without a fraction or an exponent. */
static bool get_int(sim_error *e, jnode *v, const char *field, uint64_t min, uint64_t max,
                    uint64_t *out)
{
    uint64_t x = 0;
    bool negative = v->type == WEIR_JSON_NUMBER && v->s[0] == '-';
    if (v->type != WEIR_JSON_NUMBER || !v->integer ||
        !weir_api_dec_decimal(v->s + negative, v->n - negative, max, &x) || (negative && x) ||
        x < min)
        return refuse(e, 400, field, "%s must be an integer from %llu to %llu", field,
                      (unsigned long long)min, (unsigned long long)max);
    *out = x;
    return true;
}

static bool read_limit(sim_error *e, jnode *v, sim_request *r)
{
    static const char *const names[] = {"requests_per_unit", "window_ms", "burst", "sub_windows",
                                        "hold_ms"};
    jnode *m[5];
    if (!v)
        return refuse(e, 400, "limit",
                      "limit is required: {\"requests_per_unit\": N, "
                      "\"window_ms\": MS}");
    if (v->type != WEIR_JSON_OBJECT)
        return refuse(e, 400, "limit", "limit must be an object");
    if (!members(e, v, "limit.", names, 5, m))
        return false;
    if (!m[0] || !m[1])
        return refuse(e, 400, m[0] ? "limit.window_ms" : "limit.requests_per_unit",
                      "limit.%s is required", m[0] ? "window_ms" : "requests_per_unit");
    uint64_t x = 0;
    if (!get_int(e, m[0], "limit.requests_per_unit", 0, SIM_MAX_LIMIT, &r->limit) ||
        !get_int(e, m[1], "limit.window_ms", 1, SIM_MAX_WINDOW_MS, &x))
        return false;
    r->window_ms = (int64_t)x;
    if (m[2] && !get_int(e, m[2], "limit.burst", 0, SIM_MAX_LIMIT, &r->burst))
        return false;
    if (m[3]) {
        if (!get_int(e, m[3], "limit.sub_windows", 1, SIM_MAX_SUB_WINDOWS, &x))
            return false;
        r->sub_windows = (uint32_t)x;
        if (((uint64_t)r->window_ms * US_PER_MS) % x != 0)
            return refuse(e, 400, "limit.sub_windows",
                          "limit.sub_windows must divide the window (%lld ms) into whole "
                          "microseconds",
                          (long long)r->window_ms);
    }
    r->hold_ms = r->window_ms / 10 ? r->window_ms / 10 : 1;
    if (m[4]) {
        if (!get_int(e, m[4], "limit.hold_ms", 1, SIM_MAX_WINDOW_MS, &x))
            return false;
        r->hold_ms = (int64_t)x;
    }
    return true;
}

static bool read_algorithms(sim_error *e, jnode *v, sim_request *r)
{
    if (!v) {
        for (size_t i = 0; i < WEIR_ALGORITHM_COUNT; i++)
            r->algos[i] = (weir_algorithm)(i + 1);
        r->n_algos = WEIR_ALGORITHM_COUNT;
        return true;
    }
    if (v->type != WEIR_JSON_ARRAY || v->n == 0 || v->n > WEIR_ALGORITHM_COUNT)
        return refuse(e, 400, "algorithms",
                      "algorithms must be an array of 1 to %d algorithm names",
                      WEIR_ALGORITHM_COUNT);
    jnode *item = v + 1;
    for (uint32_t i = 0; i < v->n; i++, item = weir_json_next(item)) {
        char field[32], q[WEIR_API_QUOTE_MAX + 4];
        snprintf(field, sizeof(field), "algorithms[%u]", i);
        if (item->type != WEIR_JSON_STRING)
            return refuse(e, 400, field, "%s must be a string", field);
        weir_algorithm a = (weir_algorithm)0;
        for (int k = 1; k <= WEIR_ALGORITHM_COUNT; k++)
            if (weir_api_dec_key_is(item->s, item->n, weir_algorithm_name((weir_algorithm)k)))
                a = (weir_algorithm)k;
        weir_api_dec_quote(q, item->s, item->n);
        if (!a)
            return refuse(e, 400, field,
                          "unknown algorithm '%s': token_bucket, gcra, leaky_bucket, "
                          "leaky_bucket_shaper, fixed_window, sliding_window_log, "
                          "sliding_window_counter or concurrency",
                          q);
        for (size_t k = 0; k < r->n_algos; k++)
            if (r->algos[k] == a)
                return refuse(e, 400, field, "algorithm '%s' given twice", q);
        r->algos[r->n_algos++] = a;
    }
    return true;
}

static bool read_arrival(sim_error *e, jnode *v, uint32_t i, arrival *out)
{
    static const char *const names[] = {"t_ms", "hits"};
    char field[40], where[32];
    snprintf(where, sizeof(where), "arrivals[%u].", i);
    snprintf(field, sizeof(field), "arrivals[%u]", i);
    uint64_t t = 0, hits = 1;
    if (v->type == WEIR_JSON_NUMBER) {
        if (!get_int(e, v, field, 0, SIM_MAX_T_MS, &t))
            return false;
    } else if (v->type == WEIR_JSON_OBJECT) {
        jnode *m[2];
        if (!members(e, v, where, names, 2, m))
            return false;
        snprintf(field, sizeof(field), "arrivals[%u].t_ms", i);
        if (!m[0])
            return refuse(e, 400, field, "%s is required", field);
        if (!get_int(e, m[0], field, 0, SIM_MAX_T_MS, &t))
            return false;
        snprintf(field, sizeof(field), "arrivals[%u].hits", i);
        if (m[1] && !get_int(e, m[1], field, 1, SIM_MAX_HITS, &hits))
            return false;
    } else {
        return refuse(e, 400, field,
                      "%s must be a time in milliseconds or {\"t_ms\": T, \"hits\": N}", field);
    }
    *out = (arrival){(int64_t)t * US_PER_MS, hits, i};
    return true;
}

static int by_time(const void *a, const void *b)
{
    const arrival *x = a, *y = b;
    if (x->t_us != y->t_us)
        return x->t_us < y->t_us ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

static bool read_arrivals(sim_error *e, jnode *v, sim_request *r)
{
    if (!v)
        return refuse(e, 400, "arrivals", "arrivals is required (an array, [] for none)");
    if (v->type != WEIR_JSON_ARRAY)
        return refuse(e, 400, "arrivals", "arrivals must be an array");
    if (v->n > SIM_MAX_ARRIVALS)
        return refuse(e, 400, "arrivals", "%u arrivals, more than the %u allowed: Reset", v->n,
                      SIM_MAX_ARRIVALS);
    r->n = v->n;
    if (r->n && !(r->arrivals = malloc(r->n * sizeof(arrival))))
        return refuse(e, 500, "", "out of memory");
    jnode *item = v + 1;
    for (uint32_t i = 0; i < v->n; i++, item = weir_json_next(item))
        if (!read_arrival(e, item, i, &r->arrivals[i]))
            return false;
    if (r->n)
        qsort(r->arrivals, r->n, sizeof(arrival), by_time);
    return true;
}

static bool read_request(sim_error *e, weir_json *j, const char *body, size_t len, sim_request *r)
{
    if (len > SIM_MAX_BODY_BYTES)
        return refuse(e, 413, "", "the body is %zu bytes, more than the %zu allowed", len,
                      SIM_MAX_BODY_BYTES);
    weir_json_error je;
    weir_json_result jr = weir_json_parse(j, body, len, 0, &je);
    if (jr == WEIR_JSON_NOMEM)
        return refuse(e, 500, "", "out of memory");
    if (jr != WEIR_JSON_OK) {
        unsigned line, column;
        weir_json_where(body, je.end, &line, &column);
        return refuse(e, 400, "", "malformed JSON at line %u, column %u: %s", line, column,
                      je.reason);
    }
    jnode *top = &j->nodes[0];
    if (top->type != WEIR_JSON_OBJECT)
        return refuse(e, 400, "", "the body must be a JSON object");
    static const char *const names[] = {"limit", "algorithms", "arrivals", "now_ms", "state_steps"};
    jnode *m[5];
    if (!members(e, top, "", names, 5, m) || !read_limit(e, m[0], r) ||
        !read_algorithms(e, m[1], r) || !read_arrivals(e, m[2], r))
        return false;
    uint64_t x = 0;
    r->now_ms = r->n ? r->arrivals[r->n - 1].t_us / US_PER_MS : 0;
    if (m[3]) {
        if (!get_int(e, m[3], "now_ms", 0, SIM_MAX_T_MS, &x))
            return false;
        r->now_ms = (int64_t)x;
    }
    r->state_steps = SIM_DEFAULT_STATE_STEPS;
    if (m[4]) {
        if (!get_int(e, m[4], "state_steps", 0, SIM_MAX_STATE_STEPS, &x))
            return false;
        r->state_steps = (uint32_t)x;
    }
    /* every algorithm must take the limit before anything is rendered */
    for (size_t i = 0; i < r->n_algos; i++) {
        weir_limit_spec spec = {.algorithm = r->algos[i],
                                .limit = r->limit,
                                .window_us = r->window_ms * US_PER_MS,
                                .burst = r->burst,
                                .sub_windows =
                                    r->algos[i] == WEIR_ALGO_SLIDING_COUNTER ? r->sub_windows : 0};
        weir_limit lim;
        weir_status st = weir_limit_compile(&spec, &lim);
        if (st != WEIR_OK)
            return refuse(e, 400, "limit", "%s refuses this limit: %s",
                          weir_algorithm_name(r->algos[i]), weir_strerror(st));
    }
    return true;
}

/* ------------------------------------------------------------ writing */

static void put_ms_up(weir_buf *b, int64_t us)
{
    if (us == WEIR_NEVER)
        weir_buf_puts(b, "null");
    else
        weir_buf_put_i64(b, us <= 0 ? 0 : us / US_PER_MS + (us % US_PER_MS != 0));
}

static void put_view(weir_buf *b, const weir_state_view *v)
{
    obj o = obj_open(b);
    obj_key(&o, "numbers");
    weir_buf_putc(b, '{');
    for (uint32_t i = 0; i < v->n_numbers; i++) {
        if (i)
            weir_buf_putc(b, ',');
        put_cstr(b, v->numbers[i].name);
        weir_buf_putc(b, ':');
        weir_buf_put_i64(b, v->numbers[i].value);
    }
    weir_buf_putc(b, '}');
    obj_key(&o, "table");
    if (!v->table) {
        weir_buf_puts(b, "null");
    } else {
        obj t = obj_open(b);
        obj_key(&t, "name");
        put_cstr(b, v->table);
        obj_key(&t, "columns");
        weir_buf_putc(b, '[');
        for (uint32_t c = 0; c < v->n_columns; c++) {
            if (c)
                weir_buf_putc(b, ',');
            put_cstr(b, v->columns[c]);
        }
        weir_buf_putc(b, ']');
        obj_key(&t, "total");
        weir_buf_put_u64(b, v->table_rows);
        obj_key(&t, "rows");
        weir_buf_putc(b, '[');
        for (uint32_t r = 0; r < v->n_rows; r++) {
            weir_buf_puts(b, r ? ",[" : "[");
            for (uint32_t c = 0; c < v->n_columns; c++) {
                if (c)
                    weir_buf_putc(b, ',');
                weir_buf_put_i64(b, v->rows[r][c]);
            }
            weir_buf_putc(b, ']');
        }
        weir_buf_putc(b, ']');
        obj_close(&t);
    }
    obj_close(&o);
}

/* One column of the verdicts: @which picks the field. */
enum column { C_ALLOWED, C_REMAINING, C_RETRY, C_DELAY, C_IN_WINDOW };

static void put_column(weir_buf *b, const verdict *v, size_t n, enum column which)
{
    weir_buf_putc(b, '[');
    for (size_t i = 0; i < n; i++) {
        if (i)
            weir_buf_putc(b, ',');
        switch (which) {
        case C_ALLOWED:
            put_bool(b, v[i].allowed);
            break;
        case C_REMAINING:
            weir_buf_put_u64(b, v[i].remaining);
            break;
        case C_RETRY:
            put_ms_up(b, v[i].retry_after_us);
            break;
        case C_DELAY:
            put_ms_up(b, v[i].delay_us);
            break;
        case C_IN_WINDOW:
            if (v[i].allowed)
                weir_buf_put_u64(b, v[i].in_window);
            else
                weir_buf_puts(b, "null");
            break;
        }
    }
    weir_buf_putc(b, ']');
}

/* ------------------------------------------------------------ running */

/* A FIFO over a caller's array of n slots: every arrival enters at most
 * once, so it never wraps. */
typedef struct queue {
    int64_t *t;
    uint64_t *v;
    size_t head, tail;
} queue;

/* The units admitted in (at - window, at] once @units more are admitted
 * at @at (times come in order). */
static uint64_t window_add(queue *q, uint64_t *sum, int64_t at, uint64_t units, int64_t window_us)
{
    while (q->head < q->tail && q->t[q->head] <= at - window_us)
        *sum -= q->v[q->head++];
    q->t[q->tail] = at;
    q->v[q->tail++] = units;
    *sum += units;
    return *sum;
}

/* Concurrency: gives back the leases whose hold ended by @now_us, each at
 * the time it ended (one that timed out first is gone already). */
static weir_status release_due(const weir_limit *lim, void *state, queue *rel, int64_t now_us)
{
    while (rel->head < rel->tail && rel->t[rel->head] <= now_us) {
        weir_result r;
        weir_status st = weir_release(lim, state, rel->t[rel->head], rel->v[rel->head], &r);
        if (st != WEIR_OK && st != WEIR_ENOLEASE)
            return st;
        rel->head++;
    }
    return WEIR_OK;
}

typedef struct run_mem {
    verdict *v;
    int64_t *t[2];
    uint64_t *u[2];
} run_mem;

static bool put_state(weir_buf *b, const weir_limit *lim, const void *state, int64_t at_us)
{
    weir_state_view view;
    if (weir_state_describe(lim, state, at_us, &view) != WEIR_OK)
        return false;
    put_view(b, &view);
    return true;
}

/* Runs @r's arrivals through @algo and renders its result object. */
static weir_status run_one(const sim_request *r, weir_algorithm algo, run_mem *mem, weir_buf *b)
{
    weir_limit_spec spec = {.algorithm = algo,
                            .limit = r->limit,
                            .window_us = r->window_ms * US_PER_MS,
                            .burst = r->burst,
                            .sub_windows = algo == WEIR_ALGO_SLIDING_COUNTER ? r->sub_windows : 0};
    weir_limit lim;
    weir_status st = weir_limit_compile(&spec, &lim);
    if (st != WEIR_OK)
        return st;
    /* states are 8-byte aligned: calloc's are */
    void *state = calloc(1, weir_state_size(&lim) ? weir_state_size(&lim) : 8);
    if (!state)
        return WEIR_ENOMEM;
    queue win = {mem->t[0], mem->u[0], 0, 0}, rel = {mem->t[1], mem->u[1], 0, 0};
    uint64_t in_window = 0, accepted = 0, max_in_window = 0;
    int64_t hold_us = r->hold_ms * US_PER_MS;
    size_t first_state = r->n > r->state_steps ? r->n - r->state_steps : 0;

    obj o = obj_open(b);
    obj_key(&o, "algorithm");
    put_cstr(b, weir_algorithm_name(algo));
    obj_key(&o, "limit");
    weir_buf_put_u64(b, lim.limit);
    obj_key(&o, "burst");
    weir_buf_put_u64(b, lim.burst);
    obj_key(&o, "steps");
    weir_buf_putc(b, '[');
    for (size_t i = 0; i < r->n && st == WEIR_OK; i++) {
        const arrival *a = &r->arrivals[i];
        if (algo == WEIR_ALGO_CONCURRENCY)
            st = release_due(&lim, state, &rel, a->t_us);
        weir_result res;
        if (st == WEIR_OK)
            st = weir_step(&lim, state, a->t_us, a->hits, &res);
        if (st != WEIR_OK)
            break;
        verdict *v = &mem->v[i];
        *v = (verdict){res.allowed, res.remaining, res.retry_after_us, res.delay_us, 0};
        if (res.allowed) {
            accepted++;
            v->in_window =
                window_add(&win, &in_window, a->t_us + res.delay_us, a->hits, lim.window_us);
            if (v->in_window > max_in_window)
                max_in_window = v->in_window;
            if (algo == WEIR_ALGO_CONCURRENCY) {
                rel.t[rel.tail] = a->t_us + hold_us;
                rel.v[rel.tail++] = res.lease;
            }
        }
        if (i >= first_state) {
            weir_buf_puts(b, i > first_state ? ",{\"i\":" : "{\"i\":");
            weir_buf_put_u64(b, i);
            weir_buf_puts(b, ",\"t_ms\":");
            weir_buf_put_i64(b, a->t_us / US_PER_MS);
            weir_buf_puts(b, ",\"state\":");
            if (!put_state(b, &lim, state, a->t_us))
                st = WEIR_EINVAL;
            weir_buf_putc(b, '}');
        }
    }
    weir_buf_putc(b, ']');
    int64_t now_us = r->now_ms * US_PER_MS;
    if (st == WEIR_OK && algo == WEIR_ALGO_CONCURRENCY)
        st = release_due(&lim, state, &rel, now_us);
    obj_key(&o, "state");
    if (st == WEIR_OK && !put_state(b, &lim, state, now_us))
        st = WEIR_EINVAL;
    free(state);
    if (st != WEIR_OK)
        return st;

    obj_key(&o, "accepted");
    weir_buf_put_u64(b, accepted);
    obj_key(&o, "denied");
    weir_buf_put_u64(b, r->n - accepted);
    obj_key(&o, "max_in_window");
    weir_buf_put_u64(b, max_in_window);
    obj_key(&o, "allowed");
    put_column(b, mem->v, r->n, C_ALLOWED);
    obj_key(&o, "remaining");
    put_column(b, mem->v, r->n, C_REMAINING);
    obj_key(&o, "retry_after_ms");
    put_column(b, mem->v, r->n, C_RETRY);
    obj_key(&o, "delay_ms");
    put_column(b, mem->v, r->n, C_DELAY);
    obj_key(&o, "in_window");
    put_column(b, mem->v, r->n, C_IN_WINDOW);
    obj_close(&o);
    return WEIR_OK;
}

static void put_limit(weir_buf *b, const sim_request *r)
{
    obj o = obj_open(b);
    obj_key(&o, "requests_per_unit");
    weir_buf_put_u64(b, r->limit);
    obj_key(&o, "window_ms");
    weir_buf_put_i64(b, r->window_ms);
    obj_key(&o, "burst");
    if (r->burst)
        weir_buf_put_u64(b, r->burst);
    else
        weir_buf_puts(b, "null");
    obj_key(&o, "sub_windows");
    if (r->sub_windows)
        weir_buf_put_u64(b, r->sub_windows);
    else
        weir_buf_puts(b, "null");
    obj_key(&o, "hold_ms");
    weir_buf_put_i64(b, r->hold_ms);
    obj_close(&o);
}

static bool run(const sim_request *r, weir_buf *b, sim_error *e)
{
    size_t n = r->n ? r->n : 1;
    run_mem mem = {malloc(n * sizeof(verdict)),
                   {malloc(n * sizeof(int64_t)), malloc(n * sizeof(int64_t))},
                   {malloc(n * sizeof(uint64_t)), malloc(n * sizeof(uint64_t))}};
    weir_status st = WEIR_ENOMEM;
    if (mem.v && mem.t[0] && mem.t[1] && mem.u[0] && mem.u[1]) {
        st = WEIR_OK;
        obj o = obj_open(b);
        obj_key(&o, "limit");
        put_limit(b, r);
        obj_key(&o, "now_ms");
        weir_buf_put_i64(b, r->now_ms);
        obj_key(&o, "t_ms");
        weir_buf_putc(b, '[');
        for (size_t i = 0; i < r->n; i++) {
            if (i)
                weir_buf_putc(b, ',');
            weir_buf_put_i64(b, r->arrivals[i].t_us / US_PER_MS);
        }
        weir_buf_puts(b, "]");
        obj_key(&o, "hits");
        weir_buf_putc(b, '[');
        for (size_t i = 0; i < r->n; i++) {
            if (i)
                weir_buf_putc(b, ',');
            weir_buf_put_u64(b, r->arrivals[i].hits);
        }
        weir_buf_putc(b, ']');
        obj_key(&o, "results");
        weir_buf_putc(b, '[');
        for (size_t i = 0; i < r->n_algos && st == WEIR_OK; i++) {
            if (i)
                weir_buf_putc(b, ',');
            st = run_one(r, r->algos[i], &mem, b);
        }
        weir_buf_putc(b, ']');
        obj_close(&o);
    }
    free(mem.v);
    for (int i = 0; i < 2; i++) {
        free(mem.t[i]);
        free(mem.u[i]);
    }
    if (st == WEIR_OK && !weir_buf_ok(b))
        st = WEIR_ENOMEM;
    if (st == WEIR_ENOMEM)
        return refuse(e, 500, "", "out of memory");
    if (st != WEIR_OK)
        return refuse(e, 500, "", "the simulation failed: %s", weir_strerror(st));
    return true;
}

bool sim_answer(weir_json *parser, const char *body, size_t len, weir_buf *out, sim_error *err)
{
    sim_request r;
    memset(&r, 0, sizeof(r));
    memset(err, 0, sizeof(*err));
    bool ok = read_request(err, parser, body, len, &r) && run(&r, out, err);
    free(r.arrivals);
    return ok;
}
