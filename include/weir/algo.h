/*
 * weir/algo.h - the rate limiting algorithms as pure step functions.
 *
 * Each algorithm is a function of (limit, state, now, hits) that returns a
 * verdict and, when it admits, updates the state. There is no clock, no
 * allocation, no lock and no global state here: an embedder that keeps its
 * own state (in shared memory, in a struct of its own) calls these directly.
 *
 * Conventions shared by every function in this header:
 *   - time is int64 microseconds chosen by the caller (`now_us`), counted
 *     from an origin of the caller's choosing; fixed and sliding windows
 *     align to multiples of the window counted from 0, so the Unix epoch
 *     gives UTC-aligned windows. A negative time is decided as time 0 (the
 *     durations reported stay relative to the caller's `now_us`). GCRA
 *     works in nanoseconds and so covers 292 years from the origin (until
 *     2262 with the Unix epoch); later requests are denied as "never";
 *   - arithmetic is integer only and saturating: no decision depends on
 *     floating point, and a decision is exactly reproducible;
 *   - a clock that goes backwards never grants extra quota: an earlier
 *     `now_us` than the state's last charge is decided as that time (GCRA
 *     and the concurrency limiter, which keep no such time, simply find the
 *     key further from rest);
 *   - `hits` is the cost of the request; `hits == 0` peeks: it reports
 *     whether a request of cost 1 would be admitted now and changes nothing;
 *   - a denied request never changes the state (it consumes nothing);
 *   - a zero-filled state buffer of weir_state_size() bytes is a fresh key
 *     (full quota), so states can be allocated with calloc() or zeroed
 *     shared memory and need no constructor.
 *
 * Thread safety: the functions are reentrant; the caller serialises calls
 * that share one state buffer.
 */
#ifndef WEIR_ALGO_H
#define WEIR_ALGO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "weir/export.h"
#include "weir/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* X(ENUM, number, config name, needs a variable-size state) */
#define WEIR_ALGORITHM_MAP(X)                          \
    X(TOKEN_BUCKET, 1, "token_bucket", 0)              \
    X(GCRA, 2, "gcra", 0)                              \
    X(LEAKY_BUCKET, 3, "leaky_bucket", 0)              \
    X(LEAKY_SHAPER, 4, "leaky_bucket_shaper", 0)       \
    X(FIXED_WINDOW, 5, "fixed_window", 0)              \
    X(SLIDING_LOG, 6, "sliding_window_log", 1)         \
    X(SLIDING_COUNTER, 7, "sliding_window_counter", 0) \
    X(CONCURRENCY, 8, "concurrency", 1)

typedef enum weir_algorithm {
#define WEIR_ALGO_ENUM_(e, num, name, var) WEIR_ALGO_##e = (num),
    WEIR_ALGORITHM_MAP(WEIR_ALGO_ENUM_)
#undef WEIR_ALGO_ENUM_
} weir_algorithm;

/** Number of algorithms in WEIR_ALGORITHM_MAP (their numbers are 1..N). */
#define WEIR_ALGORITHM_COUNT 8

/** `retry_after_us` value meaning "this cost can never be admitted". */
#define WEIR_NEVER ((int64_t)-1)

/* Caps. A limit outside them is refused by weir_limit_compile(). */
#define WEIR_MAX_LIMIT UINT32_MAX                      /* requests per window */
#define WEIR_MAX_WINDOW_US ((int64_t)3155760000000000) /* 100 years */
#define WEIR_MAX_LOG_ENTRIES 65536u                    /* sliding log: limit cap */
#define WEIR_MAX_LEASES 65536u                         /* concurrency: limit cap */
#define WEIR_MAX_SUB_WINDOWS 1024u                     /* sliding counter buckets */
#define WEIR_MAX_WARMUP_US ((int64_t)86400000000)      /* token bucket warm-up: 1 day */
#define WEIR_MAX_COLD_FACTOR 100u                      /* warm-up: cold rate divisor */
#define WEIR_DEFAULT_COLD_FACTOR 3u

/** Size of the fixed-size state used by every algorithm but the sliding
 *  log, the multi-bucket sliding counter, the concurrency limiter and a
 *  token bucket with a warm-up. */
#define WEIR_STATE_FIXED_BYTES 16u

/** Size of a token bucket's state with a warm-up: the bucket and its heat. */
#define WEIR_STATE_WARMUP_BYTES 24u

/**
 * What the caller asks for. Fields left 0 take the algorithm's default
 * (docs/ALGORITHMS.md gives each one's meaning and default).
 */
