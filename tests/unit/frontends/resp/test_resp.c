/*
 * test_resp.c - the RESP command parser and reply writers: both command
 * forms, what Redis skips and what it refuses (each error at and just past
 * its cap), its integer rules, inline quoting, empty commands, pipelining,
 * that any split of the input gives the same commands while the caller's
 * buffer moves between calls, kept progress, sticky errors and reset; and
 * the exact bytes of every reply in RESP2 and RESP3.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "resp/resp.h"

/* ---------------------------------------------------------------- harness */

#define ARGS 8
#define BULK 32
#define INLINE 64

/* A literal with its length, NUL bytes included. */
#define T(s) s, sizeof(s) - 1

static const char msg_count_big[] = "Protocol error: too big mbulk count string";
static const char msg_count[] = "Protocol error: invalid multibulk length";
static const char msg_length_big[] = "Protocol error: too big bulk count string";
static const char msg_length[] = "Protocol error: invalid bulk length";
static const char msg_inline_big[] = "Protocol error: too big inline request";
static const char msg_quotes[] = "Protocol error: unbalanced quotes in request";

static weir_resp_limits limits(size_t max_args, size_t max_bulk, size_t max_inline)
{
    return (weir_resp_limits){.max_args = max_args, .max_bulk = max_bulk, .max_inline = max_inline};
}

static weir_resp_parser *make(size_t max_args, size_t max_bulk, size_t max_inline)
{
    weir_resp_limits lim = limits(max_args, max_bulk, max_inline);
    weir_resp_parser *p = weir_resp_parser_new(&lim);
    assert_non_null(p);
    return p;
}

/* A command on one line: 'm' (multibulk) or 'i' (inline), then each
 * argument in brackets, bytes outside printable ASCII and '\' as \xHH. */
static void describe(const weir_resp_command *c, char *out, size_t cap)
{
    size_t n = (size_t)snprintf(out, cap, "%c", c->inline_form ? 'i' : 'm');
    for (size_t i = 0; i < c->argc && n + 8 < cap; i++) {
        out[n++] = '[';
        for (size_t j = 0; j < c->argv[i].n && n + 8 < cap; j++) {
            unsigned char b = (unsigned char)c->argv[i].p[j];
            if (b >= 0x20 && b < 0x7f && b != '\\')
                out[n++] = (char)b;
            else
                n += (size_t)snprintf(out + n, cap - n, "\\x%02x", b);
        }
        out[n++] = ']';
    }
    out[n] = '\0';
}

/*
 * Parse @len bytes at once with the caps @lim, expecting @result: a command
 * described as @want using all the bytes; the error @want with nothing
 * consumed (no empty command comes before one in these inputs); or no
 * whole command, *used being @more_used.
 */
static void expect(weir_resp_limits lim, const char *text, size_t len, weir_resp_result result,
                   const char *want, size_t more_used)
{
    weir_resp_parser *p = weir_resp_parser_new(&lim);
    assert_non_null(p);
    weir_resp_command cmd;
    const char *err = NULL;
    size_t used = 99999;
    weir_resp_result r = weir_resp_parse(p, text, len, &used, &cmd, &err);
    if (r != result)
        fail_msg("'%.40s': result %d (%s), want %d", text, r, err ? err : "", result);
    if (r == WEIR_RESP_COMMAND) {
        char got[512];
        describe(&cmd, got, sizeof(got));
        assert_string_equal(got, want);
        assert_int_equal(used, len);
    } else if (r == WEIR_RESP_ERROR) {
        assert_string_equal(err, want);
        assert_int_equal(used, 0);
    } else {
        assert_int_equal(used, more_used);
    }
    weir_resp_parser_free(p);
}

static void cmd_is_lim(weir_resp_limits lim, const char *text, size_t len, const char *want)
{
    expect(lim, text, len, WEIR_RESP_COMMAND, want, 0);
}

static void bad_is_lim(weir_resp_limits lim, const char *text, size_t len, const char *message)
{
    expect(lim, text, len, WEIR_RESP_ERROR, message, 0);
}

static void more_is_lim(weir_resp_limits lim, const char *text, size_t len, size_t used)
{
    expect(lim, text, len, WEIR_RESP_NEED_MORE, NULL, used);
}

static void cmd_is(const char *text, const char *want)
{
    cmd_is_lim(limits(ARGS, BULK, INLINE), text, strlen(text), want);
}

static void bad_is(const char *text, const char *message)
{
    bad_is_lim(limits(ARGS, BULK, INLINE), text, strlen(text), message);
}

#define MAX_OUT 8
#define LINE 256

typedef struct outcome {
    size_t n_cmds;
    char cmds[MAX_OUT][LINE];
    size_t used[MAX_OUT]; /* input bytes each took, empty commands before it included */
    bool failed;
    char error[64];
    size_t left; /* bytes not consumed at the end */
} outcome;

