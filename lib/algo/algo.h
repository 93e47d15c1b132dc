/*
 * algo.h - the internal contract between the dispatcher (registry.c) and
 * each algorithm's file.
 *
 * An algorithm implements one decide function. It reads `in`, and when
 * `out` is non-NULL and the request is admitted with hits > 0 it writes the
 * new state to `out` (which may alias `in`). With `out == NULL` it is a pure
 * check. `now_us` is already clamped to >= 0 and `lim->limit` >= 1 (bans
 * are answered by the dispatcher). The function fills every field of `res`.
 */
#ifndef WEIR_ALGO_INTERNAL_H
#define WEIR_ALGO_INTERNAL_H

#include "weir/algo.h"

typedef weir_status (*weir__decide_fn)(const weir_limit *lim, const void *in, void *out,
                                       int64_t now_us, uint64_t hits, weir_result *res);

weir_status weir__bucket_decide(const weir_limit *lim, const void *in, void *out, int64_t now_us,
                                uint64_t hits, weir_result *res);
weir_status weir__gcra_decide(const weir_limit *lim, const void *in, void *out, int64_t now_us,
                              uint64_t hits, weir_result *res);
weir_status weir__fixed_decide(const weir_limit *lim, const void *in, void *out, int64_t now_us,
                               uint64_t hits, weir_result *res);
weir_status weir__log_decide(const weir_limit *lim, const void *in, void *out, int64_t now_us,
                             uint64_t hits, weir_result *res);
weir_status weir__counter_decide(const weir_limit *lim, const void *in, void *out, int64_t now_us,
                                 uint64_t hits, weir_result *res);
weir_status weir__conc_decide(const weir_limit *lim, const void *in, void *out, int64_t now_us,
                              uint64_t hits, weir_result *res);
weir_status weir__conc_release(const weir_limit *lim, void *state, int64_t now_us, uint64_t lease,
                               weir_result *res);

/* weir_refund() and weir_charge() of an algorithm: they change @state in
 * place (the refund only when it gives something back, then setting
 * *@changed; the charge when hits > 0) and report nothing: the dispatcher
 * reads the state afterwards as a peek does. Same preconditions as a
 * decide function. A NULL charge function in the registry charges by a
 * step of what the state can still admit (the window algorithms); the
 * concurrency limiter has neither. */
typedef weir_status (*weir__settle_fn)(const weir_limit *lim, void *state, int64_t now_us,
                                       uint64_t hits, bool *changed);

weir_status weir__bucket_refund(const weir_limit *lim, void *state, int64_t now_us, uint64_t hits,
                                bool *changed);
weir_status weir__bucket_charge(const weir_limit *lim, void *state, int64_t now_us, uint64_t hits,
                                bool *changed);
weir_status weir__gcra_refund(const weir_limit *lim, void *state, int64_t now_us, uint64_t hits,
                              bool *changed);
weir_status weir__gcra_charge(const weir_limit *lim, void *state, int64_t now_us, uint64_t hits,
                              bool *changed);
weir_status weir__fixed_refund(const weir_limit *lim, void *state, int64_t now_us, uint64_t hits,
                               bool *changed);
weir_status weir__log_refund(const weir_limit *lim, void *state, int64_t now_us, uint64_t hits,
                             bool *changed);
weir_status weir__counter_refund(const weir_limit *lim, void *state, int64_t now_us, uint64_t hits,
                                 bool *changed);

/* weir_state_describe() of each algorithm: @v is zeroed with its
 * algorithm set, `now_us` >= 0 and the limit >= 1 (registry.c). */
weir_status weir__bucket_describe(const weir_limit *lim, const void *in, int64_t now_us,
                                  weir_state_view *v);
weir_status weir__gcra_describe(const weir_limit *lim, const void *in, int64_t now_us,
                                weir_state_view *v);
weir_status weir__fixed_describe(const weir_limit *lim, const void *in, int64_t now_us,
                                 weir_state_view *v);
