/*
 * weir/status.h - the status codes every libweir call returns.
 *
 * One X-macro list generates both the enum and the strings, so the two can
 * never drift apart. Zero is success; errors are negative and their numbers
 * never change once released. A rate-limit denial is NOT an error: it is a
 * WEIR_OK return with `allowed == false` in the result.
 */
#ifndef WEIR_STATUS_H
#define WEIR_STATUS_H

#include "weir/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, number, message) */
#define WEIR_STATUS_MAP(X)                                    \
    X(OK, 0, "success")                                       \
    X(EINVAL, -1, "invalid argument")                         \
    X(ENOMEM, -2, "out of memory")                            \
    X(ERANGE, -3, "value out of the supported range")         \
    X(ENOLEASE, -4, "no such lease")                          \
    X(ETOOBIG, -5, "entry does not fit under the memory cap") \
    X(EUNAVAIL, -6, "store unavailable")                      \
    X(ETIMEDOUT, -7, "operation timed out")                   \
    X(ECLOSED, -8, "handle is closed")                        \
    X(EALGO, -9, "operation not supported by this algorithm") \
    X(EPARSE, -10, "malformed input")                         \
    X(EIO, -11, "input/output error")

typedef enum weir_status {
#define WEIR_STATUS_ENUM_(name, num, msg) WEIR_##name = (num),
    WEIR_STATUS_MAP(WEIR_STATUS_ENUM_)
#undef WEIR_STATUS_ENUM_
} weir_status;

/**
 * weir_strerror() - a human-readable message for a status.
 *
 * Returns a static string that is never NULL; an unknown number gives
 * "unknown status". Thread-safe.
 */
WEIR_API const char *weir_strerror(weir_status status);

/**
 * weir_status_name() - the symbolic name of a status, e.g. "WEIR_EINVAL".
 *
 * Returns a static string that is never NULL ("WEIR_UNKNOWN" for a number
 * not in the list). Thread-safe.
 */
WEIR_API const char *weir_status_name(weir_status status);

#ifdef __cplusplus
}
#endif

#endif /* WEIR_STATUS_H */
