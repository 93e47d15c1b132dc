/*
 * web.c - the dashboard's files on the admin listener (web.h).
 *
 * Every answer carries a Content-Security-Policy that lets the page load
 * only what this listener serves (no inline script, no other origin, no
 * framing, no form sent anywhere) and Cache-Control: no-cache, so a
 * browser asks again each time and a new build's files are seen at once;
 * the ETag makes asking again cost a 304.
 */
#include "web.h"

#include <string.h>

#include "worker.h"

#define PREFIX "/dashboard"
#define PREFIX_LEN (sizeof(PREFIX) - 1)
#define INDEX "dashboard.html"

static const char csp[] = "default-src 'self'; base-uri 'none'; form-action 'none'; "
                          "frame-ancestors 'none'";

const admin_web_file *admin_web_find(const char *path, size_t n)
{
    if (n < PREFIX_LEN || memcmp(path, PREFIX, PREFIX_LEN) != 0)
        return NULL;
    const char *name = path + PREFIX_LEN;
    size_t len = n - PREFIX_LEN;
    if (len == 0 || (len == 1 && name[0] == '/')) {
        name = "/" INDEX;
        len = sizeof(INDEX);
    }
    if (name[0] != '/')
        return NULL;
    name++, len--;
    for (size_t i = 0; i < weir__web_files_count; i++) {
        const admin_web_file *f = &weir__web_files[i];
        if (strlen(f->name) == len && memcmp(f->name, name, len) == 0)
            return f;
    }
    return NULL;
}

/* Whether If-None-Match lists @etag (or is "*"). */
static bool etag_matches(const weir_http1_request *req, const char *etag)
{
    weir_http1_str v = weir_http1_header_get(req, "If-None-Match");
    if (!v.p)
        return false;
    size_t en = strlen(etag);
    for (size_t i = 0; i < v.n;) {
        while (i < v.n && (v.p[i] == ' ' || v.p[i] == '\t' || v.p[i] == ','))
            i++;
        size_t start = i;
        while (i < v.n && v.p[i] != ',' && v.p[i] != ' ' && v.p[i] != '\t')
            i++;
        const char *t = v.p + start;
        size_t tn = i - start;
        if (tn >= 2 && t[0] == 'W' && t[1] == '/') /* a weak match is enough for GET */
            t += 2, tn -= 2;
        if ((tn == 1 && t[0] == '*') || (tn == en && memcmp(t, etag, en) == 0))
            return true;
    }
    return false;
}

static void add(weir_headers *h, const char *name, const char *value)
{
    weir_headers_add(h, name, strlen(name), value, strlen(value));
}

bool admin_web_handle(http_answer *a, const weir_http1_request *req)
{
    const weir_http1_str *p = &req->path;
    if (p->n < PREFIX_LEN || memcmp(p->p, PREFIX, PREFIX_LEN) != 0 ||
        (p->n > PREFIX_LEN && p->p[PREFIX_LEN] != '/'))
        return false;
    worker *w = a->conn->w;
    if (req->method != WEIR_HTTP1_GET && req->method != WEIR_HTTP1_HEAD) {
        weir_headers_clear(&w->headers);
        add(&w->headers, "Allow", "GET, HEAD");
        weir_buf_clear(&w->body);
        weir_api_render_error(&w->body, 405, "the dashboard's files are read with GET");
        http_answer_respond(a, 405, "application/problem+json", &w->headers, w->body.p,
                            w->body.len);
        return true;
    }
    const admin_web_file *f = admin_web_find(p->p, p->n);
    if (!f) {
        http_answer_problem(a, 404, "no such file of the dashboard");
        return true;
    }
    weir_headers_clear(&w->headers);
    add(&w->headers, "Content-Security-Policy", csp);
    add(&w->headers, "Cache-Control", "no-cache");
    add(&w->headers, "ETag", f->etag);
    add(&w->headers, "X-Content-Type-Options", "nosniff");
    add(&w->headers, "Referrer-Policy", "no-referrer");
    if (etag_matches(req, f->etag)) {
        /* no body, and the Content-Length a 200 would have had */
        a->head = true;
        http_answer_respond(a, 304, NULL, &w->headers, f->bytes, f->len);
        return true;
    }
    http_answer_respond(a, 200, f->type, &w->headers, f->bytes, f->len);
    return true;
}
