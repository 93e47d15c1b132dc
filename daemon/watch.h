/*
 * watch.h - the watch on the rule files: a change that can change the
 * rules calls back once things have settled (editors and ConfigMap
 * updates touch several files in a row).
 *
 * It watches the directory holding --rules for changes to its name (the
 * rule file rewritten or renamed over, a directory replaced by another, a
 * symlink to a directory swapped for one to another) and for a ConfigMap's
 * "..data" swap; when --rules is a directory, it also watches the
 * directory's .yaml and .yml files, and moves that watch to whatever the
 * path names after each such change (and on rules_watch_rearm(), which
 * SIGHUP calls). A watch that cannot be set is logged (watch_failed) and
 * tried again at the next change or SIGHUP. Once a second the rule files
 * are looked at as well (names, inodes, sizes, times, where symlinks
 * lead): a change inotify did not report (it can miss one, and a network
 * file system reports none) is caught within a second.
 */
#ifndef WEIR_DAEMON_WATCH_H
#define WEIR_DAEMON_WATCH_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#define RULES_WATCH_PATH_BYTES 4096u
/* Quiet time after a change before the callback. */
#define RULES_WATCH_SETTLE_MS 100u

typedef struct rules_watch rules_watch;
typedef void (*rules_watch_cb)(rules_watch *w);

struct rules_watch {
    uv_loop_t *loop;
    rules_watch_cb changed;
    void *data;
    char path[RULES_WATCH_PATH_BYTES];   /* --rules, without trailing slashes */
    char parent[RULES_WATCH_PATH_BYTES]; /* the directory holding it */
    char name[RULES_WATCH_PATH_BYTES];   /* its last component; "" for "/" or "." */
    uv_fs_event_t parent_ev;             /* on parent */
    uv_fs_event_t dir_ev;                /* on path, when it is a directory */
    bool parent_on, dir_on, dir_failed;
    bool rearm; /* a change of the path itself: move dir_ev at the settle */
    uv_timer_t settle;
    uv_timer_t poll;      /* once a second: the safety net under inotify */
    uint64_t fingerprint; /* of the rule files, at the last look */
};

/** Watch @path on @loop; @changed runs after each change that settled.
 *  Returns 0, or a libuv error when nothing could be watched yet (logged;
 *  the handles are set up either way: close them with
 *  rules_watch_close()). */
int rules_watch_start(rules_watch *w, uv_loop_t *loop, const char *path, rules_watch_cb changed);

/** Move the directory watch to what the path names now (after a SIGHUP). */
void rules_watch_rearm(rules_watch *w);

/** Close the handles (uv_close: the loop must run once more). */
void rules_watch_close(rules_watch *w);

#endif /* WEIR_DAEMON_WATCH_H */
