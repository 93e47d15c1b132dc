/*
 * report.c - print weir-bench's results: the machine, one table per
 * section, and whether each of the project's targets is met; or the same
 * as one JSON object. Only what was measured is printed; targets are judged
 * only at the full key counts (1M and 10M), never in a --quick run.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"

/* The project's targets (docs/BENCHMARKS.md). */
#define TARGET_SINGLE_NS 75.0
#define TARGET_BATCH_NS 30.0
#define TARGET_SCALING 1.8
#define TARGET_BYTES_PER_KEY 64.0
/* Below this CPU share a throughput run was disturbed by other processes. */
#define CALM_CPU_SHARE 0.9
#define FULL_MID 1000000u
#define FULL_BIG 10000000u

static const weir_algorithm headline[] = {WEIR_ALGO_TOKEN_BUCKET, WEIR_ALGO_GCRA,
                                          WEIR_ALGO_SLIDING_COUNTER};
#define NHEADLINE (sizeof(headline) / sizeof(headline[0]))

const char *bench_count_label(uint64_t n, char *buf, size_t cap)
{
    if (n >= 1000000 && n % 1000000 == 0)
        snprintf(buf, cap, "%" PRIu64 "M", n / 1000000);
    else if (n >= 1000 && n % 1000 == 0)
        snprintf(buf, cap, "%" PRIu64 "k", n / 1000);
    else
        snprintf(buf, cap, "%" PRIu64, n);
    return buf;
}

static double per_key(uint64_t bytes, uint64_t keys)
{
    return keys ? (double)bytes / (double)keys : 0.0;
}

static double ratio(const bench_stat *a, const bench_stat *b)
{
    return a->ok && b->ok && b->med > 0 ? a->med / b->med : 0.0;
}

/* 2T/1T with each throughput divided by the CPU share its threads got. */
static double per_cpu_scaling(const bench_algo *ar)
{
    double c1 = ar->cpu_share[0].med, c2 = ar->cpu_share[1].med;
    if (!ar->tput[0].ok || !ar->tput[1].ok || c1 <= 0 || c2 <= 0)
        return 0.0;
    return (ar->tput[1].med / c2) / (ar->tput[0].med / c1);
}

static bool full_scale(const bench_options *o)
{
    return o->keys[1] == FULL_MID && o->keys[2] == FULL_BIG;
}

/* ------------------------------------------------------------------ text */

static void header(const bench_results *r)
{
    const bench_machine *m = &r->machine;
    const bench_options *o = &r->opt;
    printf("weir-bench: the memory store (weir_memstore_*), %s\n",
           o->quick ? "QUICK run (small key counts)" : "full run");
    printf("machine   %s (cache %s), %ld cores online, %s\n", m->cpu, m->cache, m->cores,
           m->kernel);
    printf("build     %s, %s%s\n", m->compiler,
           m->release ? "release (NDEBUG)" : "NOT a release build",
           o->hugepages ? "; --hugepages: stores and the bare table on 2 MB pages (THP)" : "");
    printf("date      %s, load average at start %s, at end %s\n", m->date, m->loadavg,
           m->loadavg_end);
    printf("method    keys \"user:<n>\" drawn uniformly at random (fixed seed), every key\n"
           "          inserted once before timing; limit %u/s (sliding_window_log and\n"
           "          concurrency: %u/s so that 10M keys fit), 1 hit per decision, clock\n"
           "          +1 us per decision; %zu decisions per run, median of %u runs;\n"
           "          range = (max - min) / median; admit%% = decisions admitted\n",
           BENCH_LIMIT, BENCH_SMALL_LIMIT, o->ops, o->reps);
}

