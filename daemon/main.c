/*
 * main.c - `weir serve`, the composition root: the settings, the store
 * (from the store table), the rules and the engine, the protocols (one
 * row each below) and their listening sockets, the workers; then the main
 * thread's own loop handles signals (SIGHUP reloads, SIGTERM/SIGINT drain
 * and stop) and watches the rule files, or runs the xDS subscription that
 * delivers them (--config-type grpc-xds-sotw). The only file that names
 * every protocol and every store.
 *
 * Shutdown runs in three steps: draining (/healthz answers 503, everything
 * else is still served) for --drain-delay; closing (listeners closed, idle
 * connections closed, answers in progress finish with Connection: close,
 * decisions in flight complete) for at most --shutdown-timeout; then
 * stopping (every connection closed).
 */
#include "serve.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "admin/admin.h"
#include "admin/tokens.h"
#include "grpc/grpc.h"
#include "http/http.h"
#include "http/routes.h"
#include "listen.h"
#include "log.h"
#include "memtrim.h"
#include "quota/service.h"
#include "resp/proto_resp.h"
#include "statsd.h"
#include "stores.h"
#include "watch.h"
#include "worker.h"
#include "xds/xds.h"

/* The protocols: each listens where its setting says ("" = off). */
typedef struct protocol_row {
    const proto *proto;
    size_t addr; /* offset of its HOST:PORT in serve_options */
} protocol_row;

static const protocol_row protocols[] = {
    {&http_proto, offsetof(serve_options, http)},
    {&grpc_proto, offsetof(serve_options, grpc)},
    {&resp_proto, offsetof(serve_options, resp)},
    {&admin_proto, offsetof(serve_options, admin)},
};
#define N_PROTOCOLS (sizeof(protocols) / sizeof(protocols[0]))
_Static_assert(N_PROTOCOLS <= SERVER_MAX_LISTENERS, "a listener slot for every protocol");

/* The URL @p listens on, or "off". */
static const char *url_of(const server *s, const proto *p)
{
    for (unsigned i = 0; i < s->n_listeners; i++)
        if (s->listeners[i].proto == p)
            return s->listeners[i].url;
    return "off";
}

/* ------------------------------------------------------------ main loop */

typedef struct main_loop {
    server *srv;
    uv_loop_t loop;
    int sigfd;     /* SIGHUP, SIGTERM and SIGINT, blocked in every thread */
    uv_poll_t sig; /* polls sigfd */
    rules_watch watch;
    bool watching;
    uv_timer_t phase; /* drain delay, then shutdown timeout */
    uv_timer_t poll;  /* while closing: have the workers finished? */
    uv_timer_t trim;  /* once a second: memory back after a burst */
    memtrim trimmer;
    xds_client *xds; /* the rules' subscription, with --config-type grpc-xds-sotw */
} main_loop;

static void wake_all(server *s)
{
    for (unsigned i = 0; i < s->n_threads; i++)
        worker_wake(&s->workers[i]);
}

static void close_main(main_loop *m)
{
    if (m->xds)
        xds_stop(m->xds);
    uv_close((uv_handle_t *)&m->sig, NULL);
    if (m->watching)
        rules_watch_close(&m->watch);
    uv_close((uv_handle_t *)&m->phase, NULL);
    uv_close((uv_handle_t *)&m->poll, NULL);
    uv_close((uv_handle_t *)&m->trim, NULL);
}

static void on_poll(uv_timer_t *t)
{
    main_loop *m = t->data;
    if (atomic_load(&m->srv->workers_done) == m->srv->n_threads)
        close_main(m);
}

static void on_stop_phase(uv_timer_t *t)
{
    main_loop *m = t->data;
    dlog(WEIR_LOG_WARN, "shutdown_timeout", "action", "closing every connection", NULL);
    atomic_store(&m->srv->stopping, true);
    wake_all(m->srv);
}

static void on_close_phase(uv_timer_t *t)
{
    main_loop *m = t->data;
    server *s = m->srv;
    dlog(WEIR_LOG_INFO, "closing", "detail", "listeners closed; finishing requests in progress",
         NULL);
    atomic_store(&s->closing, true);
    wake_all(s);
    uv_timer_start(&m->phase, on_stop_phase, (uint64_t)s->opt.shutdown_timeout_ms, 0);
    uv_timer_start(&m->poll, on_poll, 20, 20);
}

