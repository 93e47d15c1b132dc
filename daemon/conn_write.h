/*
 * conn_write.h - a connection's writer: answers are appended to one
 * buffer while the other may be in flight; a flush tries a direct write
 * first and hands the rest to libuv, so a client that keeps up costs no
 * copy and no callback. Shared by every protocol.
 */
#ifndef WEIR_DAEMON_CONN_WRITE_H
#define WEIR_DAEMON_CONN_WRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "common/buf.h"

struct conn;

typedef struct conn_writer {
    weir_buf out[2]; /* out[cur] collects; the other may be in flight */
    int cur;
    bool writing;
    uv_write_t wreq;
    struct conn *c;
    /* a write handed to libuv completed and the connection is open:
     * the protocol goes on (more to send, resume reading) */
    void (*written)(struct conn_writer *wr);
} conn_writer;

void conn_writer_init(conn_writer *wr, struct conn *c, void (*written)(conn_writer *wr));
/** Free the buffers; only once the connection's handles have closed. */
void conn_writer_free(conn_writer *wr);

/** Where the next bytes go. */
static inline weir_buf *conn_writer_buf(conn_writer *wr)
{
    return &wr->out[wr->cur];
}

/** Bytes not yet handed to the socket, and in flight. */
static inline size_t conn_writer_queued(const conn_writer *wr)
{
    return wr->out[0].len + wr->out[1].len;
}

/** Send what was appended, unless a write is in flight (it is sent when
 *  that one completes). Returns false when the connection failed and was
 *  closed. Afterwards, wr->writing says whether bytes wait on the client. */
bool conn_writer_flush(conn_writer *wr);

#endif /* WEIR_DAEMON_CONN_WRITE_H */