static void section_single(const bench_results *r)
{
    const bench_options *o = &r->opt;
    char l[BENCH_SIZES][32];
    for (int k = 0; k < BENCH_SIZES; k++)
        bench_count_label(o->keys[k], l[k], sizeof(l[k]));
    printf("\n1. Single thread, weir_memstore_take: ns per decision\n");
    printf("%-24s", "");
    for (int k = 0; k < BENCH_SIZES; k++) {
        char col[128];
        snprintf(col, sizeof(col), "%s %s", l[k], o->keys[k] == 1 ? "key" : "keys");
        printf("  %-20s", col);
    }
    printf("\n%-24s", "algorithm");
    for (int k = 0; k < BENCH_SIZES; k++)
        printf("  %7s %5s %6s", "ns", "range", "admit%");
    printf("\n");
    for (int a = 1; a <= WEIR_ALGORITHM_COUNT; a++) {
        const bench_algo *ar = &r->algo[a];
        if (!ar->ran)
            continue;
        printf("%-24s", weir_algorithm_name((weir_algorithm)a));
        for (int k = 0; k < BENCH_SIZES; k++) {
            const bench_stat *s = &ar->single_ns[k];
            if (!s->ok) {
                printf("  %7s %5s %6s", "-", "", "");
                continue;
            }
            double admit =
                ar->decisions[k] ? 100.0 * (double)ar->allowed[k] / (double)ar->decisions[k] : 0;
            printf("  %7.1f %4.0f%% %6.2f", s->med, bench_spread_pct(s), admit);
        }
        printf("\n");
    }
}

static void section_batch(const bench_results *r)
{
    const bench_options *o = &r->opt;
    char l[32];
    bench_count_label(o->keys[1], l, sizeof(l));
    printf("\n2. Batch, weir_memstore_run with %u ops per call, %s keys: ns per decision\n",
           o->batch, l);
    printf("%-24s  %7s %5s  %7s  %12s\n", "algorithm", "batch", "range", "single", "batch/single");
    for (int a = 1; a <= WEIR_ALGORITHM_COUNT; a++) {
        const bench_algo *ar = &r->algo[a];
        if (!ar->ran || !ar->batch_ns.ok)
            continue;
        printf("%-24s  %7.1f %4.0f%%", weir_algorithm_name((weir_algorithm)a), ar->batch_ns.med,
               bench_spread_pct(&ar->batch_ns));
        if (ar->single_ns[1].ok)
            printf("  %7.1f  %12.2f\n", ar->single_ns[1].med,
                   ratio(&ar->batch_ns, &ar->single_ns[1]));
        else
            printf("  %7s  %12s\n", "-", "-");
    }
    if (r->sweep_ns[0].ok) {
        printf("token_bucket by batch size (ns per decision, range):\n ");
        for (int k = 0; k < BENCH_SWEEP; k++)
            printf(" %u: %.1f (%.0f%%)", r->sweep_size[k], r->sweep_ns[k].med,
                   bench_spread_pct(&r->sweep_ns[k]));
        printf("\n");
    }
}

static void section_threads(const bench_results *r)
{
    const bench_options *o = &r->opt;
    char l[32];
    bench_count_label(o->keys[1], l, sizeof(l));
    printf("\n3. Throughput, weir_memstore_take on %s keys, one shared store: decisions/s\n"
           "   (each thread its own random stream; median of %u runs of %.1f s)\n",
           l, o->reps, o->thread_s);
    printf("%-24s  %10s %5s %4s  %10s %5s %4s  %6s %7s\n", "algorithm", "1 thread", "range", "cpu",
           "2 threads", "range", "cpu", "2T/1T", "per-cpu");
    for (int a = 1; a <= WEIR_ALGORITHM_COUNT; a++) {
        const bench_algo *ar = &r->algo[a];
        if (!ar->ran || !ar->tput[0].ok)
            continue;
        printf("%-24s  %9.2fM %4.0f%% %3.0f%%  %9.2fM %4.0f%% %3.0f%%  %5.2fx %6.2fx\n",
               weir_algorithm_name((weir_algorithm)a), ar->tput[0].med / 1e6,
               bench_spread_pct(&ar->tput[0]), ar->cpu_share[0].med * 100, ar->tput[1].med / 1e6,
               bench_spread_pct(&ar->tput[1]), ar->cpu_share[1].med * 100,
               ratio(&ar->tput[1], &ar->tput[0]), per_cpu_scaling(ar));
    }
    printf("   cpu = CPU time the bench threads got / (threads x wall time): below 100%%,\n"
           "   another process held a core. per-cpu = 2T/1T with each rate divided by its\n"
           "   cpu share, an estimate of the scaling on two idle cores (not the target).\n");
}

