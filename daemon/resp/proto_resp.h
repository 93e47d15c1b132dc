/*
 * proto_resp.h - the Redis protocol's row of the protocol table: redis-cell's
 * CL.THROTTLE, GCRA, and WEIR.* commands for any Redis client
 * (commands.h, docs/RESP.md).
 */
#ifndef WEIR_DAEMON_RESP_PROTO_RESP_H
#define WEIR_DAEMON_RESP_PROTO_RESP_H

#include "proto.h"

extern const proto resp_proto;

#endif /* WEIR_DAEMON_RESP_PROTO_RESP_H */
