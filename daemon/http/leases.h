/*
 * leases.h - concurrency leases over HTTP (docs/API.md, "Leases"):
 * GET and POST /v1/acquire decide as /v1/check does and hand out the
 * token of the leases the decision took (lease_token.h), in the
 * Weir-Lease header and, for POST, the body's "lease"; POST /v1/release
 * gives a token's leases back.
 */
#ifndef WEIR_DAEMON_HTTP_LEASES_H
#define WEIR_DAEMON_HTTP_LEASES_H

#include "decide.h"
#include "http1/codec.h"

/** The response header carrying a lease token, and the request header
 *  /v1/release reads one from. */
#define LEASES_HEADER "Weir-Lease"

/** http_answer_fn of GET /v1/acquire: 200, empty, with Weir-Lease; or
 *  the denial as GET /v1/check answers it. */
void leases_answer_get(http_answer *a, const weir_request *req, const weir_api_decision *dec,
                       int64_t now_us);

/** http_answer_fn of POST /v1/acquire: /v1/check's JSON with "lease". */
void leases_answer_post(http_answer *a, const weir_request *req, const weir_api_decision *dec,
                        int64_t now_us);

/** POST /v1/release: the token in the Weir-Lease header or the body's
 *  {"lease": "..."}; answers {"leases": N, "released": K, "failed": F}. */
void leases_release(http_answer *a, const weir_http1_request *req);

#endif /* WEIR_DAEMON_HTTP_LEASES_H */