static void on_term(main_loop *m, int signum)
{
    server *s = m->srv;
    if (atomic_exchange(&s->draining, true)) {
        if (signum == SIGINT) { /* a second Ctrl-C: stop now */
            atomic_store(&s->closing, true);
            atomic_store(&s->stopping, true);
            wake_all(s);
            uv_timer_start(&m->poll, on_poll, 20, 20);
        }
        return;
    }
    dlog(WEIR_LOG_INFO, "draining", "signal", signum == SIGINT ? "SIGINT" : "SIGTERM", NULL);
    uv_timer_start(&m->phase, on_close_phase, (uint64_t)s->opt.drain_delay_ms, 0);
}

/* The signals come as reads of a signalfd, not as handlers: blocked in
 * every thread (the workers inherit the main thread's mask), they wait in
 * the kernel until this loop reads them. A handler would run on whatever
 * thread the kernel picked; under ThreadSanitizer, whose runtime stands
 * between a signal and its handler, a SIGTERM was seen lost that way now
 * and then, and the daemon stayed up. */
static void on_signal(uv_poll_t *h, int status, int events)
{
    (void)status;
    (void)events;
    main_loop *m = h->data;
    struct signalfd_siginfo si;
    while (read(m->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        if (si.ssi_signo == SIGHUP && m->srv->opt.config_xds) {
            dlog(WEIR_LOG_INFO, "reload_skipped", "reason", "signal", "detail",
                 "the rules come from the xDS server", NULL);
        } else if (si.ssi_signo == SIGHUP) {
            if (m->watching)
                rules_watch_rearm(&m->watch); /* what the path names now */
            server_reload(m->srv, "signal");
        } else
            on_term(m, (int)si.ssi_signo);
    }
}

/* Requests may carry their own limits (upstream's default): said aloud
 * when a listener that takes them is reachable beyond this machine. */
static void warn_open_overrides(const server *s)
{
    if (!s->opt.allow_request_overrides)
        return;
    const char *addrs[] = {s->opt.http, s->opt.grpc};
    for (size_t i = 0; i < 2; i++) {
        if (!addrs[i][0] || serve_on_loopback(addrs[i]))
            continue;
        dlog(WEIR_LOG_WARN, "request_overrides_allowed", "listener", addrs[i], "detail",
             "any client reaching this address can set its own limit in a request; "
             "--allow-request-overrides false refuses that (docs/OPERATIONS.md)",
             NULL);
    }
}

static void on_trim(uv_timer_t *t)
{
    main_loop *m = t->data;
    int64_t now = atomic_load(&m->srv->connections);
    memtrim_tick(&m->trimmer, now, atomic_exchange(&m->srv->connections_peak, now));
}

static void on_rules_changed(rules_watch *w)
{
    main_loop *m = w->data;
    server_reload(m->srv, "file_changed");
}

/* Sets up the main loop: the signals' descriptor and the rule watch come
 * before the rules are loaded and the workers start, so neither a signal
 * nor a file change in between is lost (both are acted on once the loop
 * runs), and every worker inherits the mask that keeps the signals for
 * the descriptor. Returns 0, or a negative error number. */
static int main_init(main_loop *m, server *s)
{
    memset(m, 0, sizeof(*m));
    m->srv = s;
    m->sigfd = -1;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    int rc = pthread_sigmask(SIG_BLOCK, &set, NULL);
    if (rc != 0)
        return -rc; /* an error number, not errno */
    if ((m->sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC)) < 0)
        return -errno;
    if ((rc = uv_loop_init(&m->loop)) < 0) { /* -errno */
        close(m->sigfd);
        return rc;
    }
    uv_poll_init(&m->loop, &m->sig, m->sigfd);
    m->sig.data = m;
    uv_poll_start(&m->sig, UV_READABLE, on_signal);
    uv_timer_init(&m->loop, &m->phase);
    uv_timer_init(&m->loop, &m->poll);
    uv_timer_init(&m->loop, &m->trim);
    m->phase.data = m->poll.data = m->trim.data = m;
    uv_timer_start(&m->trim, on_trim, 1000, 1000);
    uv_unref((uv_handle_t *)&m->trim); /* never what keeps the loop running */
    m->watch.data = m;
    if (s->opt.watch && !s->opt.config_xds) {
        /* a path that cannot be watched yet is logged and tried again at
         * its next change or SIGHUP */
        rules_watch_start(&m->watch, &m->loop, s->opt.rules, on_rules_changed);
        m->watching = true;
    }
    return 0;
}

