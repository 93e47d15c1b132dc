/*
 * cluster.c - the Redis store on a Redis Cluster: a session per event loop
 * that routes each op to the master holding its key's slot, through a
 * Redis store session per node (conn.c, link.c: batching, deadlines,
 * reconnects, the over-limit cache) under that node's own breaker.
 *
 * hiredis has no cluster support; this is the part of a cluster client
 * the store needs, and no more:
 *
 * - The slot map: read with CLUSTER SLOTS from any node that is up, when
 *   the session starts, after a redirection or a failure, and every
 *   REFRESH_US; a slot the map does not know goes to a seed, whose MOVED
 *   tells.
 * - Routing: a batch's ops are grouped by node; each group leaves as one
 *   batch of that node's session, so the batches a loop gathers leave as
 *   one script call per node (format 3: the keys among the arguments, as
 *   a call's declared keys must share a slot). An op of a slot that is
 *   migrating goes alone, its key declared, so that the node answers ASK
 *   for a key that has moved.
 * - Redirections: MOVED (the slot moved for good: the map learns it and
 *   the ops go again, to the new node), ASK (the slot is migrating: the op
 *   goes once to the importing node after ASKING, the map unchanged, and
 *   the slot's ops go alone for a while), a non-local key (format 3: the
 *   node refused the whole call before charging anything; each op goes
 *   again alone, to be redirected exactly). At most MAX_HOPS of them per
 *   batch, then its ops fail with WEIR_EUNAVAIL. TRYAGAIN, CLUSTERDOWN and
 *   READONLY (a node that is a replica now) fail the ops with
 *   WEIR_EUNAVAIL and refresh the map.
 * - Failures are per node: a node down fails its ops (WEIR_EUNAVAIL,
 *   WEIR_ETIMEDOUT: the caller's failure mode decides), the batch still
 *   completes with WEIR_OK and every other op decided.
 * - Across nodes, check-all-then-charge-all is kept by span.c.
 */
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/context.h"
#include "store/redis/cluster/cluster.h"

/* The map is read again this often, and at most this often after errors. */
#define REFRESH_US 5000000
#define REFRESH_MIN_US 100000
/* A slot an ASK named sends its ops alone this long. */
#define MIGRATING_US 2000000

/* ------------------------------------------------------------ the nodes
 * shared by every session: an address and its breaker, made once and
 * kept until the store goes (a lock only to find or add one) */

weir_status weir__rcluster_new(redis_store *rs)
{
    rcluster *c = weir__calloc(rs->base.ctx, 1, sizeof(*c));
    if (!c)
        return WEIR_ENOMEM;
    int n = weir__redis_seed_split(rs->o.seeds, c->seeds, WEIR_REDIS_MAX_SEEDS);
    if (n < 1 || pthread_mutex_init(&c->lock, NULL) != 0) {
        weir__free(rs->base.ctx, c);
        return WEIR_EINVAL;
    }
    c->n_seeds = (size_t)n;
    rs->cluster = c;
    return WEIR_OK;
}

void weir__rcluster_free(redis_store *rs)
{
    rcluster *c = rs->cluster;
    if (!c)
        return;
    for (size_t i = 0; i < c->n; i++)
        weir__free(rs->base.ctx, c->nodes[i]);
    pthread_mutex_destroy(&c->lock);
    weir__free(rs->base.ctx, c);
    rs->cluster = NULL;
}

static cnode_shared *shared_node(redis_store *rs, const char *host, int port)
{
    rcluster *c = rs->cluster;
    cnode_shared *out = NULL;
    pthread_mutex_lock(&c->lock);
    for (size_t i = 0; i < c->n && !out; i++)
        if (c->nodes[i]->addr.port == port && strcmp(c->nodes[i]->addr.host, host) == 0)
            out = c->nodes[i];
    if (!out && c->n < WEIR__MAX_NODES && strlen(host) <= WEIR_REDIS_MAX_FIELD) {
        out = weir__calloc(rs->base.ctx, 1, sizeof(*out));
        if (out) {
            snprintf(out->addr.host, sizeof(out->addr.host), "%s", host);
            out->addr.port = port;
            weir__breaker_init(&out->br, rs->o.breaker_failures, rs->o.breaker_window_us,
                               rs->o.breaker_cooldown_us);
            c->nodes[c->n] = out;
            c->n++;
            atomic_store_explicit(&c->n_published, c->n, memory_order_release);
        }
    }
    pthread_mutex_unlock(&c->lock);
    return out;
}

