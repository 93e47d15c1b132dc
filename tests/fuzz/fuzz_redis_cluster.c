/*
 * fuzz_redis_cluster.c - fuzzes what the Redis Cluster store makes of a
 * node's bytes: hiredis's reader (with the store's caps), then every reply
 * read as a slot map (weir__slot_map_parse(): a map of nodes in range, or
 * refused with a reason) and every error or string as a redirection
 * (weir__redirect_parse(): a slot below 16384 and a port in 1..65535, or
 * none); and the key slot of the raw bytes (always below 16384).
 */
#include <hiredis/hiredis.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store/redis/cluster/slots.h"
#include "store/redis/reader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
    if (!ok)
        abort();
}

static weir__node_addr nodes[WEIR__MAX_NODES];
static weir__slot_map map = {.nodes = nodes};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 65536)
        return 0;
    check(weir__key_slot(data, size) < WEIR__SLOTS);
    weir__redirect d;
    if (weir__redirect_parse((const char *)data, size, &d)) {
        check(d.slot < WEIR__SLOTS && d.to.port >= 1 && d.to.port <= 65535);
        check(strlen(d.to.host) >= 1 && strlen(d.to.host) <= WEIR_REDIS_MAX_FIELD);
    }
    redisReader *rd = redisReaderCreate();
    if (!rd)
        return 0;
    weir__redis_reader_caps caps;
    weir__redis_reader_cap(rd, &caps);
    redisReaderFeed(rd, (const char *)data, size);
    void *reply;
    while (redisReaderGetReply(rd, &reply) == REDIS_OK && reply) {
        redisReply *r = reply;
        char err[160];
        int covered = weir__slot_map_parse(r, "asked.example", &map, err, sizeof(err));
        check(covered >= -1 && covered <= (int)WEIR__SLOTS);
        if (covered >= 0) {
            check(map.n_nodes <= WEIR__MAX_NODES);
            int seen = 0;
            for (size_t s = 0; s < WEIR__SLOTS; s++) {
                check(map.node_of[s] == WEIR__NO_NODE || map.node_of[s] < map.n_nodes);
                seen += map.node_of[s] != WEIR__NO_NODE;
            }
            check(seen == covered);
            for (size_t i = 0; i < map.n_nodes; i++)
                check(map.nodes[i].port >= 1 && map.nodes[i].port <= 65535 &&
                      map.nodes[i].host[0] != '\0');
        } else {
            check(strncmp(err, "not a slot map", 14) == 0);
        }
        if ((r->type == REDIS_REPLY_ERROR || r->type == REDIS_REPLY_STRING) &&
            weir__redirect_parse(r->str, r->len, &d))
            check(d.slot < WEIR__SLOTS && d.to.port >= 1);
        freeReplyObject(reply);
    }
    redisReaderFree(rd);
    return 0;
}
