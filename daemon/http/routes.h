/*
 * routes.h - the HTTP API: which path and method does what. Each handler
 * decodes with frontends/api, decides with the engine through a call and
 * renders the answer into the request's http_answer; all protocol detail
 * lives in the codecs.
 */
#ifndef WEIR_DAEMON_HTTP_ROUTES_H
#define WEIR_DAEMON_HTTP_ROUTES_H

#include "answer.h"
#include "http1/codec.h"

/** The routes' state on one worker (its decoder); NULL when out of
 *  memory. @admin: the admin listener's (admin/admin.h answers). */
typedef struct routes_state routes_state;
routes_state *routes_state_new(const serve_options *o, bool admin);
void routes_state_free(routes_state *rs);

/** Answer @req: now, or later when its decision completes later. Either
 *  way, http_answer_respond() runs exactly once for @a while the
 *  connection is open, and the connection's protocol kick() follows an
 *  answer made outside routes_handle(). */
void routes_handle(routes_state *rs, http_answer *a, const weir_http1_request *req);

/** Route names, for metrics labels; the last is "other". */
extern const char *const routes_names[];
extern const size_t routes_count;

#endif /* WEIR_DAEMON_HTTP_ROUTES_H */
