/*
 * readfile.h - a whole input file into memory, with a cap, for the `weir`
 * subcommands that read one (sim traces, bench mixes).
 */
#ifndef WEIR_TOOLS_READFILE_H
#define WEIR_TOOLS_READFILE_H

#include <stdbool.h>
#include <stddef.h>

/**
 * weir_cli_read_file() - read all of @path, at most @max bytes, into a
 * malloc'd buffer (*@out, *@out_len; the caller frees it). On failure
 * prints "@who@path: reason" to stderr and returns false.
 */
bool weir_cli_read_file(const char *who, const char *path, size_t max, char **out, size_t *out_len);

#endif /* WEIR_TOOLS_READFILE_H */
