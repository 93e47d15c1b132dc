/*
 * shed.h - request priorities, and weir shedding its own load by them
 * (docs/OPERATIONS.md, "Priorities and load shedding").
 *
 * A request's priority is one of --priorities (most important first:
 * critical, normal, sheddable, test by default), from the Weir-Priority
 * header of an HTTP request, else from a descriptor of the request whose
 * one entry has the key --priority-key ("priority" by default), else
 * --default-priority (normal).
 *
 * Each worker measures how far its event loop runs behind: a timer due
 * every SHED_TICK_MS fires late by the time the loop spent on other work
 * past it; the lag is a moving average of that. --shed-lag gives, per
 * priority, the lag past which weir answers that priority's requests
 * itself, at once, with "overloaded" (HTTP 503 with Retry-After; gRPC
 * UNAVAILABLE; RESP -BUSY) instead of deciding them: an overloaded weir
 * drops its least important checks first, so the rest keep their latency
 * instead of all of them timing out. A priority without a lag is never
 * shed (critical, by default).
 *
 * The fleet's shedding is the rules': a limit's `shed:` keeps a share of
 * it free for more important priorities (weir_rule_limit.shed_bp). The
 * request's priority goes to the engine as its rank (weir_request.
 * priority, set by each protocol from shed_priority_of()), and a request
 * denied only by shares is answered "overloaded" as above, not "over
 * limit" (shed_by_share()).
 */
#ifndef WEIR_DAEMON_SHED_H
#define WEIR_DAEMON_SHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "weir/engine.h"

#define SHED_MAX_PRIORITIES 8u
#define SHED_NAME_BYTES 32u
/** The lag timer's period. */
#define SHED_TICK_MS 10u

typedef struct shed_config {
    unsigned n; /* priorities, most important first */
    char names[SHED_MAX_PRIORITIES][SHED_NAME_BYTES];
    unsigned dflt;                       /* a request's without one */
    char key[64];                        /* the descriptor key naming it; "" = none */
    int64_t lag_us[SHED_MAX_PRIORITIES]; /* shed past this lag; 0 = never */
} shed_config;

/** Reads --priorities, --default-priority, --priority-key and --shed-lag
 *  into @c. False, with why in @err, for a bad list (no names, a name
 *  twice or not [a-z0-9_-]{1,31}, more than SHED_MAX_PRIORITIES), an
 *  unknown default, or a --shed-lag entry that is not NAME=DURATION of a
 *  known priority. */
bool shed_configure(shed_config *c, const char *priorities, const char *dflt, const char *key,
                    const char *lag, char *err, size_t cap);

/** The priority named by @p (@n bytes, any case), or -1. */
int shed_priority_named(const shed_config *c, const char *p, size_t n);

/** The priority of @req: @given (a protocol's own, e.g. the Weir-Priority
 *  header's, or -1 when none), else a descriptor naming one, else the
 *  default. A name that is not a priority counts as none. */
unsigned shed_priority_of(const shed_config *c, const weir_request *req, int given);

/** Whether a decision of @req (@overall, @n statuses @st) was denied
 *  only by the shares its priority leaves free: every descriptor over its
 *  limit is so by shares alone (weir_descriptor_status.shed). Then @msg
 *  says so, in the words of every protocol's "overloaded" answer. A
 *  denial by any limit itself stays "over limit". */
bool shed_by_share(const shed_config *c, const weir_request *req, weir_code overall,
                   const weir_descriptor_status *st, size_t n, char *msg, size_t cap);

/** One worker's lag monitor. */
typedef struct shed_monitor {
    uint64_t due_ms; /* when the timer should fire next (uv_now) */
    int64_t lag_us;  /* the moving average */
    int64_t last_us; /* the lag of the last tick alone */
} shed_monitor;

/** Folds a tick that fired at @now_ms into @m (and sets the next due). */
void shed_tick(shed_monitor *m, uint64_t now_ms);

/** Whether a request of priority @prio is shed now. */
static inline bool shed_now(const shed_config *c, const shed_monitor *m, unsigned prio)
{
    return prio < c->n && c->lag_us[prio] > 0 && m->lag_us > c->lag_us[prio];
}

#endif /* WEIR_DAEMON_SHED_H */