/* Runs the main loop until the workers are done (or, when @serving is
 * false, only until its own handles are closed). */
static void main_run(main_loop *m, bool serving)
{
    if (!serving)
        close_main(m);
    uv_run(&m->loop, UV_RUN_DEFAULT);
    uv_loop_close(&m->loop);
    close(m->sigfd);
}

/* ------------------------------------------------------------ start, stop */

/* WEIR_TEST_CLOCK_START=<Unix seconds>: the service's clock starts there
 * and runs on with the wall clock, so tests know where windows begin and
 * never wait for the top of an hour. For the tests, not a setting: no
 * flag, no --help line. */
static int64_t test_clock(void *ud)
{
    return weir_clock_realtime_us(NULL) + *(const int64_t *)ud;
}

static int64_t clock_offset_us;

static weir_clock_fn clock_of_environment(void)
{
    const char *start = getenv("WEIR_TEST_CLOCK_START");
    if (!start || !*start)
        return NULL;
    char *end;
    long long t = strtoll(start, &end, 10);
    if (*end || t < 0 || t > 100000000000LL)
        return NULL;
    clock_offset_us = (int64_t)t * 1000000 - weir_clock_realtime_us(NULL);
    return test_clock;
}

/* --admin-token-file's tokens; an admin listener beyond this machine
 * needs them. False (said why) when it cannot start. */
static bool admin_setup(server *s)
{
    static admin_tokens tokens;
    char why[512];
    if (s->opt.admin_token_file[0]) {
        if (!admin_tokens_load(s->opt.admin_token_file, &tokens, why, sizeof(why))) {
            fprintf(stderr, "weir serve: --admin-token-file %s\n", why);
            return false;
        }
        s->admin_tokens = &tokens;
    } else if (s->opt.admin[0] && !admin_addr_is_loopback(s->opt.admin)) {
        fprintf(stderr,
                "weir serve: --admin %s is not a loopback address: give "
                "--admin-token-file too (or --admin 127.0.0.1:PORT)\n",
                s->opt.admin);
        return false;
    }
    return true;
}

static int open_listeners(server *s)
{
    for (size_t i = 0; i < N_PROTOCOLS; i++) {
        const char *addr = (const char *)&s->opt + protocols[i].addr;
        if (!addr[0])
            continue;
        server_listener *l = &s->listeners[s->n_listeners];
        char err[512];
        l->proto = protocols[i].proto;
        l->fds = listen_all(addr, l->proto->admin ? 1 : s->n_workers, l->proto->scheme, l->url,
                            sizeof(l->url), err, sizeof(err));
        if (!l->fds) {
            fprintf(stderr, "weir serve: --%s %s\n", l->proto->name, err);
            return 1;
        }
        s->n_listeners++;
    }
    return 0;
}

