/*
 * h2.h - the server side of gRPC over HTTP/2 without the socket: bytes
 * from the client go in, bytes for the client come out, and in between
 * every request stream becomes one unary call handed to a callback and
 * answered with a gRPC status and at most one message. HTTP/2 itself
 * (framing, HPACK, flow control, stream states, floods) is nghttp2's
 * session API; this codec adds gRPC's rules on top. No I/O, no clock:
 * the caller passes the time with every input.
 *
 * A request stream is a call when it is a POST with content-type
 * application/grpc (or application/grpc+proto, optionally with
 * parameters) carrying exactly one length-prefixed message. What is not:
 *
 *   a method other than POST          HTTP 405 (Allow: POST)
 *   another content-type              HTTP 415 (the gRPC spec's answer)
 *   a malformed grpc-timeout          INTERNAL "malformed grpc-timeout"
 *                                     (as grpc-go answers it)
 *   grpc-timeout already passed       DEADLINE_EXCEEDED (a timeout of 0,
 *                                     or the message completes too late)
 *   the compressed flag set           UNIMPLEMENTED
 *   a message over max_message        RESOURCE_EXHAUSTED, as soon as its
 *                                     prefix says so
 *   headers over max_header_list      RESOURCE_EXHAUSTED
 *   no message, a cut message, or a   INTERNAL (as grpc-go and grpc-java
 *   second message                    answer a unary call with these)
 *   more buffered than max_buffered   RESOURCE_EXHAUSTED
 *   incomplete after request_timeout  DEADLINE_EXCEEDED
 *
 * These answers are the codec's own: the callback sees only calls. An
 * answer sent before the request ended is followed by RST_STREAM
 * (NO_ERROR), so the client stops sending. A protocol error is nghttp2's:
 * a stream error resets that stream, a connection error queues GOAWAY
 * and ends the connection (weir_grpc_h2_recv() returns false). Nothing a
 * client sends can do more than that.
 *
 * Threads: one codec belongs to one thread.
 */
#ifndef WEIR_FRONTENDS_GRPC_H2_H
#define WEIR_FRONTENDS_GRPC_H2_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

typedef struct weir_grpc_h2 weir_grpc_h2;

/** Caps and settings; a zero field takes its default. */
typedef struct weir_grpc_h2_limits {
    /** SETTINGS_MAX_CONCURRENT_STREAMS (default 1024); more are refused. */
    uint32_t max_streams;
    /** Largest request message, prefix excluded (default 64 KiB). */
    size_t max_message;
    /** SETTINGS_MAX_HEADER_LIST_SIZE, enforced per request (default
     *  16 KiB, counted as RFC 9113 does: name + value + 32 per field). */
    uint32_t max_header_list;
    /** SETTINGS_INITIAL_WINDOW_SIZE (default 1 MiB); the connection's
     *  window is raised to 16 times that (at most 2^31 - 1). */
    uint32_t initial_window;
    /** Request bytes held at once over all of the connection's streams
     *  (default max(1 MiB, 16 * max_message)). */
    size_t max_buffered;
    /** A request must be whole this long after its headers (0 = no cap). */
    int64_t request_timeout_ns;
    /** Answers held unsent (their bytes, and 1 KiB a stream for the
     *  stream itself) past which a new call is refused with
     *  RST_STREAM(REFUSED_STREAM) (default 256 KiB): a client that keeps
     *  its flow-control window shut holds no more. */
    size_t max_unsent;
} weir_grpc_h2_limits;

/** One unary call: valid only during the callback. */
typedef struct weir_grpc_call {
    int32_t stream_id;
    /** :path, e.g. "/grpc.health.v1.Health/Check" (not NUL-terminated). */
    const char *path;
    size_t path_len;
    /** When the client gives up (the caller's clock, ns): the time given
     *  with the headers plus grpc-timeout; INT64_MAX when it sent none. */
    int64_t deadline_ns;
    /** The request message, its prefix removed. */
    const uint8_t *msg;
    size_t msg_len;
} weir_grpc_call;

/** Called once per call. It answers with weir_grpc_h2_respond(), now or
 *  later (then the stream may be gone meanwhile: the answer is dropped).
 *  It must not free the codec. */
typedef void (*weir_grpc_h2_call_fn)(void *arg, weir_grpc_h2 *h, const weir_grpc_call *call);

/** A codec for one new connection; its SETTINGS are queued at once. NULL
 *  when out of memory. */
