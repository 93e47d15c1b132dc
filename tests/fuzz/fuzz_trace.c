/*
 * fuzz_trace.c - fuzzes the CSV trace codec and, on every trace it accepts,
 * the simulator core, checking their invariants as it goes.
 *
 * Any input must parse or fail cleanly, with a line number within the input
 * and a reason; an accepted trace must be sorted with every key in range, and
 * replaying it must keep the sliding log's promises. A broken invariant
 * aborts, so the fuzzer reports it like a crash.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"
#include "trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
    if (!ok)
        abort();
}

static void check_trace(const weir_trace *t)
{
    check(t->n_events <= WEIR_TRACE_MAX_LINES && t->n_keys <= WEIR_TRACE_MAX_KEYS);
    for (size_t i = 0; i < t->n_events; i++) {
        const weir_trace_event *e = &t->events[i];
        check(e->key < t->n_keys && e->cost >= 1 && e->cost <= WEIR_TRACE_MAX_COST);
        check(e->time_us >= 0 && e->time_us <= WEIR_TRACE_MAX_TIME_US);
        check(i == 0 || e->time_us >= t->events[i - 1].time_us);
    }
    for (uint32_t k = 0; k < t->n_keys; k++) {
        size_t len;
        const char *key = weir_trace_key(t, k, &len);
        check(key && len >= 1 && len <= WEIR_TRACE_MAX_KEY_BYTES);
    }
}

/* The limit comes from the input too, so the fuzzer explores it. */
static void check_sim(const weir_trace *t, const uint8_t *data, size_t size)
{
    weir_sim_config cfg = {
        .limit = 1u + data[0] % 8u,
        .window_us = 1 + (int64_t)data[size - 1] * 37,
        .bucket_burst = data[size / 2] % 3u,
    };
    cfg.hold_us = 1 + cfg.window_us / 3;
    weir_sim_report rep;
    check(weir_sim_run(&cfg, t, &rep) == WEIR_OK);
    check(rep.requests == t->n_events && rep.keys == t->n_keys);
    for (size_t i = 0; i < WEIR_ALGORITHM_COUNT; i++)
        check(rep.rows[i].admitted + rep.rows[i].denied == rep.requests);
    const weir_sim_row *log = &rep.rows[WEIR_ALGO_SLIDING_LOG - 1];
    check(log->over == 0 && log->under == 0 && log->max_in_window <= cfg.limit);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    weir_trace t;
    weir_trace_error err;
    weir_trace_init(&t);
    weir_status st = weir_trace_parse(&t, (const char *)data, size, &err);
    if (st == WEIR_OK) {
        check_trace(&t);
        if (size > 0)
            check_sim(&t, data, size);
    } else {
        check(st == WEIR_EPARSE || st == WEIR_ENOMEM);
        check(err.line >= 1 && err.line <= (uint64_t)size + 1);
        check(err.reason[0] != '\0' && memchr(err.reason, '\0', sizeof(err.reason)) != NULL);
        check(t.events == NULL && t.n_events == 0 && t.n_keys == 0);
    }
    weir_trace_free(&t);
    return 0;
}
