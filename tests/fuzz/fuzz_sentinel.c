/*
 * fuzz_sentinel.c - fuzzes what the Redis store on Sentinel makes of a
 * sentinel's and a master's bytes: hiredis's reader (with the store's
 * caps), then each reply read as a master's address, a +switch-master
 * message and a ROLE reply; and the bytes themselves as a message's
 * payload. An address accepted is one the store can connect to and print:
 * a host of 1 to WEIR_REDIS_MAX_FIELD printable bytes without a space, a
 * port of 1 to 65535; a role is printable and short.
 */
#define _POSIX_C_SOURCE 200809L /* strnlen */

#include <hiredis/hiredis.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store/redis/reader.h"
#include "store/redis/sentinel/sentinel.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
    if (!ok)
        abort();
}

static void check_addr(const weir__redis_seed *a)
{
    size_t n = strnlen(a->host, sizeof(a->host));
    check(n >= 1 && n <= WEIR_REDIS_MAX_FIELD);
    for (size_t i = 0; i < n; i++)
        check((unsigned char)a->host[i] > ' ' && (unsigned char)a->host[i] < 0x7f);
    check(a->port >= 1 && a->port <= 65535);
    char text[WEIR_REDIS_ADDR_BYTES];
    weir__sentinel_addr_format(a, text, sizeof(text));
    check(strlen(text) < sizeof(text));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 65536)
        return 0;
    weir__redis_seed a;
    memset(&a, 0x5a, sizeof(a));
    if (weir__sentinel_switch_parse((const char *)data, size, "mymaster", &a))
        check_addr(&a);
    redisReader *rd = redisReaderCreate();
    if (!rd)
        return 0;
    weir__redis_reader_caps caps; /* as the store reads */
    weir__redis_reader_cap(rd, &caps);
    redisReaderFeed(rd, (const char *)data, size);
    void *reply;
    while (redisReaderGetReply(rd, &reply) == REDIS_OK && reply) {
        char err[240], role[40];
        memset(&a, 0x5a, sizeof(a));
        int k = weir__sentinel_addr_parse(reply, &a, err, sizeof(err));
        check(k >= -1 && k <= 1);
        if (k == 1)
            check_addr(&a);
        if (k == -1)
            check(strnlen(err, sizeof(err)) < sizeof(err));
        memset(&a, 0x5a, sizeof(a));
        k = weir__sentinel_switch_reply(reply, "mymaster", &a);
        check(k >= -1 && k <= 1);
        if (k == 1)
            check_addr(&a);
        k = weir__sentinel_role_parse(reply, role, sizeof(role));
        check(k >= -1 && k <= 1);
        if (k == 0) {
            size_t n = strnlen(role, sizeof(role));
            check(n <= 32);
            for (size_t i = 0; i < n; i++)
                check((unsigned char)role[i] > ' ' && (unsigned char)role[i] < 0x7f &&
                      role[i] != '"');
        }
        freeReplyObject(reply);
    }
    redisReaderFree(rd);
    return 0;
}