static size_t nodes_now(rcluster *c)
{
    return atomic_load_explicit(&c->n_published, memory_order_acquire);
}

void weir__rcluster_stats(redis_store *rs, weir_redis_cluster_stats *out)
{
    rcluster *c = rs->cluster;
    out->nodes = nodes_now(c);
    out->refreshes = atomic_load(&c->refreshes);
    out->moved = atomic_load(&c->moved);
    out->asked = atomic_load(&c->asked);
    out->split = atomic_load(&c->split);
    out->refunds = atomic_load(&c->refunds);
    out->refund_errors = atomic_load(&c->refund_errors);
}

void weir__rcluster_breakers(redis_store *rs, weir_redis_breaker *worst, uint64_t *opened)
{
    rcluster *c = rs->cluster;
    size_t n = nodes_now(c);
    *worst = WEIR_REDIS_CLOSED;
    *opened = 0;
    for (size_t i = 0; i < n; i++) {
        *opened += atomic_load(&c->nodes[i]->br.opened);
        /* a node no map names (a master replaced by its replica, a seed
         * that is down or a replica) serves no key: its breaker, which
         * nothing probes any more, says nothing of the store */
        if (atomic_load(&c->nodes[i]->mapped) == 0)
            continue;
        weir_redis_breaker b = weir__breaker_state(&c->nodes[i]->br);
        if (b == WEIR_REDIS_OPEN || (b == WEIR_REDIS_HALF_OPEN && *worst == WEIR_REDIS_CLOSED))
            *worst = b;
    }
}

size_t weir__rcluster_nodes(redis_store *rs, weir_redis_node *out, size_t cap)
{
    rcluster *c = rs->cluster;
    size_t n = nodes_now(c);
    for (size_t i = 0; i < n && i < cap; i++) {
        cnode_shared *sh = c->nodes[i];
        bool v6 = strchr(sh->addr.host, ':') != NULL;
        snprintf(out[i].address, sizeof(out[i].address), v6 ? "[%s]:%d" : "%s:%d", sh->addr.host,
                 sh->addr.port);
        out[i].breaker = weir__breaker_state(&sh->br);
        out[i].breaker_opened = atomic_load(&sh->br.opened);
        out[i].in_map = atomic_load(&sh->mapped) > 0;
    }
    return n;
}

/* ------------------------------------------------------------ a session's nodes */

static void on_node_redirect(void *owner, const char *err, size_t len, void *arg);
static void on_node_up(void *owner, rsession *ss);

/* The session's node for @host:@port, made if new: its index, or -1. */
static int node_find(csession *cs, const char *host, int port)
{
    for (size_t i = 0; i < cs->n_nodes; i++)
        if (cs->nodes[i].sh->addr.port == port && strcmp(cs->nodes[i].sh->addr.host, host) == 0)
            return (int)i;
    if (cs->n_nodes >= WEIR__MAX_NODES)
        return -1;
    cnode_shared *sh = shared_node(cs->rs, host, port);
    if (!sh)
        return -1;
    cs->nodes[cs->n_nodes] = (cnode){sh, NULL, false};
    return (int)cs->n_nodes++;
}

/* The node's store session, connecting when first used. */
static rsession *node_session(csession *cs, cnode *n)
{
    if (!n->ss) {
        n->ss = weir__redis_session_make(cs->rs, &cs->loop, n->sh->addr.host, n->sh->addr.port,
                                         &n->sh->br);
        if (n->ss) {
            n->ss->keys_in_args = true;
            n->ss->redirect = on_node_redirect;
            n->ss->up = on_node_up;
            n->ss->owner = cs;
        }
    }
    return n->ss;
}

/* Where a slot's ops go: its node in the map, else a seed (whose MOVED
 * tells). -1 when neither can be had. */
