/*
 * nv.h - two small helpers shared by weir's HTTP/2 codecs (grpc/h2.c, the
 * server; xds/ads.c, the client): a header field as nghttp2 takes it, and
 * a received name or value compared with a C string.
 */
#ifndef WEIR_FRONTENDS_GRPC_NV_H
#define WEIR_FRONTENDS_GRPC_NV_H

#include <nghttp2/nghttp2.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/** Whether the @n bytes at @p are exactly the NUL-terminated @z. */
static inline bool weir_h2_is(const uint8_t *p, size_t n, const char *z)
{
    return n == strlen(z) && memcmp(p, z, n) == 0;
}

/** A header field of two NUL-terminated strings (nghttp2 copies them). */
static inline nghttp2_nv weir_h2_nv(const char *name, const char *value)
{
    nghttp2_nv v = {(uint8_t *)(uintptr_t)name, (uint8_t *)(uintptr_t)value, strlen(name),
                    strlen(value), NGHTTP2_NV_FLAG_NONE};
    return v;
}

#endif /* WEIR_FRONTENDS_GRPC_NV_H */
