/*
 * reader.c - caps on hiredis's reply reader (reader.h).
 */
#include "store/redis/reader.h"

static void *capped_array(const redisReadTask *task, int elements)
{
    const weir__redis_reader_caps *k = task->privdata;
    if (elements > WEIR__REDIS_MAX_REPLY_ELEMENTS)
        return NULL; /* the reader reports it as out of memory */
    return k->inner->createArray(task, elements);
}

static void *capped_string(const redisReadTask *task, char *s, size_t len)
{
    const weir__redis_reader_caps *k = task->privdata;
    if (len > WEIR__REDIS_MAX_REPLY_STRING)
        return NULL;
    return k->inner->createString(task, s, len);
}

void weir__redis_reader_cap(redisReader *r, weir__redis_reader_caps *keep)
{
    keep->inner = r->fn;
    keep->fns = *r->fn;
    keep->fns.createArray = capped_array;
    keep->fns.createString = capped_string;
    r->fn = &keep->fns;
    r->privdata = keep;
}
