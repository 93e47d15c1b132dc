/*
 * parse.c - the RESP command parser: Redis 7's processMultibulkBuffer() and
 * processInlineBuffer() (src/networking.c) and sdssplitargs() (src/sds.c)
 * redone over the caller's bytes, with weir's caps where Redis has
 * constants. The invariant: every position kept between calls is an offset
 * into the bytes the caller gives again, never a pointer (the caller's
 * buffer may move), and no byte before that position is read again. Those
 * bytes start with any empty commands skipped on the way: *used stays 0
 * until a command is whole, and they are consumed with it.
 *
 * Followed to the letter, though it looks loose:
 *   - a count or length line ends at its first '\r', and the byte after the
 *     '\r' is skipped unread ("*1\rX" is a count line): Redis waits for that
 *     byte but never looks at it;
 *   - the two bytes after an argument's data are skipped unread as well: the
 *     length says where the argument ends, and Redis trusts it.
 * Departures:
 *   - a line (count, length or inline) whose end is more than max_inline
 *     bytes from its start is refused as too big even when it arrives whole.
 *     Redis refuses it only while it is incomplete, and parses it (then finds
 *     it malformed) when one read brings it all: the answer would depend on
 *     how the bytes arrived, and here it must not.
 *   - a NUL is a byte like any other. Redis finds line ends with strchr(),
 *     which stops at a NUL, so a line holding one waits for more input until
 *     the cap and is then refused as too big.
 *   - the caps: a count above max_args (Redis: INT_MAX) is an invalid
 *     multibulk length, a length above max_bulk an invalid bulk length; for
 *     inline commands, which Redis does not cap, more words than max_args
 *     get the first message and a word longer than max_bulk the second.
 *   - "expected '$', got '%c'" shows CR, LF and NUL as a space: Redis makes
 *     CR and LF spaces (a reply is one line) and sends the NUL, which a C
 *     string cannot carry.
 */
#include "resp.h"

#include <stdlib.h>
#include <string.h>

/* What the parser is reading. */
enum resp_state {
    ST_START,  /* nothing of the command yet: its first byte picks the form */
    ST_COUNT,  /* "*<count>\r\n" */
    ST_LENGTH, /* "$<length>\r\n" before an argument */
    ST_DATA,   /* an argument's bytes and the two after them */
    ST_INLINE, /* an inline command, up to its '\n' */
    ST_FAILED  /* a protocol error, until reset */
};

/* What one pass over the bytes given found. */
enum resp_step { STEP_MORE, STEP_DONE, STEP_FAILED };

/* Whether the end of a line is in the bytes given. */
enum resp_line { LINE_FOUND, LINE_MORE, LINE_TOO_BIG };

static const char msg_count_big[] = "Protocol error: too big mbulk count string";
static const char msg_count[] = "Protocol error: invalid multibulk length";
static const char msg_length_big[] = "Protocol error: too big bulk count string";
static const char msg_length[] = "Protocol error: invalid bulk length";
static const char msg_inline_big[] = "Protocol error: too big inline request";
static const char msg_quotes[] = "Protocol error: unbalanced quotes in request";
/* Before AUTH, Redis's own tighter caps and words (networking.c). */
#define PREAUTH_MAX_ARGS 10u
#define PREAUTH_MAX_BULK 16384u
static const char msg_preauth_count[] = "Protocol error: unauthenticated multibulk length";
static const char msg_preauth_length[] = "Protocol error: unauthenticated bulk length";
/* The byte between the last quotes is replaced by the one found. */
static const char msg_expected[] = "Protocol error: expected '$', got ' '";

struct weir_resp_parser {
    weir_resp_limits lim;
    bool preauth; /* weir_resp_parser_preauth() */
    enum resp_state state;

    /* Where the current command starts in the bytes given: after the
     * empty commands skipped since the last command handed out. */
    size_t skipped;
    size_t seen; /* bytes the last call was given */

    /* Progress in the current command, as offsets from its first byte. */
    size_t at;      /* start of the line being read (ST_DATA: of the argument) */
    size_t scanned; /* bytes from @at known to hold no line end */
    size_t want;    /* arguments the count announced */
    size_t bulk;    /* length of the argument being read */
    size_t argc;    /* arguments read so far */

