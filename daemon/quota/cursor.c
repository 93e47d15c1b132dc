/*
 * cursor.c - the cursors of the quota admin API's pages: the last key of
 * a page of tenants in base64url (RFC 4648, 5) without padding, the last
 * id of a page of the audit log in decimal. Decoding accepts exactly what
 * encoding writes, one text per key, so a cursor cannot be bent into a
 * second spelling of the same page.
 *
 * Base64 is written here rather than taken from a library: the daemon's
 * dependencies have none that is url-safe and unpadded, and it is twenty
 * lines.
 */
#include <stdio.h>
#include <string.h>

#include "api/decode_internal.h"
#include "json.h"

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/* Characters of the cursor of a @len-byte key. */
static size_t encoded_len(size_t len)
{
    return (len * 4 + 2) / 3;
}

bool quota_json_cursor_encode(const char *key, size_t len, char *out, size_t cap)
{
    if (len == 0 || len > QUOTA_MAX_KEY_BYTES || cap <= encoded_len(len))
        return false;
    const unsigned char *k = (const unsigned char *)key;
    size_t o = 0;
    for (size_t i = 0; i < len; i += 3) {
        size_t left = len - i;
        uint32_t v = (uint32_t)k[i] << 16;
        if (left > 1)
            v |= (uint32_t)k[i + 1] << 8;
        if (left > 2)
            v |= k[i + 2];
        size_t chars = left >= 3 ? 4 : left + 1;
        for (size_t c = 0; c < chars; c++)
            out[o++] = alphabet[(v >> (18 - 6 * c)) & 63];
    }
    out[o] = '\0';
    return true;
}

/* A character's six bits, -1 outside the alphabet. */
static int sextet(char ch)
{
    if (ch >= 'A' && ch <= 'Z')
        return ch - 'A';
    if (ch >= 'a' && ch <= 'z')
        return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9')
        return ch - '0' + 52;
    if (ch == '-')
        return 62;
    if (ch == '_')
        return 63;
    return -1;
}

bool quota_json_cursor_decode(const char *s, size_t n, char *key, size_t *len)
{
    /* a lone last character would carry 6 bits: less than a byte */
    if (n == 0 || n % 4 == 1 || n > encoded_len(QUOTA_MAX_KEY_BYTES))
        return false;
    char bytes[QUOTA_MAX_KEY_BYTES];
    size_t o = 0;
    uint32_t acc = 0;
    unsigned bits = 0;
    for (size_t i = 0; i < n; i++) {
        int x = sextet(s[i]);
        if (x < 0)
            return false;
        acc = acc << 6 | (uint32_t)x;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            bytes[o++] = (char)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    if (acc)
        return false; /* bits past the key's last byte: not what encode writes */
    memcpy(key, bytes, o);
    key[o] = '\0';
    *len = o;
    return true;
}

size_t quota_json_audit_cursor_encode(int64_t id, char out[QUOTA_JSON_AUDIT_CURSOR_MAX])
{
    int n = snprintf(out, QUOTA_JSON_AUDIT_CURSOR_MAX, "%lld", (long long)id);
    return n > 0 ? (size_t)n : 0;
}

bool quota_json_audit_cursor_decode(const char *s, size_t n, int64_t *id)
{
    uint64_t v;
    if (n == 0 || s[0] == '0' || !weir_api_dec_decimal(s, n, INT64_MAX, &v))
        return false;
    *id = (int64_t)v;
    return true;
}
