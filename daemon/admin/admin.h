/*
 * admin.h - the admin API (/admin/v1/...), served on its own listener
 * (--admin) by a worker of its own, never beside the decision routes:
 * every request carries a bearer token (tokens.h), and what it does may
 * wait on the quota database without holding up a decision.
 */
#ifndef WEIR_DAEMON_ADMIN_ADMIN_H
#define WEIR_DAEMON_ADMIN_ADMIN_H

#include "http/answer.h"
#include "http1/codec.h"

struct admin_quotas;

/** Answer an admin request (before it returns, but usage: when the
 *  store answers); @q is the admin worker's quota state (quotas.h). */
void admin_handle(struct admin_quotas *q, http_answer *a, const weir_http1_request *req);

/** Whether @addr (HOST:PORT as given to --admin) is a loopback address:
 *  127.0.0.0/8, [::1] or localhost. */
bool admin_addr_is_loopback(const char *addr);

#endif /* WEIR_DAEMON_ADMIN_ADMIN_H */
