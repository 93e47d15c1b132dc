/*
 * lease_token.h - the token of the leases a decision took, as every
 * protocol hands it out (HTTP's /v1/acquire and its Weir-Lease header,
 * gRPC's weir.leases.v1.Leases/Acquire, RESP's WEIR.ACQUIRE) and takes
 * it back (/v1/release, Leases/Release, WEIR.RELEASE): a token taken on
 * one protocol, or on another instance sharing the store, is given back
 * on any.
 *
 * Text: "1", then per lease ";LIMIT,TIMEOUT_US,LEASE,COUNTER": the
 * concurrency limit, its lease timeout (the rule's window), the lease id
 * and the counter's name in the store in lowercase hex; a lease of an
 * `adaptive:` limit adds ",ID,ACQUIRED_US,IN_FLIGHT" (the limit's id,
 * when it was taken and how many were in flight with it), from which
 * the release feeds the limit's controller the lease's time in flight. Only bytes a URL,
 * a header and a RESP bulk string carry unchanged: digits, a-f, ';' and
 * ','. A token is not a secret (anyone who can reach the listener can
 * spend units too); it is checked for shape only, and a lease it names
 * that is not held is simply not given back.
 */
#ifndef WEIR_DAEMON_LEASE_TOKEN_H
#define WEIR_DAEMON_LEASE_TOKEN_H

#include <stdbool.h>
#include <stddef.h>

#include "common/buf.h"
#include "weir/engine.h"

/** Most leases one token carries: one per limit a decision may test. */
#define LEASE_TOKEN_MAX_LEASES WEIR_ENGINE_MAX_LIMITS
/** Longest token taken back, in bytes. */
#define LEASE_TOKEN_MAX_BYTES 65536u

/** Appends the token of the leases the decision's statuses hold to @b;
 *  returns how many it names (0: the token is "1", nothing to give back). */
size_t lease_token_put(weir_buf *b, const weir_descriptor_status *st, size_t n, int64_t now_us);

/** A token's leases, read back. */
typedef struct lease_token {
    size_t n;
    weir_lease leases[LEASE_TOKEN_MAX_LEASES];
    /* the counters' names, decoded: each lease's key points in here */
    unsigned char keys[LEASE_TOKEN_MAX_BYTES / 2];
} lease_token;

/** A token read on this thread, for the caller to use until its next
 *  call on the thread: a token is read and its leases' calls made (which
 *  copy what they keep) in one go, so a worker needs only one. */
lease_token *lease_token_scratch(void);

/** Reads token @p (@len bytes) into @out. False, @out's count 0, when it
 *  is not a token as lease_token_put() writes them: empty, too long,
 *  another version, a number out of range or with a leading zero, a
 *  name not in lowercase hex or longer than WEIR_MAX_KEY_BYTES, more
 *  than LEASE_TOKEN_MAX_LEASES leases. */
bool lease_token_parse(const char *p, size_t len, lease_token *out);

/** Marks every lease of @t as the lease of work that failed from
 *  overload (weir_lease.dropped): an adaptive limit's controller backs
 *  off on it. */
void lease_token_set_dropped(lease_token *t);

#endif /* WEIR_DAEMON_LEASE_TOKEN_H */