/*
 * Deliver @len bytes of @text as a connection does: @first bytes, then
 * @step bytes at a time (0: all that is left). Unconsumed bytes are kept
 * and given again with what arrives after them, each time copied to a new
 * allocation: a pointer kept into an earlier one would be a use after free.
 */
static void run(const char *text, size_t len, size_t first, size_t step, weir_resp_limits lim,
                outcome *o)
{
    weir_resp_parser *p = weir_resp_parser_new(&lim);
    assert_non_null(p);
    memset(o, 0, sizeof(*o));
    size_t arrived = first == 0 || first > len ? len : first, pos = 0, start = 0;
    for (;;) {
        size_t n = arrived - pos;
        char *copy = malloc(n > 0 ? n : 1);
        assert_non_null(copy);
        memcpy(copy, text + pos, n);
        weir_resp_command cmd;
        const char *err = NULL;
        size_t used = 99999;
        weir_resp_result r = weir_resp_parse(p, copy, n, &used, &cmd, &err);
        assert_true(used <= n);
        pos += used;
        if (r == WEIR_RESP_COMMAND) {
            assert_true(o->n_cmds < MAX_OUT);
            describe(&cmd, o->cmds[o->n_cmds], LINE);
            o->used[o->n_cmds++] = pos - start;
            start = pos;
            free(copy);
            continue;
        }
        free(copy);
        if (r == WEIR_RESP_ERROR) {
            o->failed = true;
            snprintf(o->error, sizeof(o->error), "%s", err);
            break;
        }
        assert_int_equal(r, WEIR_RESP_NEED_MORE);
        assert_int_equal(used, 0);
        if (arrived == len)
            break;
        arrived = step == 0 || len - arrived < step ? len : arrived + step;
    }
    o->left = len - pos;
    weir_resp_parser_free(p);
}

static void same(const outcome *a, const outcome *b, size_t first, size_t step)
{
    if (a->n_cmds != b->n_cmds || a->failed != b->failed || a->left != b->left)
        fail_msg("first %zu step %zu: %zu commands, failed %d, left %zu; all at once: %zu, %d, %zu",
                 first, step, b->n_cmds, (int)b->failed, b->left, a->n_cmds, (int)a->failed,
                 a->left);
    for (size_t i = 0; i < a->n_cmds; i++) {
        assert_string_equal(a->cmds[i], b->cmds[i]);
        assert_int_equal(a->used[i], b->used[i]);
    }
    assert_string_equal(a->error, b->error);
}

/* Every step size and every cut into two pieces give what all at once
 * does, which is left in @whole for the caller to check. */
static void split_invariant(const char *text, size_t len, weir_resp_limits lim, outcome *whole)
{
    outcome *o = malloc(sizeof(*o));
    assert_non_null(o);
    run(text, len, 0, 0, lim, whole);
    for (size_t step = 1; step <= len; step++) {
        run(text, len, step, step, lim, o);
        same(whole, o, step, step);
    }
    for (size_t cut = 1; cut < len; cut++) {
        run(text, len, cut, 0, lim, o);
        same(whole, o, cut, 0);
    }
    free(o);
}

/* ---------------------------------------------------------------- commands */

static void multibulk_commands(void **unused)
{
    (void)unused;
    cmd_is("*1\r\n$4\r\nPING\r\n", "m[PING]");
    cmd_is("*1\r\n$4\r\npInG\r\n", "m[pInG]");
    cmd_is("*2\r\n$0\r\n\r\n$0\r\n\r\n", "m[][]");
    cmd_is_lim(limits(ARGS, BULK, INLINE), T("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nv\r\n\0x\r\n"),
               "m[SET][k][v\\x0d\\x0a\\x00x]");

    /* the views lie in the caller's bytes */
    weir_resp_parser *p = make(ARGS, BULK, INLINE);
    const char *text = "*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n";
    weir_resp_command cmd;
    size_t used;
    assert_int_equal(weir_resp_parse(p, text, strlen(text), &used, &cmd, NULL), WEIR_RESP_COMMAND);
    assert_int_equal(cmd.argc, 2);
    assert_false(cmd.inline_form);
    assert_ptr_equal(cmd.argv[0].p, text + 8);
    assert_int_equal(cmd.argv[0].n, 3);
    assert_ptr_equal(cmd.argv[1].p, text + 17);
    assert_int_equal(cmd.argv[1].n, 3);
    weir_resp_parser_free(p);
}

/* Redis waits for the byte after a line's '\r' and for the two after an
 * argument, but reads none of them. */