    size_t *off;         /* max_args: where each argument starts */
    weir_resp_arg *argv; /* max_args: the views handed out */
    char *words;         /* max_inline: inline words that had quotes, unescaped */

    const char *error;
    char expected[sizeof(msg_expected)];
};

weir_resp_parser *weir_resp_parser_new(const weir_resp_limits *lim)
{
    if (lim == NULL)
        return NULL;
    /* One block: the parser, argv, the offsets, then the word bytes (each
     * part's size a multiple of the next one's alignment). */
    size_t per_arg = sizeof(weir_resp_arg) + sizeof(size_t), args, size;
    if (__builtin_mul_overflow(lim->max_args, per_arg, &args) ||
        __builtin_add_overflow(sizeof(weir_resp_parser), args, &size) ||
        __builtin_add_overflow(size, lim->max_inline, &size))
        return NULL;
    weir_resp_parser *p = malloc(size);
    if (p == NULL)
        return NULL;
    memset(p, 0, sizeof(*p));
    p->lim = *lim;
    p->argv = (weir_resp_arg *)(void *)(p + 1);
    p->off = (size_t *)(void *)(p->argv + lim->max_args);
    p->words = (char *)(p->off + lim->max_args);
    p->state = ST_START;
    return p;
}

void weir_resp_parser_preauth(weir_resp_parser *p, bool on)
{
    p->preauth = on;
}

void weir_resp_parser_free(weir_resp_parser *p)
{
    free(p);
}

/* Read the next command from its first byte; the views handed out stay
 * valid. */
static void next_command(weir_resp_parser *p)
{
    p->state = ST_START;
    p->at = 0;
    p->scanned = 0;
    p->want = 0;
    p->bulk = 0;
    p->argc = 0;
}

/* Forget every byte given: the next call starts at its first. */
static void start_over(weir_resp_parser *p)
{
    next_command(p);
    p->skipped = 0;
    p->seen = 0;
}

void weir_resp_parser_reset(weir_resp_parser *p)
{
    start_over(p);
    p->error = NULL;
}

static enum resp_step fail(weir_resp_parser *p, const char *message)
{
    p->state = ST_FAILED;
    p->error = message;
    return STEP_FAILED;
}

static enum resp_step fail_expected(weir_resp_parser *p, char got)
{
    memcpy(p->expected, msg_expected, sizeof(msg_expected));
    if (got != '\r' && got != '\n' && got != '\0')
        p->expected[sizeof(msg_expected) - 3] = got;
    return fail(p, p->expected);
}

/*
 * Find the first @c of the line that starts at p->at, in @n bytes of the
 * command; *end is its offset. Redis refuses a line once more than
 * max_inline bytes of it wait without their end, so the end may lie at most
 * max_inline bytes after the start: a line ending further is too big
 * however it arrives. p->scanned keeps the search from covering a byte
 * twice (and stops on the end found, should the byte after it be missing).
 */
static enum resp_line find_end(weir_resp_parser *p, const char *d, size_t n, char c, size_t *end)
{
    size_t avail = n - p->at;
    size_t window = avail <= p->lim.max_inline ? avail : p->lim.max_inline + 1;
    if (p->scanned < window) {
        const char *from = d + p->at + p->scanned;
        const char *hit = memchr(from, c, window - p->scanned);
        if (hit != NULL) {
            p->scanned += (size_t)(hit - from);
            *end = p->at + p->scanned;
            return LINE_FOUND;
        }
        p->scanned = window;
    }
    return avail > p->lim.max_inline ? LINE_TOO_BIG : LINE_MORE;
}

/* Redis's string2ll(): "0", or an optional '-' and a digit 1-9 followed by
 * digits, within int64. No '+', no blanks, no leading zeros, no "-0". */
static bool parse_ll(const char *s, size_t n, int64_t *out)
{
    if (n == 1 && s[0] == '0') {
        *out = 0;
        return true;
    }
    bool neg = n > 0 && s[0] == '-';
    size_t i = neg ? 1 : 0;
    if (i == n || s[i] < '1' || s[i] > '9')
        return false;
    uint64_t v = 0;
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        unsigned digit = (unsigned)(s[i] - '0');
        if (v > (UINT64_MAX - digit) / 10)
            return false;
        v = v * 10 + digit;
    }
    if (!neg) {
        if (v > (uint64_t)INT64_MAX)
            return false;
        *out = (int64_t)v;
    } else {
        if (v > (uint64_t)INT64_MAX + 1)
            return false;
        *out = v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v;
    }
    return true;
}

