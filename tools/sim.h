/*
 * sim.h - the core of `weir sim`: replay a trace through every algorithm
 * under one limit and measure each one against the exact sliding log.
 *
 * The simulation is deterministic: integer time, per-key state in arrays
 * indexed by the trace's key numbers, no clock, no hashing with a random
 * seed. The same trace and configuration always give the same report.
 */
#ifndef WEIR_TOOLS_SIM_H
#define WEIR_TOOLS_SIM_H

#include <stddef.h>
#include <stdint.h>

#include "trace.h"
#include "weir/algo.h"
#include "weir/status.h"

/** Largest limit: the sliding log and the concurrency limiter cap it. */
#define WEIR_SIM_MAX_LIMIT WEIR_MAX_LOG_ENTRIES
/** Most requests in one simulation (a trace's line cap). */
#define WEIR_SIM_MAX_REQUESTS WEIR_TRACE_MAX_LINES
/** Most bytes of algorithm state over all keys. */
#define WEIR_SIM_MAX_STATE_BYTES ((uint64_t)1 << 30)
/** Largest trace file `weir sim --trace` reads. */
#define WEIR_SIM_MAX_TRACE_BYTES ((size_t)256 << 20)

typedef struct weir_sim_config {
    /** Requests per window, 1 .. WEIR_SIM_MAX_LIMIT, for every algorithm;
     *  the concurrency limiter's window is its lease timeout. */
    uint64_t limit;
    int64_t window_us;
    /** weir_limit_spec.burst for every algorithm (0 = each one's default;
     *  the window algorithms ignore it). */
    uint64_t bucket_burst;
    /** Concurrency limiter: an admitted request holds its lease this long,
     *  then releases it (a lease held past the window times out first). */
    int64_t hold_us;
    /** token_bucket only: weir_limit_spec.warmup_us and cold_factor (0 =
     *  no warm-up; the other algorithms have none). */
    int64_t warmup_us;
    uint32_t cold_factor;
} weir_sim_config;

/** One algorithm's results. */
typedef struct weir_sim_row {
    weir_algorithm algorithm;
    /** The effective burst after defaults (weir_limit.burst). */
    uint64_t burst;
    /** Requests admitted and denied. */
    uint64_t admitted;
    uint64_t denied;
    /** The most units admitted in any window of the limit's length by one
     *  key (the busiest), exact. The shaper's requests count when they
     *  proceed, after their delay. */
    uint64_t max_in_window;
    /** Decisions unlike the sliding log's on the same request: admitted
     *  where it denied (over) and denied where it admitted (under). */
    uint64_t over;
    uint64_t under;
    /** Leaky bucket shaper: the longest delay it gave; 0 for the others. */
    int64_t max_delay_us;
} weir_sim_row;

typedef struct weir_sim_report {
    uint64_t requests;
    uint32_t keys;
    /** Set when weir_sim_run() returns an error from weir_limit_compile():
     *  the algorithm that refused the limit. 0 otherwise. */
    weir_algorithm refused;
    /** rows[i] is algorithm i + 1, in registry order. */
    weir_sim_row rows[WEIR_ALGORITHM_COUNT];
} weir_sim_report;

/**
 * weir_sim_run() - replay @trace through every algorithm.
 *
 * @cfg:   the limit, borrowed.
 * @trace: sorted by time (as parsed or generated), borrowed.
 * @out:   filled on success; on a compile error only out->refused is set.
 *
 * Returns WEIR_OK; WEIR_EINVAL for NULL pointers, a hold <= 0, a limit
 * outside 1 .. WEIR_SIM_MAX_LIMIT or an unsorted trace; WEIR_ERANGE (or
 * WEIR_EINVAL) when an algorithm refuses the limit; WEIR_ETOOBIG when the
 * keys' states would exceed WEIR_SIM_MAX_STATE_BYTES; WEIR_ENOMEM.
 */
weir_status weir_sim_run(const weir_sim_config *cfg, const weir_trace *trace, weir_sim_report *out);

/** One request of a watched key, as every algorithm decided it. */
typedef struct weir_sim_decision {
    int64_t time_us;
    uint64_t cost;
    /** leaky_bucket_shaper's delay when it admitted the request (the only
     *  algorithm that delays; its requests count when they proceed), else
     *  0. */
    int64_t delay_us;
    /** Bit (algorithm - 1) is set when that algorithm admitted it. */
    uint32_t admitted;
} weir_sim_decision;

/** The decisions on one key's requests, for a plot of the run. */
typedef struct weir_sim_watch {
    /** In: the key (an index < trace->n_keys). */
    uint32_t key;
    /** Out: its requests in trace order; free with weir_sim_watch_free(). */
    weir_sim_decision *decisions;
    size_t n;
} weir_sim_watch;

/**
 * weir_sim_run_watched() - weir_sim_run(), also recording in @watch every
 * decision on the key @watch->key (NULL @watch: weir_sim_run()). Returns as
 * weir_sim_run(), and WEIR_EINVAL for a key out of range; on failure
 * @watch holds nothing.
 */
weir_status weir_sim_run_watched(const weir_sim_config *cfg, const weir_trace *trace,
                                 weir_sim_report *out, weir_sim_watch *watch);

/** Free what @w holds (not @w itself). NULL is a no-op. */
void weir_sim_watch_free(weir_sim_watch *w);

/** Bytes of state one key needs under @cfg, 0 when a limit does not
 *  compile. */
uint64_t weir_sim_state_bytes(const weir_sim_config *cfg);

/** Write @milli thousandths with at most three decimals and @suffix,
 *  trailing zeros cut: 1500, "/s" -> "1.5/s". */
void weir_sim_format_milli(uint64_t milli, const char *suffix, char *buf, size_t len);

/** Write @us (>= 0) in the largest unit that shows it exactly, e.g. "1s",
 *  "1500ms", "90s" -> "90s", "2m"; @buf gets at most @len bytes. */
void weir_sim_format_duration(int64_t us, char *buf, size_t len);

#endif /* WEIR_TOOLS_SIM_H */