static void multibulk_skips_what_redis_skips(void **unused)
{
    (void)unused;
    cmd_is("*1\rX$4\rYPINGzz", "m[PING]");
    cmd_is("*2\r\n$1\r\naAB$2\r\nbcCD", "m[a][bc]");
    /* so a missing CRLF shifts the next line */
    bad_is("*2\r\n$1\r\na\n$1\r\nb\r\n", "Protocol error: expected '$', got '1'");
    /* a line ends at '\r' only: "1\n$4" is the count */
    bad_is("*1\n$4\r\nPING\r\n", msg_count);
    more_is_lim(limits(ARGS, BULK, INLINE), T("*1\r"), 0);
    more_is_lim(limits(ARGS, BULK, INLINE), T("*1\r\n$4\r\nPING\r"), 0);
}

static void inline_commands(void **unused)
{
    (void)unused;
    cmd_is("PING\r\n", "i[PING]");
    cmd_is("PING\n", "i[PING]");
    cmd_is("  set  k\tv  \r\n", "i[set][k][v]");
    cmd_is("a\rb\r\n", "i[a][b]");
    cmd_is("x\r\r\n", "i[x]");
    /* '\v' and '\f' are skipped before a word but belong to one */
    cmd_is("\x0b\x0c"
           "foo\x0c"
           "bar\x0b"
           "baz \x0b\n",
           "i[foo\\x0cbar\\x0bbaz]");
    cmd_is_lim(limits(ARGS, BULK, INLINE), T("a\0b c\n"), "i[a\\x00b][c]");

    /* unquoted words are views of the caller's bytes, quoted ones not */
    weir_resp_parser *p = make(ARGS, BULK, INLINE);
    const char *text = "SET \"a b\" c\r\n";
    weir_resp_command cmd;
    size_t used;
    assert_int_equal(weir_resp_parse(p, text, strlen(text), &used, &cmd, NULL), WEIR_RESP_COMMAND);
    assert_int_equal(used, strlen(text));
    assert_true(cmd.inline_form);
    assert_int_equal(cmd.argc, 3);
    assert_ptr_equal(cmd.argv[0].p, text);
    assert_true(cmd.argv[1].p < text || cmd.argv[1].p >= text + strlen(text));
    assert_memory_equal(cmd.argv[1].p, "a b", 3);
    assert_ptr_equal(cmd.argv[2].p, text + 10);
    weir_resp_parser_free(p);
}

static const struct {
    const char *line;
    const char *want; /* NULL: unbalanced quotes */
} quoting[] = {
    {"SET \"a b\" c", "i[SET][a b][c]"},
    {"\"\\x41\\x7a\\xAf\\x00\"", "i[Az\\xaf\\x00]"},
    {"\"\\xZZ\\x4\"", "i[xZZx4]"},
    {"\"\\n\\r\\t\\b\\a\\\\\\\"\\q\"", "i[\\x0a\\x0d\\x09\\x08\\x07\\x5c\"q]"},
    {"\"a\\\"b\" \"it's\"", "i[a\"b][it's]"},
    {"'it\\'s' 'a\\nb' 'say \"hi\"'", "i[it's][a\\x5cnb][say \"hi\"]"},
    {"foo\"bar\" x'y z'", "i[foobar][xy z]"},
    {"a\"b c\" d", "i[ab c][d]"},
    {"\"\"", "i[]"},
    {"'' x", "i[][x]"},
    {"\"a\"\x0b"
     "b",
     "i[a][b]"},
    {"\"a b\"\t'c d'", "i[a b][c d]"},
    {"\"abc", NULL},
    {"\"abc\\", NULL},
    {"'abc", NULL},
    {"'\\\\'", NULL},
    {"\"a\"b", NULL},
    {"\"a\"'b'", NULL},
    {"a\"b c\"d", NULL},
    {"x \"", NULL},
};

static void inline_quoting(void **unused)
{
    (void)unused;
    for (size_t i = 0; i < sizeof(quoting) / sizeof(quoting[0]); i++) {
        char text[128];
        snprintf(text, sizeof(text), "%s\r\n", quoting[i].line);
        if (quoting[i].want != NULL)
            cmd_is(text, quoting[i].want);
        else
            bad_is(text, msg_quotes);
    }
}

static void empty_commands_are_skipped(void **unused)
{
    (void)unused;
    weir_resp_limits lim = limits(ARGS, BULK, INLINE);
    cmd_is("*0\r\n*-1\r\n\r\n\n \t\r\n*-9223372036854775808\r\n*1\r\n$1\r\nx\r\n", "m[x]");
    /* only empty commands: nothing consumed until a command follows */
    more_is_lim(lim, T("*0\r\n\r\n*-5\r\n \n"), 0);
    /* they are consumed with it, and not read again meanwhile */
    weir_resp_parser *p = make(ARGS, BULK, INLINE);
    weir_resp_command cmd;
    size_t used = 99;
    assert_int_equal(weir_resp_parse(p, T("*0\r\n*1\r\n$4\r\nPI"), &used, &cmd, NULL),
                     WEIR_RESP_NEED_MORE);
    assert_int_equal(used, 0);
    assert_int_equal(weir_resp_parse(p, T("XXXX*1\r\n$4\r\nPING\r\n"), &used, &cmd, NULL),
                     WEIR_RESP_COMMAND);
    assert_int_equal(used, 18);
    assert_int_equal(cmd.argc, 1);
    assert_memory_equal(cmd.argv[0].p, "PING", 4);
    weir_resp_parser_free(p);
}

