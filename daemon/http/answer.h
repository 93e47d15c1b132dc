/*
 * answer.h - the answer to one HTTP/1.1 request: what the request said
 * about its answer (keep-alive, HEAD, HTTP/1.0), its route for the
 * metrics, and the bytes of the response once it is rendered. The
 * connection keeps its answers in request order and sends each as soon
 * as every one before it is ready, so a decision that completes later
 * never reorders a pipeline.
 */
#ifndef WEIR_DAEMON_HTTP_ANSWER_H
#define WEIR_DAEMON_HTTP_ANSWER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "conn.h"
#include "replies.h"

typedef struct http_answer {
    reply_slot slot; /* first: the whole response, ready or not, in the queue */
    conn *conn;
    bool keep_alive, head, http10;
    size_t route;
    uint64_t t0_ns;
    int priority; /* the Weir-Priority header's (shed.h), or -1 */
} http_answer;

/**
 * http_answer_respond() - render the response: status line, Date,
 * Content-Type (when @content_type), Content-Length, Connection: close
 * when the connection ends after it, the fields of @extra (may be NULL)
 * and the body (left out for HEAD). The answer is then
 * ready; a second call is ignored. Counts the request in the metrics.
 */
void http_answer_respond(http_answer *a, int status, const char *content_type,
                         const weir_headers *extra, const char *body, size_t len);

/** Respond with an application/problem+json error body. */
void http_answer_problem(http_answer *a, int status, const char *detail);

#endif /* WEIR_DAEMON_HTTP_ANSWER_H */
