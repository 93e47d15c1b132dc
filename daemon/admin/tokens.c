/*
 * tokens.c - the admin API's bearer tokens (tokens.h).
 */
#include "tokens.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static bool name_byte(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '-';
}

static bool blank(char c)
{
    return c == ' ' || c == '\t';
}

/* Reads one "NAME TOKEN" line into @t. */
static bool parse_line(const char *s, size_t n, admin_token *t, char *why, size_t cap, size_t line)
{
    size_t i = 0;
    while (i < n && name_byte(s[i]))
        i++;
    if (i == 0 || i > ADMIN_TOKEN_NAME_BYTES || i == n || !blank(s[i])) {
        snprintf(why, cap, "line %zu: expected 'NAME TOKEN' (NAME: 1 to %u of A-Z a-z 0-9 _ . -)",
                 line, ADMIN_TOKEN_NAME_BYTES);
        return false;
    }
    memcpy(t->name, s, i);
    t->name[i] = '\0';
    while (i < n && blank(s[i]))
        i++;
    size_t start = i;
    while (i < n && s[i] > ' ' && s[i] < 0x7f)
        i++;
    size_t len = i - start;
    while (i < n && blank(s[i]))
        i++;
    if (i != n || len < ADMIN_TOKEN_MIN_BYTES || len > ADMIN_TOKEN_MAX_BYTES) {
        snprintf(why, cap, "line %zu: a token is %u to %u printable bytes without blanks", line,
                 ADMIN_TOKEN_MIN_BYTES, ADMIN_TOKEN_MAX_BYTES);
        return false;
    }
    memset(t->token, 0, sizeof(t->token));
    memcpy(t->token, s + start, len);
    t->len = len;
    return true;
}

bool admin_tokens_parse(const char *text, size_t len, admin_tokens *out, char *why, size_t cap)
{
    memset(out, 0, sizeof(*out));
    size_t line = 0;
    for (size_t at = 0; at < len;) {
        const char *nl = memchr(text + at, '\n', len - at);
        size_t end = nl ? (size_t)(nl - text) : len;
        size_t n = end - at;
        const char *s = text + at;
        at = end + 1;
        line++;
        if (n && s[n - 1] == '\r')
            n--;
        while (n && blank(*s)) {
            s++;
            n--;
        }
        if (n == 0 || s[0] == '#')
            continue;
        if (out->n == ADMIN_MAX_TOKENS) {
            snprintf(why, cap, "line %zu: more than %u tokens", line, ADMIN_MAX_TOKENS);
            return false;
        }
        admin_token *t = &out->t[out->n];
        if (!parse_line(s, n, t, why, cap, line))
            return false;
        for (size_t i = 0; i < out->n; i++) {
            if (strcmp(out->t[i].name, t->name) == 0 ||
                (out->t[i].len == t->len && memcmp(out->t[i].token, t->token, t->len) == 0)) {
                snprintf(why, cap, "line %zu: a name or a token given twice", line);
                return false;
            }
        }
        out->n++;
    }
    if (out->n == 0) {
        snprintf(why, cap, "no token in the file");
        return false;
    }
    return true;
}

bool admin_tokens_load(const char *path, admin_tokens *out, char *why, size_t cap)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(why, cap, "cannot read %s", path);
        return false;
    }
    static char text[ADMIN_TOKEN_FILE_BYTES + 1];
    size_t len = fread(text, 1, sizeof(text), f);
    bool err = ferror(f) != 0;
    fclose(f);
    if (err || len > ADMIN_TOKEN_FILE_BYTES) {
        snprintf(why, cap, "%s: unreadable or larger than %u bytes", path, ADMIN_TOKEN_FILE_BYTES);
        return false;
    }
    char reason[160];
    if (!admin_tokens_parse(text, len, out, reason, sizeof(reason))) {
        snprintf(why, cap, "%s: %s", path, reason);
        return false;
    }
    return true;
}

const char *admin_tokens_check(const admin_tokens *tokens, const char *header, size_t len)
{
    static const char bearer[] = "Bearer ";
    size_t bl = sizeof(bearer) - 1;
    if (!tokens || !header || len <= bl || strncasecmp(header, bearer, bl) != 0)
        return NULL;
    const unsigned char *given = (const unsigned char *)header + bl;
    size_t glen = len - bl;
    if (glen > ADMIN_TOKEN_MAX_BYTES)
        return NULL;
    unsigned char padded[ADMIN_TOKEN_MAX_BYTES] = {0};
    memcpy(padded, given, glen);
    const char *found = NULL;
    for (size_t i = 0; i < tokens->n; i++) {
        const admin_token *t = &tokens->t[i];
        unsigned diff = (unsigned)(t->len ^ glen);
        for (size_t k = 0; k < ADMIN_TOKEN_MAX_BYTES; k++)
            diff |= (unsigned)(t->token[k] ^ padded[k]);
        /* no branch on the bytes: a mask picks the name */
        uintptr_t mask = (uintptr_t)0 - (uintptr_t)(diff == 0);
        found = (const char *)(((uintptr_t)found & ~mask) | ((uintptr_t)t->name & mask));
    }
    return found;
}
