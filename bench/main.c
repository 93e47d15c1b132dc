/*
 * main.c - weir-bench: what a decision costs in the memory store.
 *
 * For each algorithm it builds a fresh store, inserts every key once at one
 * instant (the warm-up), then times decisions over a pre-generated stream of
 * uniformly random keys while the simulated clock advances 1 us per
 * decision. Every measurement is repeated and its median reported. All keys
 * stay in the store while timing (a store removes keys at rest only when it
 * inserts, and nothing is inserted after the warm-up), so the timed path is
 * lookup + step; the churn counter in the results checks this.
 *
 * Sections: single (ns/decision, 1 thread), batch (weir_memstore_run),
 * threads (throughput at 1 and 2 threads), memory (bytes per key) and
 * baseline (a bare table written here, the floor). See docs/BENCHMARKS.md.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "bench.h"
#include "weir/context.h"
#include "weir/store.h"
#include "weir/units.h"

/* The simulated clock starts in November 2023 (any origin works). */
#define T0_US ((int64_t)1700000000 * 1000000)
#define MAX_BATCH 256u
#define MAX_THREADS 2u
/* Decisions between two looks at the stop flag in a throughput run. */
#define STOP_STRIDE 256u
/* Address space a --hugepages arena reserves per key: the largest state
 * here (concurrency, limit 10) takes ~330 bytes, and realloc() in an arena
 * leaves the old bucket arrays behind. */
#define ARENA_BYTES_PER_KEY 1024u

static const unsigned sweep_sizes[BENCH_SWEEP] = {1, 4, 16, 64, 128, 256};

static const struct {
    const char *name;
    unsigned bit;
} section_names[] = {
    {"single", BENCH_SINGLE}, {"batch", BENCH_BATCH},       {"threads", BENCH_THREADS},
    {"memory", BENCH_MEMORY}, {"baseline", BENCH_BASELINE},
};

/* The three algorithms the throughput section and the targets cover. */
static bool headline(weir_algorithm a)
{
    return a == WEIR_ALGO_TOKEN_BUCKET || a == WEIR_ALGO_GCRA || a == WEIR_ALGO_SLIDING_COUNTER;
}

static void progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void progress(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fflush(stderr);
}

/* ------------------------------------------------------------------ options */

static void usage(FILE *f)
{
    fprintf(f, "usage: weir-bench [--quick] [--only SECTION]... [--algo NAME]... [--json]\n"
               "                  [--hugepages]\n"
               "                  [--keys MID[,BIG]] [--ops N] [--reps N] [--batch N]\n"
               "                  [--thread-seconds S] [--warmup DURATION]\n"
               "sections: single batch threads memory baseline\n"
               "algorithms: token_bucket gcra leaky_bucket leaky_bucket_shaper fixed_window\n"
               "            sliding_window_log sliding_window_counter concurrency\n");
}

