/*
 * number.c - decimal numbers in command-line values.
 */
#include "number.h"

bool weir_cli_is_digit(char c)
{
    return c >= '0' && c <= '9';
}

bool weir_cli_parse_u64(const char *s, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;
    if (!*s)
        return false;
    for (; *s; s++) {
        if (!weir_cli_is_digit(*s))
            return false;
        unsigned d = (unsigned)(*s - '0');
        if (v > (max - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}
