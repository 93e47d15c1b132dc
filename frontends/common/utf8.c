/*
 * utf8.c - well-formed UTF-8 (utf8.h).
 */
#include "common/utf8.h"

size_t weir_utf8_next(const unsigned char *s, size_t n, uint32_t *cp)
{
    static const uint32_t min[] = {0, 0, 0x80, 0x800, 0x10000};
    unsigned char c = s[0];
    size_t len = c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 0;
    if (!len || c > 0xf4)
        return 0;
    uint32_t v = len == 1 ? c : c & (0x7fu >> len);
    for (size_t i = 1; i < len; i++) {
        if (i >= n || (s[i] & 0xc0) != 0x80)
            return 0;
        v = v << 6 | (s[i] & 0x3fu);
    }
    if (v < min[len] || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
        return 0;
    if (cp)
        *cp = v;
    return len;
}

bool weir_utf8_valid(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        if (p[i] < 0x80) {
            i++;
            continue;
        }
        size_t k = weir_utf8_next(p + i, n - i, NULL);
        if (!k)
            return false;
        i += k;
    }
    return true;
}
