/*
 * lease_release.h - giving back every lease of a token (lease_token.h),
 * one call per lease, and answering once they are all done: what HTTP's
 * /v1/release and gRPC's Leases/Release share.
 */
#ifndef WEIR_DAEMON_LEASE_RELEASE_H
#define WEIR_DAEMON_LEASE_RELEASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "conn.h"
#include "lease_token.h"

typedef struct lease_counts {
    size_t leases;   /* the token names */
    size_t released; /* were held and are given back now */
    size_t failed;   /* the store failed to give back, or past the deadline */
} lease_counts;

/** Bytes of the caller's own a release keeps for its answer. */
#define LEASE_RELEASE_ARG_BYTES 64u

/** Runs once when every lease is done, unless @c closed meanwhile; @arg
 *  is the release's copy of the caller's bytes. @later: after
 *  lease_release_all() returned (the answer must kick the connection). */
typedef void (*lease_release_done)(conn *c, void *arg, const lease_counts *n, bool later);

/**
 * lease_release_all() - gives back the leases of @tok (copied: the caller
 * may free it at once) on @c's worker. @done runs exactly once, before
 * this returns when every release completed inline, else from the loop.
 * False, nothing started and @done not run, when out of memory or
 * @arg_bytes is past LEASE_RELEASE_ARG_BYTES.
 */
bool lease_release_all(conn *c, const lease_token *tok, uint64_t t0_ns, lease_release_done done,
                       const void *arg, size_t arg_bytes);

#endif /* WEIR_DAEMON_LEASE_RELEASE_H */
