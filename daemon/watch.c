/*
 * watch.c - the watch on the rule files (watch.h), on libuv's fs events
 * (inotify): one on the directory holding --rules, for the path's own
 * name, and one on the rules' directory when --rules is one. inotify
 * resolves a path once, when the watch is set: a directory replaced or a
 * symlink swapped leaves that watch on the old inode, so the parent's
 * event for the name moves it.
 */
#include "watch.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "log.h"

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Whether an entry of the rules' directory can change the rules: a .yaml
 * or .yml file (dot-files are never loaded), or a ConfigMap's "..data". */
static bool rule_entry(const char *name)
{
    if (!name || strncmp(name, "..", 2) == 0)
        return true;
    return name[0] != '.' && (ends_with(name, ".yaml") || ends_with(name, ".yml"));
}

static void on_settled(uv_timer_t *t)
{
    rules_watch *w = t->data;
    if (w->rearm || w->dir_failed) {
        w->rearm = false;
        rules_watch_rearm(w);
    }
    w->changed(w);
}

static void settle(rules_watch *w)
{
    uv_timer_start(&w->settle, on_settled, RULES_WATCH_SETTLE_MS, 0);
}

static void on_dir_event(uv_fs_event_t *h, const char *name, int events, int status)
{
    (void)events;
    rules_watch *w = h->data;
    if (status < 0) {
        dlog(WEIR_LOG_WARN, "watch_failed", "path", w->path, "error", uv_strerror(status), NULL);
        return;
    }
    if (rule_entry(name))
        settle(w);
}

static void on_parent_event(uv_fs_event_t *h, const char *name, int events, int status)
{
    (void)events;
    rules_watch *w = h->data;
    if (status < 0) {
        dlog(WEIR_LOG_WARN, "watch_failed", "path", w->parent, "error", uv_strerror(status), NULL);
        return;
    }
    /* the path's own name: rewritten, renamed over, replaced, re-linked */
    if (!name || strcmp(name, w->name) == 0) {
        w->rearm = true;
        settle(w);
    } else if (!w->dir_on && !w->dir_failed && strncmp(name, "..", 2) == 0) {
        settle(w); /* a rule file beside a ConfigMap's ..data */
    }
}

void rules_watch_rearm(rules_watch *w)
{
    struct stat st;
    bool is_dir = stat(w->path, &st) == 0 && S_ISDIR(st.st_mode);
    if (w->dir_on) {
        uv_fs_event_stop(&w->dir_ev);
        w->dir_on = false;
    }
    w->dir_failed = false;
    if (!is_dir && w->name[0])
        return; /* a file: the parent's watch sees it */
    int rc = uv_fs_event_start(&w->dir_ev, on_dir_event, w->path, 0);
    if (rc < 0) {
        /* e.g. removed for now: the next change of the name tries again */
        w->dir_failed = true;
        dlog(WEIR_LOG_WARN, "watch_failed", "path", w->path, "error", uv_strerror(rc), "detail",
             "tried again at the next change of the path or SIGHUP", NULL);
        return;
    }
    w->dir_on = true;
}

/* Once a second: a digest of what the rules are made of. */
#define POLL_MS 1000u
/* Entries of the rules' directory looked at, at most. */
#define POLL_MAX_ENTRIES 4096u

static void mix_stat(XXH3_state_t *h, const char *name, const char *path)
{
    struct stat st;
    memset(&st, 0, sizeof(st));
    stat(path, &st); /* follows symlinks: a swapped target changes it */
    uint64_t v[6] = {(uint64_t)st.st_ino,          (uint64_t)st.st_dev,
                     (uint64_t)st.st_size,         (uint64_t)st.st_mtim.tv_sec,
                     (uint64_t)st.st_mtim.tv_nsec, (uint64_t)st.st_ctim.tv_nsec};
    XXH3_64bits_update(h, name, strlen(name) + 1);
    XXH3_64bits_update(h, v, sizeof(v));
}

/* The rule file, or each rule file of the directory, as a digest. */
static uint64_t fingerprint(const rules_watch *w)
{
    XXH3_state_t h;
    XXH3_64bits_reset(&h);
    mix_stat(&h, "", w->path);
    DIR *d = opendir(w->path);
    if (d) {
        char path[RULES_WATCH_PATH_BYTES * 2];
        unsigned n = 0;
        for (struct dirent *e; (e = readdir(d)) && n < POLL_MAX_ENTRIES; n++) {
            if (!rule_entry(e->d_name) || strncmp(e->d_name, "..", 2) == 0)
                continue;
            snprintf(path, sizeof(path), "%s/%s", w->path, e->d_name);
            mix_stat(&h, e->d_name, path);
        }
        closedir(d);
    }
    return XXH3_64bits_digest(&h);
}

static void on_poll(uv_timer_t *t)
{
    rules_watch *w = t->data;
    uint64_t now = fingerprint(w);
    if (now != w->fingerprint) {
        w->fingerprint = now;
        w->rearm = true; /* the path may name another directory now */
        settle(w);
    }
}

/* @path split into w->path (no trailing slash), parent and name. */
static void split(rules_watch *w, const char *path)
{
    snprintf(w->path, sizeof(w->path), "%s", path);
    size_t n = strlen(w->path);
    while (n > 1 && w->path[n - 1] == '/')
        w->path[--n] = '\0';
    const char *slash = strrchr(w->path, '/');
    if (!slash) {
        snprintf(w->parent, sizeof(w->parent), ".");
        snprintf(w->name, sizeof(w->name), "%s", w->path);
    } else {
        snprintf(w->parent, sizeof(w->parent), "%.*s",
                 slash == w->path ? 1 : (int)(slash - w->path), w->path);
        snprintf(w->name, sizeof(w->name), "%s", slash + 1);
    }
    if (strcmp(w->name, ".") == 0 || strcmp(w->name, "..") == 0)
        w->name[0] = '\0'; /* no parent to watch for it */
}

int rules_watch_start(rules_watch *w, uv_loop_t *loop, const char *path, rules_watch_cb changed)
{
    w->loop = loop;
    w->changed = changed;
    w->parent_on = w->dir_on = w->dir_failed = w->rearm = false;
    split(w, path);
    uv_timer_init(loop, &w->settle);
    w->settle.data = w;
    uv_timer_init(loop, &w->poll);
    w->poll.data = w;
    w->fingerprint = fingerprint(w);
    uv_timer_start(&w->poll, on_poll, POLL_MS, POLL_MS);
    uv_fs_event_init(loop, &w->parent_ev);
    uv_fs_event_init(loop, &w->dir_ev);
    w->parent_ev.data = w->dir_ev.data = w;
    int rc = 0;
    if (w->name[0]) {
        rc = uv_fs_event_start(&w->parent_ev, on_parent_event, w->parent, 0);
        if (rc < 0)
            dlog(WEIR_LOG_WARN, "watch_failed", "path", w->parent, "error", uv_strerror(rc), NULL);
        else
            w->parent_on = true;
    }
    rules_watch_rearm(w);
    if (!w->parent_on && !w->dir_on)
        return rc < 0 ? rc : UV_ENOENT;
    dlog(WEIR_LOG_DEBUG, "watching", "path", w->path, "parent", w->parent_on ? w->parent : "",
         NULL);
    return 0;
}

void rules_watch_close(rules_watch *w)
{
    uv_close((uv_handle_t *)&w->settle, NULL);
    uv_close((uv_handle_t *)&w->poll, NULL);
    uv_close((uv_handle_t *)&w->parent_ev, NULL);
    uv_close((uv_handle_t *)&w->dir_ev, NULL);
}
