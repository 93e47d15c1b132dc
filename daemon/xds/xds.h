/*
 * xds.h - weir serve's rules from an xDS management server
 * (--config-type grpc-xds-sotw): one state-of-the-world subscription to
 * envoyproxy/ratelimit's RateLimitConfig resources over the aggregated
 * discovery service, on the main thread's loop. Every response is loaded
 * as a reload would load files: good rules are put in force and ACKed,
 * bad ones NACKed with the loader's errors (the rules in force stay). A
 * stream or connection that ends is opened again after a backoff; the
 * rules in force stay meanwhile. No decision ever waits on it.
 */
#ifndef WEIR_DAEMON_XDS_H
#define WEIR_DAEMON_XDS_H

#include <stddef.h>
#include <uv.h>

#include "server.h"

typedef struct xds_client xds_client;

/** Start the subscription on @loop (the main loop), with @s's settings.
 *  NULL, after writing the reason to @err (@err_cap bytes), when a
 *  setting cannot be used or out of memory. */
xds_client *xds_start(server *s, uv_loop_t *loop, char *err, size_t err_cap);

/** Close the connection and the timers; the loop then ends when nothing
 *  else runs on it. */
void xds_stop(xds_client *x);

/** Free @x once the loop has ended. NULL is a no-op. */
void xds_free(xds_client *x);

#endif /* WEIR_DAEMON_XDS_H */
