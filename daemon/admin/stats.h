/*
 * stats.h - GET /admin/v1/stats: one JSON snapshot of the service for the
 * dashboard (web/), made on the admin worker as a /metrics scrape is made
 * (each shard read under its own mutex; nothing else of the decision
 * path touched). Counters are cumulative: a reader takes rates from the
 * difference of two snapshots and their "time_ms".
 *
 * {"version":..,"time_ms":N,"status":"ok"|"degraded"|"no_rules"|"draining",
 *  "workers":N,"routes":["/admin/v1/stats",...],
 *  "decisions":{"totals":{"allowed":N,"denied":N,"shadow_would_deny":N,
 *     "failure_mode":N},"rows_total":N,"rows":[{"domain":..,"rule":..,
 *     "allowed":N,"denied":N,"shadow_would_deny":N,"failure_mode":N}]},
 *  "latency":{"bounds_seconds":[..],"protocols":{"http":{"buckets":[..],
 *     "count":N,"sum_seconds":X},"grpc":..,"resp":..}},
 *  "store":{"type":"memory","keys":N,...} or {"type":"redis"|
 *     "redis_cluster"|"redis_sentinel","breaker":..,"connections":N,...},
 *  "rules":{"reloads_ok":N,"reloads_failed":N,"last_ok_ms":N|null,
 *     "last_failed_ms":N|null,"last_error":..|null},
 *  "quotas":{"configured":false} or {"configured":true,"db":..,"up":B,
 *     "tenants":N,"age_seconds":X|null,"loads":N,"errors":N,"skipped":N},
 *  "connections":{"http":{"open":N,"accepted":N,"rejected":N,
 *     "evicted":N},"grpc":..,"resp":..}}
 *
 * Decisions, latency and connections are the deciding workers' (the
 * admin listener's own requests, the dashboard's among them, are left
 * out); "buckets" are cumulative, the last one every request.
 */
#ifndef WEIR_DAEMON_ADMIN_STATS_H
#define WEIR_DAEMON_ADMIN_STATS_H

#include "common/buf.h"
#include "server.h"

/** Rows of "decisions" at most: past it, the rows with the most denials
 *  ("rows_total" says how many there are; "totals" counts them all). */
#define ADMIN_STATS_MAX_ROWS 1000u

/** The snapshot's JSON into @b, "routes" being the admin routes
 *  @routes (@n_routes of them); false when out of memory. */
bool admin_stats_render(server *srv, const char *const *routes, size_t n_routes, weir_buf *b);

#endif /* WEIR_DAEMON_ADMIN_STATS_H */