/* Counts and lengths are Redis's string2ll(): strict decimal int64. */
static void integers(void **unused)
{
    (void)unused;
    weir_resp_limits lim = limits(ARGS, BULK, INLINE);
    static const char *const invalid[] = {
        "",
        "-",
        "-0",
        "+1",
        "01",
        "00",
        " 1",
        "1 ",
        "1a",
        "0x1",
        "1.0",
        "--1",
        "\t1",
        "1\n",
        "\xd9\xa1", /* a digit, but not an ASCII one */
        "9223372036854775808",
        "-9223372036854775809",
        "99999999999999999999",
        "18446744073709551616",
        "000000000000000000001",
    };
    char text[64];
    for (size_t i = 0; i < sizeof(invalid) / sizeof(invalid[0]); i++) {
        snprintf(text, sizeof(text), "*%s\r\n", invalid[i]);
        bad_is(text, msg_count);
        snprintf(text, sizeof(text), "*1\r\n$%s\r\n", invalid[i]);
        bad_is(text, msg_length);
    }
    /* counts up to 0 are empty commands; larger ones wait for arguments */
    static const char *const skipped[] = {"0", "-1", "-42", "-9223372036854775808"};
    for (size_t i = 0; i < sizeof(skipped) / sizeof(skipped[0]); i++) {
        snprintf(text, sizeof(text), "*%s\r\n", skipped[i]);
        more_is_lim(lim, text, strlen(text), 0);
    }
    more_is_lim(lim, T("*1\r\n"), 0);
    more_is_lim(lim, T("*8\r\n"), 0);
    /* lengths: 0 and up to the cap; a negative one is refused */
    cmd_is("*1\r\n$0\r\n\r\n", "m[]");
    more_is_lim(lim, T("*1\r\n$32\r\n"), 0);
    bad_is("*1\r\n$-1\r\n", msg_length);
    bad_is("*1\r\n$-9223372036854775808\r\n", msg_length);
    bad_is("*9223372036854775807\r\n", msg_count);
    bad_is("*1\r\n$9223372036854775807\r\n", msg_length);
}

/* ---------------------------------------------------------------- caps */

static void arg_caps(void **unused)
{
    (void)unused;
    cmd_is("*8\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n$1\r\ne\r\n$1\r\nf\r\n$1\r\ng\r\n"
           "$1\r\nh\r\n",
           "m[a][b][c][d][e][f][g][h]");
    bad_is("*9\r\n", msg_count);
    /* a 32-byte argument is the cap, 33 is refused on its length line */
    cmd_is("*1\r\n$32\r\n0123456789abcdef0123456789abcdef\r\n",
           "m[0123456789abcdef0123456789abcdef]");
    bad_is("*1\r\n$33\r\n", msg_length);
    /* inline: the same caps, worded the same */
    cmd_is("a b c d e f g h\r\n", "i[a][b][c][d][e][f][g][h]");
    bad_is("a b c d e f g h i\r\n", msg_count);
    cmd_is("0123456789abcdef0123456789abcdef\r\n", "i[0123456789abcdef0123456789abcdef]");
    bad_is("0123456789abcdef0123456789abcdef0\r\n", msg_length);
    bad_is("\"0123456789abcdef0123456789abcdef0\"\r\n", msg_length);
    /* unbalanced quotes are reported before either cap */
    bad_is("a b c d e f g h i 0123456789abcdef0123456789abcdef0 \"\r\n", msg_quotes);
    /* no arguments allowed at all: every non-empty command is refused */
    weir_resp_limits none = limits(0, BULK, INLINE);
    bad_is_lim(none, T("*1\r\n"), msg_count);
    bad_is_lim(none, T("PING\r\n"), msg_count);
    more_is_lim(none, T("*0\r\n\r\n"), 0);
}

/* A line's end may lie max_inline bytes after its start, not one more,
 * whether the line arrives at once or byte by byte. */
