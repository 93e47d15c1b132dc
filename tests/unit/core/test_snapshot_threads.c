/*
 * test_snapshot_threads.c - readers never see a torn or freed object while a
 * writer swaps it thousands of times; every replaced object is destroyed
 * exactly once, and not while a reader holds it. Also run under
 * ThreadSanitizer (and AddressSanitizer catches a use after free).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#include <cmocka.h>

#include "core/snapshot.h"
#include "weir/weir.h"

#define READERS 3
#define SWAPS 20000
#define WORDS 8

typedef struct obj {
    uint64_t version;
    uint64_t w[WORDS]; /* w[i] = version * (i + 1): torn or freed reads show */
} obj;

static atomic_int destroyed;

static obj *make(uint64_t v)
{
    obj *o = malloc(sizeof(*o));
    o->version = v;
    for (int i = 0; i < WORDS; i++)
        o->w[i] = v * (uint64_t)(i + 1);
    return o;
}

static void destroy(void *ud, void *p)
{
    (void)ud;
    memset(p, 0xdd, sizeof(obj));
    free(p);
    atomic_fetch_add(&destroyed, 1);
}

typedef struct shared {
    weir__snap *snap;
    atomic_int stop;
    atomic_int bad;
    atomic_long reads;
    atomic_int started; /* readers past their first read */
} shared;

static void *reader(void *arg)
{
    shared *sh = arg;
    weir__snap_reader *r;
    if (weir__snap_reader_new(sh->snap, &r) != WEIR_OK) {
        atomic_fetch_add(&sh->bad, 1);
        return NULL;
    }
    uint64_t last = 0;
    long n = 0;
    while (!atomic_load(&sh->stop)) {
        const obj *o = weir__snap_enter(r);
        uint64_t v = o->version;
        for (int i = 0; i < WORDS; i++)
            if (o->w[i] != v * (uint64_t)(i + 1))
                atomic_fetch_add(&sh->bad, 1);
        if (v < last) /* versions never go back for one reader */
            atomic_fetch_add(&sh->bad, 1);
        last = v;
        weir__snap_exit(r);
        if (++n == 1)
            atomic_fetch_add(&sh->started, 1);
    }
    atomic_fetch_add(&sh->reads, n);
    weir__snap_reader_free(r);
    return NULL;
}

static void swaps_under_readers(void **unused)
{
    (void)unused;
    weir_ctx *ctx;
    assert_int_equal(weir_ctx_new(NULL, &ctx), WEIR_OK);
    shared sh = {0};
    atomic_store(&destroyed, 0);
    assert_int_equal(weir__snap_new(ctx, make(1), destroy, NULL, &sh.snap), WEIR_OK);
    pthread_t t[READERS];
    for (int i = 0; i < READERS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, reader, &sh), 0);
    /* the swaps start once every reader reads: on a busy machine the
     * writer could otherwise finish before a reader is scheduled */
    while (atomic_load(&sh.started) + atomic_load(&sh.bad) < READERS)
        sched_yield();
    for (uint64_t v = 2; v <= SWAPS + 1; v++)
        assert_int_equal(weir__snap_swap(sh.snap, make(v)), WEIR_OK);
    atomic_store(&sh.stop, 1);
    for (int i = 0; i < READERS; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(atomic_load(&sh.bad), 0);
    assert_true(atomic_load(&sh.reads) > 0);
    /* with every reader gone, all replaced objects can go */
    assert_int_equal(weir__snap_reclaim(sh.snap), 0);
    assert_int_equal(atomic_load(&destroyed), SWAPS);
    weir__snap_free(sh.snap);
    assert_int_equal(atomic_load(&destroyed), SWAPS + 1);
    weir_ctx_free(ctx);
}

/* A context and a snapshot holding version 1; the destroy count reset. */
static weir__snap *new_snap(weir_ctx **ctx)
{
    assert_int_equal(weir_ctx_new(NULL, ctx), WEIR_OK);
    atomic_store(&destroyed, 0);
    weir__snap *s;
    assert_int_equal(weir__snap_new(*ctx, make(1), destroy, NULL, &s), WEIR_OK);
    return s;
}

