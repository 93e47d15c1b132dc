/*
 * file.c - reading a whole file into memory of the context's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/context.h"
#include "core/file.h"

static weir_status fail(int fd, const char *what, int err, weir_file_error *why)
{
    why->what = what;
    why->err = err;
    if (fd >= 0)
        close(fd);
    return WEIR_EIO;
}

weir_status weir__read_file(const weir_ctx *ctx, const char *path, size_t max, uint8_t **buf,
                            size_t *len, weir_file_error *why)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return fail(fd, "cannot open", errno, why);
    struct stat st;
    if (fstat(fd, &st) != 0)
        return fail(fd, "cannot stat", errno, why);
    if (!S_ISREG(st.st_mode))
        return fail(fd, "not a regular file", 0, why);
    size_t cap = max + 1;
    size_t want = st.st_size >= 0 && (uint64_t)st.st_size < cap ? (size_t)st.st_size + 1 : cap;
    uint8_t *b = weir__malloc(ctx, want);
    if (!b) {
        close(fd);
        return WEIR_ENOMEM;
    }
    size_t got = 0;
    while (got < want) {
        ssize_t n = read(fd, b + got, want - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int err = errno;
            weir__free(ctx, b);
            return fail(fd, "cannot read", err, why);
        }
        if (n == 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    *buf = b;
    *len = got;
    return WEIR_OK;
}