static bool parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (!*s || *end || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

static int parse_options(int argc, char **argv, bench_options *o)
{
    memset(o, 0, sizeof(*o));
    uint64_t ops = 0, reps = 0, batch = 64, mid = 0, big = 0;
    double thread_s = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--quick") == 0) {
            o->quick = true;
        } else if (strcmp(a, "--json") == 0) {
            o->json = true;
        } else if (strcmp(a, "--hugepages") == 0) {
            o->hugepages = true;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(0);
        } else if (strcmp(a, "--only") == 0 && v) {
            unsigned bit = 0;
            for (size_t k = 0; k < sizeof(section_names) / sizeof(section_names[0]); k++)
                if (strcasecmp(v, section_names[k].name) == 0)
                    bit = section_names[k].bit;
            if (!bit) {
                fprintf(stderr, "weir-bench: unknown section '%s'\n", v);
                return -1;
            }
            o->sections |= bit;
            i++;
        } else if (strcmp(a, "--algo") == 0 && v) {
            weir_algorithm alg;
            if (weir_algorithm_parse(v, &alg) != WEIR_OK) {
                fprintf(stderr, "weir-bench: unknown algorithm '%s'\n", v);
                return -1;
            }
            o->algos |= 1u << alg;
            i++;
        } else if (strcmp(a, "--keys") == 0 && v) {
            char buf[64];
            snprintf(buf, sizeof(buf), "%s", v);
            char *comma = strchr(buf, ',');
            if (comma)
                *comma = '\0';
            if (!parse_u64(buf, 1, BENCH_MAX_KEYS, &mid) ||
                (comma && !parse_u64(comma + 1, 1, BENCH_MAX_KEYS, &big)))
                goto bad;
            i++;
        } else if (strcmp(a, "--ops") == 0 && v) {
            if (!parse_u64(v, 1000, 1000000000, &ops))
                goto bad;
            i++;
        } else if (strcmp(a, "--reps") == 0 && v) {
            if (!parse_u64(v, 1, BENCH_REPS_MAX, &reps))
                goto bad;
            i++;
        } else if (strcmp(a, "--batch") == 0 && v) {
            if (!parse_u64(v, 1, MAX_BATCH, &batch))
                goto bad;
            i++;
        } else if (strcmp(a, "--warmup") == 0 && v) {
            /* token_bucket with a warm-up (docs/ALGORITHMS.md) */
            if (weir_duration_parse(v, &o->warmup_us) != WEIR_OK || o->warmup_us <= 0)
                goto bad;
            i++;
        } else if (strcmp(a, "--thread-seconds") == 0 && v) {
            thread_s = strtod(v, NULL);
            if (!(thread_s > 0 && thread_s <= 60))
                goto bad;
            i++;
        } else {
            goto bad;
        }
        continue;
    bad:
        fprintf(stderr, "weir-bench: bad argument '%s'\n", a);
        usage(stderr);
        return -1;
    }
    if (!o->sections)
        o->sections = BENCH_ALL;
    if (!o->algos)
        for (unsigned k = 1; k <= WEIR_ALGORITHM_COUNT; k++)
            o->algos |= 1u << k;
    o->ops = ops ? ops : (o->quick ? 200000 : 3000000);
    o->reps = reps ? (unsigned)reps : (o->quick ? 3 : 5);
    o->thread_s = thread_s > 0 ? thread_s : (o->quick ? 0.1 : 0.6);
    o->batch = (unsigned)batch;
    o->keys[0] = 1;
    o->keys[1] = mid ? mid : (o->quick ? 20000 : 1000000);
    o->keys[2] = big ? big : (mid ? mid * 10 : (o->quick ? 200000 : 10000000));
    return 0;
}

/* ------------------------------------------------------------------ the store side */

static weir_status compile_limit(weir_algorithm a, int64_t warmup_us, weir_limit *lim)
{
    weir_limit_spec spec;
    memset(&spec, 0, sizeof(spec));
    spec.algorithm = a;
    spec.warmup_us = a == WEIR_ALGO_TOKEN_BUCKET ? warmup_us : 0;
    spec.window_us = BENCH_WINDOW_US;
    bool grows = a == WEIR_ALGO_SLIDING_LOG || a == WEIR_ALGO_CONCURRENCY;
    spec.limit = grows ? BENCH_SMALL_LIMIT : BENCH_LIMIT;
    return weir_limit_compile(&spec, lim);
}

bool bench_fixed_size(const weir_limit *lim)
{
    return weir_state_size(lim) == WEIR_STATE_FIXED_BYTES;
}

/* Every key once, all at now_us: nothing comes to rest during the warm-up,
 * so the incremental sweep removes nothing and all keys are present. */
