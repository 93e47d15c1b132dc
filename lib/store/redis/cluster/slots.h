/*
 * slots.h - what a Redis Cluster client needs to know to route a key:
 * the key's hash slot (CRC16 of the key or of its hash tag, mod 16384),
 * the slot map read from CLUSTER SLOTS, and the redirections a node
 * answers with (MOVED, ASK). No I/O here.
 *
 * hiredis (Debian 12's 0.14) has no cluster support, and the clients that
 * do are not packaged, so the routing is written here, kept to what the
 * store uses: masters only (no reads from replicas), one map per session.
 */
#ifndef WEIR_STORE_REDIS_CLUSTER_SLOTS_H
#define WEIR_STORE_REDIS_CLUSTER_SLOTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "weir/redis.h"

struct redisReply;

#define WEIR__SLOTS 16384u
/* Masters a map holds at most (a cluster's recommended size is 1,000
 * nodes, masters and replicas together). */
#define WEIR__MAX_NODES 512u
/* No node holds the slot (not in the map). */
#define WEIR__NO_NODE 0xffffu

/* The hash slot of a key, as Redis computes it: the CRC16 (XMODEM) of the
 * part between the first '{' and the next '}' when that part is not
 * empty, else of the whole key; mod 16384. */
unsigned weir__key_slot(const void *key, size_t len);

typedef struct weir__node_addr {
    char host[WEIR_REDIS_MAX_FIELD + 1];
    int port;
} weir__node_addr;

/* A slot map: each slot's master, an index into the map's nodes. */
typedef struct weir__slot_map {
    uint16_t node_of[WEIR__SLOTS];
    weir__node_addr *nodes;
    size_t n_nodes;
} weir__slot_map;

/*
 * weir__slot_map_parse() - read a CLUSTER SLOTS reply into @m (its nodes
 * array holds WEIR__MAX_NODES). An entry is [start, end, [host, port,
 * id, ...], replicas...]; a master with an empty host ("" or "?", Redis's
 * "unknown endpoint") is at @asked_host, the node that answered. Slots no
 * entry names get WEIR__NO_NODE.
 *
 * Returns the number of slots covered (0 .. 16384), or -1 when the reply
 * is not such a map (a message in @err, @cap bytes).
 */
int weir__slot_map_parse(const struct redisReply *r, const char *asked_host, weir__slot_map *m,
                         char *err, size_t cap);

/* A redirection: "MOVED <slot> <host>:<port>" or "ASK <slot> <host>:<port>"
 * (an IPv6 host as Redis writes it, unbracketed, the port after the last
 * ':'). */
typedef struct weir__redirect {
    bool ask;
    unsigned slot;
    weir__node_addr to;
} weir__redirect;

/* Parse @err (@len bytes) as a redirection; false when it is none. */
bool weir__redirect_parse(const char *err, size_t len, weir__redirect *out);

#endif /* WEIR_STORE_REDIS_CLUSTER_SLOTS_H */
