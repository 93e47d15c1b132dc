/*
 * slots.c - hash slots, the slot map and redirections (slots.h).
 */
#include "store/redis/cluster/slots.h"

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* CRC16-CCITT (XMODEM: polynomial 0x1021, no reflection, initial 0), the
 * one Redis Cluster hashes keys with; the table is made once from the
 * polynomial. */
static uint16_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void)
{
    for (unsigned i = 0; i < 256; i++) {
        uint16_t c = (uint16_t)(i << 8);
        for (int b = 0; b < 8; b++)
            c = (uint16_t)((c & 0x8000) ? (c << 1) ^ 0x1021 : c << 1);
        crc_table[i] = c;
    }
}

static uint16_t crc16(const unsigned char *p, size_t n)
{
    uint16_t c = 0;
    for (size_t i = 0; i < n; i++)
        c = (uint16_t)((c << 8) ^ crc_table[((c >> 8) ^ p[i]) & 0xff]);
    return c;
}

unsigned weir__key_slot(const void *key, size_t len)
{
    pthread_once(&crc_once, crc_init);
    const unsigned char *k = key;
    const unsigned char *open = memchr(k, '{', len);
    if (open) {
        const unsigned char *close = memchr(open + 1, '}', len - (size_t)(open + 1 - k));
        if (close && close > open + 1)
            return crc16(open + 1, (size_t)(close - open - 1)) & (WEIR__SLOTS - 1);
    }
    return crc16(k, len) & (WEIR__SLOTS - 1);
}

static bool is_int(const redisReply *r, long long lo, long long hi)
{
    return r && r->type == REDIS_REPLY_INTEGER && r->integer >= lo && r->integer <= hi;
}

/* The index of @host:@port among @m's nodes, added if new; -1 when full. */
static int node_index(weir__slot_map *m, const char *host, size_t len, int port)
{
    for (size_t i = 0; i < m->n_nodes; i++)
        if (m->nodes[i].port == port && strlen(m->nodes[i].host) == len &&
            memcmp(m->nodes[i].host, host, len) == 0)
            return (int)i;
    if (m->n_nodes >= WEIR__MAX_NODES)
        return -1;
    weir__node_addr *a = &m->nodes[m->n_nodes];
    memcpy(a->host, host, len);
    a->host[len] = '\0';
    a->port = port;
    return (int)m->n_nodes++;
}

static int bad(char *err, size_t cap, const char *what)
{
    snprintf(err, cap, "not a slot map: %s", what);
    return -1;
}

int weir__slot_map_parse(const redisReply *r, const char *asked_host, weir__slot_map *m, char *err,
                         size_t cap)
{
    for (size_t s = 0; s < WEIR__SLOTS; s++)
        m->node_of[s] = WEIR__NO_NODE;
    m->n_nodes = 0;
    if (!r || r->type != REDIS_REPLY_ARRAY)
        return bad(err, cap, r && r->type == REDIS_REPLY_ERROR ? r->str : "not an array");
    int covered = 0;
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *e = r->element[i];
        if (!e || e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
            !is_int(e->element[0], 0, WEIR__SLOTS - 1) ||
            !is_int(e->element[1], e->element[0]->integer, WEIR__SLOTS - 1))
            return bad(err, cap, "an entry is not [start, end, master, ...]");
        const redisReply *mst = e->element[2];
        if (!mst || mst->type != REDIS_REPLY_ARRAY || mst->elements < 2 ||
            mst->element[0]->type != REDIS_REPLY_STRING || !is_int(mst->element[1], 1, 65535))
            return bad(err, cap, "a master is not [host, port, ...]");
        const char *host = mst->element[0]->str;
        size_t hlen = mst->element[0]->len;
        if (hlen == 0 || (hlen == 1 && host[0] == '?')) {
            host = asked_host;
            hlen = strlen(asked_host);
        }
        if (hlen > WEIR_REDIS_MAX_FIELD || memchr(host, '\0', hlen))
            return bad(err, cap, "a host name is too long");
        int idx = node_index(m, host, hlen, (int)mst->element[1]->integer);
        if (idx < 0)
            return bad(err, cap, "more masters than weir follows (512)");
        for (long long s = e->element[0]->integer; s <= e->element[1]->integer; s++) {
            if (m->node_of[s] == WEIR__NO_NODE)
                covered++;
            m->node_of[s] = (uint16_t)idx;
        }
    }
    return covered;
}

bool weir__redirect_parse(const char *err, size_t len, weir__redirect *out)
{
    size_t skip;
    if (len > 6 && memcmp(err, "MOVED ", 6) == 0) {
        out->ask = false;
        skip = 6;
    } else if (len > 4 && memcmp(err, "ASK ", 4) == 0) {
        out->ask = true;
        skip = 4;
    } else {
        return false;
    }
    const char *p = err + skip, *end = err + len;
    unsigned slot = 0;
    size_t digits = 0;
    while (p < end && *p >= '0' && *p <= '9' && digits < 6) {
        slot = slot * 10 + (unsigned)(*p++ - '0');
        digits++;
    }
    if (digits == 0 || slot >= WEIR__SLOTS || p >= end || *p++ != ' ')
        return false;
    const char *colon = NULL;
    for (const char *q = p; q < end; q++)
        if (*q == ':')
            colon = q;
    if (!colon || colon == p || (size_t)(colon - p) > WEIR_REDIS_MAX_FIELD)
        return false;
    long port = 0;
    const char *q = colon + 1;
    if (q >= end || end - q > 5)
        return false;
    for (; q < end; q++) {
        if (*q < '0' || *q > '9')
            return false;
        port = port * 10 + (*q - '0');
    }
    if (port < 1 || port > 65535 || memchr(p, '\0', (size_t)(colon - p)))
        return false;
    out->slot = slot;
    memcpy(out->to.host, p, (size_t)(colon - p));
    out->to.host[colon - p] = '\0';
    out->to.port = (int)port;
    return true;
}
