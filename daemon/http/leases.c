/*
 * leases.c - concurrency leases over HTTP (leases.h).
 */
#include "leases.h"

#include <string.h>

#include "api/json.h"
#include "lease_release.h"

/* Adds the Weir-Lease header of the token at @b's end, from @from on. */
static void add_header(worker *w, const weir_buf *b, size_t from)
{
    weir_headers_add(&w->headers, LEASES_HEADER, strlen(LEASES_HEADER), b->p + from, b->len - from);
}

void leases_answer_get(http_answer *a, const weir_request *req, const weir_api_decision *dec,
                       int64_t now_us)
{
    worker *w = a->conn->w;
    if (http_refuse_unknown_domain(a, req, dec))
        return;
    http_render_headers(w, dec, now_us);
    weir_buf_clear(&w->body);
    if (dec->overall == WEIR_CODE_OK) {
        lease_token_put(&w->body, dec->statuses, dec->n, now_us);
        add_header(w, &w->body, 0);
        if (!weir_buf_ok(&w->body) || !weir_headers_ok(&w->headers)) {
            http_answer_problem(a, 500, "out of memory");
            return;
        }
        http_answer_respond(a, 200, NULL, &w->headers, "", 0);
        return;
    }
    weir_api_render_problem(&w->body, dec, weir_api_retry_after_s(dec));
    http_answer_respond(a, (int)w->srv->opt.check_deny_status, "application/problem+json",
                        &w->headers, w->body.p, w->body.len);
}

void leases_answer_post(http_answer *a, const weir_request *req, const weir_api_decision *dec,
                        int64_t now_us)
{
    worker *w = a->conn->w;
    if (http_refuse_unknown_domain(a, req, dec))
        return;
    http_render_headers(w, dec, now_us);
    weir_buf_clear(&w->body);
    weir_api_render_decision(&w->body, dec);
    bool ok = dec->overall == WEIR_CODE_OK;
    if (ok && weir_buf_ok(&w->body) && w->body.len > 0 && w->body.p[w->body.len - 1] == '}') {
        /* the decision's object, with the token as one more member */
        w->body.len--;
        weir_buf_puts(&w->body, ",\"lease\":\"");
        size_t from = w->body.len;
        lease_token_put(&w->body, dec->statuses, dec->n, now_us);
        if (weir_buf_ok(&w->body))
            add_header(w, &w->body, from);
        weir_buf_puts(&w->body, "\"}");
    }
    if (!weir_buf_ok(&w->body) || !weir_headers_ok(&w->headers)) {
        http_answer_problem(a, 500, "out of memory");
        return;
    }
    http_answer_respond(a, ok ? 200 : 429, "application/json", &w->headers, w->body.p, w->body.len);
}

/* ------------------------------------------------------------ release */

static void released(conn *c, void *arg, const lease_counts *n, bool later)
{
    http_answer *a = *(http_answer **)arg;
    worker *w = c->w;
    weir_buf_clear(&w->body);
    /* every release: not through printf (a fiftieth of a pair's CPU) */
    weir_buf_puts(&w->body, "{\"leases\":");
    weir_buf_put_u64(&w->body, n->leases);
    weir_buf_puts(&w->body, ",\"released\":");
    weir_buf_put_u64(&w->body, n->released);
    weir_buf_puts(&w->body, ",\"failed\":");
    weir_buf_put_u64(&w->body, n->failed);
    weir_buf_putc(&w->body, '}');
    http_answer_respond(a, 200, "application/json", NULL, w->body.p, w->body.len);
    if (later)
        conn_kick(c);
}

/* The token of the request: its Weir-Lease header, else the body's
 * "lease"; and whether the work failed from overload (`?dropped=true`,
 * or the body's "dropped": true). False, with a 400 answered, when no
 * token is there or the query or "dropped" is something else. */
static bool read_token(http_answer *a, const weir_http1_request *req, lease_token *tok,
                       bool *dropped)
{
    static const char flag[] = "dropped=true";
    *dropped = req->query.n == sizeof(flag) - 1 && memcmp(req->query.p, flag, req->query.n) == 0;
    if (req->query.n && !*dropped) {
        http_answer_problem(a, 400, "POST /v1/release takes one query parameter: ?dropped=true");
        return false;
    }
    weir_http1_str h = weir_http1_header_get(req, LEASES_HEADER);
    if (h.p) {
        if (lease_token_parse(h.p, h.n, tok))
            return true;
        http_answer_problem(a, 400, "the Weir-Lease header is not a lease token of /v1/acquire");
        return false;
    }
    weir_json j;
    weir_json_init(&j);
    weir_json_error err;
    bool ok = false;
    const char *why = "the body must be {\"lease\": \"TOKEN\"} (or send the Weir-Lease header)";
    if (weir_json_parse(&j, req->body.p, req->body.n, 0, &err) == WEIR_JSON_OK &&
        j.nodes[0].type == WEIR_JSON_OBJECT) {
        const weir_json_node *v = &j.nodes[1];
        bool bad_flag = false;
        for (uint32_t i = 0; i < j.nodes[0].n; i++, v = weir_json_next(weir_json_next(v))) {
            const weir_json_node *val = v + 1;
            if (v->n == 7 && memcmp(v->s, "dropped", 7) == 0) {
                bad_flag |= val->type != WEIR_JSON_TRUE && val->type != WEIR_JSON_FALSE;
                *dropped |= val->type == WEIR_JSON_TRUE;
            } else if (v->n == 5 && memcmp(v->s, "lease", 5) == 0) {
                ok = val->type == WEIR_JSON_STRING && lease_token_parse(val->s, val->n, tok);
                if (!ok)
                    why = "\"lease\" is not a lease token of /v1/acquire";
            }
        }
        if (ok && bad_flag) {
            ok = false;
            why = "\"dropped\" must be true or false";
        }
    }
    weir_json_release(&j);
    if (!ok)
        http_answer_problem(a, 400, why);
    return ok;
}

void leases_release(http_answer *a, const weir_http1_request *req)
{
    lease_token *tok = lease_token_scratch();
    bool dropped;
    if (!read_token(a, req, tok, &dropped))
        return;
    if (dropped)
        lease_token_set_dropped(tok);
    if (!lease_release_all(a->conn, tok, a->t0_ns, released, &a, sizeof(a)))
        http_answer_problem(a, 503, "out of memory");
}
