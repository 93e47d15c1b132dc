/*
 * bench.h - the pieces weir-bench's files share: request keys and the
 * pre-generated streams of them, the clock, medians, the machine
 * description, the huge page arena, the bench-local baseline table, and
 * the results that report.c prints.
 *
 * Everything a timed loop reads is built before the loop starts: a stream
 * is an array of ready-made keys, one per decision, in the order the
 * decisions are made, so key generation and random numbers are never timed.
 */
#ifndef WEIR_BENCH_H
#define WEIR_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "timing.h"
#include "weir/algo.h"
#include "weir/context.h"

/* One request's key, as a request parser would hand it over: the text
 * "user:<n>" NUL-padded, its length in the last byte. */
#define BENCH_KEY_BYTES 16
typedef struct bench_key {
    char b[BENCH_KEY_BYTES];
} bench_key;

/* The limit every run uses: 100 requests per second, and 10 per second for
 * the algorithms whose state grows with the limit (sliding log,
 * concurrency), so that 10M keys of them fit in memory. */
#define BENCH_LIMIT 100u
#define BENCH_SMALL_LIMIT 10u
#define BENCH_WINDOW_US 1000000

/* Most distinct keys a stream can name ("user:999999999" is 14 bytes). */
#define BENCH_MAX_KEYS 1000000000u

static inline size_t bench_key_len(const bench_key *k)
{
    return (unsigned char)k->b[BENCH_KEY_BYTES - 1];
}

/* Write key number n ("user:<n>") to *out. */
void bench_key_make(uint64_t n, bench_key *out);

/* A stream of n keys drawn uniformly at random from key numbers
 * 0 .. nkeys-1 with a fixed seed (so runs are comparable). NULL on OOM. */
bench_key *bench_stream_new(uint64_t nkeys, size_t n, uint64_t seed);

/* splitmix64: the next number of the sequence in *state. */
uint64_t bench_rand(uint64_t *state);

/* Resident set size of this process in bytes, 0 if unknown. */
uint64_t bench_rss_bytes(void);

/* Give freed heap memory back to the system where the C library can. */
void bench_trim(void);

/* The median, minimum and maximum of repeated measurements. */
typedef struct bench_stat {
    double med;
    double min;
    double max;
    bool ok; /* measured */
} bench_stat;

/* Summarise v[0..n-1] (reorders v). */
bench_stat bench_stat_of(double *v, size_t n);

/* (max - min) / median in percent, the run-to-run spread. */
double bench_spread_pct(const bench_stat *s);

/* What the benchmark ran on. */
typedef struct bench_machine {
    char cpu[128];
    char cache[32];
    long cores;
    char kernel[200];
    char date[32];
    char compiler[96];
    char loadavg[64];
    char loadavg_end[64];
    bool release; /* built with NDEBUG */
} bench_machine;

void bench_machine_get(bench_machine *m);

/* The 1, 5 and 15 minute load averages, "unknown" if unreadable. */
void bench_loadavg(char *out, size_t cap);

/* A bump allocator on transparent huge pages (arena.c), for --hugepages:
 * free() does nothing, the arena is released whole. */
typedef struct bench_arena bench_arena;

/* Reserve `cap` bytes of address space; NULL on failure. */
bench_arena *bench_arena_new(size_t cap);
void bench_arena_free(bench_arena *a);
/* 16-byte aligned, zero-filled on first use; NULL when the arena is full. */
void *bench_arena_alloc(bench_arena *a, size_t size);
/* Allocator hooks for weir_ctx_new() that allocate from `a`. */
weir_allocator bench_arena_allocator(bench_arena *a);

/* The baseline: a token bucket in a bare open-addressing table (linear
 * probing, 32-byte slots, no locks, no expiry), same keys, same stream, same
 * limit and clock as the store runs; also hashing alone, and the table
 * decided in prefetched batches. ns per decision over `reps` runs. */
#define BENCH_BASELINE_BATCH 64u
/* Instructions added per decision by the "padded" variant. */
#define BENCH_BASELINE_PAD 100u

typedef struct bench_baseline {
    bench_stat table_ns;
    bench_stat hash_ns;
    bench_stat batch_ns;
    bench_stat locked_ns; /* + a spinlock per decision */
    bench_stat padded_ns; /* + lock + BENCH_BASELINE_PAD independent instructions */
    uint64_t allowed;
    uint64_t decisions;
    uint64_t table_bytes;
} bench_baseline;

bool bench_baseline_run(uint64_t nkeys, const bench_key *stream, size_t n, unsigned reps,
                        int64_t now_us, bool hugepages, bench_baseline *out);

/* ------------------------------------------------------------------ results */

/* Key-count columns: one key, the "1M" set and the "10M" set. */
#define BENCH_SIZES 3
/* Batch sizes of the token bucket batch sweep. */
#define BENCH_SWEEP 6
#define BENCH_REPS_MAX 64u

enum bench_section {
    BENCH_SINGLE = 1,
    BENCH_BATCH = 2,
    BENCH_THREADS = 4,
    BENCH_MEMORY = 8,
    BENCH_BASELINE = 16,
    BENCH_ALL = 31
};

typedef struct bench_options {
    bool quick;
    bool json;
    bool hugepages;    /* stores and the baseline table on transparent huge pages */
    unsigned sections; /* enum bench_section bits */
    unsigned algos;    /* bit a set: run algorithm a */
    size_t ops;        /* decisions per timed run */
    unsigned reps;     /* timed runs per measurement; the median is reported */
    double thread_s;   /* seconds per throughput run */
    unsigned batch;    /* ops per weir_memstore_run() */
    int64_t warmup_us; /* token_bucket's warm-up (--warmup); 0 = none */
    uint64_t keys[BENCH_SIZES];
} bench_options;

typedef struct bench_algo {
    bool ran;
    weir_limit lim;
    /* 1: ns per decision, single thread, per key count */
    bench_stat single_ns[BENCH_SIZES];
    uint64_t allowed[BENCH_SIZES];
    uint64_t decisions[BENCH_SIZES];
    /* 2: ns per decision through weir_memstore_run() at keys[1] */
    bench_stat batch_ns;
    /* 3: decisions per second at 1 and 2 threads, keys[1] */
    bench_stat tput[2];
    bench_stat cpu_share[2]; /* CPU time the threads got / (threads * wall) */
    /* 4: the store's own count and a resident-size check, per key count */
    bool mem_ok[BENCH_SIZES];
    uint64_t mem_keys[BENCH_SIZES];
    uint64_t mem_bytes[BENCH_SIZES];
    uint64_t rss_bytes[BENCH_SIZES];
    /* keys removed (expired or evicted) while timing: should be 0 */
    uint64_t churn;
    uint64_t errors;
} bench_algo;

typedef struct bench_results {
    bench_machine machine;
    bench_options opt;
    bench_algo algo[WEIR_ALGORITHM_COUNT + 1];
    unsigned sweep_size[BENCH_SWEEP];
    bench_stat sweep_ns[BENCH_SWEEP]; /* token bucket at keys[1] */
    bool base_ok[2];
    bench_baseline base[2]; /* at keys[1] and keys[2] */
    double total_s;
} bench_results;

/* True for the algorithms whose per-key state has a fixed size. */
bool bench_fixed_size(const weir_limit *lim);

/* "1", "100k", "1M", "10M". */
const char *bench_count_label(uint64_t n, char *buf, size_t cap);

/* Print the results as text tables (with the target verdicts) or JSON. */
void bench_report_text(const bench_results *r);
void bench_report_json(const bench_results *r);

#endif /* WEIR_BENCH_H */