static void line_caps(void **unused)
{
    (void)unused;
    weir_resp_limits lim = limits(1000, 5000, 4);
    outcome *o = malloc(sizeof(*o));
    assert_non_null(o);
    static const struct {
        const char *text;
        const char *error; /* NULL: waits for more */
    } cases[] = {
        {"*123\r\n", NULL},
        {"*123\r", NULL},
        {"*123", NULL},
        {"*1234\r\n", msg_count_big},
        {"*1234", msg_count_big},
        {"*1\r\n$123\r\n", NULL},
        {"*1\r\n$1234\r\n", msg_length_big},
        {"*1\r\nabcde", msg_length_big},
        {"*1\r\nabcd\r\n", "Protocol error: expected '$', got 'a'"},
        {"abcd", NULL},
        {"abcde", msg_inline_big},
        {"abcd\r\n", msg_inline_big},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *t = cases[i].text;
        split_invariant(t, strlen(t), lim, o);
        assert_int_equal(o->n_cmds, 0);
        assert_int_equal(o->failed, cases[i].error != NULL);
        if (cases[i].error != NULL)
            assert_string_equal(o->error, cases[i].error);
    }
    cmd_is_lim(lim, T("abcd\n"), "i[abcd]");
    cmd_is_lim(lim, T("abc\r\n"), "i[abc]");
    /* a line end far beyond the cap, all at once: too big all the same */
    bad_is_lim(lim, T("*12345678\r\n"), msg_count_big);
    bad_is_lim(lim, T("GET key\r\n"), msg_inline_big);
    free(o);
}

static void error_messages(void **unused)
{
    (void)unused;
    weir_resp_limits lim = limits(ARGS, BULK, INLINE);
    bad_is("*1\r\n:1\r\n", "Protocol error: expected '$', got ':'");
    bad_is("*2\r\n$1\r\na\r\n*1\r\n", "Protocol error: expected '$', got '*'");
    /* CR, LF and NUL show as a space: the message is one line */
    bad_is("*1\r\n\r\n", "Protocol error: expected '$', got ' '");
    bad_is("*1\r\n\n\r\n", "Protocol error: expected '$', got ' '");
    bad_is_lim(lim, T("*1\r\n\0\r\n"), "Protocol error: expected '$', got ' '");
    bad_is("*x\r\n", msg_count);
    bad_is("*\r\n", msg_count);
    bad_is("*1\r\n$\r\n", msg_length);
    bad_is("GET \"abc\r\n", msg_quotes);
}

/* ---------------------------------------------------------------- streams */

static void pipelining(void **unused)
{
    (void)unused;
    weir_resp_parser *p = make(ARGS, BULK, INLINE);
    const char *text = "*1\r\n$4\r\nPING\r\nECHO hi\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n";
    static const struct {
        size_t used;
        const char *want;
    } cmds[] = {{14, "m[PING]"}, {9, "i[ECHO][hi]"}, {20, "m[GET][k]"}};
    size_t len = strlen(text), pos = 0, used;
    weir_resp_command cmd;
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(weir_resp_parse(p, text + pos, len - pos, &used, &cmd, NULL),
                         WEIR_RESP_COMMAND);
        char got[LINE];
        describe(&cmd, got, sizeof(got));
        assert_string_equal(got, cmds[i].want);
        assert_int_equal(used, cmds[i].used);
        pos += used;
    }
    assert_int_equal(pos, len);
    /* nothing left: zero bytes, nothing consumed */
    assert_int_equal(weir_resp_parse(p, text + len, 0, &used, &cmd, NULL), WEIR_RESP_NEED_MORE);
    assert_int_equal(used, 0);
    assert_int_equal(weir_resp_parse(p, NULL, 0, &used, &cmd, NULL), WEIR_RESP_NEED_MORE);
    weir_resp_parser_free(p);
}

static const struct {
    const char *text;
    size_t len;
} split_inputs[] = {
    {T("*1\r\n$4\r\nPING\r\n")},
    {T("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nv\r\n\0x\r\n")},
    {T("*0\r\n\r\nPING\r\n*-1\r\n*2\r\n$4\r\nECHO\r\n$0\r\n\r\n  \n")},
    {T("SET \"a b\\x41\" 'it\\'s' c\r\nGET k\n*1\r\n$1\r\nx\r\n")},
    {T("*1\rX$4\rYPINGzz*1\r\n$1\r\na\r\n")},
    {T("PING\r\n*1\r\n$4\r\nPI")},
    {T("*2\r\n$1\r\na\r\n:1\r\n")},
    {T("*1\r\n$33\r\n")},
    {T("*9\r\n")},
    {T("GET \"abc\r\nPING\r\n")},
    {T("*x\r\n")},
    {T("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n")},
    {T("*1\r\n$11111111111111111111111111111111111111111111111111111111111111111\r\n")},
};

