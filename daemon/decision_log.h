/*
 * decision_log.h - what the log says of decisions, whatever protocol asked:
 * a sample of the decisions a store failure made (warn, one line a second
 * a worker), every unknown domain (info, once per domain a minute), and at
 * --log-level debug one line per decision with its explanation (at most
 * DECISION_LOG_DEBUG_PER_S lines a second a worker, then one line saying
 * how many were left out), so no log level can take the service down.
 */
#ifndef WEIR_DAEMON_DECISION_LOG_H
#define WEIR_DAEMON_DECISION_LOG_H

#include <stddef.h>

#include "worker.h"

#define DECISION_LOG_DEBUG_PER_S 50u
/* Unknown-domain lines a minute, all domains together; past it they are
 * counted and the next line says how many went unlogged. */
#define DECISION_LOG_UNKNOWN_PER_MIN 60u

/** Log what the decision of @req on worker @w calls for; inside the
 *  engine's callback, where the statuses are valid. */
void decision_log(worker *w, const weir_request *req, weir_code overall,
                  const weir_descriptor_status *st, size_t n);

#endif /* WEIR_DAEMON_DECISION_LOG_H */
