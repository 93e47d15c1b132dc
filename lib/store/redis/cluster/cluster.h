/*
 * cluster.h - the Redis store on a Redis Cluster: the nodes every session
 * shares (addresses and breakers), a session's slot map and node
 * sessions (cluster.c), and the spans that keep a batch whole across
 * nodes (span.c).
 */
#ifndef WEIR_STORE_REDIS_CLUSTER_H
#define WEIR_STORE_REDIS_CLUSTER_H

#include <pthread.h>

#include "store/redis/cluster/slots.h"
#include "store/redis/session.h"

/* A node, as every session of the store shares it. */
typedef struct cnode_shared {
    weir__node_addr addr;
    breaker br;
    _Atomic uint32_t mapped; /* sessions whose slot map names it now */
} cnode_shared;

/* The store's cluster part (redis_store.cluster). */
typedef struct rcluster {
    pthread_mutex_t lock; /* finding or adding a node */
    cnode_shared *nodes[WEIR__MAX_NODES];
    size_t n;                   /* under the lock */
    _Atomic size_t n_published; /* nodes[] entries readable without it */
    weir__redis_seed seeds[WEIR_REDIS_MAX_SEEDS];
    size_t n_seeds;
    /* counters (weir_redis_stats), relaxed */
    _Atomic uint64_t refreshes, moved, asked, split, refunds, refund_errors;
} rcluster;

/* A node, as one session has it. */
typedef struct cnode {
    cnode_shared *sh;
    rsession *ss; /* NULL until used, and after it left the map idle */
    bool mapped;  /* the session's map names it (counted in sh->mapped) */
} cnode;

struct cspan;

/* Some of a span's ops, sent to one node as one batch. */
typedef struct cpart {
    struct cpart *next; /* the spare list */
    struct cspan *sp;
    weir_op *ops;  /* the span's own (idx NULL), or a copy */
    uint32_t *idx; /* the copy's ops in the span's */
    size_t n, cap;
    unsigned hops_left;
    weir_op inl[4];
    uint32_t inl_idx[4];
} cpart;

/* A batch submitted to the session, until each of its ops is decided. */
typedef struct cspan {
    struct cspan *next; /* the spare list */
    struct csession *cs;
    weir__batch_req b;
    size_t pending;  /* parts in flight */
    bool submitting; /* inside the submit: not finished from there */
    bool multi;      /* split over several batches: atomic across them here */
    weir_status first_error;
    bool *charged; /* multi and atomic: the TAKEs a node charged */
    bool inl_charged[8];
} cspan;

typedef struct csession {
    weir_store_session base;
    redis_store *rs;
    weir_loop_adapter loop;
    uint16_t node_of[WEIR__SLOTS]; /* index in nodes, or WEIR__NO_NODE */
    int64_t migrating_until[WEIR__SLOTS];
    cnode nodes[WEIR__MAX_NODES];
    size_t n_nodes;
    size_t seed_next;       /* which seed (and node) to ask next */
    weir__slot_map scratch; /* the map being read */
    void *refresh_timer, *periodic;
    int64_t last_refresh;
    rsession *asked; /* the node asked for the map */
    bool refreshing, again, want_map, freeing;
    cspan *spare_spans;
    cpart *spare_parts;
} csession;

/* cluster.c */
weir_status weir__rcluster_new(redis_store *rs);
void weir__rcluster_free(redis_store *rs);
extern const redis_session_entries weir__cluster_sessions;
/* Counters and the nodes' breakers (weir_redis_*_get()). */
void weir__rcluster_stats(redis_store *rs, weir_redis_cluster_stats *out);
void weir__rcluster_breakers(redis_store *rs, weir_redis_breaker *worst, uint64_t *opened);
size_t weir__rcluster_nodes(redis_store *rs, weir_redis_node *out, size_t cap);
/* Send @p where its ops' slots are (split over nodes if need be), or all
 * alone (@alone), or to @ask_to after ASKING. */
weir_status weir__cluster_route(csession *cs, cpart *p, unsigned hops_left, bool alone,
                                const weir__node_addr *ask_to);
/* An op's node (an index), and whether it goes alone. */
int weir__cluster_dest(csession *cs, const weir_op *op, bool alone, int64_t now, bool *solo);
rsession *weir__cluster_node(csession *cs, int i);
/* A node failed a batch: the map may have changed. */
void weir__cluster_node_failed(csession *cs);

/* span.c */
weir_status weir__cluster_span_start(csession *cs, weir_op *ops, size_t n, int64_t now_us,
                                     unsigned flags, weir_store_cb cb, void *arg);
weir_status weir__cluster_part_submit(csession *cs, cpart *p, rsession *ss, bool solo, bool asking);
weir_status weir__cluster_split(csession *cs, cpart *p, unsigned hops_left, bool alone,
                                int64_t now);
void weir__cluster_part_fail(csession *cs, cpart *p, weir_status st);
void weir__cluster_spans_free(csession *cs);

#endif /* WEIR_STORE_REDIS_CLUSTER_H */
