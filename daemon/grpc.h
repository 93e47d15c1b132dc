/*
 * grpc.h - what the gRPC call handlers need from a connection: the call
 * and the codec that answers it.
 */
#ifndef WEIR_DAEMON_GRPC_H
#define WEIR_DAEMON_GRPC_H

#include "grpc/h2.h"
#include "server.h"

/* grpc_calls.c */
/** Answer @call (weir_grpc_h2_respond() exactly once): ShouldRateLimit,
 *  grpc.health.v1.Health/Check, or UNIMPLEMENTED. */
void grpc_calls_handle(worker *w, weir_grpc_h2 *h2, const weir_grpc_call *call);

#endif /* WEIR_DAEMON_GRPC_H */
