/*
 * service.c - the quota database kept in force (service.h): one thread,
 * one libuv loop, one database handle of its own.
 */
#include "service.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>

#include "common/buf.h"
#include "db.h"
#include "log.h"
#include "snapshot.h"

#define TICK_MS 1000

struct quota_service {
    char *url;
    weir_ctx *ctx;
    weir_engine *engine;
    int64_t refresh_ms;
    int64_t (*now_us)(void *arg);
    void *now_arg;
    pthread_t thread;
    uv_loop_t loop;
    uv_timer_t tick;
    uv_async_t wake; /* poke or stop */
    uv_poll_t *poll; /* PostgreSQL's socket, for its notifications; NULL: none */
    int poll_fd;
    _Atomic bool poked, stopping;
    quota_db *db;
    bool down_logged;
    pthread_mutex_t lock;
    quota_stats stats;
    /* reads begun and done (under lock), for quota_service_sync() */
    uint64_t reads_begun, reads_done;
    pthread_cond_t read_done;
};

static void set_stats(quota_service *s, void (*fn)(quota_stats *st, void *arg), void *arg)
{
    pthread_mutex_lock(&s->lock);
    fn(&s->stats, arg);
    pthread_mutex_unlock(&s->lock);
}

static void mark_down(quota_stats *st, void *arg)
{
    (void)arg;
    st->up = false;
    st->errors++;
}

static void down(quota_service *s, const char *what, const char *why)
{
    set_stats(s, mark_down, NULL);
    if (!s->down_logged)
        dlog(WEIR_LOG_ERROR, "quota_db_unavailable", "doing", what, "error", why, "detail",
             "decisions go on with the last tenant table; retrying every second", NULL);
    s->down_logged = true;
}

typedef struct loaded {
    size_t tenants, skipped;
    int64_t at_us;
    const char *kind;
} loaded;

static void mark_loaded(quota_stats *st, void *arg)
{
    const loaded *l = arg;
    st->up = true;
    st->kind = l->kind;
    st->tenants = l->tenants;
    st->skipped = l->skipped;
    st->loaded_us = l->at_us;
    st->loads++;
}

/* Reads every record and puts the table in force. */
static void load_table(quota_service *s)
{
    int64_t started = s->now_us(s->now_arg);
    quota_snapshot snap;
    weir_tenants *t = quota_snapshot_read(s->db, s->ctx, &snap);
    if (!t) {
        down(s, "reading the tenants", quota_db_error(s->db));
        return;
    }
    size_t n = weir_tenants_count(t);
    if (weir_engine_set_tenants(s->engine, t) != WEIR_OK) {
        weir_tenants_free(t);
        down(s, "putting the tenants in force", "out of memory");
        return;
    }
    if (s->down_logged)
        dlog(WEIR_LOG_INFO, "quota_db_back", NULL);
    s->down_logged = false;
    loaded l = {n, snap.skipped, started, quota_db_kind(s->db)};
    set_stats(s, mark_loaded, &l);
    char tenants[24], skipped[24];
    snprintf(tenants, sizeof(tenants), "%zu", n);
    snprintf(skipped, sizeof(skipped), "%zu", snap.skipped);
    dlog(snap.skipped ? WEIR_LOG_WARN : WEIR_LOG_DEBUG, "tenants_loaded", "tenants", tenants,
         "skipped", skipped, "first_skipped", snap.first_skipped, NULL);
}

/* load_table(), numbered: a caller of quota_service_sync() waits for a
 * read that began after its change was committed. */
static void load(quota_service *s)
{
    pthread_mutex_lock(&s->lock);
    uint64_t n = ++s->reads_begun;
    pthread_mutex_unlock(&s->lock);
    load_table(s);
    pthread_mutex_lock(&s->lock);
    s->reads_done = n;
    pthread_cond_broadcast(&s->read_done);
    pthread_mutex_unlock(&s->lock);
}

static void on_poll(uv_poll_t *p, int status, int events);

static void free_handle(uv_handle_t *h)
{
    free(h);
}

/* Watches the database's socket for notifications (PostgreSQL), again
 * when a reconnection changed it. @afresh: a change was reported, maybe a
 * reconnection's, whose socket may have the number of the one it
 * replaced: that one's registration went with it when it was closed, so
 * the same number is watched anew (a change is rare; this is cheap). */
