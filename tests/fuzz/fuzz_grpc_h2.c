/*
 * fuzz_grpc_h2.c - fuzzes the gRPC HTTP/2 server codec (frontends/grpc/
 * h2.c) as the client side of a connection: arbitrary bytes go in, in
 * pieces, with the clock moving, calls answered at once or later, and a
 * graceful shutdown now and then.
 *
 * The first input byte chooses: bits 0-2 the piece sizes, bit 3 prepend
 * the client's connection preface, bit 4 answer calls late (after the
 * next piece), bit 5 a graceful shutdown halfway, bit 6 small caps, bit 7
 * expire deadlines after each piece. The rest is the byte stream.
 *
 * Checked: calls carry an odd stream id, a path and a message within the
 * cap, and come once per stream; the streams held stay within the
 * advertised cap; the bytes out are whole HTTP/2 frames, beginning with
 * SETTINGS, of the kinds a server sends, on the streams it may use; after
 * a connection error input stays refused and the codec ends. A broken
 * invariant aborts, so the fuzzer reports it like a crash.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "grpc/h2.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_CALLS 4096u
#define FRAME_HEADER 9u

static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

typedef struct state {
    weir_grpc_h2_limits lim;
    bool late;
    int32_t called[MAX_CALLS];
    size_t n_called;
    int32_t pending[MAX_CALLS];
    size_t n_pending;
    /* the output parser: a frame may straddle two sends */
    uint8_t hdr[FRAME_HEADER];
    size_t hdr_len;
    size_t payload_left;
    size_t n_frames;
} state;

static void check(int ok)
{
    if (!ok)
        abort();
}

static void answer(weir_grpc_h2 *h, int32_t id)
{
    static const uint8_t reply[] = {0x08, 0x01}; /* overall_code: OK */
    if (id % 4 == 1)
        weir_grpc_h2_respond(h, id, 0, NULL, reply, sizeof(reply));
    else
        weir_grpc_h2_respond(h, id, 3, "bad % request\n", NULL, 0);
}

static void on_call(void *arg, weir_grpc_h2 *h, const weir_grpc_call *call)
{
    state *s = arg;
    check(call->stream_id > 0 && call->stream_id % 2 == 1);
    check(call->path != NULL);
    check(call->msg_len <= s->lim.max_message);
    check(call->msg != NULL || call->msg_len == 0);
    for (size_t i = 0; i < s->n_called; i++)
        check(s->called[i] != call->stream_id);
    if (s->n_called < MAX_CALLS)
        s->called[s->n_called++] = call->stream_id;
    if (s->late && s->n_pending < MAX_CALLS) {
        s->pending[s->n_pending++] = call->stream_id;
        return;
    }
    answer(h, call->stream_id);
    /* a second answer is refused */
    check(!weir_grpc_h2_respond(h, call->stream_id, 0, NULL, NULL, 0));
}

/* One frame header out of the server: a kind a server sends, on a stream
 * it may use. */
static void check_frame(state *s, const uint8_t *h)
{
    size_t len = (size_t)h[0] << 16 | (size_t)h[1] << 8 | h[2];
    uint8_t type = h[3];
    uint32_t id =
        ((uint32_t)h[5] << 24 | (uint32_t)h[6] << 16 | (uint32_t)h[7] << 8 | h[8]) & 0x7fffffffu;
    check(len <= 16384);
    if (s->n_frames++ == 0)
        check(type == 0x4 && id == 0); /* SETTINGS first */
    switch (type) {
    case 0x0: /* DATA */
    case 0x1: /* HEADERS */
    case 0x3: /* RST_STREAM */
        check(id % 2 == 1);
        break;
    case 0x4: /* SETTINGS */
    case 0x6: /* PING */
    case 0x7: /* GOAWAY */
        check(id == 0);
        break;
    case 0x8: /* WINDOW_UPDATE */
        break;
    default: /* no PUSH_PROMISE, PRIORITY or CONTINUATION from this server */
        abort();
    }
    s->payload_left = len;
}

static void check_output(state *s, const uint8_t *p, size_t n)
{
    while (n) {
        if (s->payload_left) {
            size_t k = n < s->payload_left ? n : s->payload_left;
            s->payload_left -= k;
            p += k;
            n -= k;
            continue;
        }
        size_t k = FRAME_HEADER - s->hdr_len;
        if (k > n)
            k = n;
        memcpy(s->hdr + s->hdr_len, p, k);
        s->hdr_len += k;
        p += k;
        n -= k;
        if (s->hdr_len == FRAME_HEADER) {
            s->hdr_len = 0;
            check_frame(s, s->hdr);
        }
    }
}

static void drain(weir_grpc_h2 *h, state *s, bool *alive)
{
    weir_buf out;
    weir_buf_init(&out, SIZE_MAX);
    for (int i = 0; i < 64; i++) {
        weir_buf_clear(&out);
        if (!weir_grpc_h2_send(h, &out, 4096)) {
            *alive = false;
            break;
        }
        check_output(s, (const uint8_t *)out.p, out.len);
        if (out.len < 4096)
            break;
    }
    weir_buf_free(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    static state s;
    memset(&s, 0, sizeof(s));
    uint8_t cfg = data[0];
    data++;
    size--;
    if (cfg & 0x40) {
        s.lim.max_streams = 4;
        s.lim.max_message = 32;
        s.lim.max_header_list = 512;
        s.lim.initial_window = 100;
        s.lim.max_buffered = 64;
    } else {
        s.lim.max_streams = 1024;
        s.lim.max_message = 65536;
    }
    s.lim.request_timeout_ns = 1000000000;
    s.late = (cfg & 0x10) != 0;
    weir_grpc_h2 *h = weir_grpc_h2_new(&s.lim, on_call, &s);
    if (!h)
        return 0;
    int64_t now = 1000000000;
    bool alive = true, failed = false;
    drain(h, &s, &alive);
    if (cfg & 0x08) {
        if (!weir_grpc_h2_recv(h, (const uint8_t *)preface, sizeof(preface) - 1, now))
            abort(); /* the preface alone is always fine */
    }
    uint32_t rng = (uint32_t)(cfg & 7) * 2654435761u + 1;
    size_t pos = 0;
    bool shut = false;
    while (pos < size) {
        size_t piece = size - pos;
        if (cfg & 7) {
            rng = rng * 1103515245u + 12345u;
            size_t cap = (size_t)1 << ((rng >> 16) % 8);
            piece = piece < cap ? piece : 1 + (rng >> 8) % cap;
        }
        bool ok = weir_grpc_h2_recv(h, data + pos, piece, now);
        if (failed)
            check(!ok); /* refused for good */
        failed = failed || !ok;
        pos += piece;
        now += (int64_t)(rng % 50000000u);
        for (size_t i = 0; i < s.n_pending; i++)
            answer(h, s.pending[i]);
        s.n_pending = 0;
        if (cfg & 0x80)
            check(weir_grpc_h2_expire(h, now) > now);
        if ((cfg & 0x20) && !shut && pos >= size / 2) {
            shut = true;
            weir_grpc_h2_shutdown(h);
        }
        check(weir_grpc_h2_open_streams(h) <= s.lim.max_streams);
        check(weir_grpc_h2_incomplete_streams(h) <= weir_grpc_h2_open_streams(h));
        drain(h, &s, &alive);
    }
    weir_grpc_h2_goaway(h);
    drain(h, &s, &alive);
    if (failed && alive)
        check(weir_grpc_h2_done(h));
    weir_grpc_h2_free(h);
    return 0;
}