static void section_memory(const bench_results *r)
{
    const bench_options *o = &r->opt;
    char l1[32], l2[32];
    bench_count_label(o->keys[1], l1, sizeof(l1));
    bench_count_label(o->keys[2], l2, sizeof(l2));
    printf("\n4. Memory: weir_store_stats_get bytes / keys (\"RSS\": growth of the resident set\n"
           "   during the warm-up / keys, a cross-check)\n");
    printf("%-24s  %7s  %8s %8s  %8s %8s\n", "algorithm", "state B", "", l1, "", l2);
    printf("%-24s  %7s  %8s %8s  %8s %8s\n", "", "", "B/key", "RSS/key", "B/key", "RSS/key");
    for (int a = 1; a <= WEIR_ALGORITHM_COUNT; a++) {
        const bench_algo *ar = &r->algo[a];
        if (!ar->ran || (!ar->mem_ok[1] && !ar->mem_ok[2]))
            continue;
        printf("%-24s  %7zu", weir_algorithm_name((weir_algorithm)a), weir_state_size(&ar->lim));
        for (int k = 1; k < BENCH_SIZES; k++) {
            if (!ar->mem_ok[k]) {
                printf("  %8s %8s", "-", "-");
                continue;
            }
            printf("  %8.1f %8.1f", per_key(ar->mem_bytes[k], ar->mem_keys[k]),
                   per_key(ar->rss_bytes[k], ar->mem_keys[k]));
        }
        printf("%s\n", bench_fixed_size(&ar->lim) ? "" : "  (variable-size state)");
    }
}

static void section_baseline(const bench_results *r)
{
    const bench_options *o = &r->opt;
    printf("\n5. Baseline: a bare open-addressing token bucket table written in the bench\n"
           "   (no locks, no expiry; bench/baseline.c), 1 thread: ns per decision\n");
    printf("%-24s", "");
    for (int k = 0; k < 2; k++) {
        char l[32];
        bench_count_label(o->keys[k + 1], l, sizeof(l));
        printf("  %7s %-6s", l, "keys");
    }
    printf("\n");
    static const char *rows[] = {
        "bare table",       "  + shard lock",    "  + lock + 100 instr",    "bare table, batch 64",
        "hash only (XXH3)", "weir token_bucket", "weir token_bucket, batch"};
    for (int row = 0; row < 7; row++) {
        printf("%-24s", rows[row]);
        for (int k = 0; k < 2; k++) {
            const bench_stat *s = NULL;
            if (row == 0 && r->base_ok[k])
                s = &r->base[k].table_ns;
            else if (row == 1 && r->base_ok[k])
                s = &r->base[k].locked_ns;
            else if (row == 2 && r->base_ok[k])
                s = &r->base[k].padded_ns;
            else if (row == 3 && r->base_ok[k])
                s = &r->base[k].batch_ns;
            else if (row == 4 && r->base_ok[k])
                s = &r->base[k].hash_ns;
            else if (row == 5)
                s = &r->algo[WEIR_ALGO_TOKEN_BUCKET].single_ns[k + 1];
            else if (row == 6 && k == 0)
                s = &r->algo[WEIR_ALGO_TOKEN_BUCKET].batch_ns;
            if (s && s->ok)
                printf("  %7.1f %4.0f%% ", s->med, bench_spread_pct(s));
            else
                printf("  %7s %5s ", "-", "");
        }
        printf("\n");
    }
    printf("%-24s", "bare table bytes/key");
    for (int k = 0; k < 2; k++) {
        if (r->base_ok[k])
            printf("  %7.1f %6s", per_key(r->base[k].table_bytes, o->keys[k + 1]), "");
        else
            printf("  %7s %6s", "-", "");
    }
    printf("\n");
}

/* One verdict line. */
static void verdict(const char *what, bool measured, double value, bool at_most, double bound,
                    const char *unit, bool judge)
{
    if (!measured) {
        printf("  [not run] %s\n", what);
        return;
    }
    bool met = at_most ? value <= bound : value >= bound;
    printf("  [%s] %s: %.2f%s (target %s %.2f%s)\n",
           !judge ? "n/a   "
           : met  ? "met   "
                  : "MISSED",
           what, value, unit, at_most ? "<=" : ">=", bound, unit);
}

