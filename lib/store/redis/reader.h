/*
 * reader.h - caps on what hiredis's reply reader builds from Redis's bytes.
 *
 * hiredis 0.14 (Debian 12's) allocates an array of whatever length a reply
 * announces ("*900000000\r\n" is 7 GB of pointers) before one element
 * arrives; hiredis 1.x caps it (maxelements), 0.14 cannot. The store puts
 * these reply functions in front of hiredis's own: an array longer than
 * any reply the store asks for, or a string longer than any it expects,
 * is refused, the reader fails ("out of memory"), and the connection is
 * dropped and made again, instead of the process growing without bound.
 */
#ifndef WEIR_STORE_REDIS_READER_H
#define WEIR_STORE_REDIS_READER_H

#include <hiredis/read.h>

#include "weir/store.h"

/* The longest array a reply may hold: more than the script's, for a call
 * of WEIR_MAX_BATCH ops (1 + at most 6 per op), and than a Redis Cluster's
 * CLUSTER SLOTS (one entry per range of slots: 16,384 at most). */
#define WEIR__REDIS_SCRIPT_ELEMENTS (1 + 8 * (int)WEIR_MAX_BATCH)
#define WEIR__REDIS_MAX_REPLY_ELEMENTS \
    (WEIR__REDIS_SCRIPT_ELEMENTS > 16400 ? WEIR__REDIS_SCRIPT_ELEMENTS : 16400)
/* The longest string: a sha1, a library name, an error message. */
#define WEIR__REDIS_MAX_REPLY_STRING ((size_t)1 << 16)

/* The reply functions of one reader, kept where the reader can reach them
 * (its privdata): one per connection, living as long as it. */
typedef struct weir__redis_reader_caps {
    redisReplyObjectFunctions fns;
    const redisReplyObjectFunctions *inner;
} weir__redis_reader_caps;

/* Put the caps in front of @r's reply functions; @keep must outlive @r. */
void weir__redis_reader_cap(redisReader *r, weir__redis_reader_caps *keep);

#endif /* WEIR_STORE_REDIS_READER_H */
