/*
 * pb.h - appending a protobuf-c message to a weir_buf, shared by the gRPC
 * codecs (rls.c, health.c). Internal to frontends/grpc.
 */
#ifndef WEIR_FRONTENDS_GRPC_PB_H
#define WEIR_FRONTENDS_GRPC_PB_H

#include <protobuf-c/protobuf-c.h>

#include "common/buf.h"

/** Append the serialized @msg to @out (nothing, and @out failed, when it
 *  does not fit). */
static inline void weir_pb_append(weir_buf *out, const ProtobufCMessage *msg)
{
    size_t n = protobuf_c_message_get_packed_size(msg);
    if (!n || !weir_buf_reserve(out, n))
        return;
    size_t packed = protobuf_c_message_pack(msg, (uint8_t *)out->p + out->len);
    out->len += packed <= n ? packed : n;
}

#endif /* WEIR_FRONTENDS_GRPC_PB_H */