static void section_targets(const bench_results *r)
{
    const bench_options *o = &r->opt;
    bool judge = full_scale(o);
    printf("\nTargets%s\n", judge ? "" : " (not judged: key counts are not 1M/10M)");
    char what[128];
    for (size_t i = 0; i < NHEADLINE; i++) {
        const bench_algo *ar = &r->algo[headline[i]];
        const char *name = weir_algorithm_name(headline[i]);
        if (!ar->ran)
            continue;
        snprintf(what, sizeof(what), "%s single thread, 1M random keys", name);
        verdict(what, ar->single_ns[1].ok, ar->single_ns[1].med, true, TARGET_SINGLE_NS, " ns",
                judge);
    }
    for (size_t i = 0; i < NHEADLINE; i++) {
        const bench_algo *ar = &r->algo[headline[i]];
        if (!ar->ran)
            continue;
        snprintf(what, sizeof(what), "%s 2 threads / 1 thread", weir_algorithm_name(headline[i]));
        verdict(what, ar->tput[0].ok && ar->tput[1].ok, ratio(&ar->tput[1], &ar->tput[0]), false,
                TARGET_SCALING, "x", judge);
        double low = ar->cpu_share[0].med < ar->cpu_share[1].med ? ar->cpu_share[0].med
                                                                 : ar->cpu_share[1].med;
        if (ar->tput[0].ok && low < CALM_CPU_SHARE)
            printf("           disturbed: the threads got only %.0f%% of their cores; "
                   "per-cpu estimate %.2fx\n",
                   low * 100, per_cpu_scaling(ar));
    }
    for (size_t i = 0; i < NHEADLINE; i++) {
        const bench_algo *ar = &r->algo[headline[i]];
        if (!ar->ran)
            continue;
        snprintf(what, sizeof(what), "%s batch of %u, 1M keys", weir_algorithm_name(headline[i]),
                 o->batch);
        verdict(what, ar->batch_ns.ok, ar->batch_ns.med, true, TARGET_BATCH_NS, " ns", judge);
    }
    for (int a = 1; a <= WEIR_ALGORITHM_COUNT; a++) {
        const bench_algo *ar = &r->algo[a];
        if (!ar->ran || !bench_fixed_size(&ar->lim))
            continue;
        snprintf(what, sizeof(what), "%s bytes per key, 10M keys",
                 weir_algorithm_name((weir_algorithm)a));
        verdict(what, ar->mem_ok[2], per_key(ar->mem_bytes[2], ar->mem_keys[2]), true,
                TARGET_BYTES_PER_KEY, " B", judge);
    }
}

static void footer(const bench_results *r)
{
    uint64_t errors = 0, churn = 0;
    for (int a = 1; a <= WEIR_ALGORITHM_COUNT; a++) {
        errors += r->algo[a].errors;
        churn += r->algo[a].churn;
    }
    printf("\nchecks    %" PRIu64 " calls failed; %" PRIu64
           " keys expired or evicted while timing (both should be 0)\n",
           errors, churn);
    printf("total     %.0f s\n", r->total_s);
}

void bench_report_text(const bench_results *r)
{
    unsigned sec = r->opt.sections;
    header(r);
    if (sec & BENCH_SINGLE)
        section_single(r);
    if (sec & BENCH_BATCH)
        section_batch(r);
    if (sec & BENCH_THREADS)
        section_threads(r);
    if (sec & BENCH_MEMORY)
        section_memory(r);
    if (sec & BENCH_BASELINE)
        section_baseline(r);
    section_targets(r);
    footer(r);
}

/* ------------------------------------------------------------------ JSON */

/* The strings printed here come from /proc and uname: escape the two
 * characters that could break the JSON. */
static void json_str(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            putchar('\\');
        if ((unsigned char)*s >= 0x20)
            putchar(*s);
    }
    putchar('"');
}

static void json_stat(const char *name, const bench_stat *s, bool comma)
{
    if (s->ok)
        printf("\"%s\": {\"median\": %.3f, \"min\": %.3f, \"max\": %.3f}", name, s->med, s->min,
               s->max);
    else
        printf("\"%s\": null", name);
    if (comma)
        printf(", ");
}

