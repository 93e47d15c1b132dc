/*
 * top.h - GET /admin/v1/top?domain=D&n=10: the keys a domain denied most
 * over the minute under way and the one before, every worker's sketches
 * merged, each with its count's error (docs/OPERATIONS.md).
 */
#ifndef WEIR_DAEMON_ADMIN_TOP_H
#define WEIR_DAEMON_ADMIN_TOP_H

#include "common/buf.h"
#include "http/answer.h"
#include "http1/codec.h"
#include "weir/topk.h"

struct admin_quotas;

/* n: keys listed by default and at most. */
#define ADMIN_TOP_DEFAULT 10u
#define ADMIN_TOP_MAX 100u

/** The route; answers before it returns. */
void admin_top_get(struct admin_quotas *q, http_answer *a, const weir_http1_request *req,
                   const char *who);

/** {"domain":..,"window_seconds":N,"since":RFC 3339,"denied":N,
 *  "keys":[{"entries":[{"key":..,"value":..}],["truncated":true,]
 *  "denied":N,"error":N},...],"sketch":{"counters":N,"bytes":N,
 *  "error_bound":N}} into @b: @n of @top (@n_top, largest first) from
 *  the merged sketch @merged, which @bytes of sketches gave. */
void admin_render_top(weir_buf *b, const char *domain, size_t len, int64_t since_us, int64_t now_us,
                      const weir_topk *merged, const weir_topk_entry *top, size_t n_top,
                      size_t bytes);

#endif /* WEIR_DAEMON_ADMIN_TOP_H */
