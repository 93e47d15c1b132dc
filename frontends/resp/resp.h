/*
 * resp.h - the Redis protocol (RESP) as a server reads and writes it: a
 * command parser (bytes in, whole commands out) and the reply encoder.
 * No I/O, no allocation after weir_resp_parser_new().
 *
 * Commands arrive as RESP arrays of bulk strings ("*2\r\n$4\r\nPING\r\n
 * $1\r\nx\r\n") or as inline commands, one line of space-separated words
 * with Redis's quoting rules (what telnet and `redis-cli` in a pipe send).
 * Anything else, or past a cap, is a protocol error worded as Redis words
 * it ("Protocol error: invalid bulk length"); the server answers it and
 * closes the connection, as Redis does.
 *
 * Why not hiredis's reader: it parses replies, not commands (no inline
 * form, and it would accept nested arrays and every RESP3 type a client
 * must not send), and it allocates a reply object per argument, which a
 * server answering millions of commands a second cannot afford. This
 * parser hands out views into the caller's bytes instead.
 *
 * Threads: a parser belongs to one connection.
 */
#ifndef WEIR_FRONTENDS_RESP_RESP_H
#define WEIR_FRONTENDS_RESP_RESP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

/* ------------------------------------------------------------ parsing */

typedef struct weir_resp_limits {
    /** Most arguments in one command (the command name counts). */
    size_t max_args;
    /** Longest argument, in bytes. */
    size_t max_bulk;
    /** Longest inline command line, in bytes (Redis: 64 KB). */
    size_t max_inline;
} weir_resp_limits;

/** One argument: a view, valid until the next weir_resp_parse(). Bytes,
 *  not NUL-terminated. */
typedef struct weir_resp_arg {
    const char *p;
    size_t n;
} weir_resp_arg;

typedef struct weir_resp_command {
    /** argv[0] is the command name as sent (any case). */
    const weir_resp_arg *argv;
    size_t argc; /* >= 1 */
    /** It came as an inline command. */
    bool inline_form;
} weir_resp_command;

typedef enum weir_resp_result {
    /** No whole command in the bytes given: call again with the same bytes
     *  and more after them (*used is 0 then, even after empty commands:
     *  they are consumed with the next command; the parser remembers how
     *  far it got, so bytes are not scanned twice). */
    WEIR_RESP_NEED_MORE,
    /** *cmd holds a whole command; *used bytes were consumed. */
    WEIR_RESP_COMMAND,
    /** A protocol error: *error says what, as Redis words it (Redis
     *  answers "-ERR <error>"). The connection answers it and closes; the
     *  parser stays in error. *used counts the empty commands before the
     *  bad one, and is 0 on every later call. */
    WEIR_RESP_ERROR
} weir_resp_result;

typedef struct weir_resp_parser weir_resp_parser;

/** A parser with its caps (copied), or NULL when out of memory (or @lim
 *  is NULL). It allocates max_args views and max_inline bytes at once. */
weir_resp_parser *weir_resp_parser_new(const weir_resp_limits *lim);
/** NULL is a no-op. */
void weir_resp_parser_free(weir_resp_parser *p);

/**
 * weir_resp_parse() - take the first command out of @data.
 *
 * Empty commands ("*0\r\n", "*-1\r\n", blank inline lines) are consumed
 * and skipped, as Redis skips them. Returns as described at
 * weir_resp_result; *used says how many bytes of @data were consumed (the
 * command, and any empty commands before it). The views of *cmd point into
 * @data (or, for an inline command with quotes or escapes, into the
 * parser's own buffer) and stay valid until the next call. @used, @cmd and
 * @error may be NULL. Given fewer bytes than the last call (a caller's
 * bug), the parser reads the partial command again from @data's start.
 */
weir_resp_result weir_resp_parse(weir_resp_parser *p, const char *data, size_t len, size_t *used,
                                 weir_resp_command *cmd, const char **error);

/** A client not yet authenticated gets Redis's tighter caps on RESP
 *  arrays: at most 10 arguments ("Protocol error: unauthenticated
 *  multibulk length") of at most 16384 bytes ("... unauthenticated bulk
 *  length"), whatever the limits; off (the default) lifts them. Takes
 *  effect from the next count or length read. */
void weir_resp_parser_preauth(weir_resp_parser *p, bool on);

/** Forget any partial command and a sticky error: the next call starts on
 *  a command boundary. */
void weir_resp_parser_reset(weir_resp_parser *p);

/* ------------------------------------------------------------ replies */

/* Every writer appends to @b (a weir_buf: appends never fail loudly; the
 * caller checks weir_buf_ok() once). @resp3 chooses RESP3's types where
 * RESP2 has none (maps, nulls, booleans); RESP2 gets their usual RESP2
 * shapes (a map is an array of 2n elements, a null is "$-1"). */

void weir_resp_simple(weir_buf *b, const char *s); /* "+OK" */
/** An error reply: @msg starts with its code ("ERR ...", "NOAUTH ...");
 *  CR and LF in it become spaces, as Redis does. */
void weir_resp_error(weir_buf *b, const char *msg, size_t n);
/** weir_resp_error() with printf formatting. */
void weir_resp_errorf(weir_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void weir_resp_int(weir_buf *b, int64_t v);
void weir_resp_bulk(weir_buf *b, const void *p, size_t n);
void weir_resp_bulk_str(weir_buf *b, const char *s);
void weir_resp_null(weir_buf *b, bool resp3);
void weir_resp_array(weir_buf *b, size_t n);
/** A map of @n pairs (then 2n elements follow, key then value). */
void weir_resp_map(weir_buf *b, size_t n, bool resp3);
/** A set of @n elements (RESP2: an array). */
void weir_resp_set(weir_buf *b, size_t n, bool resp3);

#endif /* WEIR_FRONTENDS_RESP_RESP_H */