static void any_split_gives_the_same_commands(void **unused)
{
    (void)unused;
    weir_resp_limits lim = limits(ARGS, BULK, INLINE);
    outcome *o = malloc(sizeof(*o));
    assert_non_null(o);
    for (size_t i = 0; i < sizeof(split_inputs) / sizeof(split_inputs[0]); i++)
        split_invariant(split_inputs[i].text, split_inputs[i].len, lim, o);

    /* and what all at once gives is right */
    split_invariant(split_inputs[2].text, split_inputs[2].len, lim, o);
    assert_int_equal(o->n_cmds, 2);
    assert_string_equal(o->cmds[0], "i[PING]");
    assert_int_equal(o->used[0], 12);
    assert_string_equal(o->cmds[1], "m[ECHO][]");
    assert_int_equal(o->used[1], 5 + 20);
    assert_false(o->failed);
    assert_int_equal(o->left, 3); /* the blank line, until a command follows */
    split_invariant(split_inputs[3].text, split_inputs[3].len, lim, o);
    assert_int_equal(o->n_cmds, 3);
    assert_string_equal(o->cmds[0], "i[SET][a bA][it's][c]");
    assert_string_equal(o->cmds[1], "i[GET][k]");
    assert_string_equal(o->cmds[2], "m[x]");
    split_invariant(split_inputs[5].text, split_inputs[5].len, lim, o);
    assert_int_equal(o->n_cmds, 1);
    assert_int_equal(o->left, 10);
    split_invariant(split_inputs[6].text, split_inputs[6].len, lim, o);
    assert_int_equal(o->n_cmds, 0);
    assert_string_equal(o->error, "Protocol error: expected '$', got ':'");
    split_invariant(split_inputs[11].text, split_inputs[11].len, lim, o);
    assert_string_equal(o->error, msg_inline_big);
    split_invariant(split_inputs[12].text, split_inputs[12].len, lim, o);
    assert_string_equal(o->error, msg_length_big);
    free(o);
}

/* What was read is not read again: a call continues where the last one
 * stopped, whatever the bytes before that point now hold. */
static void progress_is_kept(void **unused)
{
    (void)unused;
    weir_resp_parser *p = make(ARGS, BULK, INLINE);
    weir_resp_command cmd;
    size_t used = 99;
    assert_int_equal(weir_resp_parse(p, T("*1\r\n$4\r\n"), &used, &cmd, NULL), WEIR_RESP_NEED_MORE);
    assert_int_equal(used, 0);
    assert_int_equal(weir_resp_parse(p, T("XXXXXXXXPING\r\n"), &used, &cmd, NULL),
                     WEIR_RESP_COMMAND);
    assert_int_equal(used, 14);
    assert_int_equal(cmd.argc, 1);
    assert_memory_equal(cmd.argv[0].p, "PING", 4);

    /* the same bytes again, or fewer than before (a caller's bug): the
     * command is read again from its start */
    assert_int_equal(weir_resp_parse(p, T("*1\r\n$4\r\nPI"), &used, &cmd, NULL),
                     WEIR_RESP_NEED_MORE);
    assert_int_equal(weir_resp_parse(p, T("*1\r\n$4\r\nPI"), &used, &cmd, NULL),
                     WEIR_RESP_NEED_MORE);
    assert_int_equal(weir_resp_parse(p, T("PING\r\n"), &used, &cmd, NULL), WEIR_RESP_COMMAND);
    assert_true(cmd.inline_form);
    assert_int_equal(used, 6);
    weir_resp_parser_free(p);
}

static void errors_are_sticky_until_reset(void **unused)
{
    (void)unused;
    weir_resp_parser *p = make(ARGS, BULK, INLINE);
    weir_resp_command cmd;
    const char *err = NULL;
    size_t used = 99;
    /* the empty command before the error is consumed */
    assert_int_equal(weir_resp_parse(p, T("*0\r\n*1\r\n$-1\r\n"), &used, &cmd, &err),
                     WEIR_RESP_ERROR);
    assert_int_equal(used, 4);
    assert_string_equal(err, msg_length);
    const char *first = err;
    err = NULL;
    assert_int_equal(weir_resp_parse(p, T("PING\r\n"), &used, &cmd, &err), WEIR_RESP_ERROR);
    assert_int_equal(used, 0);
    assert_ptr_equal(err, first);
    assert_int_equal(weir_resp_parse(p, NULL, 0, &used, &cmd, &err), WEIR_RESP_ERROR);
    assert_int_equal(used, 0);
    weir_resp_parser_reset(p);
    assert_int_equal(weir_resp_parse(p, T("PING\r\n"), &used, &cmd, &err), WEIR_RESP_COMMAND);
    assert_int_equal(cmd.argc, 1);
    /* the formatted message stays until reset too */
    assert_int_equal(weir_resp_parse(p, T("*1\r\n+x\r\n"), &used, &cmd, &err), WEIR_RESP_ERROR);
    assert_string_equal(err, "Protocol error: expected '$', got '+'");
    assert_int_equal(weir_resp_parse(p, T("*1\r\n:x\r\n"), &used, &cmd, &err), WEIR_RESP_ERROR);
    assert_string_equal(err, "Protocol error: expected '$', got '+'");
    /* reset in the middle of a command forgets it */
    weir_resp_parser_reset(p);
    assert_int_equal(weir_resp_parse(p, T("*2\r\n$1\r\na\r\n"), &used, &cmd, &err),
                     WEIR_RESP_NEED_MORE);
    weir_resp_parser_reset(p);
    assert_int_equal(weir_resp_parse(p, T("ECHO b\n"), &used, &cmd, NULL), WEIR_RESP_COMMAND);
    assert_int_equal(cmd.argc, 2);
    assert_memory_equal(cmd.argv[1].p, "b", 1);
    weir_resp_parser_free(p);
}

