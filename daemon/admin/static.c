/*
 * static.c - the files of web/ on the admin listener (static.h), with
 * headers that keep a page to itself: its own scripts and styles only
 * (Content-Security-Policy), no sniffing, no framing, no referrer.
 */
#include "static.h"

#include <stdio.h>
#include <string.h>

#include "worker.h"

#define CSP                                                                           \
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " \
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

const admin_static_file *admin_static_find(const char *path, size_t n)
{
    for (size_t i = 0; i < weir__web_files_count; i++) {
        const admin_static_file *f = &weir__web_files[i];
        if (strlen(f->path) == n && memcmp(f->path, path, n) == 0)
            return f;
    }
    return NULL;
}

bool admin_static_handle(http_answer *a, const weir_http1_request *req)
{
    const admin_static_file *f = admin_static_find(req->path.p, req->path.n);
    if (!f)
        return false;
    worker *w = a->conn->w;
    weir_headers_clear(&w->headers);
    if (req->method != WEIR_HTTP1_GET && req->method != WEIR_HTTP1_HEAD) {
        static const char allow[] = "GET, HEAD";
        weir_headers_add(&w->headers, "Allow", 5, allow, sizeof(allow) - 1);
        char detail[160];
        snprintf(detail, sizeof(detail), "method not allowed: %s takes GET", f->path);
        weir_buf_clear(&w->body);
        weir_api_render_error(&w->body, 405, detail);
        http_answer_respond(a, 405, "application/problem+json", &w->headers, w->body.p,
                            w->body.len);
        return true;
    }
    static const struct {
        const char *name, *value;
    } headers[] = {
        {"Content-Security-Policy", CSP},
        {"X-Content-Type-Options", "nosniff"},
        {"Referrer-Policy", "no-referrer"},
        {"Cache-Control", "no-cache"},
    };
    for (size_t i = 0; i < sizeof(headers) / sizeof(headers[0]); i++)
        weir_headers_add(&w->headers, headers[i].name, strlen(headers[i].name), headers[i].value,
                         strlen(headers[i].value));
    http_answer_respond(a, 200, f->content_type, &w->headers, (const char *)f->bytes, f->len);
    return true;
}
