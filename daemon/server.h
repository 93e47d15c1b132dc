/*
 * server.h - what every worker of the running service shares: settings,
 * the context, the store and the engine, metrics, the listening sockets of
 * each protocol, the shutdown flags, and the /v1/rules text. One server
 * per process, made by main.c; workers read it, only main.c writes it
 * outside the atomics and the rules lock.
 */
#ifndef WEIR_DAEMON_SERVER_H
#define WEIR_DAEMON_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/buf.h"
#include "metrics.h"
#include "options.h"
#include "weir/weir.h"

/** Most protocols one server listens for. */
#define SERVER_MAX_LISTENERS 4u

struct proto;
struct statsd;
struct worker;

/** One protocol's listening sockets: one per worker (SO_REUSEPORT). */
typedef struct server_listener {
    const struct proto *proto;
    int *fds;
    char url[SERVE_ADDR_BYTES + 16];
} server_listener;

typedef struct server {
    serve_options opt;
    weir_ctx *ctx;
    weir_store *store;
    weir_store *fallback; /* failure_mode local: this instance's own memory */
    weir_engine *engine;
    metrics *metrics;
    struct statsd *statsd; /* --statsd's sink, or NULL */
    unsigned n_workers;
    struct worker *workers;
    server_listener listeners[SERVER_MAX_LISTENERS];
    unsigned n_listeners;
    _Atomic bool draining;   /* /healthz fails; listeners close after the delay */
    _Atomic bool rules_seen; /* rules with a domain have been in force */
    _Atomic bool closing;    /* listeners closed; idle connections go */
    _Atomic bool stopping;   /* shutdown timeout passed: close everything */
    _Atomic int64_t connections;
    _Atomic int64_t connections_peak; /* highest since memtrim last looked */
    /* WEIR_TEST_FAIL_CONN_ALLOC=N: every Nth connection's memory is
     * refused, as under memory exhaustion (for the tests; 0 = never) */
    unsigned fail_conn_alloc;
    /* WEIR_TEST_DECISION_COST_US=N: every decision first keeps its worker
     * busy N microseconds, as an expensive decision would (for the tests
     * of load shedding; 0 = never) */
    unsigned decision_cost_us;
    _Atomic unsigned workers_done;
    pthread_mutex_t rules_lock;
    char *rules_text; /* /v1/rules: the compiled rules, one line per limit; after
                         it and a NUL, /rlconfig's (upstream's form) */
    size_t rules_text_len;
    size_t rlconfig_len;
    size_t tiers_len;   /* then GET /admin/v1/tiers's JSON, NUL-terminated */
    size_t rules_total; /* the three texts' bytes */
    /* --admin-token-file's tokens (NULL: none: every admin request is
     * refused) */
    struct admin_tokens *admin_tokens;
    struct quota_service *quotas; /* --quota-db's, or NULL */
    unsigned n_threads;           /* workers, plus the admin worker (the last) with --admin */
} server;

/** The service's clock in microseconds since the Unix epoch: the context's
 *  (the wall clock, never running backwards). */
int64_t server_now_us(server *s);
/** server_now_us() for a callback's void pointer. */
int64_t server_clock(void *s);

/** A copy of the /v1/rules text (or, @upstream, the /rlconfig text)
 *  into @out. */
void server_rules_text(server *s, weir_buf *out, bool upstream);

/** Appends GET /admin/v1/tiers's JSON of the rules in force to @out. */
void server_tiers_json(server *s, weir_buf *out);

/** Load the rule path; NULL (the errors logged) when it is not valid. */
weir_rules *server_load_rules(server *s);

/** What a load holds, for its log line (the rules may be gone by then). */
typedef struct server_rules_counts {
    size_t domains, descriptors, limits;
} server_rules_counts;
server_rules_counts server_count_rules(const weir_rules *rules);
/** event=rules_loaded with the counts (0 domains: every request is
 *  allowed, and a warning said so already); rules with a domain mark the
 *  service healthy for --health-needs-rules. */
void server_log_loaded(server *s, const server_rules_counts *c, const char *why);

/** Whether health checks pass: not draining, and rules with a domain in
 *  force when --health-needs-rules asks for them. */
bool server_healthy(server *s);

/** Make @rules' /v1/rules text the one served; false when out of memory. */
bool server_set_rules_text(server *s, const weir_rules *rules);

/** Load the rule path and put it in force (a bad file keeps the old
 *  rules); logs either way. Returns whether the new rules are in force. */
bool server_reload(server *s, const char *why);

/** Load @n_docs in-memory rule documents (rules delivered over xDS) as
 *  the rule path would be loaded (the same options, store checks and
 *  --strict); NULL when they are not valid: the errors are logged, and
 *  appended to @why (when not NULL) as "file:line:column: message", "; "
 *  between them. */
weir_rules *server_parse_rules(server *s, const weir_rules_doc *docs, size_t n_docs, weir_buf *why);

/** Put @rules (taken over) in force as a reload does: the engine, the
 *  /v1/rules text, the metrics and the log; @why names the cause
 *  ("signal", "file_changed", "xds"). False (the old rules kept, @rules
 *  freed) when out of memory. */
bool server_put_rules(server *s, weir_rules *rules, const char *why);

#endif /* WEIR_DAEMON_SERVER_H */