static int start(server *s)
{
    weir_clock_fn clock = clock_of_environment();
    weir_ctx_options co = {sizeof(co), NULL, clock,           &clock_offset_us,
                           dlog_lib,   NULL, s->opt.log_level};
    if (weir_ctx_new(&co, &s->ctx) != WEIR_OK)
        return 1;
    char msg[256];
    char store_shown[SERVE_ADDR_BYTES + 8];
    stores_describe(s->opt.store, store_shown, sizeof(store_shown));
    msg[0] = '\0';
    bool warn;
    if (stores_open(s->ctx, &s->opt, &s->store, msg, sizeof(msg), &warn) != WEIR_OK) {
        fprintf(stderr, "weir serve: --store '%s': %s\n", store_shown, msg);
        return 1;
    }
    if (msg[0])
        dlog(warn ? WEIR_LOG_WARN : WEIR_LOG_INFO, "store_checked", "store", store_shown, "result",
             msg, NULL);
    weir_rules *rules = NULL;
    if (s->opt.config_xds) {
        /* as upstream: the service runs before the first rules arrive */
        if (weir_rules_empty(s->ctx, &rules) == WEIR_OK)
            dlog(WEIR_LOG_INFO, "started_without_rules", "xds_server", s->opt.xds_server, "detail",
                 "every request is allowed until the xDS server's rules arrive", NULL);
    } else {
        rules = server_load_rules(s);
    }
    if (!rules && s->opt.force_start && weir_rules_empty(s->ctx, &rules) == WEIR_OK)
        dlog(WEIR_LOG_WARN, "started_without_rules", "path", s->opt.rules, "detail",
             "--force-start: every request is allowed until the rules load (a fix to the "
             "files, or SIGHUP)",
             NULL);
    if (!rules) {
        fprintf(stderr, "weir serve: %s: the rules did not load (see above)\n", s->opt.rules);
        return 1;
    }
    /* a store shared with other instances: limits with failure_mode local
     * are decided here, on memory of this instance's own, while it fails */
    if (!(weir_store_caps(s->store) & WEIR_STORE_INLINE)) {
        weir_memstore_options mo = {sizeof(mo), s->opt.max_memory, 0, 0, 0};
        if (weir_memstore_new(s->ctx, &mo, &s->fallback) != WEIR_OK) {
            fprintf(stderr, "weir serve: cannot make the local fallback store\n");
            return 1;
        }
    }
    weir_engine_options eo = {sizeof(eo), s->store, s->fallback, (uint32_t)s->opt.instances,
                              !s->opt.allow_request_overrides};
    server_rules_counts counts = server_count_rules(rules);
    if (!server_set_rules_text(s, rules) ||
        weir_engine_new(s->ctx, &eo, rules, &s->engine) != WEIR_OK) {
        weir_rules_free(rules);
        fprintf(stderr, "weir serve: cannot start the engine\n");
        return 1;
    }
    metrics_reload(s->metrics, true, server_now_us(s), NULL);
    server_log_loaded(s, &counts, "start");
    if (s->opt.quota_db[0]) {
        char why[256];
        s->quotas = quota_service_start(s->opt.quota_db, s->ctx, s->engine, s->opt.quota_refresh_ms,
                                        server_clock, s, why, sizeof(why));
        if (!s->quotas) {
            fprintf(stderr, "weir serve: --quota-db %s\n", why);
            return 1;
        }
    }

    if (!admin_setup(s))
        return 1;
    s->workers = calloc(s->n_threads, sizeof(*s->workers));
    if (!s->workers || open_listeners(s) != 0)
        return 1;
    for (unsigned i = 0; i < s->n_threads; i++) {
        s->workers[i].srv = s;
        s->workers[i].id = i;
        int rc = worker_start(&s->workers[i]);
        if (rc < 0) {
            fprintf(stderr, "weir serve: worker %u: %s\n", i, uv_strerror(rc));
            return 1;
        }
    }
    if (s->opt.statsd[0]) {
        char why[128];
        s->statsd =
            statsd_start(s->opt.statsd, s->opt.statsd_interval_ms, s->metrics, why, sizeof(why));
        if (!s->statsd) {
            fprintf(stderr, "weir serve: --statsd %s: %s\n", s->opt.statsd, why);
            return 1;
        }
    }
    char threads[16];
    snprintf(threads, sizeof(threads), "%u", s->n_workers);
    const char *http = url_of(s, &http_proto), *grpc = url_of(s, &grpc_proto);
    const char *resp = url_of(s, &resp_proto);
    dlog(WEIR_LOG_INFO, "listening", "http", http, "grpc", grpc, "resp", resp, "admin",
         url_of(s, &admin_proto), "threads", threads, "store", store_shown, "version",
         weir_version(), NULL);
    warn_open_overrides(s);
    if (strcmp(http, "off") != 0) {
        printf("weir %s: serving %s\n"
               "  check:   curl -si '%s/v1/check?domain=DOMAIN&KEY=VALUE' (docs/API.md)\n"
               "  health:  %s/healthz\n  metrics: %s/metrics\n  rules:   %s/v1/rules\n",
               weir_version(), s->opt.config_xds ? s->opt.xds_server : s->opt.rules, http, http,
               http, http);
        fflush(stdout);
    }
    if (strcmp(grpc, "off") != 0) {
        printf("  grpc:    %s (envoy.service.ratelimit.v3.RateLimitService)\n", grpc);
        fflush(stdout);
    }
    if (strcmp(resp, "off") != 0) {
        printf("  resp:    %s (CL.THROTTLE, GCRA, WEIR.CHECK: docs/RESP.md)\n", resp);
        fflush(stdout);
    }
    const char *admin = url_of(s, &admin_proto);
    if (strcmp(admin, "off") != 0) {
        printf("  admin:   %s/admin/v1/tiers (bearer token: docs/QUOTAS.md)\n"
               "  dashboard: %s/dashboard (the same token: docs/DASHBOARD.md)\n",
               admin, admin);
        fflush(stdout);
    }
    return 0;
}

