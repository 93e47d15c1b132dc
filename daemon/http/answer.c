/*
 * answer.c - an HTTP/1.1 response rendered into its answer's own bytes.
 */
#include "answer.h"

#include "log.h"

/* "HTTP/1.1 NNN Reason\r\n" without printf: it is on every answer. */
static void put_status_line(weir_buf *o, int status)
{
    char line[16] = "HTTP/1.1 000 ";
    int v = status < 100 || status > 999 ? 500 : status;
    line[9] = (char)('0' + v / 100);
    line[10] = (char)('0' + v / 10 % 10);
    line[11] = (char)('0' + v % 10);
    weir_buf_put(o, line, 13);
    weir_buf_puts(o, weir_api_reason(v));
    weir_buf_put(o, "\r\n", 2);
}

void http_answer_respond(http_answer *a, int status, const char *content_type,
                         const weir_headers *extra, const char *body, size_t len)
{
    worker *w = a->conn->w;
    if (a->slot.ready)
        return;
    a->slot.ready = true;
    /* draining already: a keep-alive client moves away between requests,
     * rather than having its connection closed under the next one */
    if (atomic_load_explicit(&w->srv->draining, memory_order_relaxed))
        a->keep_alive = false;
    weir_buf *o = &a->slot.bytes;
    put_status_line(o, status);
    weir_buf_puts(o, w->date);
    if (content_type) {
        weir_buf_puts(o, "Content-Type: ");
        weir_buf_puts(o, content_type);
        weir_buf_puts(o, "\r\n");
    }
    weir_buf_puts(o, "Content-Length: ");
    weir_buf_put_u64(o, len);
    weir_buf_puts(o, "\r\n");
    if (!a->keep_alive)
        weir_buf_puts(o, "Connection: close\r\n");
    else if (a->http10)
        weir_buf_puts(o, "Connection: keep-alive\r\n");
    if (extra)
        weir_headers_put_lines(extra, o);
    weir_buf_puts(o, "\r\n");
    if (!a->head)
        weir_buf_put(o, body, len);
    if (!weir_buf_ok(o)) {
        /* out of memory for the answer: nothing sensible can follow */
        dlog(WEIR_LOG_ERROR, "response_dropped", "reason", "out of memory", NULL);
        weir_buf_clear(o);
        a->keep_alive = false;
    }
    a->slot.close_after = !a->keep_alive;
    metrics_request(w->metrics, PROTO_HTTP, (int64_t)(uv_hrtime() - a->t0_ns), a->route, status);
}

void http_answer_problem(http_answer *a, int status, const char *detail)
{
    worker *w = a->conn->w;
    weir_buf_clear(&w->body);
    weir_api_render_error(&w->body, status, detail);
    http_answer_respond(a, status, "application/problem+json", NULL, w->body.p, w->body.len);
}