void bench_report_json(const bench_results *r)
{
    const bench_machine *m = &r->machine;
    const bench_options *o = &r->opt;
    printf("{\n  \"machine\": {\"cpu\": ");
    json_str(m->cpu);
    printf(", \"cache\": ");
    json_str(m->cache);
    printf(", \"cores\": %ld, \"kernel\": ", m->cores);
    json_str(m->kernel);
    printf(", \"compiler\": ");
    json_str(m->compiler);
    printf(", \"release\": %s, \"date\": ", m->release ? "true" : "false");
    json_str(m->date);
    printf(", \"loadavg\": ");
    json_str(m->loadavg);
    printf(", \"loadavg_end\": ");
    json_str(m->loadavg_end);
    printf("},\n  \"config\": {\"quick\": %s, \"ops\": %zu, \"reps\": %u, \"batch\": %u, "
           "\"thread_seconds\": %.2f, \"limit\": %u, \"small_limit\": %u, \"window_us\": %d, "
           "\"hugepages\": %s, \"keys\": [%" PRIu64 ", %" PRIu64 ", %" PRIu64 "]},\n",
           o->quick ? "true" : "false", o->ops, o->reps, o->batch, o->thread_s, BENCH_LIMIT,
           BENCH_SMALL_LIMIT, BENCH_WINDOW_US, o->hugepages ? "true" : "false", o->keys[0],
           o->keys[1], o->keys[2]);
    printf("  \"algorithms\": [");
    bool first = true;
    for (int a = 1; a <= WEIR_ALGORITHM_COUNT; a++) {
        const bench_algo *ar = &r->algo[a];
        if (!ar->ran)
            continue;
        printf("%s\n    {\"name\": \"%s\", \"limit\": %" PRIu64 ", \"state_bytes\": %zu, ",
               first ? "" : ",", weir_algorithm_name((weir_algorithm)a), ar->lim.limit,
               weir_state_size(&ar->lim));
        first = false;
        printf("\"single_ns\": [");
        for (int k = 0; k < BENCH_SIZES; k++) {
            const bench_stat *s = &ar->single_ns[k];
            if (s->ok)
                printf("{\"keys\": %" PRIu64 ", \"median\": %.3f, \"min\": %.3f, \"max\": %.3f, "
                       "\"admitted\": %" PRIu64 ", \"decisions\": %" PRIu64 "}",
                       o->keys[k], s->med, s->min, s->max, ar->allowed[k], ar->decisions[k]);
            else
                printf("null");
            printf(k + 1 < BENCH_SIZES ? ", " : "], ");
        }
        json_stat("batch_ns", &ar->batch_ns, true);
        json_stat("decisions_per_s_1_thread", &ar->tput[0], true);
        json_stat("decisions_per_s_2_threads", &ar->tput[1], true);
        json_stat("cpu_share_1_thread", &ar->cpu_share[0], true);
        json_stat("cpu_share_2_threads", &ar->cpu_share[1], true);
        printf("\"memory\": [");
        for (int k = 1; k < BENCH_SIZES; k++) {
            if (ar->mem_ok[k])
                printf("{\"keys\": %" PRIu64 ", \"bytes\": %" PRIu64 ", \"rss_growth\": %" PRIu64
                       "}",
                       ar->mem_keys[k], ar->mem_bytes[k], ar->rss_bytes[k]);
            else
                printf("null");
            printf(k + 1 < BENCH_SIZES ? ", " : "], ");
        }
        printf("\"errors\": %" PRIu64 ", \"churn\": %" PRIu64 "}", ar->errors, ar->churn);
    }
    printf("\n  ],\n  \"batch_sweep_token_bucket\": [");
    for (int k = 0; k < BENCH_SWEEP && r->sweep_ns[k].ok; k++) {
        printf("%s{\"batch\": %u, ", k ? ", " : "", r->sweep_size[k]);
        json_stat("ns", &r->sweep_ns[k], false);
        printf("}");
    }
    printf("],\n  \"baseline\": [");
    for (int k = 0; k < 2; k++) {
        if (r->base_ok[k]) {
            printf("{\"keys\": %" PRIu64 ", ", o->keys[k + 1]);
            json_stat("table_ns", &r->base[k].table_ns, true);
            json_stat("hash_ns", &r->base[k].hash_ns, true);
            json_stat("batch_ns", &r->base[k].batch_ns, true);
            json_stat("locked_ns", &r->base[k].locked_ns, true);
            json_stat("padded_ns", &r->base[k].padded_ns, true);
            printf("\"table_bytes\": %" PRIu64 "}", r->base[k].table_bytes);
        } else {
            printf("null");
        }
        printf(k == 0 ? ", " : "");
    }
    printf("],\n  \"total_seconds\": %.1f\n}\n", r->total_s);
}
