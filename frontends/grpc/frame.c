/*
 * frame.c - gRPC's length-prefixed message framing: a 1-byte flag (0 =
 * plain, 1 = compressed) and a 4-byte big-endian length before each
 * message of a request or response body.
 *
 * weir never advertises a grpc-accept-encoding, so a compressed message is
 * answered UNIMPLEMENTED; a flag byte other than 0 or 1 (reserved by the
 * protocol) is the client's mistake: INVALID_ARGUMENT. A length past the
 * cap is refused as soon as the prefix is in (RESOURCE_EXHAUSTED), before
 * the message is buffered.
 */
#include "grpc/rls.h"

#include <stdio.h>

weir_grpc_frame_result weir_grpc_frame_parse(const uint8_t *data, size_t len, size_t max_message,
                                             const uint8_t **msg, size_t *msg_len, size_t *used,
                                             weir_grpc_error *err)
{
    if (!data || len < WEIR_GRPC_PREFIX_BYTES)
        return WEIR_GRPC_FRAME_NEED_MORE;
    uint8_t flag = data[0];
    if (flag == 1) {
        err->code = WEIR_GRPC_UNIMPLEMENTED;
        snprintf(err->message, sizeof err->message, "compressed messages are not supported");
        return WEIR_GRPC_FRAME_ERROR;
    }
    if (flag != 0) {
        err->code = WEIR_GRPC_INVALID_ARGUMENT;
        snprintf(err->message, sizeof err->message, "invalid gRPC message flags 0x%02x",
                 (unsigned)flag);
        return WEIR_GRPC_FRAME_ERROR;
    }
    uint32_t n = (uint32_t)data[1] << 24 | (uint32_t)data[2] << 16 | (uint32_t)data[3] << 8 |
                 (uint32_t)data[4];
    if (n > max_message) {
        err->code = WEIR_GRPC_RESOURCE_EXHAUSTED;
        snprintf(err->message, sizeof err->message, "message larger than %zu bytes", max_message);
        return WEIR_GRPC_FRAME_ERROR;
    }
    if (len - WEIR_GRPC_PREFIX_BYTES < n)
        return WEIR_GRPC_FRAME_NEED_MORE;
    *msg = data + WEIR_GRPC_PREFIX_BYTES;
    *msg_len = n;
    *used = WEIR_GRPC_PREFIX_BYTES + (size_t)n;
    return WEIR_GRPC_FRAME_MESSAGE;
}

void weir_grpc_frame_prefix(weir_buf *out, size_t len)
{
    if (len > UINT32_MAX) {
        out->failed = true;
        return;
    }
    uint8_t p[WEIR_GRPC_PREFIX_BYTES] = {0, (uint8_t)(len >> 24), (uint8_t)(len >> 16),
                                         (uint8_t)(len >> 8), (uint8_t)len};
    weir_buf_put(out, p, sizeof p);
}
