/*
 * fuzz_redis_reply.c - fuzzes what the Redis store makes of Redis's bytes:
 * hiredis's reader (the RESP parser the store uses, with its caps) and then
 * weir__redis_decode() on every reply it gives, for a call of one to four
 * batches (their sizes from the first byte). Any reply is the script's or
 * WEIR_EIO; a refused one leaves every op as it was; an accepted one gives
 * every op a known status and results in range.
 */
#include <hiredis/hiredis.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store/redis/codec.h"
#include "store/redis/reader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
    if (!ok)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 65536)
        return 0;
    weir_op ops[16];
    weir__redis_batch b[4];
    size_t nb = 1u + (data[0] & 3u), used = 0;
    for (size_t j = 0; j < nb; j++) {
        size_t n = 1u + ((data[0] >> (2 + j)) & 3u);
        b[j] = (weir__redis_batch){&ops[used], n, -1, 0};
        used += n;
    }
    redisReader *rd = redisReaderCreate();
    if (!rd)
        return 0;
    weir__redis_reader_caps caps; /* as the store reads */
    weir__redis_reader_cap(rd, &caps);
    redisReaderFeed(rd, (const char *)data + 1, size - 1);
    void *reply;
    while (redisReaderGetReply(rd, &reply) == REDIS_OK && reply) {
        memset(ops, 0x5a, sizeof(ops));
        weir_op before[16];
        memcpy(before, ops, sizeof(ops));
        int64_t now = -1;
        weir_status st = weir__redis_decode(reply, b, nb, &now);
        if (st == WEIR_OK) {
            check(now >= 0);
            for (size_t i = 0; i < used; i++) {
                check(ops[i].status <= WEIR_OK && ops[i].status >= WEIR_EIO);
                if (ops[i].status == WEIR_OK)
                    check(ops[i].result.retry_after_us >= -1);
            }
        } else {
            check(st == WEIR_EIO);
            check(memcmp(before, ops, sizeof(ops)) == 0);
        }
        freeReplyObject(reply);
    }
    redisReaderFree(rd);
    return 0;
}
