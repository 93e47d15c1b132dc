/*
 * http.h - the HTTP/1.1 protocol's row of the protocol table: the JSON
 * API, /metrics, /healthz and upstream's /json (routes.h).
 */
#ifndef WEIR_DAEMON_HTTP_HTTP_H
#define WEIR_DAEMON_HTTP_HTTP_H

#include "proto.h"

extern const proto http_proto;
/** The admin API (admin/admin.h) on its own listener, over the same
 *  HTTP/1.1 connections. */
extern const proto admin_proto;

#endif /* WEIR_DAEMON_HTTP_HTTP_H */