/* Before AUTH: Redis's caps of 10 arguments and 16384-byte arguments on
 * RESP arrays, in its words; inline commands keep the parser's; off lifts
 * them. */
static void preauth_caps(void **unused)
{
    (void)unused;
    weir_resp_parser *p = make(64, 1u << 20, INLINE);
    weir_resp_command cmd;
    const char *err = NULL;
    size_t used;
    weir_resp_parser_preauth(p, true);
    assert_int_equal(weir_resp_parse(p, T("*10\r\n"), &used, &cmd, &err), WEIR_RESP_NEED_MORE);
    weir_resp_parser_reset(p);
    assert_int_equal(weir_resp_parse(p, T("*11\r\n"), &used, &cmd, &err), WEIR_RESP_ERROR);
    assert_string_equal(err, "Protocol error: unauthenticated multibulk length");
    weir_resp_parser_reset(p);
    assert_int_equal(weir_resp_parse(p, T("*1\r\n$16384\r\n"), &used, &cmd, &err),
                     WEIR_RESP_NEED_MORE);
    weir_resp_parser_reset(p);
    assert_int_equal(weir_resp_parse(p, T("*1\r\n$16385\r\n"), &used, &cmd, &err), WEIR_RESP_ERROR);
    assert_string_equal(err, "Protocol error: unauthenticated bulk length");
    weir_resp_parser_reset(p);
    assert_int_equal(weir_resp_parse(p, T("a b c d e f g h i j k l\r\n"), &used, &cmd, &err),
                     WEIR_RESP_COMMAND);
    assert_int_equal(cmd.argc, 12);
    weir_resp_parser_preauth(p, false);
    assert_int_equal(weir_resp_parse(p, T("*11\r\n$16385\r\n"), &used, &cmd, &err),
                     WEIR_RESP_NEED_MORE);
    weir_resp_parser_free(p);
}

static void new_and_free(void **unused)
{
    (void)unused;
    assert_null(weir_resp_parser_new(NULL));
    weir_resp_parser_free(NULL);
    weir_resp_limits huge = limits(SIZE_MAX / 4, BULK, INLINE);
    assert_null(weir_resp_parser_new(&huge));
    huge = limits(ARGS, BULK, SIZE_MAX - 8);
    assert_null(weir_resp_parser_new(&huge));
    /* the caps are copied */
    weir_resp_limits lim = limits(1, BULK, INLINE);
    weir_resp_parser *p = weir_resp_parser_new(&lim);
    assert_non_null(p);
    lim.max_args = 100;
    const char *err = NULL;
    assert_int_equal(weir_resp_parse(p, T("*2\r\n"), NULL, NULL, &err), WEIR_RESP_ERROR);
    assert_string_equal(err, msg_count);
    weir_resp_parser_free(p);
}

/* ---------------------------------------------------------------- replies */

static void bytes_are(weir_buf *b, const char *want, size_t n)
{
    assert_true(weir_buf_ok(b));
    if (b->len != n || memcmp(b->p, want, n) != 0)
        fail_msg("got '%.*s' (%zu bytes), want '%.*s'", (int)b->len, b->p, b->len, (int)n, want);
    weir_buf_clear(b);
}

