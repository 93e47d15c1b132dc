/*
 * ads.h - the client side of one gRPC bidirectional stream over HTTP/2
 * (h2c) without the socket: weir's xDS subscription. Bytes from the
 * server go in, whole response messages come out through a callback,
 * request messages are queued, and bytes for the server come out.
 * HTTP/2 itself is nghttp2's client session; this adds gRPC's rules: the
 * request headers, the length-prefixed messages under a cap, and the
 * status the stream ends with (trailers, or an HTTP or stream error said
 * as a gRPC status). No I/O, no clock.
 *
 * The stream ends once: on_end is called exactly once, whatever ended it
 * (trailers, a reset, a response that is not gRPC, a message over the cap,
 * a connection error); the caller then drops the connection.
 *
 * Threads: one codec belongs to one thread.
 */
#ifndef WEIR_FRONTENDS_XDS_ADS_H
#define WEIR_FRONTENDS_XDS_ADS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

typedef struct weir_xds_ads weir_xds_ads;

typedef struct weir_xds_ads_callbacks {
    /** One whole response message (its gRPC prefix removed), valid during
     *  the call. The callback may queue messages; it must not free the
     *  codec. */
    void (*on_message)(void *arg, const uint8_t *msg, size_t len);
    /** The stream is over: @grpc_status (0 when the server ended it with
     *  OK) and a NUL-terminated reason, never NULL. */
    void (*on_end)(void *arg, int grpc_status, const char *message);
} weir_xds_ads_callbacks;

typedef struct weir_xds_ads_options {
    /** :authority (the server's host:port) and :path (the method). */
    const char *authority;
    const char *path;
    /** user-agent, e.g. "weir/0.1.0". */
    const char *user_agent;
    /** Extra request headers: @n_headers name/value pairs, names in lower
     *  case (CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS). */
    const char *const *header_names;
    const char *const *header_values;
    size_t n_headers;
    /** Largest response message, prefix excluded; more ends the stream
     *  with RESOURCE_EXHAUSTED. */
    size_t max_message;
} weir_xds_ads_options;

/** A codec with its connection preface, SETTINGS and the stream's HEADERS
 *  queued; the options are copied. NULL when out of memory. */
weir_xds_ads *weir_xds_ads_new(const weir_xds_ads_options *o, const weir_xds_ads_callbacks *cb,
                               void *arg);
void weir_xds_ads_free(weir_xds_ads *a);

/** Queue @len bytes of whole, already framed messages on the stream.
 *  False when the stream is over or out of memory. */
bool weir_xds_ads_queue(weir_xds_ads *a, const void *framed, size_t len);

/** Take @len bytes the server sent; callbacks run from inside. False when
 *  the connection is broken (on_end has been called). */
bool weir_xds_ads_recv(weir_xds_ads *a, const uint8_t *data, size_t len);

/** Append the bytes due to the server to @out. False when the session is
 *  broken (on_end has been called). */
bool weir_xds_ads_send(weir_xds_ads *a, weir_buf *out);

/** Whether on_end has been called. */
bool weir_xds_ads_ended(const weir_xds_ads *a);

#endif /* WEIR_FRONTENDS_XDS_ADS_H */
