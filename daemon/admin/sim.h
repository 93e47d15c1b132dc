/*
 * sim.h - POST /admin/v1/sim: a trace of arrivals decided by weir's own
 * algorithms, for the simulator page (web/sim.*, docs/SIMULATOR.md).
 *
 * Every algorithm asked for starts from a fresh state and decides the
 * arrivals in time order with weir_step(); the answer is each arrival's
 * verdict and, read by weir_state_describe(), the state after the last
 * steps and at `now_ms`. Nothing is kept between two requests and nothing
 * shared is read or written: the same body always gets the same answer.
 * That is why the route takes no token (admin.c), and why everything a
 * body can ask for is capped here: the body, the arrivals, the cost of
 * each, the limit (so the states), the states shown.
 *
 * The body:
 *   {"limit": {"requests_per_unit": 10, "window_ms": 1000,
 *              "burst": 5, "sub_windows": 4, "hold_ms": 100},
 *    "algorithms": ["token_bucket", "fixed_window"],
 *    "arrivals": [0, 10, {"t_ms": 990, "hits": 2}],
 *    "now_ms": 2000, "state_steps": 20}
 *
 * limit.requests_per_unit 0 .. SIM_MAX_LIMIT and limit.window_ms
 * 1 .. SIM_MAX_WINDOW_MS are required; burst (0 or absent: each
 * algorithm's default), sub_windows (the sliding counter's,
 * 1 .. SIM_MAX_SUB_WINDOWS, a divisor of the window), hold_ms (concurrency: how long an admitted
 * request holds its lease before it releases it; default a tenth of the window, at least 1 ms; a
 * lease times out after the window) are optional. algorithms: weir's names (weir/algo.h), each at
 * most once; absent: all of them. arrivals: up to SIM_MAX_ARRIVALS, each a time in milliseconds 0
 * .. SIM_MAX_T_MS or an object with t_ms and hits (1 .. SIM_MAX_HITS, default 1); any order (sorted
 * by time, stably). now_ms (default the last arrival's time): when the final state is read.
 * state_steps 0 .. SIM_MAX_STATE_STEPS (default 20): for how many of the last arrivals the state
 * after the step is given. Integers only, names exact, unknown members refused; null is the same as
 * absent.
 *
 * The answer: {"limit":{...the limit as read...}, "t_ms":[...],
 * "hits":[...], "now_ms":N, "results":[{"algorithm":"fixed_window",
 * "limit":10, "burst":10, "accepted":N, "denied":N, "max_in_window":N,
 * "allowed":[...], "remaining":[...], "retry_after_ms":[...],
 * "delay_ms":[...], "in_window":[...], "steps":[{"i":I,"t_ms":T,
 * "state":S}], "state":S}]}, arrays one item per arrival in time order.
 * retry_after_ms and delay_ms are rounded up, null for "never";
 * in_window is the units admitted in the window of the limit's length
 * that ends when the request proceeds (its arrival; for the shaper, after
 * its delay), itself included, null when denied. S is a state view:
 * {"numbers":{"name":value,...},"table":null|{"name":..,"columns":[..],
 * "total":N,"rows":[[..],..]}}.
 *
 * Refusals are application/problem+json with "detail" and "field": 400
 * for any body that is not as above, 413 for one over SIM_MAX_BODY_BYTES,
 * 500 out of memory.
 */
#ifndef WEIR_DAEMON_ADMIN_SIM_H
#define WEIR_DAEMON_ADMIN_SIM_H

#include <stdbool.h>
#include <stddef.h>

#include "api/json.h"
#include "common/buf.h"

#define SIM_PATH "/admin/v1/sim"

#define SIM_MAX_BODY_BYTES ((size_t)64 << 10)
#define SIM_MAX_ARRIVALS 10000u
#define SIM_MAX_HITS 1000u
#define SIM_MAX_LIMIT 65536u        /* WEIR_MAX_LOG_ENTRIES */
#define SIM_MAX_WINDOW_MS 86400000u /* a day */
#define SIM_MAX_T_MS 1000000000000u /* about 31 years */
#define SIM_MAX_SUB_WINDOWS 64u     /* each step walks them */
#define SIM_MAX_STATE_STEPS 100u
#define SIM_DEFAULT_STATE_STEPS 20u

/** Why a body was refused. */
typedef struct sim_error {
    int status;       /* 400, 413 or 500 */
    char field[64];   /* the JSON path at fault, "" for the whole body */
    char detail[192]; /* for a person */
} sim_error;

/**
 * sim_answer() - decides the trace of @body (@len bytes) and writes the
 * answer to @out. Returns true; false with @err filled (nothing useful in
 * @out then). @parser is the caller's (one thread's).
 */
bool sim_answer(weir_json *parser, const char *body, size_t len, weir_buf *out, sim_error *err);

/** The problem+json body of @err. */
void sim_render_problem(weir_buf *out, const sim_error *err);

#endif /* WEIR_DAEMON_ADMIN_SIM_H */
