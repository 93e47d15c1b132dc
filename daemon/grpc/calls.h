/*
 * calls.h - the gRPC methods: Envoy's ShouldRateLimit and the standard
 * health check. Each decodes with frontends/grpc, decides with the engine
 * through a call and encodes the answer; the transport is conn.c's.
 */
#ifndef WEIR_DAEMON_GRPC_CALLS_H
#define WEIR_DAEMON_GRPC_CALLS_H

#include "conn.h"
#include "grpc/h2.h"

/** The methods' state on one worker (decoder, scratch); NULL when out of
 *  memory. */
typedef struct grpc_calls grpc_calls;
grpc_calls *grpc_calls_new(const serve_options *o);
void grpc_calls_free(grpc_calls *gc);

/**
 * grpc_calls_handle() - answer @gcall of connection @cn (whose codec is
 * @h2) with weir_grpc_h2_respond(), exactly once: now, or later when its
 * decision completes later (then the connection's protocol kick() sends
 * it), or DEADLINE_EXCEEDED when the call's grpc-timeout or
 * --decision-timeout passes first.
 */
void grpc_calls_handle(grpc_calls *gc, conn *cn, weir_grpc_h2 *h2, const weir_grpc_call *gcall);

#endif /* WEIR_DAEMON_GRPC_CALLS_H */