/* A reader inside enter/exit keeps its object alive across swaps. */
static void held_object_survives(void **unused)
{
    (void)unused;
    weir_ctx *ctx;
    weir__snap *s = new_snap(&ctx);
    weir__snap_reader *r, *idle;
    assert_int_equal(weir__snap_reader_new(s, &r), WEIR_OK);
    assert_int_equal(weir__snap_reader_new(s, &idle), WEIR_OK);
    const obj *held = weir__snap_enter(r);
    assert_int_equal(weir__snap_swap(s, make(2)), WEIR_OK);
    assert_int_equal(weir__snap_swap(s, make(3)), WEIR_OK);
    assert_int_equal(atomic_load(&destroyed), 0);
    assert_int_equal(held->version, 1); /* still readable */
    assert_int_equal(weir__snap_reclaim(s), 2);
    weir__snap_exit(r);
    assert_int_equal(weir__snap_reclaim(s), 0);
    assert_int_equal(atomic_load(&destroyed), 2);
    const obj *now = weir__snap_enter(r);
    assert_int_equal(now->version, 3);
    weir__snap_exit(r);
    weir__snap_reader_free(r);
    weir__snap_reader_free(idle);
    weir__snap_reader_free(NULL);
    weir__snap_free(s);
    weir__snap_free(NULL);
    assert_int_equal(atomic_load(&destroyed), 3);
    assert_int_equal(weir__snap_new(NULL, NULL, destroy, NULL, &s), WEIR_EINVAL);
    weir_ctx_free(ctx);
}

/* A child of fork() reclaims too: where readers publish with a plain
 * store, reclaiming needs the kernel's membarrier, and the child uses the
 * registration its parent made (Linux copies it with the address space). */
static void reclaims_in_a_forked_child(void **unused)
{
    (void)unused;
    weir_ctx *ctx;
    weir__snap *s = new_snap(&ctx);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        weir__snap_reader *r = NULL;
        int bad = weir__snap_reader_new(s, &r) != WEIR_OK;
        const obj *o = bad ? NULL : weir__snap_enter(r);
        bad |= !o || o->version != 1;
        if (r)
            weir__snap_exit(r);
        bad |= weir__snap_swap(s, make(2)) != WEIR_OK;
        /* the reader is idle: the replaced object goes at once */
        bad |= weir__snap_reclaim(s) != 0 || atomic_load(&destroyed) != 1;
        _exit(bad);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    weir__snap_free(s);
    weir_ctx_free(ctx);
}

#if defined(__x86_64__)
#define NATIVE_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NATIVE_ARCH AUDIT_ARCH_AARCH64
#endif

/* From here on every membarrier() of this process fails with EPERM, as
 * under a seccomp policy that denies it. False when no filter could be
 * installed. */
static bool refuse_membarrier(void)
{
#if defined(NATIVE_ARCH) && defined(SYS_membarrier)
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NATIVE_ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_membarrier, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {sizeof(code) / sizeof(code[0]), code};
    return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
           prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) == 0;
#else
    return false;
#endif
}

/* A membarrier that fails after the registration reclaims nothing: it
 * cannot prove that a reader's plain store is visible, so the replaced
 * object waits (a later reclaim that succeeds frees it). Run in a child,
 * since the filter cannot be taken off again. Exit status 77: no filter. */
static void a_refused_membarrier_reclaims_nothing(void **unused)
{
    (void)unused;
    weir_ctx *ctx;
    weir__snap *s = new_snap(&ctx);
    if (!weir__snap_uses_membarrier(s)) {
        weir__snap_free(s);
        weir_ctx_free(ctx);
        skip(); /* readers publish with a locked store: no membarrier to fail */
    }
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (!refuse_membarrier())
            _exit(77);
        weir__snap_reader *r = NULL;
        int bad = weir__snap_reader_new(s, &r) != WEIR_OK;
        bad |= weir__snap_swap(s, make(2)) != WEIR_OK;
        /* the reader is idle, yet the replaced object must wait */
        bad |= weir__snap_reclaim(s) != 1 || atomic_load(&destroyed) != 0;
        const obj *o = bad ? NULL : weir__snap_enter(r);
        bad |= !o || o->version != 2;
        _exit(bad);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    weir__snap_free(s);
    weir_ctx_free(ctx);
    if (WEXITSTATUS(status) == 77)
        skip();
    assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(swaps_under_readers),
        cmocka_unit_test(held_object_survives),
        cmocka_unit_test(reclaims_in_a_forked_child),
        cmocka_unit_test(a_refused_membarrier_reclaims_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
