/*
 * readfile.c - a whole input file into memory, with a cap.
 */
#include "readfile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool weir_cli_read_file(const char *who, const char *path, size_t max, char **out, size_t *out_len)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        fprintf(stderr, "%s%s: %s\n", who, path, strerror(errno));
        return false;
    }
    char *buf = NULL;
    size_t len = 0, cap = 0;
    const char *why = NULL;
    for (;;) {
        if (len == cap) {
            if (cap > max) {
                why = "too large";
                break;
            }
            size_t ncap = cap ? cap * 2 : 65536;
            char *nb = realloc(buf, ncap);
            if (!nb) {
                why = "out of memory";
                break;
            }
            buf = nb;
            cap = ncap;
        }
        size_t got = fread(buf + len, 1, cap - len, fp);
        len += got;
        if (got == 0) {
            if (ferror(fp))
                why = "read error";
            break;
        }
    }
    fclose(fp);
    if (!why && len > max)
        why = "too large";
    if (why) {
        if (strcmp(why, "too large") == 0)
            fprintf(stderr, "%s%s: larger than the cap of %zu MiB\n", who, path, max >> 20);
        else
            fprintf(stderr, "%s%s: %s\n", who, path, why);
        free(buf);
        return false;
    }
    *out = buf;
    *out_len = len;
    return true;
}
