/*
 * loop_io.h - a hiredis async context driven by a weir_loop_adapter's fd
 * watch: hiredis's event hooks (add/del read and write, cleanup) mapped
 * onto one watch, and the watch's readiness handed back to hiredis. Used
 * by a store session's connection (link.c) and by the sentinel links.
 */
#ifndef WEIR_STORE_REDIS_LOOP_IO_H
#define WEIR_STORE_REDIS_LOOP_IO_H

#include <hiredis/async.h>
#include <stdbool.h>

#include "weir/store.h"

typedef struct weir__redis_io {
    const weir_loop_adapter *loop;
    /* the owner's context field: NULL once the connection is going, so
     * that nothing is handed to a context hiredis may be freeing */
    redisAsyncContext *const *acp;
    void *watch;
    unsigned events;
} weir__redis_io;

/* Watch @ac's socket on @loop (unref'd: an idle connection keeps no loop
 * running) and set its event hooks; @acp is where the owner keeps @ac.
 * @ac->data stays the caller's. false when the watch cannot be made (@ac
 * is then the caller's to free). */
bool weir__redis_io_attach(weir__redis_io *io, const weir_loop_adapter *loop, redisAsyncContext *ac,
                           redisAsyncContext *const *acp);

#endif /* WEIR_STORE_REDIS_LOOP_IO_H */
