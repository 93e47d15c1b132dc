/*
 * leases.c - the weir.leases.v1 messages (proto/weir/leases/v1): a
 * ReleaseRequest's token in, an AcquireResponse and a ReleaseResponse out.
 */
#include <stdio.h>
#include <string.h>

#include "grpc/pb.h"
#include "grpc/rls.h"
#include "weir/leases/v1/leases.pb-c.h"

bool weir_leases_decode_release(const uint8_t *msg, size_t len, char *lease, size_t cap,
                                size_t *lease_len, bool *dropped, weir_grpc_error *err)
{
    static const uint8_t empty[1];
    /* a call per lease given back, not per decision: protobuf-c's own
     * allocator is fine */
    ProtobufCMessage *m = NULL;
    if (msg || !len)
        m = protobuf_c_message_unpack(&weir__leases__v1__release_request__descriptor, NULL, len,
                                      msg ? msg : empty);
    if (!m) {
        err->code = WEIR_GRPC_INVALID_ARGUMENT;
        snprintf(err->message, sizeof err->message, "cannot parse ReleaseRequest");
        return false;
    }
    const Weir__Leases__V1__ReleaseRequest *r = (const Weir__Leases__V1__ReleaseRequest *)m;
    size_t n = r->lease ? strlen(r->lease) : 0;
    bool fits = n <= cap;
    if (fits) {
        memcpy(lease, r->lease ? r->lease : "", n);
        *lease_len = n;
        *dropped = r->dropped;
    } else {
        err->code = WEIR_GRPC_INVALID_ARGUMENT;
        snprintf(err->message, sizeof err->message, "lease: longer than any lease token");
    }
    protobuf_c_message_free_unpacked(m, NULL);
    return fits;
}

/* A varint, as protobuf writes one. */
static void put_varint(weir_buf *out, uint64_t v)
{
    while (v >= 0x80) {
        weir_buf_putc(out, (char)(v | 0x80));
        v >>= 7;
    }
    weir_buf_putc(out, (char)v);
}

/* Field @field, length-delimited (wire type 2). */
static void put_bytes(weir_buf *out, unsigned field, const void *p, size_t n)
{
    put_varint(out, (uint64_t)field << 3 | 2);
    put_varint(out, n);
    weir_buf_put(out, p, n);
}

void weir_leases_encode_acquire(weir_buf *out, const weir_buf *response, const char *lease,
                                size_t lease_len)
{
    /* written by hand around the response weir_rls_encode_response()
     * already serialised: protobuf-c would take it as a message tree to
     * pack again, not as bytes */
    put_bytes(out, 1, response->p ? response->p : "", response->len);
    if (lease_len)
        put_bytes(out, 2, lease, lease_len);
}

bool weir_costs_decode_settle(weir_rls_decoder *d, const uint8_t *msg, size_t len, uint64_t *cost,
                              weir_grpc_error *err)
{
    static const uint8_t empty[1];
    ProtobufCMessage *m = NULL;
    if (msg || !len)
        m = protobuf_c_message_unpack(&weir__leases__v1__settle_request__descriptor, NULL, len,
                                      msg ? msg : empty);
    if (!m) {
        err->code = WEIR_GRPC_INVALID_ARGUMENT;
        snprintf(err->message, sizeof err->message, "cannot parse SettleRequest");
        return false;
    }
    const Weir__Leases__V1__SettleRequest *r = (const Weir__Leases__V1__SettleRequest *)m;
    /* the request again as bytes, for the one decoder of RateLimitRequest
     * (its caps and checks): protobuf-c has unpacked it already */
    weir_buf b;
    weir_buf_init(&b, 2 * len + 64); /* packed again: never much longer */
    bool ok = false;
    if (r->request)
        weir_pb_append(&b, &r->request->base);
    if (r->cost > 1000000000000000000ull) {
        err->code = WEIR_GRPC_INVALID_ARGUMENT;
        snprintf(err->message, sizeof err->message, "cost: at most 10^18");
    } else if (!weir_buf_ok(&b)) {
        err->code = WEIR_GRPC_RESOURCE_EXHAUSTED;
        snprintf(err->message, sizeof err->message, "out of memory");
    } else {
        ok = weir_rls_decode(d, (const uint8_t *)(b.p ? b.p : ""), b.len, err);
        *cost = r->cost;
    }
    weir_buf_free(&b);
    protobuf_c_message_free_unpacked(m, NULL);
    return ok;
}

void weir_leases_encode_release(weir_buf *out, uint32_t leases, uint32_t released, uint32_t failed)
{
    Weir__Leases__V1__ReleaseResponse r = WEIR__LEASES__V1__RELEASE_RESPONSE__INIT;
    r.leases = leases;
    r.released = released;
    r.failed = failed;
    weir_pb_append(out, &r.base); /* all zero packs to nothing, as proto3 says */
}
