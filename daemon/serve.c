/*
 * serve.c - `weir serve`: settings, the rules, the store and the engine,
 * the listening sockets, the workers; then the main thread's own loop
 * handles signals (SIGHUP reloads, SIGTERM/SIGINT drain and stop) and
 * watches the rule files.
 *
 * Shutdown runs in three steps: draining (/healthz answers 503, everything
 * else is still served) for --drain-delay; closing (listeners closed, idle
 * connections closed, answers in progress finish with Connection: close)
 * for at most --shutdown-timeout; then stopping (every connection closed).
 */
#include "serve.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/rules_text.h"
#include "http.h"
#include "log.h"

/* Rule errors logged per failed load. */
#define MAX_LOGGED_ERRORS 20u
/* Quiet time after a file change before the reload (editors and
 * ConfigMap updates touch several files in a row). */
#define WATCH_SETTLE_MS 100u

int64_t server_now_us(server *s)
{
    return weir_ctx_now_us(s->ctx);
}

void server_rules_text(server *s, weir_buf *out)
{
    pthread_mutex_lock(&s->rules_lock);
    weir_buf_put(out, s->rules_text, s->rules_text_len);
    pthread_mutex_unlock(&s->rules_lock);
}

static void log_rule_errors(const weir_rules_error *errs, size_t n, weir_status st,
                            const char *path)
{
    if (!n) {
        dlog(WEIR_LOG_ERROR, "rules_error", "path", path, "error", weir_strerror(st), NULL);
        return;
    }
    for (size_t i = 0; i < n && i < MAX_LOGGED_ERRORS; i++) {
        char line[16], col[16];
        snprintf(line, sizeof(line), "%u", errs[i].line);
        snprintf(col, sizeof(col), "%u", errs[i].column);
        dlog(WEIR_LOG_ERROR, "rules_error", "file", errs[i].file, "line", line, "column", col,
             "error", errs[i].message, NULL);
    }
}

/* Loads the rule path; NULL (errors logged) when it is not valid. */
static weir_rules *load_rules(server *s)
{
    weir_rules_options ro = {sizeof(ro), s->opt.merge_domains, s->opt.default_algorithm, 0, 0};
    weir_rules_error *errs = calloc(MAX_LOGGED_ERRORS, sizeof(*errs));
    if (!errs)
        return NULL;
    weir_rules *rules = NULL;
    size_t n = 0;
    weir_status st =
        weir_rules_load(s->ctx, s->opt.rules, &ro, &rules, errs, MAX_LOGGED_ERRORS, &n);
    if (st != WEIR_OK)
        log_rule_errors(errs, n, st, s->opt.rules);
    free(errs);
    return st == WEIR_OK ? rules : NULL;
}

/* Swaps in the /v1/rules text of @rules; false when out of memory. */
static bool set_rules_text(server *s, const weir_rules *rules, bool *changed)
{
    weir_buf b;
    weir_buf_init(&b, SIZE_MAX);
    weir_api_render_rules(&b, rules);
    weir_buf_putc(&b, '\0');
    if (!weir_buf_ok(&b))
        return false;
    pthread_mutex_lock(&s->rules_lock);
    *changed = !s->rules_text || strcmp(s->rules_text, b.p) != 0;
    char *old = s->rules_text;
    s->rules_text = b.p;
    s->rules_text_len = b.len - 1;
    pthread_mutex_unlock(&s->rules_lock);
    free(old);
    return true;
}