static uint64_t warm_up(weir_store *s, const weir_limit *lim, uint64_t nkeys, int64_t now_us)
{
    uint64_t errors = 0;
    for (uint64_t i = 0; i < nkeys; i++) {
        bench_key k;
        bench_key_make(i, &k);
        weir_result r;
        if (weir_memstore_take(s, k.b, bench_key_len(&k), lim, now_us, 1, &r) != WEIR_OK ||
            !r.allowed)
            errors++;
    }
    return errors;
}

/* One timed run of single takes; returns seconds. */
static double run_takes(weir_store *s, const weir_limit *lim, const bench_key *stream, size_t n,
                        int64_t *now_us, uint64_t *allowed, uint64_t *errors)
{
    int64_t now = *now_us;
    uint64_t ok = 0, bad = 0;
    double t0 = bench_now_s();
    for (size_t i = 0; i < n; i++) {
        weir_result r;
        weir_status st =
            weir_memstore_take(s, stream[i].b, bench_key_len(&stream[i]), lim, now++, 1, &r);
        if (st == WEIR_OK)
            ok += r.allowed;
        else
            bad++;
    }
    double t1 = bench_now_s();
    *now_us = now;
    *allowed += ok;
    *errors += bad;
    return t1 - t0;
}

/* One timed run of batches of `bs` takes at one time each; returns
 * seconds, *done = decisions made (n rounded down to whole batches). */
static double run_batches(weir_store *s, const weir_limit *lim, const bench_key *stream, size_t n,
                          unsigned bs, int64_t *now_us, uint64_t *errors, size_t *done)
{
    static weir_op ops[MAX_BATCH];
    memset(ops, 0, sizeof(ops));
    size_t nb = n / bs;
    int64_t now = *now_us;
    uint64_t bad = 0;
    double t0 = bench_now_s();
    for (size_t b = 0; b < nb; b++) {
        const bench_key *k = &stream[b * bs];
        for (unsigned j = 0; j < bs; j++) {
            ops[j].key = k[j].b;
            ops[j].key_len = bench_key_len(&k[j]);
            ops[j].limit = lim;
            ops[j].hits = 1;
            ops[j].kind = WEIR_OP_TAKE;
        }
        if (weir_memstore_run(s, ops, bs, now, 0) != WEIR_OK) {
            bad += bs;
        } else {
            for (unsigned j = 0; j < bs; j++)
                bad += ops[j].status != WEIR_OK;
        }
        now += bs;
    }
    double t1 = bench_now_s();
    *now_us = now;
    *errors += bad;
    *done = nb * bs;
    return t1 - t0;
}

typedef struct worker {
    pthread_t tid;
    weir_store *store;
    const weir_limit *lim;
    const bench_key *stream;
    size_t n;
    int64_t now_us;
    pthread_barrier_t *start;
    atomic_bool *stop;
    uint64_t decisions;
    uint64_t errors;
    double secs;
    double cpu_secs; /* CPU time the thread got while running */
} worker;

static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    pthread_barrier_wait(w->start);
    double t0 = bench_now_s();
    double c0 = thread_cpu_s();
    size_t i = 0;
    int64_t now = w->now_us;
    uint64_t bad = 0, done = 0;
    while (!atomic_load_explicit(w->stop, memory_order_relaxed)) {
        for (unsigned k = 0; k < STOP_STRIDE; k++) {
            weir_result r;
            const bench_key *key = &w->stream[i];
            bad += weir_memstore_take(w->store, key->b, bench_key_len(key), w->lim, now++, 1, &r) !=
                   WEIR_OK;
            if (++i == w->n)
                i = 0;
        }
        done += STOP_STRIDE;
    }
    w->secs = bench_now_s() - t0;
    w->cpu_secs = thread_cpu_s() - c0;
    w->decisions = done;
    w->errors = bad;
    w->now_us = now;
    return NULL;
}

/* One throughput run of `secs` with nt threads, each on its own stream;
 * returns decisions per second summed over the threads, or -1. *cpu_share
 * is the CPU time the threads got over nt * the wall time: below 1 when
 * other processes took a core. */
