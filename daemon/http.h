/*
 * http.h - what the HTTP routes need from a connection: the request being
 * answered and a way to answer it.
 */
#ifndef WEIR_DAEMON_HTTP_H
#define WEIR_DAEMON_HTTP_H

#include <stddef.h>

#include "http1/codec.h"
#include "server.h"

/**
 * http_respond() - queue the answer to the connection's current request:
 * status line, Date, Content-Type (when @content_type), Content-Length,
 * Connection: close when the connection ends after it, @extra (complete
 * "Name: value\r\n" lines, may be NULL) and the body (left out for HEAD).
 * Exactly one answer per request.
 */
void http_respond(http_conn *c, int status, const char *content_type, const weir_buf *extra,
                  const char *body, size_t len);

/** The worker serving the connection. */
worker *http_worker(http_conn *c);

/** Labels the current request's metrics with route number @route. */
void http_set_route(http_conn *c, size_t route);

/* routes.c */
/** Answer @req (calls http_respond() exactly once). */
void routes_handle(http_conn *c, const weir_http1_request *req);
/** Route names, for metrics labels; the last is "other". */
extern const char *const routes_names[];
extern const size_t routes_count;

#endif /* WEIR_DAEMON_HTTP_H */
