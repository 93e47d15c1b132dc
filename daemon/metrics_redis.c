/*
 * metrics_redis.c - the Redis store in /metrics: the breaker, connections
 * and call counters of every Redis store, and on a Redis Cluster the
 * routing counters and each node's breaker (one series per node met: a
 * cluster has at most 512 masters, so the labels stay bounded).
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "metrics_internal.h"
#include "weir/redis.h"

/* The nodes rendered at most (the store follows at most this many). */
#define MAX_NODES 512

/* sync: local, once a sync has been made */
static void render_sync(weir_store *store, weir_buf *b)
{
    weir_redis_sync_stats y = {.size = sizeof(y)};
    if (weir_redis_sync_stats_get(store, &y) != WEIR_OK || (y.sync_age_us < 0 && !y.outage))
        return;
    static const struct {
        const char *name, *help;
        size_t off;
    } counters[] = {
        {"weir_redis_sync_local_total",
         "sync: local decisions made without a call (from a reservation, or denied past it).",
         offsetof(weir_redis_sync_stats, local)},
        {"weir_redis_sync_reserved_total", "sync: local hits reserved in Redis.",
         offsetof(weir_redis_sync_stats, reserved)},
        {"weir_redis_sync_returned_total", "sync: local hits given back unused.",
         offsetof(weir_redis_sync_stats, returned)},
        {"weir_redis_sync_outage_total",
         "sync: local decisions made at this instance's share while Redis was away.",
         offsetof(weir_redis_sync_stats, outage)},
        {"weir_redis_sync_overshoot_total",
         "Hits admitted while Redis was away that Redis could not take when it came back.",
         offsetof(weir_redis_sync_stats, overshoot)},
    };
    for (size_t i = 0; i < sizeof(counters) / sizeof(counters[0]); i++) {
        uint64_t v;
        memcpy(&v, (const char *)&y + counters[i].off, sizeof(v));
        metrics_header(b, counters[i].name, "counter", counters[i].help);
        weir_buf_printf(b, "%s %llu\n", counters[i].name, (unsigned long long)v);
    }
    metrics_header(b, "weir_redis_sync_age_seconds", "gauge",
                   "Seconds since a sync (sync: local) last reached Redis.");
    weir_buf_printf(b, "weir_redis_sync_age_seconds %.3f\n",
                    y.sync_age_us < 0 ? -1.0 : (double)y.sync_age_us / 1e6);
}

static void render_cluster(weir_store *store, weir_buf *b)
{
    weir_redis_cluster_stats c = {.size = sizeof(c)};
    if (weir_redis_cluster_stats_get(store, &c) != WEIR_OK)
        return;
    static const struct {
        const char *name, *type, *help;
        size_t off;
    } counters[] = {
        {"weir_redis_cluster_nodes", "gauge",
         "Redis Cluster nodes met so far (masters, and the seeds).",
         offsetof(weir_redis_cluster_stats, nodes)},
        {"weir_redis_cluster_refreshes_total", "counter", "Slot maps read (CLUSTER SLOTS).",
         offsetof(weir_redis_cluster_stats, refreshes)},
        {"weir_redis_cluster_moved_total", "counter",
         "MOVED answers (and calls refused for a key the node does not serve), followed.",
         offsetof(weir_redis_cluster_stats, moved)},
        {"weir_redis_cluster_asked_total", "counter", "ASK answers (a slot migrating), followed.",
         offsetof(weir_redis_cluster_stats, asked)},
        {"weir_redis_cluster_split_total", "counter",
         "Decision batches whose keys live on several nodes.",
         offsetof(weir_redis_cluster_stats, split)},
        {"weir_redis_cluster_refunds_total", "counter",
         "Charges given back for batches another node denied.",
         offsetof(weir_redis_cluster_stats, refunds)},
        {"weir_redis_cluster_refund_errors_total", "counter",
         "Refunds that could not be made (their charges stay).",
         offsetof(weir_redis_cluster_stats, refund_errors)},
    };
    for (size_t i = 0; i < sizeof(counters) / sizeof(counters[0]); i++) {
        uint64_t v;
        memcpy(&v, (const char *)&c + counters[i].off, sizeof(v));
        metrics_header(b, counters[i].name, counters[i].type, counters[i].help);
        weir_buf_printf(b, "%s %llu\n", counters[i].name, (unsigned long long)v);
    }
    weir_redis_node *nodes = malloc(MAX_NODES * sizeof(*nodes));
    if (!nodes)
        return;
    size_t n = weir_redis_nodes_get(store, nodes, MAX_NODES);
    if (n > MAX_NODES)
        n = MAX_NODES;
    metrics_header(b, "weir_redis_node_breaker_state", "gauge",
                   "A Redis Cluster master's circuit breaker: 0 closed, 1 open, 2 half-open "
                   "(the masters a slot map names now).");
    for (size_t i = 0; i < n; i++)
        if (nodes[i].in_map)
            weir_buf_printf(b, "weir_redis_node_breaker_state{node=\"%s\"} %d\n", nodes[i].address,
                            (int)nodes[i].breaker);
    metrics_header(b, "weir_redis_node_breaker_opened_total", "counter",
                   "Times a Redis Cluster node's circuit breaker opened.");
    for (size_t i = 0; i < n; i++)
        weir_buf_printf(b, "weir_redis_node_breaker_opened_total{node=\"%s\"} %llu\n",
                        nodes[i].address, (unsigned long long)nodes[i].breaker_opened);
    free(nodes);
}