typedef struct weir_limit_spec {
    weir_algorithm algorithm;
    /** Requests per window; 0 bans (every request denied, retry "never"). */
    uint64_t limit;
    /** Window length in microseconds, 1 .. WEIR_MAX_WINDOW_US. For the
     *  concurrency limiter this is the lease timeout. */
    int64_t window_us;
    /** Most requests admitted at once from rest (bucket algorithms and
     *  GCRA). 0 = default: `limit` for the token bucket and the shaper's
     *  queue, 1 (strict spacing, NGINX's burst=0) for GCRA and the leaky
     *  bucket policer. Ignored by the window algorithms. */
    uint64_t burst;
    /** Sliding window counter only: number of sub-windows k. 0 or 1 = the
     *  classic two-window counter (fixed-size state); k > 1 keeps k+1
     *  counters and `window_us` must be a multiple of k. */
    uint32_t sub_windows;
    /** Token bucket only: the warm-up period in microseconds, 0 ..
     *  WEIR_MAX_WARMUP_US; 0 = none. A cold key (fresh, or idle for this
     *  long) admits at limit / cold_factor (and a burst / cold_factor); its
     *  rate rises linearly to the limit over this much time under load
     *  (docs/ALGORITHMS.md, "Warm-up"). */
    int64_t warmup_us;
    /** With a warm-up: how much slower a cold key is, 1 ..
     *  WEIR_MAX_COLD_FACTOR; 0 = WEIR_DEFAULT_COLD_FACTOR. Must be 0
     *  without a warm-up. */
    uint32_t cold_factor;
} weir_limit_spec;

/**
 * A validated limit with its derived constants. Produced by
 * weir_limit_compile(); treat it as read-only and pass it by pointer. It
 * holds no pointers and can be copied with memcpy.
 */
typedef struct weir_limit {
    weir_algorithm algorithm;
    uint32_t sub_windows; /* >= 1 for the sliding counter, else 0 */
    uint64_t limit;
    int64_t window_us;
    uint64_t burst; /* defaults applied */
    /* derived constants (meaning depends on the algorithm) */
    int64_t unit;     /* bucket: scaled units per request; GCRA: ns per request */
    int64_t rate;     /* bucket: scaled units drained per microsecond */
    int64_t capacity; /* bucket: burst * unit; GCRA: burst * unit (ns) */
    /* UINT64_MAX / divisor for the divisors a decision uses, so it divides
     * by multiplying: unit, rate, and span (the window, or the sub-window
     * of the sliding counter) */
    uint64_t inv_unit;
    uint64_t inv_rate;
    uint64_t inv_span;
    int64_t span_us;
    uint32_t state_bytes;
    uint32_t cold_factor; /* token bucket warm-up: 0 without, else >= 1 */
    int64_t warmup_us;    /* token bucket warm-up period: 0 = none */
} weir_limit;

/** The verdict of one step. */
typedef struct weir_result {
    /** Whether the request is admitted (a denial is data, not an error). */
    bool allowed;
    /** The most `remaining` can ever be: the burst capacity for the bucket
     *  algorithms and GCRA, the limit for the others. */
    uint64_t limit;
    /** Requests of cost 1 that would be admitted right after this one. */
    uint64_t remaining;
    /** Microseconds until the key is back at rest (a fresh state). */
    int64_t reset_after_us;
    /** 0 when admitted. When denied: microseconds after which the same
     *  request, with no other traffic, is admitted (waiting exactly this
     *  long is enough), or WEIR_NEVER when the cost exceeds what the key
     *  can ever admit. For the concurrency limiter it is the time until
     *  enough leases time out, an upper bound (releases may come earlier). */
    int64_t retry_after_us;
    /** Leaky bucket shaper: microseconds the admitted request should wait
     *  before it proceeds. 0 for every other algorithm. */
    int64_t delay_us;
    /** Concurrency limiter: the lease id of an admitted acquire, to pass to
     *  weir_release(). 0 otherwise. */
    uint64_t lease;
} weir_result;

/**
 * weir_limit_compile() - validate a spec and derive the step constants.
 *
 * @spec: the request (borrowed, not kept).
 * @out:  written only on success.
 *
 * Returns WEIR_OK; WEIR_EINVAL for a NULL pointer, an unknown algorithm, a
 * window <= 0, sub-windows that do not divide the window, a warm-up on an
 * algorithm other than the token bucket, a negative warm-up, or a cold
 * factor without a warm-up; WEIR_ERANGE for a value past a cap (limit,
 * burst, window, log entries, leases, sub-windows, warm-up, cold factor)
 * or a limit/window/burst combination whose exact integer
 * representation would not fit in 63 bits. Thread-safe.
 */
