/*
 * metrics_internal.h - what metrics.c (the shards, weir's own series, the
 * exposition) and metrics_upstream.c (upstream's per-descriptor
 * counters, their series and the statsd sink's deltas) share: the shard
 * layout and its tables of series.
 *
 * Every field of a shard but the atomics is read and written under its
 * lock; table entries are never removed, so their keys live as long as
 * the metrics.
 */
#ifndef WEIR_DAEMON_METRICS_INTERNAL_H
#define WEIR_DAEMON_METRICS_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "metrics.h"
#include "shed.h"
#include "stat_key.h"
#include "top_keys.h"

/* HTTP status codes counted (metrics.c's table; the latency buckets:
 * metrics.h). */
#define METRICS_N_CODES 13u
/* weir_refusal_code values counted (0 .. WEIR_REFUSAL_OVERRIDE_REFUSED) */
#define METRICS_REFUSALS 13u

/* Outcomes of weir's own series, and a failure mode's decisions. */
enum { RES_ALLOWED, RES_DENIED, RES_SHADOW, RES_FAILURE, RES_N };
enum { FM_ALLOW, FM_DENY, FM_LOCAL, FM_N };
/* Upstream's per-descriptor counters (in hits, like upstream). */
enum { UP_TOTAL, UP_OVER, UP_NEAR, UP_WITHIN, UP_SHADOW, UP_N };

/* The head of a table entry: its key, @len bytes, and the key's hash. */
typedef struct series_head {
    uint64_t hash;
    char *key;
    size_t len;
} series_head;

/* Entries by key: open addressing on pointers, never removed. */
typedef struct series_table {
    series_head **slots;
    size_t cap, used;
} series_table;

/* weir's own series of one limit: key "domain\0rule\0"; in the tiers
 * table, of one tenant tier's descriptors: "domain\0tier\0". */
typedef struct rule_series {
    series_head h;
    uint64_t results[RES_N];
    uint64_t failure[FM_N];
} rule_series;

/* upstream's series of one stat key (stat_key.text, its levels). */
typedef struct stat_series {
    series_head h;
    unsigned n_levels;
    bool from_request;
    uint64_t counts[UP_N];
    uint64_t sent[UP_N]; /* what the statsd sink has been given */
} stat_series;

struct metrics_shard {
    pthread_mutex_t lock;
    series_table rules, stats, tiers;
    size_t value_series; /* stats entries holding request values */
    uint32_t near_ppm;   /* near_limit threshold, millionths of a limit */
    stat_key scratch;
    top_keys *top; /* the keys denied most (NULL: --top-keys 0) */
    uint64_t latency[PROTO_N][METRICS_N_BUCKETS + 1];
    uint64_t latency_count[PROTO_N];
    uint64_t latency_sum_ns[PROTO_N];
    uint64_t *http; /* [route][code index or METRICS_N_CODES] */
    _Atomic int64_t connections[PROTO_N];
    _Atomic uint64_t accepted[PROTO_N];
    _Atomic uint64_t rejected[PROTO_N];
    _Atomic uint64_t evicted[PROTO_N];
    /* requests the engine refused, by weir_refusal_code */
    _Atomic uint64_t refused[PROTO_N][METRICS_REFUSALS];
    /* requests answered "overloaded", by cause and priority (shed.h) */
    _Atomic uint64_t shed[PROTO_N][SHED_CAUSE_N][SHED_MAX_PRIORITIES];
};

struct metrics {
    unsigned n_shards;
    metrics_shard *shards;
    const char *const *routes;
    size_t n_routes;
    _Atomic uint64_t reload_ok, reload_failed;
    pthread_mutex_t reload_lock; /* the last loads' times and reason */
    int64_t last_ok_us, last_failed_us;
    char last_error[METRICS_RELOAD_ERROR_BYTES];
    uint64_t sent_ok, sent_failed; /* the statsd sink's, read by it only */
    weir_ctx *top_ctx;             /* the top keys' sketches' allocator */
    const shed_config *shed;       /* the priorities' names (metrics_set_shed()) */
    uint32_t top_counters;
};

/** The entry of @key (@len bytes) in @t, else a new one of @size zeroed
 *  bytes (*made set) unless @t holds @cap entries already. NULL when
 *  absent past the cap, or out of memory. Under the shard's lock. */
void *metrics_table_get(series_table *t, const char *key, size_t len, size_t size, size_t cap,
                        bool *made);

/** Counts descriptor @i of @req under upstream's series, by the outcome
 *  @o it reported. Under the shard's lock. */
void metrics_count_upstream(metrics_shard *s, const weir_request *req, size_t i,
                            const weir_limit_outcome *o);

/** Prometheus: a label value escaped, and a series' HELP and TYPE. */
void metrics_put_label(weir_buf *b, const char *v);
void metrics_header(weir_buf *b, const char *name, const char *type, const char *help);

/* metrics_redis.c: the Redis store's state and counters, when the store
 * is one (a cluster's per node too). */
void metrics_render_redis(weir_store *store, weir_buf *b);

/** Upstream's ratelimit_service_rate_limit_* series. */
void metrics_render_upstream(metrics *m, weir_buf *b);

#endif /* WEIR_DAEMON_METRICS_INTERNAL_H */
