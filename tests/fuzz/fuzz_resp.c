/*
 * fuzz_resp.c - fuzzes the RESP command parser the way a connection drives
 * it: bytes arrive in pieces, unconsumed bytes are given again with what
 * arrives after them (copied to a new allocation each time, so a pointer
 * kept into an earlier one is a use after free), and every pipelined
 * command is taken out in turn until an error or the end.
 *
 * The first input byte chooses the piece sizes; the rest is the byte
 * stream. Each input runs twice, all at once and in pieces, and both runs
 * must hand out the same commands and end the same way. Every command must
 * be within the caps, with its views inside the bytes given or (quoted
 * inline words) inside one region no larger than the parser's word buffer,
 * and must come back the same when written as a RESP array and parsed
 * again. An error must be one of Redis's messages and stay until reset.
 * A broken invariant aborts, so the fuzzer reports it like a crash.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "resp/resp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_ARGS 8u
#define MAX_BULK 32u
#define MAX_INLINE 64u

static const weir_resp_limits lim = {
    .max_args = MAX_ARGS, .max_bulk = MAX_BULK, .max_inline = MAX_INLINE};

/* What one run produced, to compare the two runs. */
typedef struct digest {
    size_t n_cmds;
    uint64_t hash;
    bool failed;
    char error[64];
    size_t left; /* bytes not consumed at the end */
} digest;

static void check(int ok)
{
    if (!ok)
        abort();
}

/* FNV-1a over @n bytes, continuing @h. */
static uint64_t mix(uint64_t h, const void *p, size_t n)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 1099511628211u;
    }
    return h;
}

static const char *const known_errors[] = {
    "Protocol error: too big mbulk count string", "Protocol error: invalid multibulk length",
    "Protocol error: too big bulk count string",  "Protocol error: invalid bulk length",
    "Protocol error: too big inline request",     "Protocol error: unbalanced quotes in request",
};

static void check_error(const char *e)
{
    check(e != NULL);
    for (size_t i = 0; i < sizeof(known_errors) / sizeof(known_errors[0]); i++) {
        if (strcmp(e, known_errors[i]) == 0)
            return;
    }
    static const char expected[] = "Protocol error: expected '$', got '";
    size_t n = strlen(e), k = sizeof(expected) - 1;
    check(n == k + 2 && memcmp(e, expected, k) == 0 && e[k + 1] == '\'');
    check(e[k] != '$' && e[k] != '\r' && e[k] != '\n');
}

/* The view lies within the @n bytes at @buf. */
static bool inside(weir_resp_arg a, const char *buf, size_t n)
{
    uintptr_t p = (uintptr_t)a.p, lo = (uintptr_t)buf;
    return p >= lo && p <= lo + n && a.n <= lo + n - p;
}

/* Written as a RESP array, the command parses back to itself. */
static void check_round_trip(const weir_resp_command *c, weir_resp_parser *again)
{
    static char out[MAX_ARGS * (MAX_BULK + 16) + 16];
    size_t n = (size_t)snprintf(out, sizeof(out), "*%zu\r\n", c->argc);
    for (size_t i = 0; i < c->argc; i++) {
        n += (size_t)snprintf(out + n, sizeof(out) - n, "$%zu\r\n", c->argv[i].n);
        memcpy(out + n, c->argv[i].p, c->argv[i].n);
        n += c->argv[i].n;
        memcpy(out + n, "\r\n", 2);
        n += 2;
    }
    weir_resp_parser_reset(again);
    weir_resp_command back;
    size_t used = 0;
    check(weir_resp_parse(again, out, n, &used, &back, NULL) == WEIR_RESP_COMMAND);
    check(used == n && !back.inline_form && back.argc == c->argc);
    for (size_t i = 0; i < c->argc; i++) {
        check(back.argv[i].n == c->argv[i].n);
        check(memcmp(back.argv[i].p, c->argv[i].p, c->argv[i].n) == 0);
    }
}

