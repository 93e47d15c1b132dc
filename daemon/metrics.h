/*
 * metrics.h - the service's counters and their Prometheus text rendering.
 *
 * Each worker thread writes its own shard; a scrape sums the shards. Label
 * values come from the rules (domain, rule name or path) and from fixed
 * tables (protocol, route, status code, result); only upstream's series
 * take request values, where a rule asks for them (detailed_metric,
 * value_to_metric) or a request names its own limit, and those series
 * are capped (docs/OPERATIONS.md). The keys denied most are request
 * values too: they are kept in fixed-size sketches and read through the
 * admin API (metrics_top()), never as labels.
 */
#ifndef WEIR_DAEMON_METRICS_H
#define WEIR_DAEMON_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "weir/weir.h"

typedef enum metrics_proto { PROTO_HTTP, PROTO_GRPC, PROTO_RESP, PROTO_N } metrics_proto;

typedef struct metrics metrics;
typedef struct metrics_shard metrics_shard;

/** Counters for @n_shards writers; @routes (n_routes names) label HTTP
 *  requests. NULL when out of memory. */
metrics *metrics_new(unsigned n_shards, const char *const *routes, size_t n_routes);
void metrics_free(metrics *m);
metrics_shard *metrics_shard_at(metrics *m, unsigned i);

/** Count one request decided at @now_us: every limit each descriptor
 *  tested (the statuses' outcomes), by domain, rule and result, plus
 *  upstream's hit counters, and each denied descriptor's entries among
 *  the top keys (metrics_set_top_keys()). */
void metrics_decision(metrics_shard *s, const weir_request *req,
                      const weir_descriptor_status *statuses, size_t n, int64_t now_us);
/** One request's handling time on @proto, and (HTTP) its route and status. */
void metrics_request(metrics_shard *s, metrics_proto proto, int64_t ns, size_t route, int status);
void metrics_connection(metrics_shard *s, metrics_proto proto, int delta);
void metrics_connection_rejected(metrics_shard *s, metrics_proto proto);
/** An idle connection closed to admit a new one at --max-connections. */
void metrics_connection_evicted(metrics_shard *s, metrics_proto proto);
/** A request the engine refused (weir_engine_refusal()), by its reason. */
void metrics_refused(metrics_shard *s, metrics_proto proto, weir_refusal_code why);
/** A rule load's result, at @now_us (the service's clock); @error (may
 *  be NULL) says why a failed one failed. */
void metrics_reload(metrics *m, bool ok, int64_t now_us, const char *error);

/** The near_limit threshold of upstream's counters by default: 80 % of a
 *  limit, in millionths (upstream's NEAR_LIMIT_RATIO 0.8). */
#define METRICS_NEAR_PPM_DEFAULT 800000u
/** Set the near_limit threshold (millionths of a limit, at most 1000000)
 *  before any decision is counted. */
void metrics_set_near_ratio(metrics *m, uint32_t ppm);

/** Record the keys each domain denies most, in sketches of @counters
 *  counters (0: none), before any decision is counted. False when out of
 *  memory. */
bool metrics_set_top_keys(metrics *m, uint32_t counters);

/** An empty sketch of the top keys' shape (free it with
 *  weir_topk_free()); NULL when they are not recorded or out of memory. */
weir_topk *metrics_top_new(metrics *m);

/** Merges into @into (from metrics_top_new()) every worker's denials of
 *  @domain (@len bytes) over the minute under way at @now_us and the one
 *  before it; returns the bytes @domain's sketches hold. */
size_t metrics_top(metrics *m, const char *domain, size_t len, int64_t now_us, weir_topk *into);

/** A counter's growth, named for statsd: @prefix @key, then '.' @stat
 *  when @stat is not NULL. */
typedef void metrics_emit_fn(void *arg, const char *prefix, const char *key, const char *stat,
                             uint64_t delta);
/** Calls @emit for each of upstream's counters (the per-descriptor ones
 *  under ratelimit.service.rate_limit., config_load_success and
 *  config_load_error) that grew since the previous call. One caller at a
 *  time: the statsd sink. */
void metrics_deltas(metrics *m, metrics_emit_fn *emit, void *arg);

/** Why a request was answered "overloaded" (weir_shed_total's cause). */
typedef enum metrics_shed_cause {
    SHED_CAUSE_OVERLOAD, /* weir shed it itself: its event loop lags (shed.h) */
    SHED_CAUSE_SHARE,    /* a limit kept its share for more important priorities */
    SHED_CAUSE_N
} metrics_shed_cause;

/** A request of priority @prio answered "overloaded", for @cause. */
void metrics_shed(metrics_shard *s, metrics_proto proto, unsigned prio, metrics_shed_cause cause);
/** The priorities' names for weir_shed_total's labels (kept, not copied). */
struct shed_config;
void metrics_set_shed(metrics *m, const struct shed_config *c);

/** The Prometheus text exposition of everything, with @store's stats. */
void metrics_render(metrics *m, weir_store *store, weir_buf *out);

/* ------------------------------------------------------------ snapshots */

/** Latency buckets: their upper bounds in nanoseconds (the last bucket,
 *  index METRICS_N_BUCKETS, holds what is above the last bound). */
#define METRICS_N_BUCKETS 10u
extern const int64_t metrics_bucket_ns[METRICS_N_BUCKETS];

/** The text kept of the last failed rule load's reason. */
#define METRICS_RELOAD_ERROR_BYTES 512u

/** One (domain, rule)'s decisions summed over the shards; the strings
 *  belong to the metrics (their entries are never removed). */
typedef struct metrics_rule_counts {
    const char *domain, *rule;
    uint64_t allowed, denied, shadow_would_deny, failure_mode;
} metrics_rule_counts;

/** The counters summed over some shards, read as a scrape reads them. */
typedef struct metrics_snapshot {
    metrics_rule_counts *rules; /* n_rules, by domain then rule */
    size_t n_rules;
    /* tenants' descriptors by domain then tier (`rule` is the tier) */
    metrics_rule_counts *tiers;
    size_t n_tiers;
    uint64_t latency[PROTO_N][METRICS_N_BUCKETS + 1]; /* per bucket, not cumulative */
    uint64_t latency_count[PROTO_N];
    uint64_t latency_sum_ns[PROTO_N];
    int64_t connections[PROTO_N];
    uint64_t accepted[PROTO_N], rejected[PROTO_N], evicted[PROTO_N];
    uint64_t reload_ok, reload_failed;
    int64_t last_ok_us, last_failed_us;          /* the service's clock; 0: none yet */
    char last_error[METRICS_RELOAD_ERROR_BYTES]; /* the last failure's reason */
} metrics_snapshot;

/** Sums the first @n_shards shards (the deciding workers': the admin
 *  worker's shard is the last) into @out, each shard under its lock as a
 *  scrape takes it. False when out of memory (nothing to free then). */
bool metrics_snapshot_take(metrics *m, unsigned n_shards, metrics_snapshot *out);
void metrics_snapshot_free(metrics_snapshot *s);

#endif /* WEIR_DAEMON_METRICS_H */