bool server_reload(server *s, const char *why)
{
    weir_rules *rules = load_rules(s);
    if (!rules) {
        metrics_reload(s->metrics, false);
        dlog(WEIR_LOG_ERROR, "rules_reload_failed", "reason", why, "path", s->opt.rules, "kept",
             "the rules in force", NULL);
        return false;
    }
    bool changed = true;
    /* A file watch also fires for files that change nothing; only a SIGHUP
     * reloads identical rules. */
    char *before = NULL;
    pthread_mutex_lock(&s->rules_lock);
    before = s->rules_text ? strdup(s->rules_text) : NULL;
    pthread_mutex_unlock(&s->rules_lock);
    weir_buf now;
    weir_buf_init(&now, SIZE_MAX);
    weir_api_render_rules(&now, rules);
    weir_buf_putc(&now, '\0');
    bool same = before && weir_buf_ok(&now) && strcmp(before, now.p) == 0;
    free(before);
    weir_buf_free(&now);
    if (same && strcmp(why, "signal") != 0) {
        weir_rules_free(rules);
        dlog(WEIR_LOG_DEBUG, "rules_unchanged", "reason", why, NULL);
        return true;
    }
    if (!set_rules_text(s, rules, &changed) || weir_engine_reload(s->engine, rules) != WEIR_OK) {
        weir_rules_free(rules);
        metrics_reload(s->metrics, false);
        dlog(WEIR_LOG_ERROR, "rules_reload_failed", "reason", why, "error", "out of memory", NULL);
        return false;
    }
    metrics_reload(s->metrics, true);
    dlog(WEIR_LOG_INFO, "rules_loaded", "reason", why, "path", s->opt.rules, NULL);
    return true;
}

/* ------------------------------------------------------------ sockets */

/* Splits "HOST:PORT" or "[V6]:PORT". */
static bool split_addr(const char *addr, char *host, size_t cap, char *port, size_t pcap)
{
    const char *colon;
    if (addr[0] == '[') {
        const char *end = strchr(addr, ']');
        if (!end || end[1] != ':')
            return false;
        if ((size_t)(end - addr - 1) >= cap)
            return false;
        memcpy(host, addr + 1, (size_t)(end - addr - 1));
        host[end - addr - 1] = '\0';
        colon = end + 1;
    } else {
        colon = strrchr(addr, ':');
        if (!colon || (size_t)(colon - addr) >= cap)
            return false;
        memcpy(host, addr, (size_t)(colon - addr));
        host[colon - addr] = '\0';
    }
    if (!colon[1] || strlen(colon + 1) >= pcap)
        return false;
    strcpy(port, colon + 1);
    return true;
}

/* Opens @n listening sockets on @addr sharing one port (SO_REUSEPORT);
 * with port 0 the first socket's port is used for the rest. Writes the
 * URL to @url. Returns NULL with @err set. */
static int *listen_all(const char *addr, unsigned n, const char *scheme, char *url, size_t ucap,
                       char *err, size_t ecap)
{
    char host[SERVE_ADDR_BYTES], port[32];
    if (!split_addr(addr, host, sizeof(host), port, sizeof(port))) {
        snprintf(err, ecap, "'%s' is not HOST:PORT", addr);
        return NULL;
    }
    struct addrinfo hints = {0}, *ai = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    int gai = getaddrinfo(host[0] ? host : NULL, port, &hints, &ai);
    if (gai != 0) {
        snprintf(err, ecap, "%s: %s", addr, gai_strerror(gai));
        return NULL;
    }
    int *fds = calloc(n, sizeof(*fds));
    if (!fds) {
        freeaddrinfo(ai);
        snprintf(err, ecap, "out of memory");
        return NULL;
    }
    struct sockaddr_storage bound;
    socklen_t blen = (socklen_t)ai->ai_addrlen;
    memcpy(&bound, ai->ai_addr, ai->ai_addrlen);
    freeaddrinfo(ai);
    for (unsigned i = 0; i < n; i++) {
        int one = 1;
        int fd = socket(bound.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
            setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0 ||
            bind(fd, (struct sockaddr *)&bound, blen) < 0 || listen(fd, 1024) < 0) {
            snprintf(err, ecap, "%s: %s", addr, strerror(errno));
            if (fd >= 0)
                close(fd);
            for (unsigned j = 0; j < i; j++)
                close(fds[j]);
            free(fds);
            return NULL;
        }
        fds[i] = fd;
        if (i == 0 && getsockname(fd, (struct sockaddr *)&bound, &blen) < 0) {
            snprintf(err, ecap, "%s: %s", addr, strerror(errno));
            close(fd);
            free(fds);
            return NULL;
        }
    }
    unsigned p = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                   : ((struct sockaddr_in *)&bound)->sin_port);
    bool v6 = strchr(host, ':') != NULL;
    snprintf(url, ucap, "%s://%s%s%s:%u", scheme, v6 ? "[" : "", host[0] ? host : "0.0.0.0",
             v6 ? "]" : "", p);
    return fds;
}

