/*
 * decision_log.c - the log lines decisions call for (decision_log.h).
 */
#include "decision_log.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <xxhash.h>

#include "api/api.h"
#include "log.h"

/* A sample of the decisions the store's failure made (at most one line a
 * second a worker): which limit, and how its failure mode decided. */
static void log_failure_mode(worker *w, const weir_descriptor_status *st, size_t n)
{
    const weir_descriptor_status *s = NULL;
    for (size_t i = 0; i < n && !s; i++)
        if (st[i].failure_mode && st[i].limit)
            s = &st[i];
    if (!s)
        return;
    uint64_t now = uv_now(&w->loop);
    if (w->failure_logged_ms && now - w->failure_logged_ms < 1000) {
        w->failure_unlogged++;
        return;
    }
    const char *mode = s->local                                      ? "local"
                       : s->limit->failure_mode == WEIR_FAILURE_DENY ? "deny"
                                                                     : "allow";
    char unlogged[24];
    snprintf(unlogged, sizeof(unlogged), "%llu", (unsigned long long)w->failure_unlogged);
    dlog(WEIR_LOG_WARN, "failure_mode_decision", "domain", s->limit->domain, "rule",
         s->limit->name ? s->limit->name : s->limit->path, "mode", mode, "code",
         s->code == WEIR_CODE_OVER_LIMIT ? "OVER_LIMIT" : "OK", "unlogged_since_last", unlogged,
         NULL);
    w->failure_logged_ms = now;
    w->failure_unlogged = 0;
}

/* ------------------------------------------------------------ unknown domains */

/* Domains logged lately, process-wide: a slot per hash, so a domain whose
 * slot another took may be logged again sooner; that costs a line, never
 * a lock held for long. */
#define UNKNOWN_SLOTS 256u
#define UNKNOWN_NAME_BYTES 128u
#define MINUTE_MS 60000u

typedef struct unknown_slot {
    uint64_t logged_ms; /* 0: empty */
    size_t len;
    char name[UNKNOWN_NAME_BYTES];
} unknown_slot;

static struct {
    pthread_mutex_t lock;
    unknown_slot slots[UNKNOWN_SLOTS];
    uint64_t minute_ms; /* the start of the minute the lines are counted in */
    unsigned lines;     /* logged in it */
    uint64_t unlogged;  /* over the cap since the last line */
} unknown = {.lock = PTHREAD_MUTEX_INITIALIZER};

static uint64_t now_ms(worker *w)
{
    int64_t us = server_now_us(w->srv);
    return us > 0 ? (uint64_t)us / 1000u + 1u : 1u; /* never 0: 0 is "empty" */
}

static void log_unknown_domain(worker *w, const weir_request *req)
{
    size_t len =
        req->domain_len < UNKNOWN_NAME_BYTES - 1 ? req->domain_len : UNKNOWN_NAME_BYTES - 1;
    uint64_t now = now_ms(w);
    unknown_slot *s = &unknown.slots[XXH3_64bits(req->domain, len) % UNKNOWN_SLOTS];
    char name[UNKNOWN_NAME_BYTES], unlogged[24];
    pthread_mutex_lock(&unknown.lock);
    if (s->logged_ms && s->len == len && memcmp(s->name, req->domain, len) == 0 &&
        now - s->logged_ms < MINUTE_MS) {
        pthread_mutex_unlock(&unknown.lock);
        return;
    }
    if (now - unknown.minute_ms >= MINUTE_MS) {
        unknown.minute_ms = now;
        unknown.lines = 0;
    }
    if (unknown.lines >= DECISION_LOG_UNKNOWN_PER_MIN) {
        unknown.unlogged++;
        pthread_mutex_unlock(&unknown.lock);
        return;
    }
    unknown.lines++;
    s->logged_ms = now;
    s->len = len;
    memcpy(s->name, req->domain, len);
    snprintf(unlogged, sizeof(unlogged), "%llu", (unsigned long long)unknown.unlogged);
    unknown.unlogged = 0;
    pthread_mutex_unlock(&unknown.lock);
    memcpy(name, req->domain, len);
    name[len] = '\0';
    dlog(WEIR_LOG_INFO, "unknown_domain", "domain", name, "detail",
         "no rules name this domain: its requests are allowed (logged once a minute)",
         "unlogged_since_last", unlogged, NULL);
}

/* ------------------------------------------------------------ debug lines */

typedef struct explained {
    worker *w;
    const weir_request *req;
    const weir_api_decision *dec;
} explained;

static void write_line(void *arg, const weir_match_trace *traces, size_t n)
{
    (void)n;
    explained *x = arg;
    weir_buf line;
    weir_buf_init(&line, 8192);
    weir_api_explain_line(&line, x->req, x->dec, traces);
    weir_buf_putc(&line, '\0');
    char domain[UNKNOWN_NAME_BYTES];
    size_t len = x->req->domain_len < sizeof(domain) - 1 ? x->req->domain_len : sizeof(domain) - 1;
    memcpy(domain, x->req->domain, len);
    domain[len] = '\0';
    dlog(WEIR_LOG_DEBUG, "decision", "domain", domain, "code",
         x->dec->overall == WEIR_CODE_OVER_LIMIT ? "OVER_LIMIT" : "OK", "explain",
         weir_buf_ok(&line) ? line.p : "(too long)", NULL);
    weir_buf_free(&line);
}

/* Whether worker @w may write one more debug line this second. */
static bool debug_line_allowed(worker *w)
{
    uint64_t now = now_ms(w);
    if (now - w->debug_second_ms >= 1000u) {
        if (w->debug_unlogged) {
            char count[24];
            snprintf(count, sizeof(count), "%llu", (unsigned long long)w->debug_unlogged);
            dlog(WEIR_LOG_DEBUG, "decision_lines_left_out", "count", count, "detail",
                 "more decisions than the debug log writes in a second", NULL);
        }
        w->debug_second_ms = now;
        w->debug_lines = 0;
        w->debug_unlogged = 0;
    }
    if (w->debug_lines >= DECISION_LOG_DEBUG_PER_S) {
        w->debug_unlogged++;
        return false;
    }
    w->debug_lines++;
    return true;
}

void decision_log(worker *w, const weir_request *req, weir_code overall,
                  const weir_descriptor_status *st, size_t n)
{
    log_failure_mode(w, st, n);
    if (n && st[0].domain_not_found && req->domain)
        log_unknown_domain(w, req);
    if (!dlog_enabled(WEIR_LOG_DEBUG) || !debug_line_allowed(w))
        return;
    weir_api_decision dec = {overall, st, n};
    explained x = {w, req, &dec};
    weir_engine_explain(w->reader, req, write_line, &x);
}