static int slot_node(csession *cs, unsigned slot)
{
    uint16_t i = cs->node_of[slot];
    if (i != WEIR__NO_NODE)
        return i;
    /* from seed_next on, the first seed that is up, else the first
     * connecting or not tried yet (its ops wait for it), else seed_next's */
    rcluster *c = cs->rs->cluster;
    int best = -1, best_state = -1;
    for (size_t k = 0; k < c->n_seeds && best_state != S_UP; k++) {
        const weir__redis_seed *s = &c->seeds[(cs->seed_next + k) % c->n_seeds];
        int n = node_find(cs, s->host, s->port);
        int state = n < 0 ? S_DOWN : cs->nodes[n].ss ? (int)cs->nodes[n].ss->state : S_CONNECTING;
        if (n >= 0 && (best < 0 || state > best_state)) {
            best = n;
            best_state = state;
        }
    }
    return best;
}

/* ------------------------------------------------------------ the slot map */

static void refresh_soon(csession *cs);

static void on_slots(redisAsyncContext *ac, void *r, void *privdata)
{
    csession *cs = privdata;
    redisReply *reply = r;
    (void)ac;
    cs->refreshing = false;
    if (cs->freeing)
        return;
    rsession *from = cs->asked;
    cs->asked = NULL;
    char err[160];
    int covered = -1;
    if (reply && from)
        covered = weir__slot_map_parse(reply, from->host, &cs->scratch, err, sizeof(err));
    if (covered <= 0) {
        if (reply)
            weir__log(cs->rs->base.ctx, WEIR_LOG_WARN,
                      "event=redis_cluster_map_refused error=\"%s\"",
                      covered == 0 ? "no slot is served" : err);
        cs->seed_next++;
        cs->again = true;
        refresh_soon(cs);
        return;
    }
    /* the map's nodes as the session's, connected now: a connection made
     * by a decision's first op would take longer than its timeout */
    int idx[WEIR__MAX_NODES];
    for (size_t i = 0; i < cs->scratch.n_nodes; i++) {
        idx[i] = node_find(cs, cs->scratch.nodes[i].host, cs->scratch.nodes[i].port);
        if (idx[i] >= 0)
            node_session(cs, &cs->nodes[idx[i]]);
    }
    bool changed = false;
    for (size_t s = 0; s < WEIR__SLOTS; s++) {
        uint16_t was = cs->node_of[s], now = cs->scratch.node_of[s];
        uint16_t to = now == WEIR__NO_NODE || idx[now] < 0 ? WEIR__NO_NODE : (uint16_t)idx[now];
        changed |= was != to;
        cs->node_of[s] = to;
    }
    redis_count(&cs->rs->cluster->refreshes, 1);
    if (changed)
        weir__log(cs->rs->base.ctx, WEIR_LOG_INFO, "event=redis_cluster_map masters=%zu slots=%d",
                  cs->scratch.n_nodes, covered);
    /* a node no slot names any more (a master gone, demoted or emptied):
     * its connection goes once nothing waits on it; not the one that
     * answered (a replica seed), whose reply callback this is: hiredis
     * still uses its session when the callback returns */
    for (size_t i = 0; i < cs->n_nodes; i++) {
        cnode *n = &cs->nodes[i];
        bool named = false;
        for (size_t k = 0; k < cs->scratch.n_nodes && !named; k++)
            named = idx[k] == (int)i;
        if (named != n->mapped) {
            n->mapped = named;
            if (named)
                atomic_fetch_add(&n->sh->mapped, 1);
            else
                atomic_fetch_sub(&n->sh->mapped, 1);
        }
        if (!named && n->ss && n->ss != from && weir__redis_session_idle(n->ss)) {
            weir__redis_session_free(&n->ss->base);
            n->ss = NULL;
        }
    }
    if (cs->again) {
        cs->again = false;
        refresh_soon(cs);
    }
}

/* Ask a node that is up for the map; when none is, connect to a seed,
 * whose coming up asks. */
static void refresh_now(csession *cs)
{
    for (size_t k = 0; k < cs->n_nodes; k++) {
        cnode *n = &cs->nodes[(cs->seed_next + k) % cs->n_nodes];
        if (n->ss && n->ss->state == S_UP && n->ss->ac &&
            redisAsyncCommand(n->ss->ac, on_slots, cs, "CLUSTER SLOTS") == REDIS_OK) {
            /* only a map asked counts: a seed coming up asks at once */
            cs->last_refresh = weir__redis_mono_us();
            cs->refreshing = true;
            cs->asked = n->ss;
            return;
        }
    }
    /* no node is up: connect to every seed (one may be down for good);
     * the first up asks (on_node_up) */
    rcluster *c = cs->rs->cluster;
    for (size_t k = 0; k < c->n_seeds; k++) {
        int i = node_find(cs, c->seeds[k].host, c->seeds[k].port);
        if (i >= 0)
            node_session(cs, &cs->nodes[i]);
    }
    cs->want_map = true;
}