/* ------------------------------------------------------------ main loop */

typedef struct main_loop {
    server *srv;
    uv_loop_t loop;
    int sigfd;     /* SIGHUP, SIGTERM and SIGINT, blocked in every thread */
    uv_poll_t sig; /* polls sigfd */
    uv_fs_event_t watch;
    bool watching;
    uv_timer_t settle; /* file change -> reload */
    uv_timer_t phase;  /* drain delay, then shutdown timeout */
    uv_timer_t poll;   /* while closing: have the workers finished? */
} main_loop;

static void wake_all(server *s)
{
    for (unsigned i = 0; i < s->n_workers; i++)
        worker_wake(&s->workers[i]);
}

static void close_main(main_loop *m)
{
    uv_close((uv_handle_t *)&m->sig, NULL);
    if (m->watching)
        uv_close((uv_handle_t *)&m->watch, NULL);
    uv_close((uv_handle_t *)&m->settle, NULL);
    uv_close((uv_handle_t *)&m->phase, NULL);
    uv_close((uv_handle_t *)&m->poll, NULL);
}

static void on_poll(uv_timer_t *t)
{
    main_loop *m = t->data;
    if (atomic_load(&m->srv->workers_done) == m->srv->n_workers)
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
        if (si.ssi_signo == SIGHUP)
            server_reload(m->srv, "signal");
        else
            on_term(m, (int)si.ssi_signo);
    }
}

static void on_settled(uv_timer_t *t)
{
    main_loop *m = t->data;
    server_reload(m->srv, "file_changed");
}

static void on_fs_event(uv_fs_event_t *h, const char *name, int events, int status)
{
    (void)name;
    (void)events;
    main_loop *m = h->data;
    if (status < 0) {
        dlog(WEIR_LOG_WARN, "watch_failed", "error", uv_strerror(status), NULL);
        return;
    }
    uv_timer_start(&m->settle, on_settled, WATCH_SETTLE_MS, 0);
}

/* Watches the rule directory, or the directory holding the rule file: a
 * Kubernetes ConfigMap replaces files by swapping a symlink next to them,
 * which a watch on the file itself would never see. */
static void start_watch(main_loop *m)
{
    const char *path = m->srv->opt.rules;
    char dir[sizeof(m->srv->opt.rules)];
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(dir, sizeof(dir), "%s", path);
    } else {
        const char *slash = strrchr(path, '/');
        if (!slash)
            snprintf(dir, sizeof(dir), ".");
        else if (slash == path)
            snprintf(dir, sizeof(dir), "/");
        else
            snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
    }
    uv_fs_event_init(&m->loop, &m->watch);
    m->watch.data = m;
    int rc = uv_fs_event_start(&m->watch, on_fs_event, dir, 0);
    if (rc < 0) {
        dlog(WEIR_LOG_WARN, "watch_failed", "path", dir, "error", uv_strerror(rc), NULL);
        uv_close((uv_handle_t *)&m->watch, NULL);
        return;
    }
    m->watching = true;
    dlog(WEIR_LOG_DEBUG, "watching", "path", dir, NULL);
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
    uv_timer_init(&m->loop, &m->settle);
    uv_timer_init(&m->loop, &m->phase);
    uv_timer_init(&m->loop, &m->poll);
    m->settle.data = m->phase.data = m->poll.data = m;
    if (s->opt.watch)
        start_watch(m);
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

