/*
 * top_keys.h - one worker's record of the keys each domain denied most,
 * in fixed memory: per domain a Space-Saving sketch (weir/topk.h) of the
 * denials of the clock's minute under way and one of the minute before,
 * turned over as minutes pass. GET /admin/v1/top merges every worker's.
 * Written and read under the worker's metrics shard lock.
 *
 * A key is a denied descriptor's entries, length-prefixed rather than
 * joined with delimiters, so no value can pass for two entries: each
 * entry's key, then its value, as a LEB128 length and the bytes.
 */
#ifndef WEIR_DAEMON_TOP_KEYS_H
#define WEIR_DAEMON_TOP_KEYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "weir/weir.h"

/* Domains one worker keeps; a domain past them is not recorded until
 * one of them has gone a whole minute without a denial. */
#define TOP_KEYS_MAX_DOMAINS 64u
#define TOP_KEYS_MINUTE_US INT64_C(60000000)
/* Counters of each sketch, by default and at most (--top-keys). */
#define TOP_KEYS_DEFAULT_COUNTERS 1024u
#define TOP_KEYS_MAX_COUNTERS 65536u
/* Bytes of a key as the sketch sees it: an encoding longer than this is
 * its beginning and a digest of the whole. (The sketch keeps fewer:
 * WEIR_TOPK_DEFAULT_KEY_BYTES, then its own digest.) */
#define TOP_KEYS_ENCODED_BYTES 1024u

typedef struct top_keys top_keys;

/** A worker's record, with sketches of @counters counters (1 ..
 *  TOP_KEYS_MAX_COUNTERS) made from @ctx when a domain first denies.
 *  NULL when out of memory. */
top_keys *top_keys_new(const weir_ctx *ctx, uint32_t counters);
void top_keys_free(top_keys *t);

/** Count a denial of descriptor @d of a request to @domain (@len bytes)
 *  decided at @now_us. Allocates only at a domain's first denial. */
void top_keys_denied(top_keys *t, const char *domain, size_t len, const weir_descriptor *d,
                     int64_t now_us);

/** Merges into @into (a sketch of the same counters and key cap) the
 *  denials @domain counted in @now_us's minute and the one before; adds
 *  the bytes its sketches hold to *@bytes. */
void top_keys_merge(const top_keys *t, const char *domain, size_t len, int64_t now_us,
                    weir_topk *into, size_t *bytes);

/** Calls @fn for each whole entry of an encoded key (@n bytes); false
 *  when the bytes end inside an entry (the beginning of a longer key). */
typedef void top_keys_entry_fn(void *arg, const char *key, size_t key_len, const char *value,
                               size_t value_len);
bool top_keys_decode(const void *key, size_t n, top_keys_entry_fn *fn, void *arg);

#endif /* WEIR_DAEMON_TOP_KEYS_H */
