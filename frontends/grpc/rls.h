/*
 * rls.h - Envoy's rate limit service messages (envoy.service.ratelimit.v3)
 * without the transport: a serialized RateLimitRequest decoded into an
 * engine request, a decision encoded as a RateLimitResponse, the gRPC
 * health messages, and the 5-byte gRPC message framing. No I/O.
 *
 * The messages are compiled from proto/ with protobuf-c at build time;
 * ../shared ENVOY_COMPAT.md's names and field numbers are the contract.
 *
 * Threads: a decoder belongs to one thread.
 */
#ifndef WEIR_FRONTENDS_GRPC_RLS_H
#define WEIR_FRONTENDS_GRPC_RLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/decision.h"
#include "common/headers.h"
#include "weir/engine.h"

/** gRPC status codes weir sends. */
enum {
    WEIR_GRPC_OK = 0,
    WEIR_GRPC_CANCELLED = 1,
    WEIR_GRPC_UNKNOWN = 2,
    WEIR_GRPC_INVALID_ARGUMENT = 3,
    WEIR_GRPC_DEADLINE_EXCEEDED = 4,
    WEIR_GRPC_NOT_FOUND = 5,
    WEIR_GRPC_PERMISSION_DENIED = 7,
    WEIR_GRPC_RESOURCE_EXHAUSTED = 8,
    WEIR_GRPC_UNIMPLEMENTED = 12,
    WEIR_GRPC_INTERNAL = 13,
    WEIR_GRPC_UNAVAILABLE = 14,
};

/** A refusal: the gRPC status and its grpc-message text. */
typedef struct weir_grpc_error {
    int code;
    char message[192];
} weir_grpc_error;

/* ------------------------------------------------------------ framing */

/** Bytes of a gRPC message prefix: 1 flag byte, 4 length bytes (big end). */
#define WEIR_GRPC_PREFIX_BYTES 5u

typedef enum weir_grpc_frame_result {
    WEIR_GRPC_FRAME_NEED_MORE, /* the prefix or the message is not whole yet */
    WEIR_GRPC_FRAME_MESSAGE,   /* *msg / *msg_len: one whole message */
    WEIR_GRPC_FRAME_ERROR      /* *err: compressed (UNIMPLEMENTED) or too
                                  large (RESOURCE_EXHAUSTED) */
} weir_grpc_frame_result;

/** Reads the first length-prefixed message of @data (@len bytes of a
 *  request body). *@used is the bytes it spans (prefix included). */
weir_grpc_frame_result weir_grpc_frame_parse(const uint8_t *data, size_t len, size_t max_message,
                                             const uint8_t **msg, size_t *msg_len, size_t *used,
                                             weir_grpc_error *err);
/** Appends the prefix of an uncompressed message of @len bytes. */
void weir_grpc_frame_prefix(weir_buf *out, size_t len);

/* ------------------------------------------------------------ ShouldRateLimit */

typedef struct weir_rls_decoder weir_rls_decoder;

/** A decoder with the caps of @limits (NULL = defaults: 64 descriptors,
 *  64 entries; max_batch unused). NULL when out of memory. */
weir_rls_decoder *weir_rls_decoder_new(const weir_api_limits *limits);
void weir_rls_decoder_free(weir_rls_decoder *d);

/**
 * weir_rls_decode() - decode a serialized RateLimitRequest.
 *
 * On success the request is weir_rls_request(d), valid until the next
 * decode; its hits follow upstream (a descriptor's hits_addend, when
 * present, wins, 0 = peek; otherwise the request's, 0 = 1); a descriptor's
 * `limit` becomes an override (unit UNKNOWN maps to WEIR_UNIT_NONE, which
 * the caller must refuse as INVALID_ARGUMENT). On failure *err is
 * INVALID_ARGUMENT ("cannot parse RateLimitRequest", caps exceeded with
 * the count) and nothing is held. An empty domain or descriptor list
 * decodes fine: the caller answers them with upstream's messages.
 */
bool weir_rls_decode(weir_rls_decoder *d, const uint8_t *msg, size_t len, weir_grpc_error *err);
const weir_request *weir_rls_request(const weir_rls_decoder *d);

/**
 * weir_rls_encode_response() - append a serialized RateLimitResponse:
 * overall_code; one DescriptorStatus per status in order (code;
 * current_limit {requests_per_unit, unit, name} when a limit applied;
 * limit_remaining, saturated to uint32, UINT32_MAX for unlimited;
 * duration_until_reset); response_headers_to_add from @headers (NULL for
 * none; `value` filled, never `raw_value`); raw_body when @raw_body is not
 * NULL.
 */
void weir_rls_encode_response(weir_buf *out, const weir_api_decision *dec,
                              const weir_headers *headers, const char *raw_body, size_t raw_len);

/** Append a serialized RateLimitRequest (for clients: the load generator
 *  and tests). */
void weir_rls_encode_request(weir_buf *out, const weir_request *req);

/* ------------------------------------------------------------ grpc.health.v1 */

/** HealthCheckResponse.ServingStatus values. */
enum { WEIR_HEALTH_UNKNOWN = 0, WEIR_HEALTH_SERVING = 1, WEIR_HEALTH_NOT_SERVING = 2 };

/** Decode a HealthCheckRequest; its service name (NUL-terminated, cut to
 *  @cap - 1 bytes) into @service. false (INVALID_ARGUMENT) when malformed. */
bool weir_health_decode(const uint8_t *msg, size_t len, char *service, size_t cap,
                        weir_grpc_error *err);
/** Append a serialized HealthCheckResponse with @status. */
void weir_health_encode(weir_buf *out, int status);

/* ------------------------------------------------------------ weir.leases.v1 */

/** Decode a ReleaseRequest: its lease token (not NUL-terminated, at most
 *  @cap bytes) into @lease, its length into @lease_len, its dropped flag
 *  into @dropped. false (INVALID_ARGUMENT) when malformed or longer than
 *  @cap. */
bool weir_leases_decode_release(const uint8_t *msg, size_t len, char *lease, size_t cap,
                                size_t *lease_len, bool *dropped, weir_grpc_error *err);
/** Append a serialized AcquireResponse: @response (a RateLimitResponse
 *  weir_rls_encode_response() wrote) and the token (none when empty). */
void weir_leases_encode_acquire(weir_buf *out, const weir_buf *response, const char *lease,
                                size_t lease_len);
/** Decode a Costs/Settle SettleRequest: its request into @d (as
 *  weir_rls_decode()), its cost into @cost. false with @err set when
 *  malformed, past the decoder's caps, or a cost past 10^18. */
bool weir_costs_decode_settle(weir_rls_decoder *d, const uint8_t *msg, size_t len, uint64_t *cost,
                              weir_grpc_error *err);
/** Append a serialized ReleaseResponse. */
void weir_leases_encode_release(weir_buf *out, uint32_t leases, uint32_t released, uint32_t failed);

#endif /* WEIR_FRONTENDS_GRPC_RLS_H */