static double run_threads(weir_store *s, const weir_limit *lim, bench_key *const *streams, size_t n,
                          unsigned nt, double secs, int64_t *now_us, uint64_t *errors,
                          double *cpu_share)
{
    worker w[MAX_THREADS];
    pthread_barrier_t start;
    atomic_bool stop = false;
    if (pthread_barrier_init(&start, NULL, nt + 1) != 0)
        return -1;
    unsigned made = 0;
    for (; made < nt; made++) {
        w[made] = (worker){.store = s,
                           .lim = lim,
                           .stream = streams[made],
                           .n = n,
                           .now_us = *now_us,
                           .start = &start,
                           .stop = &stop};
        if (pthread_create(&w[made].tid, NULL, worker_main, &w[made]) != 0)
            break;
    }
    if (made < nt) {
        /* The started ones wait at the barrier for good: just leave. */
        fprintf(stderr, "weir-bench: pthread_create failed\n");
        exit(1);
    }
    pthread_barrier_wait(&start);
    struct timespec ts = {(time_t)secs, (long)((secs - (double)(time_t)secs) * 1e9)};
    nanosleep(&ts, NULL);
    atomic_store(&stop, true);
    double rate = 0, cpu = 0, wall = 0;
    for (unsigned k = 0; k < nt; k++) {
        pthread_join(w[k].tid, NULL);
        rate += (double)w[k].decisions / w[k].secs;
        cpu += w[k].cpu_secs;
        wall += w[k].secs;
        *errors += w[k].errors;
        if (w[k].now_us > *now_us)
            *now_us = w[k].now_us;
    }
    pthread_barrier_destroy(&start);
    *cpu_share = wall > 0 ? cpu / wall : 0;
    return rate;
}

/* ------------------------------------------------------------------ sections */

typedef struct streams {
    bench_key *s[BENCH_SIZES];
    bench_key *second; /* the second thread's stream over keys[1] */
} streams;

static bench_key *make_stream(uint64_t nkeys, size_t n, uint64_t seed)
{
    bench_key *k = bench_stream_new(nkeys, n, seed);
    if (!k) {
        fprintf(stderr, "weir-bench: out of memory for the key streams\n");
        exit(1);
    }
    return k;
}

/* Every stream the chosen sections read, made before anything is timed. */
static void make_streams(const bench_options *o, streams *st)
{
    unsigned sec = o->sections;
    bool need[BENCH_SIZES] = {
        (sec & BENCH_SINGLE) != 0,
        (sec & (BENCH_SINGLE | BENCH_BATCH | BENCH_THREADS | BENCH_BASELINE)) != 0,
        (sec & (BENCH_SINGLE | BENCH_BASELINE)) != 0,
    };
    double t0 = bench_now_s();
    for (int k = 0; k < BENCH_SIZES; k++)
        if (need[k])
            st->s[k] = make_stream(o->keys[k], o->ops, 0x5eed0000u + (uint64_t)k);
    if (sec & BENCH_THREADS)
        st->second = make_stream(o->keys[1], o->ops, 0x5eed1000u);
    progress("key streams: %zu keys each, made in %.1f s\n", o->ops, bench_now_s() - t0);
}