static void on_refresh_timer(void *arg)
{
    csession *cs = arg;
    cs->refresh_timer = NULL;
    if (cs->refreshing) {
        cs->again = true;
        return;
    }
    refresh_now(cs);
}

static void on_periodic(void *arg)
{
    csession *cs = arg;
    cs->periodic = NULL;
    refresh_soon(cs);
    cs->periodic = cs->loop.timer_start(cs->loop.data, REFRESH_US, on_periodic, cs);
    if (cs->periodic)
        cs->loop.unref(cs->loop.data, cs->periodic);
}

/* Read the map again, at most every REFRESH_MIN_US. */
static void refresh_soon(csession *cs)
{
    if (cs->freeing)
        return;
    if (cs->refreshing) {
        cs->again = true;
        return;
    }
    if (cs->refresh_timer)
        return;
    int64_t wait = cs->last_refresh + REFRESH_MIN_US - weir__redis_mono_us();
    cs->refresh_timer =
        cs->loop.timer_start(cs->loop.data, wait < 0 ? 0 : wait, on_refresh_timer, cs);
    if (cs->refresh_timer)
        cs->loop.unref(cs->loop.data, cs->refresh_timer);
}

static void on_node_up(void *owner, rsession *ss)
{
    csession *cs = owner;
    (void)ss;
    if (cs->want_map) {
        cs->want_map = false;
        refresh_soon(cs);
    }
}

void weir__cluster_node_failed(csession *cs)
{
    refresh_soon(cs);
}

/* ------------------------------------------------------------ routing */

static bool migrating(const csession *cs, unsigned slot, int64_t now)
{
    return cs->migrating_until[slot] > now;
}

weir_status weir__cluster_route(csession *cs, cpart *p, unsigned hops_left, bool alone,
                                const weir__node_addr *ask_to)
{
    int64_t now = weir__redis_mono_us();
    if (ask_to) {
        int i = node_find(cs, ask_to->host, ask_to->port);
        rsession *ss = i < 0 ? NULL : node_session(cs, &cs->nodes[i]);
        if (!ss)
            return WEIR_EUNAVAIL;
        p->hops_left = hops_left;
        return weir__cluster_part_submit(cs, p, ss, true, true);
    }
    /* the part's ops by node: in place when they all go to one */
    size_t n = p->n;
    int first = -1;
    bool one = !alone;
    for (size_t i = 0; i < n && one; i++) {
        unsigned slot = weir__key_slot(p->ops[i].key, p->ops[i].key_len);
        int node = slot_node(cs, slot);
        if (node < 0 || migrating(cs, slot, now) || (first >= 0 && node != first) ||
            cs->node_of[slot] == WEIR__NO_NODE)
            one = false;
        first = node;
    }
    if (one && first >= 0) {
        rsession *ss = node_session(cs, &cs->nodes[first]);
        if (!ss)
            return WEIR_ENOMEM;
        p->hops_left = hops_left;
        return weir__cluster_part_submit(cs, p, ss, false, false);
    }
    return weir__cluster_split(cs, p, hops_left, alone, now);
}

int weir__cluster_dest(csession *cs, const weir_op *op, bool alone, int64_t now, bool *solo)
{
    unsigned slot = weir__key_slot(op->key, op->key_len);
    *solo = alone || migrating(cs, slot, now) || cs->node_of[slot] == WEIR__NO_NODE;
    return slot_node(cs, slot);
}

rsession *weir__cluster_node(csession *cs, int i)
{
    return node_session(cs, &cs->nodes[i]);
}

/* An answer that the keys are elsewhere: the part goes again, where the
 * answer says. */
