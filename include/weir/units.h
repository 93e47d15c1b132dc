/*
 * weir/units.h - the one grammar of durations and of sizes that every part
 * of weir reads: rule files (`window:`), `weir serve` flags, `weir sim`
 * and `weir bench`. An embedder reading its own settings can use it too.
 *
 * Durations: "0", or one or more <number><unit> parts ("1h30m"), or one
 * bare number, which is seconds ("30" = "30s"). A number is digits with
 * an optional fraction ("1.5s"); units are us, ms, s, m, h, d (24 h), w
 * (7 d). Exact to the microsecond: a fraction that does not come to whole
 * microseconds is refused, never rounded. At most WEIR_MAX_WINDOW_US (100
 * years).
 *
 * Sizes: a number with an optional unit, any case: none or B (bytes),
 * K / KB (1000), KiB (1024), M / MB, MiB, G / GB, GiB, T / TB, TiB. A
 * fraction must come to whole bytes ("1.5KiB" is 1536).
 */
#ifndef WEIR_UNITS_H
#define WEIR_UNITS_H

#include <stdint.h>

#include "weir/export.h"
#include "weir/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Valid durations, for error messages. */
#define WEIR_DURATION_EXAMPLES "500ms, 30s, 1.5s, 5m, 1h30m, 2d"
/** Valid sizes, for error messages. */
#define WEIR_SIZE_EXAMPLES "4096, 64KiB, 512MiB, 1.5GB"

/**
 * weir_duration_parse() - @s (NUL-terminated) as a duration, in
 * microseconds. Since 0.2.
 *
 * Returns WEIR_OK (*@out_us written); WEIR_EPARSE when @s is not a
 * duration (empty, a sign, a space, an unknown unit, a fraction finer
 * than a microsecond); WEIR_ERANGE past 100 years; WEIR_EINVAL for NULL.
 */
WEIR_API weir_status weir_duration_parse(const char *s, int64_t *out_us);

/**
 * weir_size_parse() - @s (NUL-terminated) as a number of bytes. Since 0.2.
 *
 * Returns WEIR_OK (*@out written); WEIR_EPARSE when @s is not a size;
 * WEIR_ERANGE past UINT64_MAX; WEIR_EINVAL for NULL.
 */
WEIR_API weir_status weir_size_parse(const char *s, uint64_t *out);

#ifdef __cplusplus
}
#endif

#endif /* WEIR_UNITS_H */
