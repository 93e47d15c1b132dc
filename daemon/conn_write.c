/*
 * conn_write.c - the two-buffer writer of conn_write.h.
 */
#include "conn_write.h"

#include "conn.h"

void conn_writer_init(conn_writer *wr, conn *c, void (*written)(conn_writer *wr))
{
    weir_buf_init(&wr->out[0], SIZE_MAX);
    weir_buf_init(&wr->out[1], SIZE_MAX);
    wr->cur = 0;
    wr->writing = false;
    wr->c = c;
    wr->written = written;
}

void conn_writer_free(conn_writer *wr)
{
    weir_buf_free(&wr->out[0]);
    weir_buf_free(&wr->out[1]);
}

static void on_write(uv_write_t *req, int status)
{
    conn_writer *wr = req->data;
    wr->writing = false;
    weir_buf_clear(&wr->out[wr->cur ^ 1]);
    if (wr->c->closed)
        return;
    if (status < 0) {
        conn_close(wr->c);
        return;
    }
    wr->written(wr);
}

bool conn_writer_flush(conn_writer *wr)
{
    conn *c = wr->c;
    if (c->closed)
        return false;
    if (wr->writing)
        return true;
    weir_buf *b = &wr->out[wr->cur];
    if (!b->len)
        return true;
    uv_buf_t ub = uv_buf_init(b->p, (unsigned)b->len);
    int n = uv_try_write((uv_stream_t *)&c->tcp, &ub, 1);
    if (n == (int)b->len) {
        weir_buf_clear(b);
        return true;
    }
    if (n < 0 && n != UV_EAGAIN) {
        conn_close(c);
        return false;
    }
    size_t done = n > 0 ? (size_t)n : 0;
    ub = uv_buf_init(b->p + done, (unsigned)(b->len - done));
    wr->wreq.data = wr;
    wr->writing = true;
    wr->cur ^= 1;
    if (uv_write(&wr->wreq, (uv_stream_t *)&c->tcp, &ub, 1, on_write) < 0) {
        wr->writing = false;
        conn_close(c);
        return false;
    }
    return true;
}
