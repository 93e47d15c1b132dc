/*
 * health.c - the grpc.health.v1 messages: a HealthCheckRequest's service
 * name in, a HealthCheckResponse's serving status out.
 */
#include <stdio.h>
#include <string.h>

#include "grpc/health/v1/health.pb-c.h"
#include "grpc/pb.h"
#include "grpc/rls.h"

bool weir_health_decode(const uint8_t *msg, size_t len, char *service, size_t cap,
                        weir_grpc_error *err)
{
    static const uint8_t empty[1];
    /* a rare call (probes): protobuf-c's default allocator */
    ProtobufCMessage *m = NULL;
    if (msg || !len)
        m = protobuf_c_message_unpack(&grpc__health__v1__health_check_request__descriptor, NULL,
                                      len, msg ? msg : empty);
    if (!m) {
        if (err) {
            err->code = WEIR_GRPC_INVALID_ARGUMENT;
            snprintf(err->message, sizeof err->message, "cannot parse HealthCheckRequest");
        }
        return false;
    }
    const Grpc__Health__V1__HealthCheckRequest *r = (const Grpc__Health__V1__HealthCheckRequest *)m;
    if (cap) {
        const char *s = r->service ? r->service : "";
        size_t n = strlen(s);
        if (n > cap - 1)
            n = cap - 1;
        memcpy(service, s, n);
        service[n] = '\0';
    }
    protobuf_c_message_free_unpacked(m, NULL);
    return true;
}

void weir_health_encode(weir_buf *out, int status)
{
    Grpc__Health__V1__HealthCheckResponse r = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;
    r.status = (Grpc__Health__V1__HealthCheckResponse__ServingStatus)status;
    weir_pb_append(out, &r.base);
}
