/*
 * hybrid.h - `sync: local` on the Redis store (hybrid.c): a session that
 * decides flagged ops from capacity reserved ahead in Redis, around the
 * store's own session.
 */
#ifndef WEIR_STORE_REDIS_HYBRID_H
#define WEIR_STORE_REDIS_HYBRID_H

#include "store/redis/redis_internal.h"

typedef struct hsession hsession;

weir_status weir__hybrid_session_new(weir_store *s, const weir_loop_adapter *loop,
                                     weir_store_session **out);
weir_status weir__hybrid_submit(weir_store_session *ss, weir_op *ops, size_t n, int64_t now_us,
                                unsigned flags, weir_store_cb cb, void *arg);
void weir__hybrid_session_free(weir_store_session *ss);
/* Sync no later than @at (monotonic microseconds). */
void weir__hybrid_arm(hsession *hs, int64_t at);

#endif /* WEIR_STORE_REDIS_HYBRID_H */