weir_grpc_h2 *weir_grpc_h2_new(const weir_grpc_h2_limits *limits, weir_grpc_h2_call_fn on_call,
                               void *arg);
void weir_grpc_h2_free(weir_grpc_h2 *h);

/**
 * weir_grpc_h2_recv() - take @len bytes the client sent, at @now_ns (a
 * monotonic clock in nanoseconds). Calls run from inside. Returns false
 * when the connection must end: a connection error (a GOAWAY is queued
 * when the client spoke HTTP/2 at all) or out of memory; the caller sends
 * what weir_grpc_h2_send() still gives, then closes. Later input is
 * ignored.
 */
bool weir_grpc_h2_recv(weir_grpc_h2 *h, const uint8_t *data, size_t len, int64_t now_ns);

/**
 * weir_grpc_h2_send() - append the bytes due to the client to @out, until
 * none are left or @out holds at least @budget bytes (the rest waits for
 * the next call). Returns false when the connection must end (out of
 * memory, a broken session).
 */
bool weir_grpc_h2_send(weir_grpc_h2 *h, weir_buf *out, size_t budget);

/**
 * weir_grpc_h2_respond() - answer call @stream_id: with @msg (@msg_len
 * bytes, prefixed here) the response is HEADERS (:status 200,
 * content-type application/grpc), one DATA with the message, and
 * trailers grpc-status / grpc-message; with @msg NULL it is a
 * Trailers-Only response (one HEADERS frame). @message may be NULL or
 * empty; it is percent-encoded as the gRPC spec says. Returns false when
 * the stream is gone or was answered already, or out of memory (the
 * stream is then reset).
 */
bool weir_grpc_h2_respond(weir_grpc_h2 *h, int32_t stream_id, int grpc_status, const char *message,
                          const uint8_t *msg, size_t msg_len);

/**
 * weir_grpc_h2_expire() - answer with DEADLINE_EXCEEDED the incomplete
 * requests whose grpc-timeout or request_timeout has passed at @now_ns.
 * Returns when the next one would pass (INT64_MAX: none pending).
 */
int64_t weir_grpc_h2_expire(weir_grpc_h2 *h, int64_t now_ns);

/**
 * weir_grpc_h2_shutdown() - graceful end: a GOAWAY announcing it (last
 * stream 2^31 - 1) and a PING; when the PING's ACK comes back (a round
 * trip later: streams the client opened meanwhile are in) the final
 * GOAWAY names the last stream that will be answered. In-flight calls are
 * still answered; once they are, weir_grpc_h2_done() turns true.
 */
void weir_grpc_h2_shutdown(weir_grpc_h2 *h);
/** The final GOAWAY now (NO_ERROR), e.g. when the PING's ACK is late or
 *  the connection was idle too long. */
void weir_grpc_h2_goaway(weir_grpc_h2 *h);

/** Bytes held by answers not sent yet (weir_grpc_h2_limits.max_unsent). */
size_t weir_grpc_h2_held(const weir_grpc_h2 *h);
/** Calls refused so far because the answers held passed max_unsent. */
uint64_t weir_grpc_h2_refused_streams(const weir_grpc_h2 *h);

/** Requests received and not yet closed (answered and sent, or reset). */
size_t weir_grpc_h2_open_streams(const weir_grpc_h2 *h);
/** Requests closed so far (answered and sent, or reset): while some are
 *  open and this does not move, the connection makes no progress. */
uint64_t weir_grpc_h2_closed_streams(const weir_grpc_h2 *h);
/** Requests still arriving: begun, not yet whole and not answered. */
size_t weir_grpc_h2_incomplete_streams(const weir_grpc_h2 *h);
/** Nothing more to read or write: close the connection. */
bool weir_grpc_h2_done(weir_grpc_h2 *h);

/**
 * weir_grpc_timeout_parse() - a grpc-timeout value: 1 to 8 ASCII digits
 * and a unit, H (hours), M (minutes), S, m (milliseconds), u, n. The
 * timeout in ns into *@ns (saturated to INT64_MAX); false when malformed.
 */
bool weir_grpc_timeout_parse(const char *s, size_t n, int64_t *ns);

/** @n bytes percent-encoded as grpc-message wants (bytes outside
 *  0x20..0x7E, and '%', become %XX) into @out (@cap bytes, NUL-terminated,
 *  cut at a whole escape). Returns the length written. */
size_t weir_grpc_percent_encode(const char *s, size_t n, char *out, size_t cap);

#endif /* WEIR_FRONTENDS_GRPC_H2_H */
