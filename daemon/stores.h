/*
 * stores.h - the stores `weir serve --store URL` can use, as a table: a
 * new store is a row (its scheme and how to open it).
 */
#ifndef WEIR_DAEMON_STORES_H
#define WEIR_DAEMON_STORES_H

#include <stdbool.h>
#include <stddef.h>

#include "options.h"
#include "weir/weir.h"

/** Whether @url names a store of this build; otherwise false with a
 *  message naming the stores there are into @msg. */
bool stores_check(const char *url, char *msg, size_t cap);

/** @url as it may be logged: a password in it replaced by "***". */
void stores_describe(const char *url, char *out, size_t cap);

/** Open the store that o->store names, with o's settings for it.
 *  Returns WEIR_OK, or an error with a message in @msg. An opened store
 *  may leave a message too (what the start-up check found), with *warn
 *  set when it is a problem (Redis not answering yet). */
weir_status stores_open(weir_ctx *ctx, const serve_options *o, weir_store **out, char *msg,
                        size_t cap, bool *warn);

#endif /* WEIR_DAEMON_STORES_H */