weir_status weir__log_describe(const weir_limit *lim, const void *in, int64_t now_us,
                               weir_state_view *v);
weir_status weir__counter_describe(const weir_limit *lim, const void *in, int64_t now_us,
                                   weir_state_view *v);
weir_status weir__conc_describe(const weir_limit *lim, const void *in, int64_t now_us,
                                weir_state_view *v);

/* Appends a number to @v (at most WEIR_STATE_VIEW_NUMBERS are kept). */
static inline void weir__view_number(weir_state_view *v, const char *name, int64_t value)
{
    if (v->n_numbers < WEIR_STATE_VIEW_NUMBERS)
        v->numbers[v->n_numbers++] = (weir_state_number){name, value};
}

/* Names @v's table; its rows go in with weir__view_row(), the oldest
 * first, `total` of them: only the newest WEIR_STATE_VIEW_ROWS are kept. */
static inline void weir__view_table(weir_state_view *v, const char *name, uint64_t total,
                                    const char *c0, const char *c1, const char *c2)
{
    v->table = name;
    v->table_rows = total;
    v->columns[0] = c0;
    v->columns[1] = c1;
    v->columns[2] = c2;
    v->n_columns = c2 ? 3 : c1 ? 2 : 1;
}

/* Whether row @i (from 0, of the table's total) is one of the kept. */
static inline bool weir__view_keeps(const weir_state_view *v, uint64_t i)
{
    return v->table_rows - i <= WEIR_STATE_VIEW_ROWS;
}

static inline void weir__view_row(weir_state_view *v, int64_t a, int64_t b, int64_t c)
{
    if (v->n_rows < WEIR_STATE_VIEW_ROWS) {
        int64_t *r = v->rows[v->n_rows++];
        r[0] = a;
        r[1] = b;
        r[2] = c;
    }
}

/* Compile helpers: fill the derived fields of `out` (limit, window, burst
 * already validated and defaulted by registry.c). */
weir_status weir__bucket_compile(weir_limit *out);
weir_status weir__gcra_compile(weir_limit *out);

/* @lim (and its burst) scaled down to @ppm millionths, at least 1 (a ban
 * stays a ban): an instance's share of a limit (failure_mode local, and a
 * store deciding locally while its shared state is away). */
weir_status weir__limit_share(const weir_limit *lim, uint32_t ppm, weir_limit *out);

/* The denial result shared by every algorithm for a ban (limit 0). */
void weir__ban_result(const weir_limit *lim, weir_result *res);

/* weir_step()/weir_check() for callers that have already checked their
 * arguments (a compiled limit, an aligned state, res non-NULL) and whose
 * `now_us` is >= 0: the memory store's hot path. `out` NULL is a check. */
weir_status weir__decide(const weir_limit *lim, const void *in, void *out, int64_t now_us,
                         uint64_t hits, weir_result *res);

/* weir_step_reserve() for the same callers as weir__decide(): a TAKE of
 * @hits that leaves at least @reserve units free; @reserve 0 is
 * weir__decide(). `out` NULL is a check. */
weir_status weir__decide_reserve(const weir_limit *lim, const void *in, void *out, int64_t now_us,
                                 uint64_t hits, uint64_t reserve, weir_result *res);

/* weir_refund() and weir_charge() for the same callers as weir__decide():
 * @state is written in place. */
weir_status weir__refund(const weir_limit *lim, void *state, int64_t now_us, uint64_t hits,
                         weir_result *res);
weir_status weir__charge(const weir_limit *lim, void *state, int64_t now_us, uint64_t hits,
                         weir_result *res);

/* What a refund or a charge reports of @state at @now_us: a peek's limit,
 * remaining and reset_after_us, with @allowed and no retry, delay or
 * lease (a ban: all 0). The memory store's refund of a key it does not
 * hold reports a fresh state so. */
weir_status weir__settled(const weir_limit *lim, const void *state, int64_t now_us, bool allowed,
                          weir_result *res);

#endif /* WEIR_ALGO_INTERNAL_H */
