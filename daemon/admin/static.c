/*
 * static.c - the files of web/ on the admin listener (static.h), with
 * headers that keep a page to itself: its own scripts and styles only
 * (Content-Security-Policy), no sniffing, no framing, no referrer.
 * Cache-Control: no-cache makes a browser ask again each time, so a new
 * build's files are seen at once; the ETag makes asking again a 304.
 */
#include "static.h"

#include <stdio.h>
#include <string.h>

#include "worker.h"

#define CSP                                                                           \
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " \
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

static const admin_static_file *find(const char *path, size_t n)
{
    for (size_t i = 0; i < weir__web_files_count; i++) {
        const admin_static_file *f = &weir__web_files[i];
        if (strlen(f->path) == n && memcmp(f->path, path, n) == 0)
            return f;
    }
    return NULL;
}

const admin_static_file *admin_static_find(const char *path, size_t n)
{
    const admin_static_file *f = find(path, n);
    /* a page's folder, /NAME/: the page */
    if (!f && n > 2 && path[n - 1] == '/' && !memchr(path + 1, '/', n - 2))
        f = find(path, n - 1);
    return f;
}

/* Whether @path lies under a page's folder (/sim/..., /dashboard/...):
 * the pages' own namespace. */
static bool under_page(const char *path, size_t n)
{
    const char *slash = n > 1 ? memchr(path + 1, '/', n - 1) : NULL;
    return slash && find(path, (size_t)(slash - path));
}

/* Whether If-None-Match lists @etag, or is "*" (RFC 9110 13.1.2: a weak
 * comparison, so W/"x" matches "x"). */
static bool etag_matches(const weir_http1_request *req, const char *etag)
{
    weir_http1_str v = weir_http1_header_get(req, "If-None-Match");
    size_t en = strlen(etag);
    for (size_t i = 0; v.p && i < v.n;) {
        while (i < v.n && (v.p[i] == ' ' || v.p[i] == '\t' || v.p[i] == ','))
            i++;
        size_t start = i;
        while (i < v.n && v.p[i] != ',' && v.p[i] != ' ' && v.p[i] != '\t')
            i++;
        const char *t = v.p + start;
        size_t tn = i - start;
        if (tn >= 2 && t[0] == 'W' && t[1] == '/')
            t += 2, tn -= 2;
        if ((tn == 1 && t[0] == '*') || (tn == en && memcmp(t, etag, en) == 0))
            return true;
    }
    return false;
}

bool admin_static_handle(http_answer *a, const weir_http1_request *req)
{
    const admin_static_file *f = admin_static_find(req->path.p, req->path.n);
    if (!f) {
        if (!under_page(req->path.p, req->path.n))
            return false;
        http_answer_problem(a, 404, "no such file");
        return true;
    }
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
    const struct {
        const char *name, *value;
    } headers[] = {
        {"Content-Security-Policy", CSP},
        {"X-Content-Type-Options", "nosniff"},
        {"Referrer-Policy", "no-referrer"},
        {"Cache-Control", "no-cache"},
        {"ETag", f->etag},
    };
    for (size_t i = 0; i < sizeof(headers) / sizeof(headers[0]); i++)
        weir_headers_add(&w->headers, headers[i].name, strlen(headers[i].name), headers[i].value,
                         strlen(headers[i].value));
    if (etag_matches(req, f->etag)) {
        /* no body, and the Content-Length a 200 would have had */
        a->head = true;
        http_answer_respond(a, 304, NULL, &w->headers, (const char *)f->bytes, f->len);
        return true;
    }
    http_answer_respond(a, 200, f->content_type, &w->headers, (const char *)f->bytes, f->len);
    return true;
}
