/*
 * grpc.h - the gRPC protocol's row of the protocol table: Envoy's rate
 * limit service (ShouldRateLimit) and grpc.health.v1 over HTTP/2
 * cleartext (calls.h).
 */
#ifndef WEIR_DAEMON_GRPC_GRPC_H
#define WEIR_DAEMON_GRPC_GRPC_H

#include "proto.h"

extern const proto grpc_proto;

#endif /* WEIR_DAEMON_GRPC_GRPC_H */