/* Everything measured on one store of one algorithm at one key count. */
static void measure_size(bench_results *res, weir_ctx *shared_ctx, weir_algorithm a, int size,
                         streams *st)
{
    const bench_options *o = &res->opt;
    bench_algo *ar = &res->algo[a];
    const weir_limit *lim = &ar->lim;
    uint64_t nkeys = o->keys[size];
    char label[32];
    bench_count_label(nkeys, label, sizeof(label));
    bool do_single = o->sections & BENCH_SINGLE;
    bool do_mem = (o->sections & BENCH_MEMORY) && size > 0;
    bool do_batch = (o->sections & BENCH_BATCH) && size == 1;
    bool do_threads = (o->sections & BENCH_THREADS) && size == 1 && headline(a);
    if (!do_single && !do_mem && !do_batch && !do_threads)
        return;

    bench_trim();
    uint64_t rss0 = bench_rss_bytes();
    weir_ctx *ctx = shared_ctx;
    bench_arena *arena = NULL;
    if (o->hugepages) {
        /* Address space only: pages are touched as the store grows. */
        arena = bench_arena_new(((size_t)nkeys + 65536) * ARENA_BYTES_PER_KEY);
        if (!arena) {
            fprintf(stderr, "weir-bench: cannot map the huge page arena\n");
            exit(1);
        }
        weir_allocator al = bench_arena_allocator(arena);
        weir_ctx_options co = {.size = sizeof(co), .allocator = &al};
        if (weir_ctx_new(&co, &ctx) != WEIR_OK) {
            fprintf(stderr, "weir-bench: cannot set up the huge page arena\n");
            exit(1);
        }
    }
    weir_store *s;
    if (weir_memstore_new(ctx, NULL, &s) != WEIR_OK) {
        fprintf(stderr, "weir-bench: weir_memstore_new failed\n");
        exit(1);
    }
    progress("%-24s %4s keys: warm-up", weir_algorithm_name(a), label);
    double tw = bench_now_s();
    ar->errors += warm_up(s, lim, nkeys, T0_US);
    progress(" %.1fs", bench_now_s() - tw);
    weir_store_stats before;
    weir_store_stats_get(s, &before);
    if (size > 0) {
        ar->mem_ok[size] = true;
        ar->mem_keys[size] = before.keys;
        ar->mem_bytes[size] = before.bytes;
        uint64_t rss1 = bench_rss_bytes();
        ar->rss_bytes[size] = rss1 > rss0 ? rss1 - rss0 : 0;
        progress(", %.1f B/key", (double)before.bytes / (double)before.keys);
    }
    int64_t now = T0_US + 1;
    double v[BENCH_REPS_MAX];

    if (do_single) {
        const bench_key *stream = st->s[size];
        for (unsigned r = 0; r < o->reps; r++) {
            double secs = run_takes(s, lim, stream, o->ops, &now, &ar->allowed[size], &ar->errors);
            v[r] = secs * 1e9 / (double)o->ops;
            ar->decisions[size] += o->ops;
        }
        ar->single_ns[size] = bench_stat_of(v, o->reps);
        progress(", single %.1f ns", ar->single_ns[size].med);
    }
    if (do_batch) {
        const bench_key *stream = st->s[size];
        for (unsigned r = 0; r < o->reps; r++) {
            size_t done;
            double secs = run_batches(s, lim, stream, o->ops, o->batch, &now, &ar->errors, &done);
            v[r] = secs * 1e9 / (double)done;
        }
        ar->batch_ns = bench_stat_of(v, o->reps);
        progress(", batch%u %.1f ns", o->batch, ar->batch_ns.med);
        if (a == WEIR_ALGO_TOKEN_BUCKET) {
            for (unsigned k = 0; k < BENCH_SWEEP; k++) {
                res->sweep_size[k] = sweep_sizes[k];
                for (unsigned r = 0; r < o->reps; r++) {
                    size_t done;
                    double secs = run_batches(s, lim, stream, o->ops, sweep_sizes[k], &now,
                                              &ar->errors, &done);
                    v[r] = secs * 1e9 / (double)done;
                }
                res->sweep_ns[k] = bench_stat_of(v, o->reps);
            }
        }
    }
    if (do_threads) {
        bench_key *two[MAX_THREADS] = {st->s[size], st->second};
        /* 1 and 2 threads alternate, so that both see the same
         * disturbance from whatever else runs on the machine. */
        double rate[MAX_THREADS][BENCH_REPS_MAX], share[MAX_THREADS][BENCH_REPS_MAX];
        for (unsigned r = 0; r < o->reps; r++)
            for (unsigned nt = 1; nt <= MAX_THREADS; nt++)
                rate[nt - 1][r] = run_threads(s, lim, two, o->ops, nt, o->thread_s, &now,
                                              &ar->errors, &share[nt - 1][r]);
        for (unsigned nt = 1; nt <= MAX_THREADS; nt++) {
            ar->tput[nt - 1] = bench_stat_of(rate[nt - 1], o->reps);
            ar->cpu_share[nt - 1] = bench_stat_of(share[nt - 1], o->reps);
            progress(", %uT %.1f M/s (cpu %.0f%%)", nt, ar->tput[nt - 1].med / 1e6,
                     ar->cpu_share[nt - 1].med * 100);
        }
    }

    weir_store_stats after;
    weir_store_stats_get(s, &after);
    ar->churn += (after.expirations - before.expirations) + (after.evictions - before.evictions);
    progress("\n");
    double tf = bench_now_s();
    weir_store_free(s);
    if (arena) {
        weir_ctx_free(ctx);
        bench_arena_free(arena);
    }
    if (bench_now_s() - tf > 1.0)
        progress("  (free took %.1fs)\n", bench_now_s() - tf);
}