static void watch_fd(quota_service *s, bool afresh)
{
    int fd = s->db ? quota_db_fd(s->db) : -1;
    if (fd == s->poll_fd && !(afresh && fd >= 0))
        return;
    if (s->poll) {
        uv_close((uv_handle_t *)s->poll, free_handle);
        s->poll = NULL;
    }
    s->poll_fd = -1;
    uv_poll_t *p = fd >= 0 ? calloc(1, sizeof(*p)) : NULL;
    if (!p)
        return;
    if (uv_poll_init(&s->loop, p, fd) != 0) {
        free(p);
        return;
    }
    p->data = s;
    uv_poll_start(p, UV_READABLE, on_poll);
    s->poll = p;
    s->poll_fd = fd;
}

static void run_once(quota_service *s)
{
    if (!s->db) {
        char why[256];
        quota_db_options o = {s->url, NULL, 0};
        if (!(s->db = quota_db_open(&o, why, sizeof(why)))) {
            down(s, "opening the database", why);
            return;
        }
        atomic_store(&s->poked, true);
    }
    bool changed = quota_db_changed(s->db);
    watch_fd(s, changed);
    if (quota_db_lost(s->db)) {
        /* the connection went and could not be made again (tried each
         * second): the last table stays in force, and /healthz says so */
        down(s, "listening for changes", quota_db_error(s->db));
        return;
    }
    pthread_mutex_lock(&s->lock);
    int64_t age_ms = (s->now_us(s->now_arg) - s->stats.loaded_us) / 1000;
    bool never = s->stats.loads == 0;
    pthread_mutex_unlock(&s->lock);
    if (atomic_exchange(&s->poked, false) || changed || never || age_ms >= s->refresh_ms)
        load(s);
}

static void on_tick(uv_timer_t *t)
{
    run_once(t->data);
}

static void on_poll(uv_poll_t *p, int status, int events)
{
    (void)status;
    (void)events;
    run_once(p->data);
}

static void on_wake(uv_async_t *a)
{
    quota_service *s = a->data;
    if (!atomic_load(&s->stopping)) {
        run_once(s);
        return;
    }
    uv_timer_stop(&s->tick);
    uv_close((uv_handle_t *)&s->tick, NULL);
    uv_close((uv_handle_t *)&s->wake, NULL);
    if (s->poll)
        uv_close((uv_handle_t *)s->poll, free_handle);
    s->poll = NULL;
}

static void *run(void *arg)
{
    quota_service *s = arg;
    run_once(s);
    uv_run(&s->loop, UV_RUN_DEFAULT);
    return NULL;
}

/* Whether @url names a database kind this build knows. */
static bool url_ok(const char *url, char *why, size_t cap)
{
    static const char *const schemes[] = {"sqlite://", "postgres://", "postgresql://"};
    for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++)
        if (strncmp(url, schemes[i], strlen(schemes[i])) == 0 && url[strlen(schemes[i])])
            return true;
    snprintf(why, cap, "'%.100s' is not sqlite:///PATH or postgres://...", url);
    return false;
}

quota_service *quota_service_start(const char *url, weir_ctx *ctx, weir_engine *engine,
                                   int64_t refresh_ms, int64_t (*now_us)(void *arg), void *now_arg,
                                   char *why, size_t cap)
{
    if (!url_ok(url, why, cap))
        return NULL;
    quota_service *s = calloc(1, sizeof(*s));
    if (!s || !(s->url = strdup(url)) || uv_loop_init(&s->loop) != 0) {
        if (s)
            free(s->url);
        free(s);
        snprintf(why, cap, "out of memory");
        return NULL;
    }
    s->ctx = ctx;
    s->engine = engine;
    s->refresh_ms = refresh_ms > 0 ? refresh_ms : 30000;
    s->now_us = now_us;
    s->now_arg = now_arg;
    s->poll_fd = -1;
    /* named before the database first answers: /healthz of one down at start */
    s->stats.kind = strncmp(url, "sqlite://", strlen("sqlite://")) == 0 ? "sqlite" : "postgres";
    pthread_mutex_init(&s->lock, NULL);
    pthread_condattr_t ca; /* waits measured on the monotonic clock */
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->read_done, &ca);
    pthread_condattr_destroy(&ca);
    uv_timer_init(&s->loop, &s->tick);
    s->tick.data = s;
    uv_timer_start(&s->tick, on_tick, TICK_MS, TICK_MS);
    uv_async_init(&s->loop, &s->wake, on_wake);
    s->wake.data = s;
    if (pthread_create(&s->thread, NULL, run, s) != 0) {
        snprintf(why, cap, "cannot start its thread");
        uv_close((uv_handle_t *)&s->tick, NULL);
        uv_close((uv_handle_t *)&s->wake, NULL);
        uv_run(&s->loop, UV_RUN_DEFAULT);
        uv_loop_close(&s->loop);
        pthread_mutex_destroy(&s->lock);
        pthread_cond_destroy(&s->read_done);
        free(s->url);
        free(s);
        return NULL;
    }
    return s;
}

