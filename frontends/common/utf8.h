/*
 * utf8.h - well-formed UTF-8 (RFC 3629), as JSON, protobuf strings and
 * YAML want it: no overlong forms, no surrogates, nothing past U+10FFFF.
 * One reader for every codec that checks or re-encodes text.
 */
#ifndef WEIR_FRONTENDS_COMMON_UTF8_H
#define WEIR_FRONTENDS_COMMON_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/** The sequence at @s (@n bytes there, n >= 1): its length, 1 to 4, with
 *  its code point in *@cp (may be NULL); 0 when it is not well-formed (or
 *  cut short by @n). Reads no byte past the first that is not part of it,
 *  so a NUL-terminated string may give n as 4. */
size_t weir_utf8_next(const unsigned char *s, size_t n, uint32_t *cp);

/** Whether the @n bytes at @s are well-formed UTF-8 (NULs included). */
bool weir_utf8_valid(const char *s, size_t n);

#endif /* WEIR_FRONTENDS_COMMON_UTF8_H */