static void run_baseline(bench_results *res, streams *st)
{
    const bench_options *o = &res->opt;
    for (int k = 0; k < 2; k++) {
        char label[32];
        bench_count_label(o->keys[k + 1], label, sizeof(label));
        progress("baseline                 %4s keys:", label);
        const bench_key *stream = st->s[k + 1];
        bench_trim();
        res->base_ok[k] = bench_baseline_run(o->keys[k + 1], stream, o->ops, o->reps, T0_US,
                                             o->hugepages, &res->base[k]);
        if (res->base_ok[k])
            progress(
                " table %.1f ns, locked %.1f ns, padded %.1f ns, batch %.1f ns, hash %.1f ns\n",
                res->base[k].table_ns.med, res->base[k].locked_ns.med, res->base[k].padded_ns.med,
                res->base[k].batch_ns.med, res->base[k].hash_ns.med);
        else
            progress(" failed (out of memory?)\n");
    }
}

int main(int argc, char **argv)
{
    static bench_results res;
    if (parse_options(argc, argv, &res.opt) != 0)
        return 2;
    const bench_options *o = &res.opt;
    bench_machine_get(&res.machine);
    if (!res.machine.release)
        progress("weir-bench: warning: not a release build (NDEBUG unset); numbers are not "
                 "representative\n");
    double t_start = bench_now_s();

    weir_ctx *ctx;
    if (weir_ctx_new(NULL, &ctx) != WEIR_OK) {
        fprintf(stderr, "weir-bench: weir_ctx_new failed\n");
        return 1;
    }
    streams st;
    memset(&st, 0, sizeof(st));
    make_streams(o, &st);

    for (unsigned a = 1; a <= WEIR_ALGORITHM_COUNT; a++) {
        if (!(o->algos & (1u << a)))
            continue;
        bench_algo *ar = &res.algo[a];
        if (compile_limit((weir_algorithm)a, o->warmup_us, &ar->lim) != WEIR_OK) {
            fprintf(stderr, "weir-bench: cannot compile a limit for %s\n",
                    weir_algorithm_name((weir_algorithm)a));
            return 1;
        }
        ar->ran = true;
        for (int size = 0; size < BENCH_SIZES; size++)
            measure_size(&res, ctx, (weir_algorithm)a, size, &st);
    }
    if (o->sections & BENCH_BASELINE)
        run_baseline(&res, &st);

    for (int k = 0; k < BENCH_SIZES; k++)
        free(st.s[k]);
    free(st.second);
    weir_ctx_free(ctx);
    res.total_s = bench_now_s() - t_start;
    bench_loadavg(res.machine.loadavg_end, sizeof(res.machine.loadavg_end));

    if (o->json)
        bench_report_json(&res);
    else
        bench_report_text(&res);
    return 0;
}
