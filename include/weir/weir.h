/*
 * weir/weir.h - libweir, the whole public contract in one include.
 *
 *   weir/status.h   status codes and weir_strerror()
 *   weir/context.h  per-context allocator, clock and log hook
 *   weir/algo.h     the algorithms as pure step functions
 *   weir/store.h    the asynchronous store interface and the memory store
 *   weir/redis.h    the Redis store
 *   weir/rules.h    rule files (envoyproxy/ratelimit YAML + weir's extensions)
 *   weir/engine.h   the decision engine: requests matched against rules
 *   weir/units.h    the grammar of durations and sizes
 *   weir/calendar.h time zones and calendar periods (day, month, year)
 *   weir/topk.h     the heaviest keys of a stream in fixed memory (Space-Saving)
 *   weir/adaptive.h a concurrency limit found from latency (AIMD, Vegas, gradient)
 *   weir/cms.h      a limiter for unbounded key sets: counts in a count-min sketch
 *
 * docs/LIBRARY.md walks through a first program.
 */
#ifndef WEIR_WEIR_H
#define WEIR_WEIR_H

#include "weir/adaptive.h"
#include "weir/algo.h"
#include "weir/calendar.h"
#include "weir/cms.h"
#include "weir/context.h"
#include "weir/engine.h"
#include "weir/export.h"
#include "weir/redis.h"
#include "weir/rules.h"
#include "weir/status.h"
#include "weir/store.h"
#include "weir/topk.h"
#include "weir/units.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The library's version string, e.g. "0.1.0". */
WEIR_API const char *weir_version(void);

#ifdef __cplusplus
}
#endif

#endif /* WEIR_WEIR_H */
