/*
 * decide.h - how an HTTP route decides: a call per request, its answer
 * rendered inside the call's decided() hook (where the statuses and the
 * rules they point to are valid), before the route returns or later from
 * the worker's loop; a request the engine refuses answered at once.
 * routes.c (the check routes, batches) and leases.c share it.
 */
#ifndef WEIR_DAEMON_HTTP_DECIDE_H
#define WEIR_DAEMON_HTTP_DECIDE_H

#include "answer.h"
#include "api/api.h"
#include "call.h"

/** What answers a decision, inside the call's decided() hook. */
typedef void (*http_answer_fn)(http_answer *a, const weir_request *req,
                               const weir_api_decision *dec, int64_t now_us);

/** Decides @req and answers @a with @answer (or 504 past
 *  --decision-timeout); a refusal is answered at once (400, 403, 503). */
void http_decide(http_answer *a, const weir_request *req, http_answer_fn answer);

/** Settles @req, decided earlier with its hits as an estimate, to @cost
 *  (weir_engine_settle()), answering @a with @answer as http_decide()
 *  does; not counted among the decisions. */
void http_settle(http_answer *a, const weir_request *req, uint64_t cost, http_answer_fn answer);

/** Decides @req through @ops with @data_bytes of @data as the call's.
 *  Returns 0, or the HTTP status of a refusal with @msg filled (nothing
 *  answered then). */
int http_decide_call(http_answer *a, const weir_request *req, const call_ops *ops, const void *data,
                     size_t data_bytes, char *msg, size_t cap);

/** Whether @dec, call @c's decision, was denied only by the shares of its
 *  request's priority (shed_by_share()): then it is counted as shed and
 *  @msg says why; the caller answers 503, never 429. */
bool http_shed_by_share(call *c, const weir_api_decision *dec, char *msg, size_t cap);

/** The rate limit headers of @dec into the worker's header list. */
void http_render_headers(worker *w, const weir_api_decision *dec, int64_t now_us);

/** "unknown domain 'x'" into @msg. */
void http_unknown_domain_text(const weir_request *req, char *msg, size_t cap);

/** weir's own API answers an unknown domain with 404 (upstream's /json
 *  answers OK); true when it did. */
bool http_refuse_unknown_domain(http_answer *a, const weir_request *req,
                                const weir_api_decision *dec);

#endif /* WEIR_DAEMON_HTTP_DECIDE_H */
