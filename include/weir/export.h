/*
 * weir/export.h - symbol visibility for the public API.
 *
 * The library is built with hidden visibility; only declarations marked
 * WEIR_API are exported from libweir.so.
 */
#ifndef WEIR_EXPORT_H
#define WEIR_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define WEIR_API __attribute__((visibility("default")))
#else
#define WEIR_API
#endif

#define WEIR_VERSION_MAJOR 0
#define WEIR_VERSION_MINOR 1
#define WEIR_VERSION_PATCH 0
#define WEIR_VERSION_STRING "0.1.0"

#endif /* WEIR_EXPORT_H */