/* The Redis store's state and counters, when the store is one. */
/* The master Sentinel names and the following of it, when the store is
 * on Sentinel. */
static void render_redis_sentinel(weir_store *store, weir_buf *b)
{
    weir_redis_sentinel_stats s = {.size = sizeof(s)};
    if (weir_redis_sentinel_stats_get(store, &s) != WEIR_OK)
        return;
    metrics_header(b, "weir_redis_sentinel_master", "gauge",
                   "The master the sentinels named last (its address a label): 1, or 0 with an "
                   "empty address until one is named.");
    weir_buf_puts(b, "weir_redis_sentinel_master{address=\"");
    metrics_put_label(b, s.master);
    weir_buf_printf(b, "\"} %d\n", s.master[0] ? 1 : 0);
    const struct {
        const char *name, *help;
        uint64_t value;
    } counters[] = {
        {"weir_redis_sentinel_failovers_total",
         "Times the master the sentinels name moved to another address.", s.failovers},
        {"weir_redis_sentinel_errors_total",
         "Connections to sentinels that failed, were lost, timed out or were refused.",
         s.sentinel_errors},
        {"weir_redis_sentinel_not_master_total",
         "Connections to a named master refused because ROLE said it was not one.", s.not_master},
    };
    for (size_t i = 0; i < sizeof(counters) / sizeof(counters[0]); i++) {
        metrics_header(b, counters[i].name, "counter", counters[i].help);
        weir_buf_printf(b, "%s %llu\n", counters[i].name, (unsigned long long)counters[i].value);
    }
}

void metrics_render_redis(weir_store *store, weir_buf *b)
{
    weir_redis_stats r;
    if (weir_redis_stats_get(store, &r) != WEIR_OK)
        return;
    metrics_header(b, "weir_redis_breaker_state", "gauge",
                   "The Redis circuit breaker: 0 closed, 1 open, 2 half-open.");
    weir_buf_printf(b, "weir_redis_breaker_state %d\n", (int)r.breaker);
    metrics_header(b, "weir_redis_connections", "gauge",
                   "Connections to Redis up now (one per worker).");
    weir_buf_printf(b, "weir_redis_connections %llu\n", (unsigned long long)r.connections);
    static const struct {
        const char *name, *help;
        size_t off;
    } counters[] = {
        {"weir_redis_breaker_opened_total", "Times the Redis circuit breaker opened.",
         offsetof(weir_redis_stats, breaker_opened)},
        {"weir_redis_connects_total", "Connections to Redis made.",
         offsetof(weir_redis_stats, connects)},
        {"weir_redis_connect_errors_total", "Connections to Redis that failed or were lost.",
         offsetof(weir_redis_stats, connect_errors)},
        {"weir_redis_calls_total", "Script calls Redis answered.",
         offsetof(weir_redis_stats, calls)},
        {"weir_redis_batches_total", "Decision batches those calls carried.",
         offsetof(weir_redis_stats, batches)},
        {"weir_redis_timeouts_total", "Decision batches Redis did not answer in time.",
         offsetof(weir_redis_stats, timeouts)},
        {"weir_redis_errors_total", "Decision batches failed by an error or a lost connection.",
         offsetof(weir_redis_stats, errors)},
        {"weir_redis_rejected_total", "Decision batches failed at once by the open breaker.",
         offsetof(weir_redis_stats, rejected)},
        {"weir_redis_script_reloads_total", "Script calls sent again after NOSCRIPT.",
         offsetof(weir_redis_stats, script_reloads)},
        {"weir_redis_cached_total",
         "Decision batches denied by the local over-limit cache, without a call to Redis.",
         offsetof(weir_redis_stats, cached)},
    };
    for (size_t i = 0; i < sizeof(counters) / sizeof(counters[0]); i++) {
        uint64_t v;
        memcpy(&v, (const char *)&r + counters[i].off, sizeof(v));
        metrics_header(b, counters[i].name, "counter", counters[i].help);
        weir_buf_printf(b, "%s %llu\n", counters[i].name, (unsigned long long)v);
    }
    render_cluster(store, b);
    render_sync(store, b);
    render_redis_sentinel(store, b);
}