/* isspace() in the C locale: what sdssplitargs() skips between words. */
static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* What ends an unquoted word: '\v' and '\f' do not (sdssplitargs() skips
 * them before a word but keeps them inside one). */
static bool ends_word(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* The byte "\<c>" stands for inside double quotes; any other is itself. */
static char unescape(char c)
{
    switch (c) {
    case 'n':
        return '\n';
    case 'r':
        return '\r';
    case 't':
        return '\t';
    case 'b':
        return '\b';
    case 'a':
        return '\a';
    default:
        return c;
    }
}

/*
 * Split an inline line (@n bytes, no '\n', n <= max_inline) into p->argv as
 * sdssplitargs() does. Each word is unescaped into p->words as it is read;
 * a word that had no quotes is then pointed to where it lies instead and
 * its copy forgotten, so the copies never need more than the line's bytes.
 * Words past max_args are read but not kept: unbalanced quotes anywhere on
 * the line are reported first, as Redis (which has no such cap) would.
 */
static enum resp_step split_inline(weir_resp_parser *p, const char *s, size_t n)
{
    const char *q = s, *end = s + n;
    char *w = p->words;
    size_t argc = 0;
    bool too_long = false;
    for (;;) {
        while (q < end && is_space(*q))
            q++;
        if (q == end)
            break;
        const char *from = q;
        char *o = w;
        char quote = 0; /* the quote we are inside, if any */
        bool quoted = false;
        for (;;) {
            if (quote == 0) {
                if (q == end || ends_word(*q))
                    break;
                if (*q == '"' || *q == '\'') {
                    quote = *q++;
                    quoted = true;
                } else {
                    *o++ = *q++;
                }
                continue;
            }
            if (q == end)
                return fail(p, msg_quotes);
            if (*q == quote) {
                /* a closing quote ends the word: "a"b is refused */
                q++;
                if (q < end && !is_space(*q))
                    return fail(p, msg_quotes);
                break;
            }
            if (quote == '"' && *q == '\\' && end - q >= 2) {
                int hi = end - q >= 4 && q[1] == 'x' ? hex_value(q[2]) : -1;
                int lo = hi >= 0 ? hex_value(q[3]) : -1;
                if (lo >= 0) {
                    *o++ = (char)(hi * 16 + lo);
                    q += 4;
                } else {
                    *o++ = unescape(q[1]);
                    q += 2;
                }
            } else if (quote == '\'' && *q == '\\' && end - q >= 2 && q[1] == '\'') {
                *o++ = '\'';
                q += 2;
            } else {
                *o++ = *q++;
            }
        }
        size_t len = (size_t)(o - w);
        if (len > p->lim.max_bulk)
            too_long = true;
        if (argc < p->lim.max_args)
            p->argv[argc] = (weir_resp_arg){quoted ? w : from, len};
        argc++;
        if (quoted)
            w = o;
    }
    if (argc > p->lim.max_args)
        return fail(p, msg_count);
    if (too_long)
        return fail(p, msg_length);
    p->argc = argc;
    return STEP_DONE;
}

/*
 * Read on in the current command, @n bytes of which are at @d. STEP_DONE:
 * it is whole and *size bytes long (p->argc 0 for an empty command); the
 * views of an inline command are set, a multibulk one's are p->off.
 */
static enum resp_step step(weir_resp_parser *p, const char *d, size_t n, size_t *size)
{
    size_t end;
    int64_t v;
    enum resp_line line;
    for (;;) {
        switch (p->state) {
        case ST_START:
            if (n == 0)
                return STEP_MORE;
            p->state = d[0] == '*' ? ST_COUNT : ST_INLINE;
            break;

        case ST_COUNT:
            line = find_end(p, d, n, '\r', &end);
            if (line == LINE_TOO_BIG)
                return fail(p, msg_count_big);
            if (line == LINE_MORE || end + 1 == n)
                return STEP_MORE;
            if (!parse_ll(d + 1, end - 1, &v) || (v > 0 && (uint64_t)v > p->lim.max_args))
                return fail(p, msg_count);
            if (p->preauth && v > (int64_t)PREAUTH_MAX_ARGS)
                return fail(p, msg_preauth_count);
            if (v <= 0) {
                *size = end + 2;
                return STEP_DONE;
            }
            p->want = (size_t)v;
            p->at = end + 2;
            p->scanned = 0;
            p->state = ST_LENGTH;
            break;

        case ST_LENGTH:
            line = find_end(p, d, n, '\r', &end);
            if (line == LINE_TOO_BIG)
                return fail(p, msg_length_big);
            if (line == LINE_MORE || end + 1 == n)
                return STEP_MORE;
            /* the whole line first, then its first byte, as Redis checks */
            if (d[p->at] != '$')
                return fail_expected(p, d[p->at]);
            if (!parse_ll(d + p->at + 1, end - p->at - 1, &v) || v < 0 ||
                (uint64_t)v > p->lim.max_bulk)
                return fail(p, msg_length);
            if (p->preauth && v > (int64_t)PREAUTH_MAX_BULK)
                return fail(p, msg_preauth_length);
            p->bulk = (size_t)v;
            p->at = end + 2;
            p->state = ST_DATA;
            break;

        case ST_DATA:
            if (n - p->at < 2 || n - p->at - 2 < p->bulk)
                return STEP_MORE;
            p->off[p->argc] = p->at;
            p->argv[p->argc].n = p->bulk;
            p->argc++;
            p->at += p->bulk + 2;
            if (p->argc == p->want) {
                *size = p->at;
                return STEP_DONE;
            }
            p->scanned = 0;
            p->state = ST_LENGTH;
            break;

        case ST_INLINE:
            line = find_end(p, d, n, '\n', &end);
            if (line == LINE_TOO_BIG)
                return fail(p, msg_inline_big);
            if (line == LINE_MORE)
                return STEP_MORE;
            *size = end + 1;
            return split_inline(p, d, end > 0 && d[end - 1] == '\r' ? end - 1 : end);

        case ST_FAILED:
        default:
            return STEP_FAILED;
        }
    }
}

weir_resp_result weir_resp_parse(weir_resp_parser *p, const char *data, size_t len, size_t *used,
                                 weir_resp_command *cmd, const char **error)
{
    if (p->state == ST_FAILED) {
        if (error != NULL)
            *error = p->error;
        if (used != NULL)
            *used = 0;
        return WEIR_RESP_ERROR;
    }
    if (data == NULL)
        len = 0;
    /* Fewer bytes than last time is the caller's bug: the offsets kept may
     * point past the end, so the bytes are read again from the first. */
    if (len < p->seen)
        start_over(p);
    size_t start = p->skipped; /* where the current command starts */
    weir_resp_result res = WEIR_RESP_ERROR;
    while (p->state != ST_FAILED) {
        const char *d = data != NULL ? data + start : "";
        size_t n = len - start, size = 0;
        enum resp_step s = step(p, d, n, &size);
        if (s == STEP_MORE) {
            p->skipped = start;
            p->seen = len;
            res = WEIR_RESP_NEED_MORE;
            break;
        }
        if (s == STEP_FAILED)
            break;
        start += size;
        if (p->argc == 0) {
            /* "*0", "*-1" or a blank line: skipped, as Redis skips them */
            next_command(p);
            continue;
        }
        bool inline_form = p->state == ST_INLINE;
        if (!inline_form) {
            for (size_t i = 0; i < p->argc; i++)
                p->argv[i].p = d + p->off[i];
        }
        if (cmd != NULL) {
            cmd->argv = p->argv;
            cmd->argc = p->argc;
            cmd->inline_form = inline_form;
        }
        start_over(p);
        res = WEIR_RESP_COMMAND;
        break;
    }
    if (res == WEIR_RESP_ERROR && error != NULL)
        *error = p->error;
    if (used != NULL)
        *used = res == WEIR_RESP_NEED_MORE ? 0 : start;
    return res;
}
