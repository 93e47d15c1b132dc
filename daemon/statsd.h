/*
 * statsd.h - the statsd sink: upstream's counters sent by UDP to a statsd
 * server every interval, under upstream's stat names, for dashboards
 * built on envoyproxy/ratelimit's statsd output (docs/OPERATIONS.md).
 */
#ifndef WEIR_DAEMON_STATSD_H
#define WEIR_DAEMON_STATSD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "metrics.h"

/** Largest datagram sent: lines are packed up to this (a line longer
 *  than it goes alone). Fits an Ethernet frame with IPv6 and UDP. */
#define STATSD_DATAGRAM_BYTES 1432u

typedef struct statsd statsd;

/**
 * statsd_start() - start sending @m's counters to @addr ("host:port" or
 * "[v6]:port") every @interval_ms (> 0) from a thread of the sink's own.
 *
 * The name is resolved when the first send is due, and again at each
 * interval until it resolves; a datagram that cannot be sent (no
 * listener, no route, a full socket buffer) is dropped, and its counts
 * are not sent again. Returns NULL after writing the reason to @why
 * (@why_len bytes) when @addr is not host:port or the thread cannot start.
 */
statsd *statsd_start(const char *addr, int64_t interval_ms, metrics *m, char *why, size_t why_len);

/** Whether @addr is "host:port" or "[v6]:port" with a port 1..65535. */
bool statsd_check(const char *addr);

/** Send what is left, then stop the thread and free the sink. NULL is a
 *  no-op. Call after every worker has stopped counting. */
void statsd_stop(statsd *s);

#endif /* WEIR_DAEMON_STATSD_H */