void quota_service_poke(quota_service *s)
{
    if (!s)
        return;
    atomic_store(&s->poked, true);
    uv_async_send(&s->wake);
}

bool quota_service_sync(quota_service *s, int64_t timeout_ms)
{
    if (!s)
        return true;
    pthread_mutex_lock(&s->lock);
    uint64_t want = s->reads_begun + 1;
    pthread_mutex_unlock(&s->lock);
    quota_service_poke(s);
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += (time_t)(timeout_ms / 1000);
    until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&s->lock);
    int rc = 0;
    while (s->reads_done < want && rc == 0)
        rc = pthread_cond_timedwait(&s->read_done, &s->lock, &until);
    bool done = s->reads_done >= want;
    pthread_mutex_unlock(&s->lock);
    return done;
}

void quota_service_stats(quota_service *s, quota_stats *out)
{
    pthread_mutex_lock(&s->lock);
    *out = s->stats;
    pthread_mutex_unlock(&s->lock);
}

void quota_service_stop(quota_service *s)
{
    if (!s)
        return;
    atomic_store(&s->stopping, true);
    uv_async_send(&s->wake);
    pthread_join(s->thread, NULL);
    uv_loop_close(&s->loop);
    quota_db_close(s->db);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->read_done);
    free(s->url);
    free(s);
}

void quota_service_metrics(quota_service *s, weir_buf *b, int64_t now_us)
{
    if (!s)
        return;
    quota_stats st;
    quota_service_stats(s, &st);
    double age = st.loaded_us ? (double)(now_us - st.loaded_us) / 1e6 : -1;
    weir_buf_printf(b,
                    "# HELP weir_quota_db_up Whether the quota database answered the last "
                    "attempt (1) or not (0).\n"
                    "# TYPE weir_quota_db_up gauge\n"
                    "weir_quota_db_up %d\n"
                    "# HELP weir_quota_tenants Tenants in the table in force.\n"
                    "# TYPE weir_quota_tenants gauge\n"
                    "weir_quota_tenants %llu\n"
                    "# HELP weir_quota_snapshot_age_seconds Seconds since the table in force was "
                    "read (-1: never).\n"
                    "# TYPE weir_quota_snapshot_age_seconds gauge\n"
                    "weir_quota_snapshot_age_seconds %.3f\n"
                    "# HELP weir_quota_loads_total Tables read and put in force.\n"
                    "# TYPE weir_quota_loads_total counter\n"
                    "weir_quota_loads_total %llu\n"
                    "# HELP weir_quota_errors_total Attempts to open or read the quota database "
                    "that failed.\n"
                    "# TYPE weir_quota_errors_total counter\n"
                    "weir_quota_errors_total %llu\n"
                    "# HELP weir_quota_skipped Records of the last read that could not be used.\n"
                    "# TYPE weir_quota_skipped gauge\n"
                    "weir_quota_skipped %llu\n",
                    st.up ? 1 : 0, (unsigned long long)st.tenants, age,
                    (unsigned long long)st.loads, (unsigned long long)st.errors,
                    (unsigned long long)st.skipped);
}

void quota_service_health(quota_service *s, weir_buf *b, int64_t now_us)
{
    if (!s)
        return;
    quota_stats st;
    quota_service_stats(s, &st);
    weir_buf_printf(b, ",\"quotas\":{\"db\":\"%s\",\"status\":\"%s\",\"tenants\":%llu",
                    st.kind ? st.kind : "none", st.up ? "ok" : "unavailable",
                    (unsigned long long)st.tenants);
    if (st.loaded_us)
        weir_buf_printf(b, ",\"age_seconds\":%.3f", (double)(now_us - st.loaded_us) / 1e6);
    weir_buf_putc(b, '}');
}