static void replies(void **unused)
{
    (void)unused;
    weir_buf b;
    weir_buf_init(&b, 1 << 20);
    weir_resp_simple(&b, "OK");
    bytes_are(&b, T("+OK\r\n"));
    weir_resp_simple(&b, "a\rb\nc");
    bytes_are(&b, T("+a b c\r\n"));
    weir_resp_error(&b, "ERR bad\r\nthing\n", 15);
    bytes_are(&b, T("-ERR bad  thing \r\n"));
    weir_resp_error(&b, "ERR x", 3);
    bytes_are(&b, T("-ERR\r\n"));
    weir_resp_errorf(&b, "ERR %s %d", "a\nb", -5);
    bytes_are(&b, T("-ERR a b -5\r\n"));
    weir_resp_errorf(&b, "%s", "");
    bytes_are(&b, T("-\r\n"));

    weir_resp_int(&b, 0);
    weir_resp_int(&b, -1);
    weir_resp_int(&b, 1234567890);
    bytes_are(&b, T(":0\r\n:-1\r\n:1234567890\r\n"));
    weir_resp_int(&b, INT64_MAX);
    weir_resp_int(&b, INT64_MIN);
    bytes_are(&b, T(":9223372036854775807\r\n:-9223372036854775808\r\n"));

    weir_resp_bulk(&b, "k\0\r\n", 4);
    bytes_are(&b, T("$4\r\nk\0\r\n\r\n"));
    weir_resp_bulk(&b, NULL, 0);
    weir_resp_bulk_str(&b, "");
    weir_resp_bulk_str(&b, "hello");
    bytes_are(&b, T("$0\r\n\r\n$0\r\n\r\n$5\r\nhello\r\n"));

    weir_resp_null(&b, false);
    bytes_are(&b, T("$-1\r\n"));
    weir_resp_null(&b, true);
    bytes_are(&b, T("_\r\n"));
    weir_resp_array(&b, 0);
    weir_resp_array(&b, 12);
    bytes_are(&b, T("*0\r\n*12\r\n"));
    weir_resp_map(&b, 2, false);
    bytes_are(&b, T("*4\r\n"));
    weir_resp_map(&b, 2, true);
    bytes_are(&b, T("%2\r\n"));
    weir_resp_set(&b, 3, false);
    bytes_are(&b, T("*3\r\n"));
    weir_resp_set(&b, 3, true);
    bytes_are(&b, T("~3\r\n"));

    /* a whole reply, as a command would build it */
    weir_resp_map(&b, 2, true);
    weir_resp_bulk_str(&b, "allowed");
    weir_resp_int(&b, 1);
    weir_resp_bulk_str(&b, "reset");
    weir_resp_null(&b, true);
    bytes_are(&b, T("%2\r\n$7\r\nallowed\r\n:1\r\n$5\r\nreset\r\n_\r\n"));

    /* a RESP2 map too large to count fails the buffer */
    weir_resp_map(&b, SIZE_MAX, false);
    assert_false(weir_buf_ok(&b));
    weir_buf_free(&b);
}

/* A reply that fits the buffer's cap exactly is written, however short of
 * memory the buffer is; one byte less and the buffer fails. */
static void replies_at_the_cap(void **unused)
{
    (void)unused;
    static const char pad[250] = {0};
    weir_buf b;
    for (int room = 4; room >= 3; room--) {
        weir_buf_init(&b, 250 + (size_t)room);
        weir_buf_put(&b, pad, sizeof(pad));
        weir_resp_int(&b, 7);
        assert_int_equal(weir_buf_ok(&b), room == 4);
        if (room == 4)
            assert_memory_equal(b.p + 250, ":7\r\n", 4);
        weir_buf_free(&b);

        weir_buf_init(&b, 250 + (size_t)room);
        weir_buf_put(&b, pad, sizeof(pad));
        weir_resp_array(&b, 2);
        assert_int_equal(weir_buf_ok(&b), room == 4);
        weir_buf_free(&b);
    }
    for (size_t max = 9; max >= 8; max--) {
        weir_buf_init(&b, max);
        weir_resp_bulk(&b, "abc", 3);
        assert_int_equal(weir_buf_ok(&b), max == 9);
        if (max == 9)
            assert_memory_equal(b.p, "$3\r\nabc\r\n", 9);
        weir_buf_free(&b);
    }
    weir_buf_init(&b, 5);
    weir_resp_simple(&b, "OK");
    weir_resp_simple(&b, "");
    assert_false(weir_buf_ok(&b));
    weir_buf_free(&b);
    for (size_t max = 9; max >= 8; max--) {
        weir_buf_init(&b, max);
        weir_resp_errorf(&b, "ERR %d", 42);
        assert_int_equal(weir_buf_ok(&b), max == 9);
        if (max == 9)
            bytes_are(&b, T("-ERR 42\r\n"));
        weir_buf_free(&b);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(multibulk_commands),
        cmocka_unit_test(multibulk_skips_what_redis_skips),
        cmocka_unit_test(inline_commands),
        cmocka_unit_test(inline_quoting),
        cmocka_unit_test(empty_commands_are_skipped),
        cmocka_unit_test(integers),
        cmocka_unit_test(arg_caps),
        cmocka_unit_test(line_caps),
        cmocka_unit_test(error_messages),
        cmocka_unit_test(pipelining),
        cmocka_unit_test(any_split_gives_the_same_commands),
        cmocka_unit_test(progress_is_kept),
        cmocka_unit_test(errors_are_sticky_until_reset),
        cmocka_unit_test(preauth_caps),
        cmocka_unit_test(new_and_free),
        cmocka_unit_test(replies),
        cmocka_unit_test(replies_at_the_cap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
