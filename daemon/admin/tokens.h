/*
 * tokens.h - the admin API's bearer tokens (--admin-token-file): named
 * tokens read once at start, a request's Authorization header checked
 * against all of them in constant time. The name is who made a change in
 * the audit log.
 */
#ifndef WEIR_DAEMON_ADMIN_TOKENS_H
#define WEIR_DAEMON_ADMIN_TOKENS_H

#include <stdbool.h>
#include <stddef.h>

#define ADMIN_MAX_TOKENS 64u
#define ADMIN_TOKEN_NAME_BYTES 64u
#define ADMIN_TOKEN_MIN_BYTES 16u
#define ADMIN_TOKEN_MAX_BYTES 256u
#define ADMIN_TOKEN_FILE_BYTES 65536u

typedef struct admin_token {
    char name[ADMIN_TOKEN_NAME_BYTES + 1];
    unsigned char token[ADMIN_TOKEN_MAX_BYTES]; /* zero-padded */
    size_t len;
} admin_token;

typedef struct admin_tokens {
    admin_token t[ADMIN_MAX_TOKENS];
    size_t n;
} admin_tokens;

/**
 * admin_tokens_parse() - the file's text: one token a line, "NAME TOKEN"
 * (blanks between; NAME 1..64 of [A-Za-z0-9_.-], TOKEN 16..256 printable
 * bytes without a blank), blank lines and lines starting with '#' ignored.
 * Duplicate names or tokens are refused. Returns false with a reason
 * naming the line in @why.
 */
bool admin_tokens_parse(const char *text, size_t len, admin_tokens *out, char *why, size_t cap);

/** admin_tokens_parse() of the file at @path (at most
 *  ADMIN_TOKEN_FILE_BYTES). */
bool admin_tokens_load(const char *path, admin_tokens *out, char *why, size_t cap);

/**
 * admin_tokens_check() - the name of the token an Authorization header
 * value ("Bearer TOKEN") carries, or NULL. Every token is compared, each
 * over its whole buffer, whatever matched: the time taken does not tell
 * how much of a guess was right.
 */
const char *admin_tokens_check(const admin_tokens *tokens, const char *header, size_t len);

#endif /* WEIR_DAEMON_ADMIN_TOKENS_H */