WEIR_API weir_status weir_limit_compile(const weir_limit_spec *spec, weir_limit *out);

/**
 * weir_state_size() - bytes of state one key needs under @lim.
 *
 * WEIR_STATE_FIXED_BYTES for the fixed-size algorithms,
 * WEIR_STATE_WARMUP_BYTES for a token bucket with a warm-up; for the sliding log
 * 8 + 8 * limit, for the k-bucket counter 8 + 4 * (k + 1), for the
 * concurrency limiter 16 + 24 * limit. The buffer must be 8-byte aligned and
 * zero-filled before first use.
 */
WEIR_API size_t weir_state_size(const weir_limit *lim);

/**
 * weir_step() - decide one request and, if admitted, charge it.
 *
 * @lim:    a compiled limit.
 * @state:  weir_state_size(lim) bytes; updated only when the request is
 *          admitted with hits > 0.
 * @now_us: the time of the request.
 * @hits:   the cost; 0 peeks (see the header comment).
 * @res:    the verdict; written only on success.
 *
 * For the concurrency limiter an admitted step is an acquire that creates a
 * lease of @hits units (res->lease).
 *
 * Returns WEIR_OK (admitted or denied, see res->allowed); WEIR_EINVAL for a
 * NULL pointer or a state whose bookkeeping is out of range (it was not
 * produced by these functions under the same limit). Never allocates.
 */
WEIR_API weir_status weir_step(const weir_limit *lim, void *state, int64_t now_us, uint64_t hits,
                               weir_result *res);

/**
 * weir_step_reserve() - weir_step() that keeps a reserve: the request is
 * admitted only if at least @reserve units remain free after it (Since 0.2).
 *
 * @hits:    the cost charged when admitted, exactly as weir_step() charges
 *           it; 0 peeks: it reports whether a request of cost 1 with the
 *           same reserve would be admitted now, and changes nothing.
 * @reserve: units that must stay free; 0 is weir_step().
 *
 * Admitted iff weir_check() of a cost of max(hits, 1) + @reserve
 * (saturating) admits; then @hits only is charged and @res is
 * weir_step()'s. Denied by the reserve, @res is that check's: allowed
 * false, retry_after_us the time until hits + reserve fit (WEIR_NEVER when
 * they exceed what the key can ever hold), remaining, limit and reset as a
 * denial reports them; the state is not changed. For the concurrency
 * limiter an admitted step is an acquire of @hits units (an adaptive limit
 * below the limiter's maximum is a reserve of maximum - current limit).
 *
 * Same returns, arguments and guarantees as weir_step().
 */
WEIR_API weir_status weir_step_reserve(const weir_limit *lim, void *state, int64_t now_us,
                                       uint64_t hits, uint64_t reserve, weir_result *res);

/**
 * weir_check() - the verdict weir_step() would give, without changing
 * anything. Used to check several limits before charging any of them.
 * Same arguments, returns and guarantees as weir_step(), except that
 * @state is not written and res->lease is 0.
 */
WEIR_API weir_status weir_check(const weir_limit *lim, const void *state, int64_t now_us,
                                uint64_t hits, weir_result *res);

/**
 * weir_release() - give back a concurrency lease.
 *
 * @lease: an id from an admitted weir_step() on the same state.
 * @res:   the state after the release (allowed = true); written on success.
 *
 * Returns WEIR_OK; WEIR_ENOLEASE when no such lease is held (already
 * released, or reaped after the lease timeout); WEIR_EALGO when @lim is not
 * a concurrency limit; WEIR_EINVAL for NULL pointers or a corrupt state.
 */
WEIR_API weir_status weir_release(const weir_limit *lim, void *state, int64_t now_us,
                                  uint64_t lease, weir_result *res);

/**
 * weir_refund() - give back @hits units that a TAKE under the same limit
 * charged earlier (Since 0.2): a reservation settled for less than it
 * took, or a charge undone.
 *
 * @state:  weir_state_size(lim) bytes; written only when something is
 *          given back.
 * @hits:   the units to give back; 0 gives back nothing.
 * @res:    the state after the refund, as a peek (hits 0) would report it
 *          (limit, remaining, reset_after_us), with allowed = whether
 *          there was something to give back, retry_after_us, delay_us and
 *          lease 0. Written only on success.
 *
 * Per algorithm (docs/ALGORITHMS.md, "Reserve, refund and charge"): the
 * fixed window's count down by @hits, not below 0, and nothing when the
 * state's window is over; the buckets' level down by @hits requests, not
 * below empty; GCRA's TAT back by @hits emission intervals, not before
 * now; the sliding log's newest @hits entries removed; the sliding
 * counter's newest sub-window's count down by @hits, not below 0, and
 * nothing when that sub-window has left the window. Nothing is given back
 * when the key is at rest (a fresh state). A refund never makes the key
 * live longer. It gives back what the state holds, not what this caller
 * charged: refund only what was charged.
 *
 * Returns WEIR_OK; WEIR_EALGO for the concurrency limiter (a lease goes
 * back by weir_release()); WEIR_EINVAL for a NULL pointer or a corrupt
 * state.
 */
