/*
 * log.h - the daemon's log: one line per event on stderr, either
 * key=value text or one JSON object, each with a UTC timestamp, the level
 * and the event name. Thread-safe (each line is one write).
 */
#ifndef WEIR_DAEMON_LOG_H
#define WEIR_DAEMON_LOG_H

#include <stdbool.h>

#include "weir/context.h"

void dlog_setup(weir_log_level level, bool json);
bool dlog_enabled(weir_log_level level);

/** Log @event with NULL-terminated key, value string pairs:
 *  dlog(WEIR_LOG_INFO, "listening", "http", url, NULL). */
void dlog(weir_log_level level, const char *event, ...);

/** The library's log hook: @msg is "event=NAME key=value ...". */
void dlog_lib(void *ud, weir_log_level level, const char *msg);

#endif /* WEIR_DAEMON_LOG_H */
