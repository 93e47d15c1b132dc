/*
 * quotas.h - the admin API's quota routes (quotas.c): tenants' records,
 * their pages and the audit log, on the admin worker.
 */
#ifndef WEIR_DAEMON_ADMIN_QUOTAS_H
#define WEIR_DAEMON_ADMIN_QUOTAS_H

#include <stdbool.h>
#include <stddef.h>

#include "http/answer.h"
#include "http1/codec.h"

#define ADMIN_QUOTAS_PREFIX "/admin/v1/quotas/"

/** The admin worker's quota state: its database handle and scratch. */
typedef struct admin_quotas admin_quotas;
admin_quotas *admin_quotas_new(void);
void admin_quotas_free(admin_quotas *q);
/** The admin worker's JSON parser, for a route that reads a body. */
struct weir_json;
struct weir_json *admin_quotas_parser(admin_quotas *q);

/* The routes; @who is the token's name. Each answers before it returns. */
void admin_quota_get(admin_quotas *q, http_answer *a, const weir_http1_request *req,
                     const char *who);
void admin_quota_put(admin_quotas *q, http_answer *a, const weir_http1_request *req,
                     const char *who);
void admin_quota_delete(admin_quotas *q, http_answer *a, const weir_http1_request *req,
                        const char *who);
void admin_quota_list(admin_quotas *q, http_answer *a, const weir_http1_request *req,
                      const char *who);
void admin_audit_list(admin_quotas *q, http_answer *a, const weir_http1_request *req,
                      const char *who);

/** The key after @prefix bytes of @path, percent-decoded into @key
 *  (QUOTA_MAX_KEY_BYTES + 1); false when answered (missing, too long, a
 *  bad escape, a NUL byte). */
bool admin_path_key(http_answer *a, const weir_http1_str *path, size_t prefix, char *key,
                    size_t *len);

/** Query parameter @name of @q, percent-decoded into @out (@cap bytes,
 *  NUL-ended): 0 absent, 1 found (*@len bytes), -1 bad (too long, a bad
 *  escape or a NUL). */
int admin_query_param(const weir_http1_str *q, const char *name, char *out, size_t cap,
                      size_t *len);

/** Query parameter @name of @q as a count, 1 .. @max (@dflt when
 *  absent); 0 when answered 400 ("NAME is 1 to MAX"). */
size_t admin_query_count(http_answer *a, const weir_http1_str *q, const char *name, size_t dflt,
                         size_t max);

/** Whether every parameter of @q is one of @names (@n of them); else
 *  answered 400, naming the first unknown one and what the route takes. */
bool admin_params_known(http_answer *a, const weir_http1_str *q, const char *const *names,
                        size_t n);

/** @key's record in the quota database, or NULL (none, no database, or
 *  the database unavailable: nothing answered). Valid until the next
 *  call on @q. */
struct quota_tenant;
const struct quota_tenant *admin_quota_record(admin_quotas *q, http_answer *a, const char *key,
                                              size_t len);

#endif /* WEIR_DAEMON_ADMIN_QUOTAS_H */