static void stop(server *s)
{
    for (unsigned i = 0; s->workers && i < s->n_threads; i++) {
        if (s->workers[i].srv && s->workers[i].thread)
            pthread_join(s->workers[i].thread, NULL);
        worker_cleanup(&s->workers[i]);
    }
    free(s->workers);
    statsd_stop(s->statsd); /* after the workers: their last counts are sent */
    quota_service_stop(s->quotas);
    for (unsigned i = 0; i < s->n_listeners; i++)
        free(s->listeners[i].fds);
    weir_engine_free(s->engine);
    weir_store_free(s->store);
    weir_store_free(s->fallback);
    weir_ctx_free(s->ctx);
    metrics_free(s->metrics);
    free(s->rules_text);
    pthread_mutex_destroy(&s->rules_lock);
}

int weir_cli_serve(int argc, char **argv)
{
    static server srv; /* large */
    memset(&srv, 0, sizeof(srv));
    bool done;
    int rc = serve_options_parse(&srv.opt, argc, argv, stdout, stderr, &done);
    if (rc || done)
        return rc;
    dlog_setup(srv.opt.log_level, srv.opt.log_json);
    /* a fault for the tests, not a setting: no flag, no --help line */
    const char *cost = getenv("WEIR_TEST_DECISION_COST_US");
    if (cost)
        srv.decision_cost_us = (unsigned)strtoul(cost, NULL, 10);
    const char *fail = getenv("WEIR_TEST_FAIL_CONN_ALLOC");
    if (fail)
        srv.fail_conn_alloc = (unsigned)strtoul(fail, NULL, 10);
    signal(SIGPIPE, SIG_IGN);
    pthread_mutex_init(&srv.rules_lock, NULL);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    srv.n_workers = srv.opt.threads ? srv.opt.threads : (unsigned)(cores > 0 ? cores : 1);
    /* one metrics shard per worker: a worker's counters take no lock but
     * the scrape's */
    srv.n_threads = srv.n_workers + (srv.opt.admin[0] ? 1u : 0u);
    srv.metrics = metrics_new(srv.n_threads, routes_names, routes_count);
    if (!srv.metrics) {
        fprintf(stderr, "weir serve: out of memory\n");
        return 1;
    }
    metrics_set_near_ratio(srv.metrics, srv.opt.near_limit_ppm);
    metrics_set_shed(srv.metrics, &srv.opt.shed);
    if (!metrics_set_top_keys(srv.metrics, (uint32_t)srv.opt.top_keys)) {
        fprintf(stderr, "weir serve: out of memory\n");
        return 1;
    }
    static main_loop m;
    int err = main_init(&m, &srv);
    if (err < 0) {
        fprintf(stderr, "weir serve: cannot set up the signal descriptor and event loop: %s\n",
                strerror(-err));
        return 1;
    }
    rc = start(&srv);
    if (rc == 0 && srv.opt.config_xds) {
        char why[256];
        if (!(m.xds = xds_start(&srv, &m.loop, why, sizeof(why)))) {
            fprintf(stderr, "weir serve: %s\n", why);
            rc = 1;
        }
    }
    main_run(&m, rc == 0);
    xds_free(m.xds);
    if (rc == 0) {
        dlog(WEIR_LOG_INFO, "stopped", NULL);
    } else {
        atomic_store(&srv.closing, true);
        atomic_store(&srv.stopping, true);
        for (unsigned i = 0; srv.workers && i < srv.n_threads; i++)
            if (srv.workers[i].thread)
                worker_wake(&srv.workers[i]);
    }
    stop(&srv);
    return rc;
}
