/*
 * number.h - decimal numbers in command-line values, for the `weir`
 * subcommands (strtoull accepts signs, blanks and other bases; these
 * accept digits only and refuse overflow).
 */
#ifndef WEIR_TOOLS_NUMBER_H
#define WEIR_TOOLS_NUMBER_H

#include <stdbool.h>
#include <stdint.h>

/** Whether @c is an ASCII decimal digit. */
bool weir_cli_is_digit(char c);

/** @s, all digits and at least one, as a number no larger than @max. */
bool weir_cli_parse_u64(const char *s, uint64_t max, uint64_t *out);

#endif /* WEIR_TOOLS_NUMBER_H */
