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

#endif /* WEIR_ALGO_INTERNAL_H */