static uint64_t check_command(const weir_resp_command *c, const char *buf, size_t n,
                              weir_resp_parser *again, uint64_t h)
{
    check(c->argv != NULL && c->argc >= 1 && c->argc <= MAX_ARGS);
    uintptr_t lo = UINTPTR_MAX, hi = 0; /* the views outside @buf */
    const char *prev_end = buf;
    for (size_t i = 0; i < c->argc; i++) {
        weir_resp_arg a = c->argv[i];
        check(a.p != NULL && a.n <= MAX_BULK);
        if (inside(a, buf, n)) {
            if (c->inline_form) {
                /* a word without quotes: nothing that ends or quotes one */
                for (size_t j = 0; j < a.n; j++)
                    check(strchr(" \t\r\n\"'", a.p[j]) == NULL || a.p[j] == '\0');
            } else {
                check(a.p >= prev_end); /* in order, apart */
                prev_end = a.p + a.n;
            }
        } else {
            check(c->inline_form);
            uintptr_t p = (uintptr_t)a.p;
            lo = p < lo ? p : lo;
            hi = p + a.n > hi ? p + a.n : hi;
        }
        h = mix(h, &a.n, sizeof(a.n));
        h = mix(h, a.p, a.n);
    }
    if (hi != 0) {
        uintptr_t b = (uintptr_t)buf;
        check(hi - lo <= MAX_INLINE && (hi <= b || lo >= b + n));
    }
    check_round_trip(c, again);
    return mix(h, &c->inline_form, sizeof(c->inline_form));
}

/* Feed @text in pieces of 1..@seed bytes (all at once when @seed is 0). */
static void run(const char *text, size_t size, unsigned seed, weir_resp_parser *again, digest *d)
{
    weir_resp_parser *p = weir_resp_parser_new(&lim);
    check(p != NULL);
    uint32_t rng = seed * 2654435761u + 1;
    size_t pos = 0, arrived = 0;
    memset(d, 0, sizeof(*d));
    d->hash = 14695981039346656037u;
    if (seed == 0)
        arrived = size;
    for (;;) {
        size_t n = arrived - pos;
        const char *buf = text + pos;
        char *copy = NULL;
        if (seed != 0) {
            copy = malloc(n > 0 ? n : 1);
            check(copy != NULL);
            if (n > 0)
                memcpy(copy, buf, n);
            buf = copy;
        }
        weir_resp_command cmd;
        const char *err = NULL;
        size_t used = SIZE_MAX;
        weir_resp_result r = weir_resp_parse(p, buf, n, &used, &cmd, &err);
        check(used <= n);
        pos += used;
        if (r == WEIR_RESP_COMMAND) {
            check(used > 0);
            d->hash = check_command(&cmd, buf, n, again, d->hash);
            d->hash = mix(d->hash, &pos, sizeof(pos));
            d->n_cmds++;
            free(copy);
            continue;
        }
        if (r == WEIR_RESP_ERROR) {
            check_error(err);
            d->failed = true;
            snprintf(d->error, sizeof(d->error), "%s", err);
            /* sticky: nothing more is consumed, the same message */
            const char *again_err = NULL;
            check(weir_resp_parse(p, buf + used, n - used, &used, &cmd, &again_err) ==
                  WEIR_RESP_ERROR);
            check(used == 0 && again_err == err);
            free(copy);
            break;
        }
        check(r == WEIR_RESP_NEED_MORE && used == 0);
        free(copy);
        if (arrived == size)
            break;
        rng = rng * 1103515245u + 12345u;
        size_t piece = 1 + (rng >> 16) % seed;
        arrived += piece < size - arrived ? piece : size - arrived;
    }
    d->left = size - pos;
    /* after a reset the parser reads a fresh command */
    weir_resp_parser_reset(p);
    weir_resp_command cmd;
    size_t used = 0;
    check(weir_resp_parse(p, "*1\r\n$4\r\nPING\r\n", 14, &used, &cmd, NULL) == WEIR_RESP_COMMAND);
    check(used == 14 && cmd.argc == 1 && cmd.argv[0].n == 4);
    weir_resp_parser_free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    weir_resp_parser *again = weir_resp_parser_new(&lim);
    check(again != NULL);
    unsigned seed = data[0];
    const char *text = (const char *)data + 1;
    digest whole, pieces;
    run(text, size - 1, 0, again, &whole);
    run(text, size - 1, seed == 0 ? 1 : seed, again, &pieces);
    check(whole.n_cmds == pieces.n_cmds && whole.hash == pieces.hash);
    check(whole.failed == pieces.failed && strcmp(whole.error, pieces.error) == 0);
    check(whole.left == pieces.left);
    weir_resp_parser_free(again);
    return 0;
}