static int start(server *s)
{
    weir_ctx_options co = {sizeof(co), NULL, NULL, NULL, dlog_lib, NULL, s->opt.log_level};
    if (weir_ctx_new(&co, &s->ctx) != WEIR_OK)
        return 1;
    weir_memstore_options mo = {sizeof(mo), s->opt.max_memory, 0, 0, 0};
    if (weir_memstore_new(s->ctx, &mo, &s->store) != WEIR_OK)
        return 1;
    weir_rules *rules = load_rules(s);
    if (!rules) {
        fprintf(stderr, "weir serve: %s: the rules did not load (see above)\n", s->opt.rules);
        return 1;
    }
    bool changed;
    weir_engine_options eo = {sizeof(eo), s->store};
    if (!set_rules_text(s, rules, &changed) ||
        weir_engine_new(s->ctx, &eo, rules, &s->engine) != WEIR_OK) {
        weir_rules_free(rules);
        fprintf(stderr, "weir serve: cannot start the engine\n");
        return 1;
    }
    metrics_reload(s->metrics, true);
    dlog(WEIR_LOG_INFO, "rules_loaded", "reason", "start", "path", s->opt.rules, NULL);

    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    s->n_workers = s->opt.threads ? s->opt.threads : (unsigned)(cores > 0 ? cores : 1);
    s->workers = calloc(s->n_workers, sizeof(*s->workers));
    if (!s->workers)
        return 1;
    char err[512];
    if (s->opt.http[0]) {
        s->http_fds = listen_all(s->opt.http, s->n_workers, "http", s->http_url,
                                 sizeof(s->http_url), err, sizeof(err));
        if (!s->http_fds) {
            fprintf(stderr, "weir serve: --http %s\n", err);
            return 1;
        }
    }
    if (s->opt.grpc[0]) {
        s->grpc_fds = listen_all(s->opt.grpc, s->n_workers, "http", s->grpc_url,
                                 sizeof(s->grpc_url), err, sizeof(err));
        if (!s->grpc_fds) {
            fprintf(stderr, "weir serve: --grpc %s\n", err);
            return 1;
        }
    }
    if (s->opt.resp[0])
        dlog(WEIR_LOG_WARN, "listener_unavailable", "protocol", "resp", "address", s->opt.resp,
             "reason", "not implemented in this version", NULL);
    for (unsigned i = 0; i < s->n_workers; i++) {
        s->workers[i].srv = s;
        s->workers[i].id = i;
        int rc = worker_start(&s->workers[i]);
        if (rc < 0) {
            fprintf(stderr, "weir serve: worker %u: %s\n", i, uv_strerror(rc));
            return 1;
        }
    }
    char threads[16];
    snprintf(threads, sizeof(threads), "%u", s->n_workers);
    dlog(WEIR_LOG_INFO, "listening", "http", s->http_url[0] ? s->http_url : "off", "grpc",
         s->grpc_url[0] ? s->grpc_url : "off", "threads", threads, "store", s->opt.store, "version",
         weir_version(), NULL);
    if (s->http_url[0]) {
        printf("weir %s: serving %s\n"
               "  check:   curl -si '%s/v1/check?domain=DOMAIN&KEY=VALUE' (docs/API.md)\n"
               "  health:  %s/healthz\n  metrics: %s/metrics\n  rules:   %s/v1/rules\n",
               weir_version(), s->opt.rules, s->http_url, s->http_url, s->http_url, s->http_url);
        fflush(stdout);
    }
    if (s->grpc_url[0]) {
        printf("  grpc:    %s (envoy.service.ratelimit.v3.RateLimitService)\n", s->grpc_url);
        fflush(stdout);
    }
    return 0;
}

static void stop(server *s)
{
    for (unsigned i = 0; s->workers && i < s->n_workers; i++) {
        if (s->workers[i].srv && s->workers[i].thread)
            pthread_join(s->workers[i].thread, NULL);
        worker_cleanup(&s->workers[i]);
    }
    free(s->workers);
    free(s->http_fds);
    free(s->grpc_fds);
    weir_engine_free(s->engine);
    weir_store_free(s->store);
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
    const char *fail = getenv("WEIR_TEST_FAIL_CONN_ALLOC");
    if (fail)
        srv.fail_conn_alloc = (unsigned)strtoul(fail, NULL, 10);
    signal(SIGPIPE, SIG_IGN);
    pthread_mutex_init(&srv.rules_lock, NULL);
    srv.metrics = metrics_new(srv.opt.threads ? srv.opt.threads : 64, routes_names, routes_count);
    if (!srv.metrics) {
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
    main_run(&m, rc == 0);
    if (rc == 0) {
        dlog(WEIR_LOG_INFO, "stopped", NULL);
    } else {
        atomic_store(&srv.closing, true);
        atomic_store(&srv.stopping, true);
        for (unsigned i = 0; srv.workers && i < srv.n_workers; i++)
            if (srv.workers[i].thread)
                worker_wake(&srv.workers[i]);
    }
    stop(&srv);
    return rc;
}
