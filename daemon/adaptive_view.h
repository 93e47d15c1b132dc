/*
 * adaptive_view.h - the `adaptive:` limits in force as an operator reads
 * them: their controllers' limits and numbers in /metrics, and the same
 * with each limit's recent history in GET /admin/v1/stats (the
 * dashboard's "Adaptive limits" panel).
 */
#ifndef WEIR_DAEMON_ADAPTIVE_VIEW_H
#define WEIR_DAEMON_ADAPTIVE_VIEW_H

#include "common/buf.h"
#include "weir/engine.h"

/** Appends the weir_adaptive_* series of @e's rules in force to @b. */
void adaptive_view_metrics(weir_engine *e, weir_buf *b);

/** Appends `,"adaptive":[...]`: one object per adaptive limit (domain,
 *  rule, controller, limit, min, max, samples, dropped, windows, the
 *  no-load and last window's RTT in ms, probing, and the history as
 *  [[time_ms, limit], ...], oldest first). */
void adaptive_view_json(weir_engine *e, weir_buf *b);

#endif /* WEIR_DAEMON_ADAPTIVE_VIEW_H */
