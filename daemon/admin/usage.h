/*
 * usage.h - GET /admin/v1/usage/{key}: a tenant's current use of each of
 * its limits, read without consuming (usage.c).
 */
#ifndef WEIR_DAEMON_ADMIN_USAGE_H
#define WEIR_DAEMON_ADMIN_USAGE_H

#include "http/answer.h"
#include "http1/codec.h"
#include "quotas.h"

#define ADMIN_USAGE_PREFIX "/admin/v1/usage/"

/** Answers now, or when the store's answer comes (a store that
 *  completes later). */
void admin_usage_get(admin_quotas *q, http_answer *a, const weir_http1_request *req,
                     const char *who);

#endif /* WEIR_DAEMON_ADMIN_USAGE_H */
