/*
 * file.h - reading a whole file into memory of the context's: what the
 * rule loader and the time zone loader share.
 */
#ifndef WEIR_CORE_FILE_H
#define WEIR_CORE_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "weir/context.h"
#include "weir/status.h"

/* Why a file could not be read, for a message: "cannot open", "cannot
 * stat", "not a regular file", "cannot read"; and errno (0 for "not a
 * regular file"). */
typedef struct weir_file_error {
    const char *what;
    int err;
} weir_file_error;

/*
 * weir__read_file() - the regular file @path, up to @max + 1 bytes (one
 * byte past the cap, so a file that grew after fstat() is still seen to be
 * too large: *len > @max says so).
 *
 * Returns WEIR_OK (*buf from the context's allocator, free it with
 * weir__free(); *len); WEIR_EIO with *why filled; WEIR_ENOMEM.
 */
weir_status weir__read_file(const weir_ctx *ctx, const char *path, size_t max, uint8_t **buf,
                            size_t *len, weir_file_error *why);

#endif /* WEIR_CORE_FILE_H */
