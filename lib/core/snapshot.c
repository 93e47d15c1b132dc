/*
 * snapshot.c - epoch-based reclamation for one swappable object.
 *
 * A global epoch counts swaps. A reader entering publishes the epoch it
 * saw, then loads the object; a swap publishes the new object, then moves
 * the epoch on and tags the old object with the new epoch. The old object
 * can go once every reader is idle or has published an epoch at least its
 * tag: such a reader loaded the object after the swap. All of it is
 * sequentially consistent, so a reader that published too late to be seen
 * by the check also loads the new object. Registration, swaps and
 * reclamation take a mutex; reads take none.
 *
 * The reader's side of that order costs a locked instruction per read
 * (a sequentially consistent store is an xchg on x86-64), on every
 * decision. Where the kernel offers it, the snapshot moves that cost to
 * the rare side: a reader publishes with a plain store, and a check first
 * runs membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED), which makes every
 * running thread of the process execute a full barrier. After it, a
 * reader's earlier publication is visible to the check, or the reader's
 * load of the object comes after the barrier and so after the swap. If
 * membarrier is missing (old kernels, seccomp filters) the readers keep
 * the locked store; if it fails later, the check reclaims nothing.
 *
 * Invariant: `current` is never on the retired list; every retired object
 * is destroyed exactly once, by reclaim or by free.
 */
#define _GNU_SOURCE
#include <linux/membarrier.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/context.h"
#include "core/snapshot.h"

/* Padded to a cache line so readers on different cores do not share one
 * (allocations are 16-byte aligned, so this bounds sharing to two lines). */
struct weir__snap_reader {
    _Atomic uint64_t active; /* 0 = outside; else the epoch seen */
    weir__snap *snap;
    weir__snap_reader *next;
    char pad[64 - 3 * sizeof(void *)];
};

typedef struct retired {
    void *obj;
    uint64_t epoch;
    struct retired *next;
} retired;

struct weir__snap {
    _Atomic(void *) current;
    _Atomic uint64_t epoch;
    weir_ctx *ctx;
    weir__snap_destroy_fn destroy;
    void *ud;
    bool asymmetric;    /* readers publish with a plain store (membarrier) */
    pthread_mutex_t mu; /* readers list, retired list, writers */
    weir__snap_reader *readers;
    retired *retired;
};

#if defined(__SANITIZE_THREAD__)
#define SNAP_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SNAP_TSAN 1
#endif
#endif

/* glibc has no wrapper for it. ThreadSanitizer does not know the order it
 * gives, so a TSan build keeps the readers' locked store. */
static int membarrier(int cmd)
{
#if defined(SYS_membarrier) && !defined(SNAP_TSAN)
    return (int)syscall(SYS_membarrier, cmd, 0, 0);
#else
    (void)cmd;
    return -1;
#endif
}

weir_status weir__snap_new(weir_ctx *ctx, void *initial, weir__snap_destroy_fn destroy, void *ud,
                           weir__snap **out)
{
    if (!ctx || !destroy || !out)
        return WEIR_EINVAL;
    weir__snap *s = weir__calloc(ctx, 1, sizeof(*s));
    if (!s)
        return WEIR_ENOMEM;
    if (pthread_mutex_init(&s->mu, NULL) != 0) {
        weir__free(ctx, s);
        return WEIR_ENOMEM;
    }
    s->ctx = ctx;
    s->asymmetric = membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
    s->destroy = destroy;
    s->ud = ud;
    atomic_init(&s->current, initial);
    atomic_init(&s->epoch, 1);
    *out = s;
    return WEIR_OK;
}

void weir__snap_free(weir__snap *s)
{
    if (!s)
        return;
    for (retired *r = s->retired, *n; r; r = n) {
        n = r->next;
        s->destroy(s->ud, r->obj);
        weir__free(s->ctx, r);
    }
    void *cur = atomic_load(&s->current);
    if (cur)
        s->destroy(s->ud, cur);
    pthread_mutex_destroy(&s->mu);
    weir__free(s->ctx, s);
}

