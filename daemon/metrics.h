/*
 * metrics.h - the service's counters and their Prometheus text rendering.
 *
 * Each worker thread writes its own shard; a scrape sums the shards. Label
 * values come only from the rules (domain, rule name or path) and from
 * fixed tables (protocol, route, status code, result): never from request
 * values, so the number of series is bounded by the rule files.
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

/** Count one decided request: every limit each descriptor tested (the
 *  statuses' outcomes), by domain, rule and result, plus upstream's hit
 *  counters. */
void metrics_decision(metrics_shard *s, const weir_request *req,
                      const weir_descriptor_status *statuses, size_t n);
/** One request's handling time on @proto, and (HTTP) its route and status. */
void metrics_request(metrics_shard *s, metrics_proto proto, int64_t ns, size_t route, int status);
void metrics_connection(metrics_shard *s, metrics_proto proto, int delta);
void metrics_connection_rejected(metrics_shard *s, metrics_proto proto);
void metrics_reload(metrics *m, bool ok);

/** The Prometheus text exposition of everything, with @store's stats. */
void metrics_render(metrics *m, weir_store *store, weir_buf *out);

#endif /* WEIR_DAEMON_METRICS_H */