static void on_node_redirect(void *owner, const char *err, size_t len, void *arg)
{
    csession *cs = owner;
    cpart *p = arg;
    rcluster *c = cs->rs->cluster;
    weir__redirect d;
    bool redirect = weir__redirect_parse(err, len, &d);
    bool local_refusal = !redirect && strstr(err, "non local key") != NULL;
    if (p->hops_left == 0 || (!redirect && !local_refusal)) {
        /* TRYAGAIN, CLUSTERDOWN, READONLY, or redirected too often */
        weir__log(cs->rs->base.ctx, WEIR_LOG_WARN, "event=redis_cluster_error error=\"%.*s\"",
                  (int)(len > 200 ? 200 : len), err);
        refresh_soon(cs);
        weir__cluster_part_fail(cs, p, WEIR_EUNAVAIL);
        return;
    }
    weir_status st;
    if (redirect && d.ask) {
        redis_count(&c->asked, 1);
        cs->migrating_until[d.slot] = weir__redis_mono_us() + MIGRATING_US;
        st = weir__cluster_route(cs, p, p->hops_left - 1, true, &d.to);
    } else if (redirect) {
        redis_count(&c->moved, 1);
        int i = node_find(cs, d.to.host, d.to.port);
        if (i >= 0)
            cs->node_of[d.slot] = (uint16_t)i;
        refresh_soon(cs);
        st = weir__cluster_route(cs, p, p->hops_left - 1, false, NULL);
    } else {
        /* the whole call was refused, nothing charged: each op alone */
        redis_count(&c->moved, 1);
        refresh_soon(cs);
        st = weir__cluster_route(cs, p, p->hops_left - 1, true, NULL);
    }
    if (st != WEIR_OK)
        weir__cluster_part_fail(cs, p, st);
}

/* ------------------------------------------------------------ the session */

static weir_status cs_new(weir_store *s, const weir_loop_adapter *loop, weir_store_session **out)
{
    if (!weir_loop_has_io(loop))
        return WEIR_EINVAL;
    redis_store *rs = (redis_store *)s;
    csession *cs = weir__calloc(s->ctx, 1, sizeof(*cs));
    weir__node_addr *scratch_nodes =
        cs ? weir__calloc(s->ctx, WEIR__MAX_NODES, sizeof(*scratch_nodes)) : NULL;
    if (!scratch_nodes) {
        weir__free(s->ctx, cs);
        return WEIR_ENOMEM;
    }
    cs->base.store = s;
    cs->rs = rs;
    cs->loop = *loop;
    cs->scratch.nodes = scratch_nodes;
    for (size_t i = 0; i < WEIR__SLOTS; i++)
        cs->node_of[i] = WEIR__NO_NODE;
    cs->seed_next = (size_t)(uintptr_t)cs / 64;
    refresh_now(cs);
    cs->periodic = loop->timer_start(loop->data, REFRESH_US, on_periodic, cs);
    if (cs->periodic)
        loop->unref(loop->data, cs->periodic);
    *out = &cs->base;
    return WEIR_OK;
}

static weir_status cs_submit(weir_store_session *base, weir_op *ops, size_t n, int64_t now_us,
                             unsigned flags, weir_store_cb cb, void *arg)
{
    csession *cs = (csession *)base;
    int64_t batch_now = cs->rs->o.redis_clock ? -1 : now_us;
    if (n == 0)
        return WEIR_EINVAL;
    for (size_t i = 0; i < n; i++) {
        weir_status st = weir__redis_op_ok(&ops[i], batch_now < 0 ? 0 : batch_now);
        if (st != WEIR_OK)
            return st;
    }
    return weir__cluster_span_start(cs, ops, n, now_us, flags, cb, arg);
}

static void cs_free(weir_store_session *base)
{
    csession *cs = (csession *)base;
    weir_ctx *ctx = cs->rs->base.ctx;
    cs->freeing = true;
    if (cs->refresh_timer)
        cs->loop.timer_stop(cs->loop.data, cs->refresh_timer);
    if (cs->periodic)
        cs->loop.timer_stop(cs->loop.data, cs->periodic);
    /* their batches complete with WEIR_ECLOSED, and with them the spans */
    for (size_t i = 0; i < cs->n_nodes; i++) {
        if (cs->nodes[i].mapped)
            atomic_fetch_sub(&cs->nodes[i].sh->mapped, 1);
        if (cs->nodes[i].ss)
            weir__redis_session_free(&cs->nodes[i].ss->base);
    }
    weir__cluster_spans_free(cs);
    weir__free(ctx, cs->scratch.nodes);
    weir__free(ctx, cs);
}

const redis_session_entries weir__cluster_sessions = {cs_new, cs_submit, cs_free};