WEIR_API weir_status weir_refund(const weir_limit *lim, void *state, int64_t now_us, uint64_t hits,
                                 weir_result *res);

/**
 * weir_charge() - charge @hits whatever the verdict would be, as far as the
 * state can hold them (Since 0.2): the work already happened (a cost known
 * only afterwards, an overrun of a reservation).
 *
 * @state:  weir_state_size(lim) bytes; written when @hits > 0.
 * @hits:   the units to charge; 0 charges nothing.
 * @res:    as after a TAKE: allowed true, limit, remaining, reset_after_us;
 *          retry_after_us, delay_us and lease 0. Written only on success.
 *
 * The state saturates at full: the fixed window's count at the limit, the
 * buckets' level at the capacity, GCRA's TAT at now + the burst's
 * tolerance, the sliding log filled to the limit with entries at now, the
 * sliding counter's estimate at the limit. What the key cannot hold is not
 * carried over as debt: the key is simply full, and admits again as it
 * would after any TAKE that filled it. A charge of more than the limit
 * leaves remaining 0. A ban (limit 0) holds nothing.
 *
 * Returns WEIR_OK; WEIR_EALGO for the concurrency limiter; WEIR_EINVAL for
 * a NULL pointer or a corrupt state.
 */
WEIR_API weir_status weir_charge(const weir_limit *lim, void *state, int64_t now_us, uint64_t hits,
                                 weir_result *res);

/* ------------------------------------------------------------------------ */
/* Reading a state                                                          */

/** Most numbers, table columns and table rows in a weir_state_view. */
#define WEIR_STATE_VIEW_NUMBERS 8
#define WEIR_STATE_VIEW_COLUMNS 3
#define WEIR_STATE_VIEW_ROWS 32

/** One named number of a state: "tokens_milli", "tat_ns", ... The name is
 *  a static string; a name ending in _us, _ns or _milli says its unit. */
typedef struct weir_state_number {
    const char *name;
    int64_t value;
} weir_state_number;

/**
 * What a state holds, as named numbers and at most one table, for a
 * person (a simulator's state panel, a debugger): docs/ALGORITHMS.md,
 * "Reading a state", lists each algorithm's names. Plain data, no
 * pointers but to static strings.
 */
typedef struct weir_state_view {
    weir_algorithm algorithm;
    uint32_t n_numbers;
    weir_state_number numbers[WEIR_STATE_VIEW_NUMBERS];
    /** "log" (sliding log), "sub_windows" (sliding counter), "leases"
     *  (concurrency), or NULL: no table. */
    const char *table;
    uint32_t n_columns;
    const char *columns[WEIR_STATE_VIEW_COLUMNS];
    /** Rows the state holds; `rows` has the newest n_rows of them
     *  (at most WEIR_STATE_VIEW_ROWS), oldest first. */
    uint64_t table_rows;
    uint32_t n_rows;
    int64_t rows[WEIR_STATE_VIEW_ROWS][WEIR_STATE_VIEW_COLUMNS];
} weir_state_view;

/**
 * weir_state_describe() - what @state holds at @now_us, as weir_step()
 * would read it then (time passed refills buckets and ends windows and
 * leases; a time before the state's last charge is read as that time).
 *
 * Returns WEIR_OK and fills @out; WEIR_EINVAL for a NULL pointer, a
 * misaligned state or one weir_step() would refuse. A ban (limit 0) gives
 * no numbers. Changes nothing; cost bounded by the state's size.
 */
WEIR_API weir_status weir_state_describe(const weir_limit *lim, const void *state, int64_t now_us,
                                         weir_state_view *out);

/** The config name of an algorithm ("token_bucket", ...), or NULL. */
WEIR_API const char *weir_algorithm_name(weir_algorithm algo);

/**
 * weir_algorithm_parse() - look up an algorithm by its config name.
 * @name is NUL-terminated and compared case-insensitively. Returns WEIR_OK
 * and writes @out, or WEIR_EINVAL for an unknown name or a NULL pointer.
 */
WEIR_API weir_status weir_algorithm_parse(const char *name, weir_algorithm *out);

#ifdef __cplusplus
}
#endif

#endif /* WEIR_ALGO_H */