weir_status weir__snap_reader_new(weir__snap *s, weir__snap_reader **out)
{
    if (!s || !out)
        return WEIR_EINVAL;
    weir__snap_reader *r = weir__calloc(s->ctx, 1, sizeof(*r));
    if (!r)
        return WEIR_ENOMEM;
    atomic_init(&r->active, 0);
    r->snap = s;
    pthread_mutex_lock(&s->mu);
    r->next = s->readers;
    s->readers = r;
    pthread_mutex_unlock(&s->mu);
    *out = r;
    return WEIR_OK;
}

void weir__snap_reader_free(weir__snap_reader *r)
{
    if (!r)
        return;
    weir__snap *s = r->snap;
    pthread_mutex_lock(&s->mu);
    for (weir__snap_reader **p = &s->readers; *p; p = &(*p)->next) {
        if (*p == r) {
            *p = r->next;
            break;
        }
    }
    pthread_mutex_unlock(&s->mu);
    weir__free(s->ctx, r);
}

const void *weir__snap_enter(weir__snap_reader *r)
{
    weir__snap *s = r->snap;
    uint64_t epoch = atomic_load(&s->epoch);
    if (s->asymmetric) {
        atomic_store_explicit(&r->active, epoch, memory_order_relaxed);
        /* the checker's membarrier orders this store before the load */
        atomic_signal_fence(memory_order_seq_cst);
    } else {
        atomic_store(&r->active, epoch);
    }
    return atomic_load(&s->current);
}

void weir__snap_exit(weir__snap_reader *r)
{
    atomic_store_explicit(&r->active, 0, memory_order_release);
}

/* Under the mutex: the oldest epoch a reader may still be reading in
 * (UINT64_MAX when every reader is idle). */
static uint64_t oldest_active(const weir__snap *s)
{
    uint64_t min = UINT64_MAX;
    for (const weir__snap_reader *r = s->readers; r; r = r->next) {
        uint64_t e = atomic_load(&r->active);
        if (e != 0 && e < min)
            min = e;
    }
    return min;
}

static size_t reclaim_locked(weir__snap *s)
{
    if (!s->retired)
        return 0;
    /* a reader's plain publication is visible after this (see above) */
    uint64_t oldest =
        s->asymmetric && membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0 ? 0 : oldest_active(s);
    size_t waiting = 0;
    for (retired **p = &s->retired; *p;) {
        retired *r = *p;
        if (oldest >= r->epoch) {
            *p = r->next;
            s->destroy(s->ud, r->obj);
            weir__free(s->ctx, r);
        } else {
            waiting++;
            p = &r->next;
        }
    }
    return waiting;
}

weir_status weir__snap_swap(weir__snap *s, void *next)
{
    if (!s)
        return WEIR_EINVAL;
    retired *r = weir__calloc(s->ctx, 1, sizeof(*r));
    if (!r)
        return WEIR_ENOMEM;
    pthread_mutex_lock(&s->mu);
    void *old = atomic_exchange(&s->current, next);
    r->epoch = atomic_fetch_add(&s->epoch, 1) + 1;
    if (old) {
        r->obj = old;
        r->next = s->retired;
        s->retired = r;
    } else {
        weir__free(s->ctx, r);
    }
    reclaim_locked(s);
    pthread_mutex_unlock(&s->mu);
    return WEIR_OK;
}

size_t weir__snap_reclaim(weir__snap *s)
{
    if (!s)
        return 0;
    pthread_mutex_lock(&s->mu);
    size_t waiting = reclaim_locked(s);
    pthread_mutex_unlock(&s->mu);
    return waiting;
}

bool weir__snap_uses_membarrier(const weir__snap *s)
{
    return s && s->asymmetric;
}
