/*
 * test_bench_grpc.c - the parts of `weir bench grpc` that need no server:
 * its flags (defaults, values, and every refusal with exit code 2), the
 * --file request mix (syntax, caps, errors with line numbers), `{n}`
 * substitution, the encoded requests (decoded back with the server's own
 * decoder), and the latency histogram against known distributions.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "bench_grpc.h"
#include "bench_hist.h"
#include "bench_mix.h"
#include "fake.h"
#include "grpc/rls.h"

#define S 1000000000ull /* one second in ns */

/* ------------------------------------------------------------------------ */
/* Flags                                                                    */

/* Parse `weir bench grpc ARGS...` (NULL-terminated) with stderr captured
 * into @err (may be NULL). */
static int parse(weir_bench_grpc_opts *o, char *err, size_t len, const char *const *args)
{
    char *argv[64];
    int argc = 0;
    argv[argc++] = (char *)"grpc";
    for (; *args; args++)
        argv[argc++] = (char *)*args;
    argv[argc] = NULL;
    FILE *tmp = tmpfile();
    assert_non_null(tmp);
    fflush(stderr);
    fflush(stdout);
    int saved = dup(fileno(stderr));
    int saved_out = dup(fileno(stdout));
    dup2(fileno(tmp), fileno(stderr));
    dup2(fileno(tmp), fileno(stdout));
    int rc = weir_bench_grpc_parse_args(argc, argv, o);
    fflush(stderr);
    fflush(stdout);
    dup2(saved, fileno(stderr));
    dup2(saved_out, fileno(stdout));
    close(saved);
    close(saved_out);
    if (err) {
        rewind(tmp);
        size_t got = fread(err, 1, len - 1, tmp);
        err[got] = '\0';
    }
    fclose(tmp);
    return rc;
}

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

static void defaults(void **unused)
{
    (void)unused;
    weir_bench_grpc_opts o;
    const char *const none[] = {NULL};
    assert_int_equal(parse(&o, NULL, 0, none), -1);
    assert_string_equal(o.host, "127.0.0.1");
    assert_string_equal(o.port, "8081");
    assert_string_equal(o.authority, "127.0.0.1:8081");
    assert_int_equal(o.connections, 4);
    assert_int_equal(o.streams, 32);
    assert_int_equal(o.threads, 1);
    assert_true(o.duration_ns == 10 * S);
    assert_true(o.warmup_ns == S);
    assert_null(o.domain);
    assert_int_equal(o.n_descriptors, 0);
    assert_true(o.keys == 1000);
    assert_false(o.keys_given);
    assert_null(o.file);
    assert_true(o.hits == 0);
    assert_true(o.rate == 0);
    assert_false(o.json);
    assert_int_equal(o.encode, WEIR_BENCH_ENCODE_AUTO);
    weir_bench_grpc_opts_free(&o);
}

static void values(void **unused)
{
    (void)unused;
    weir_bench_grpc_opts o;
    assert_int_equal(
        parse(&o, NULL, 0,
              ARGS("--target", "[::1]:9000", "--connections", "8", "--streams=64", "--duration",
                   "2.5", "--warmup", "0", "--threads", "2", "--domain", "api", "--descriptor",
                   "user=u{n}", "--descriptor", "path=/x,method=GET", "--keys", "100000", "--hits",
                   "3", "--rate", "50000", "--json", "--encode", "live")),
        -1);
    assert_string_equal(o.host, "::1");
    assert_string_equal(o.port, "9000");
    assert_string_equal(o.authority, "[::1]:9000");
    assert_int_equal(o.connections, 8);
    assert_int_equal(o.streams, 64);
    assert_int_equal(o.threads, 2);
    assert_true(o.duration_ns == 2500000000ull);
    assert_true(o.warmup_ns == 0);
    assert_string_equal(o.domain, "api");
    assert_int_equal(o.n_descriptors, 2);
    assert_string_equal(o.descriptors[0], "user=u{n}");
    assert_string_equal(o.descriptors[1], "path=/x,method=GET");
    assert_true(o.keys == 100000);
    assert_true(o.keys_given);
    assert_true(o.hits == 3);
    assert_true(o.rate == 50000);
    assert_true(o.json);
    assert_int_equal(o.encode, WEIR_BENCH_ENCODE_LIVE);
    weir_bench_grpc_opts_free(&o);

    char out[8192];
    assert_int_equal(parse(&o, out, sizeof out, ARGS("--help")), 0);
    assert_non_null(strstr(out, "--descriptor"));
    assert_non_null(strstr(out, "DOMAIN KEY=VALUE"));
}

static void refuses_bad_flags(void **unused)
{
    (void)unused;
    static const struct {
        const char *args[8];
        const char *says;
    } bad[] = {
        {{"--bogus"}, "unknown option '--bogus'"},
        {{"target"}, "unexpected argument"},
        {{"--connections"}, "--connections needs a value"},
        {{"--connections", "0"}, "--connections wants an integer 1..10000"},
        {{"--connections", "10001"}, "--connections wants an integer"},
        {{"--connections", "-1"}, "--connections wants an integer"},
        {{"--streams", "x"}, "--streams wants an integer"},
        {{"--streams", "100001"}, "--streams wants an integer"},
        {{"--threads", "0"}, "--threads wants an integer"},
        {{"--threads", "5"}, "--threads 5 is more than --connections 4"},
        {{"--duration", "0"}, "--duration must be more than 0"},
        {{"--duration", "ten"}, "--duration wants a duration"},
        {{"--duration", "1.5x"}, "--duration wants a duration"},
        {{"--duration", "86401"}, "--duration wants a duration"},
        {{"--duration", "1."}, "--duration wants a duration"},
        {{"--duration", "0.0000000001"}, "--duration wants a duration"},
        {{"--warmup", "-1"}, "--warmup wants a duration"},
        {{"--duration", "1", "--duration", "2"}, "--duration given twice"},
        {{"--target", "localhost"}, "--target wants HOST:PORT"},
        {{"--target", ":8081"}, "--target wants HOST:PORT"},
        {{"--target", "h:0"}, "--target wants HOST:PORT"},
        {{"--target", "h:65536"}, "--target wants HOST:PORT"},
        {{"--target", "::1:8081"}, "--target wants HOST:PORT"},
        {{"--target", "[::1]8081"}, "--target wants HOST:PORT"},
        {{"--keys", "0"}, "--keys wants an integer 1..4294967296"},
        {{"--hits", "0"}, "--hits wants an integer 1..4294967295"},
        {{"--hits", "4294967296"}, "--hits wants an integer"},
        {{"--rate", "1e5"}, "--rate wants an integer"},
        {{"--encode", "fast"}, "--encode wants auto, table or live"},
        {{"--json=yes"}, "--json takes no value"},
        {{"--domain", ""}, "--domain is empty"},
        {{"--file", "m.txt", "--descriptor", "a=b"}, "give it, or --domain and --descriptor"},
        {{"--file", "m.txt", "--domain", "d"}, "give it, or --domain and --descriptor"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        weir_bench_grpc_opts o;
        char err[1024];
        int rc = parse(&o, err, sizeof err, bad[i].args);
        if (rc != 2 || !strstr(err, bad[i].says))
            fail_msg("%s ...: exit %d, stderr '%s'; wanted 2 and '%s'", bad[i].args[0], rc, err,
                     bad[i].says);
        assert_non_null(strstr(err, "weir bench grpc --help"));
    }
}

static void parses_seconds_and_targets(void **unused)
{
    (void)unused;
    uint64_t ns = 0, max = 86400 * S;
    assert_true(weir_bench_parse_seconds("10", max, &ns) && ns == 10 * S);
    assert_true(weir_bench_parse_seconds("0", max, &ns) && ns == 0);
    assert_true(weir_bench_parse_seconds("2.5", max, &ns) && ns == 2500000000ull);
    assert_true(weir_bench_parse_seconds("0.000001", max, &ns) && ns == 1000);
    assert_false(weir_bench_parse_seconds("0.000000001", max, &ns)); /* finer than 1us */
    assert_true(weir_bench_parse_seconds("1m30s", max, &ns) && ns == 90 * S);
    assert_true(weir_bench_parse_seconds("30s", max, &ns) && ns == 30 * S);
    assert_true(weir_bench_parse_seconds("250ms", max, &ns) && ns == 250000000ull);
    assert_true(weir_bench_parse_seconds("1.5ms", max, &ns) && ns == 1500000ull);
    assert_true(weir_bench_parse_seconds("2m", max, &ns) && ns == 120 * S);
    assert_true(weir_bench_parse_seconds("86400", max, &ns) && ns == max);
    assert_false(weir_bench_parse_seconds("86400.5", max, &ns));
    assert_false(weir_bench_parse_seconds("99999999999999999999999", max, &ns));
    assert_false(weir_bench_parse_seconds("", max, &ns));
    assert_false(weir_bench_parse_seconds(".5", max, &ns));
    assert_false(weir_bench_parse_seconds("5 s", max, &ns));
    assert_true(weir_bench_parse_seconds("5us", max, &ns) && ns == 5000);

    char host[64], port[8];
    assert_true(weir_bench_parse_target("127.0.0.1:8081", host, sizeof host, port, sizeof port));
    assert_string_equal(host, "127.0.0.1");
    assert_string_equal(port, "8081");
    assert_true(weir_bench_parse_target("rls.internal:443", host, sizeof host, port, sizeof port));
    assert_string_equal(host, "rls.internal");
    assert_true(weir_bench_parse_target("[fe80::1]:1", host, sizeof host, port, sizeof port));
    assert_string_equal(host, "fe80::1");
    assert_string_equal(port, "1");
    assert_true(weir_bench_parse_target("h:08081", host, sizeof host, port, sizeof port));
    assert_string_equal(port, "8081");
    assert_false(weir_bench_parse_target("[]:80", host, sizeof host, port, sizeof port));
    assert_false(weir_bench_parse_target("h:", host, sizeof host, port, sizeof port));
    assert_false(weir_bench_parse_target("h:80x", host, sizeof host, port, sizeof port));
    char small[4];
    assert_false(weir_bench_parse_target("long:80", small, sizeof small, port, sizeof port));
}

/* ------------------------------------------------------------------------ */
/* The request mix                                                          */

static void expect_entry(const weir_bench_desc *d, size_t i, const char *key, const char *value)
{
    assert_true(i < d->n_entries);
    const weir_bench_entry *e = &d->entries[i];
    if (e->key_len != strlen(key) || memcmp(e->key, key, e->key_len) != 0 ||
        e->value_len != strlen(value) || memcmp(e->value, value, e->value_len) != 0)
        fail_msg("entry %zu is %.*s=%.*s, not %s=%s", i, (int)e->key_len, e->key, (int)e->value_len,
                 e->value, key, value);
}

static void parses_a_file(void **unused)
{
    (void)unused;
    const char text[] = "# a comment\n"
                        "\n"
                        "api remote_address=10.0.0.{n};path=/login,method=POST\r\n"
                        "  \t  \n"
                        "\tother\t k=v \n"
                        "api a==b,c=\n"
                        "api x=1;y=2;z=3"; /* no final newline */
    weir_bench_mix m;
    weir_bench_mix_init(&m);
    weir_bench_mix_error err = {0, ""};
    if (!weir_bench_mix_parse_file(&m, text, strlen(text), &err))
        fail_msg("line %llu: %s", (unsigned long long)err.line, err.reason);
    assert_int_equal(m.n, 4);

    const weir_bench_template *t = &m.t[0];
    assert_int_equal(t->domain_len, 3);
    assert_memory_equal(t->domain, "api", 3);
    assert_int_equal(t->n_descs, 2);
    assert_int_equal(t->n_entries, 3);
    assert_true(t->has_mark);
    expect_entry(&t->descs[0], 0, "remote_address", "10.0.0.{n}");
    assert_int_equal(t->descs[0].entries[0].marks, 1);
    expect_entry(&t->descs[1], 0, "path", "/login");
    expect_entry(&t->descs[1], 1, "method", "POST");

    t = &m.t[1];
    assert_memory_equal(t->domain, "other", 5);
    assert_int_equal(t->n_descs, 1);
    expect_entry(&t->descs[0], 0, "k", "v");
    assert_false(t->has_mark);

    t = &m.t[2]; /* '=' may be in a value; a value may be empty */
    expect_entry(&t->descs[0], 0, "a", "=b");
    expect_entry(&t->descs[0], 1, "c", "");

    t = &m.t[3];
    assert_int_equal(t->n_descs, 3);
    expect_entry(&t->descs[2], 0, "z", "3");

    assert_true(m.has_mark);
    assert_int_equal(m.max_descs, 3);
    assert_int_equal(m.max_entries, 3);
    assert_true(weir_bench_mix_distinct(&m, 1000) == 1003);
    assert_true(weir_bench_mix_distinct(&m, UINT64_MAX) == UINT64_MAX);
    weir_bench_mix_free(&m);
}

/* A line of @n descriptors of @e entries each. */
static char *wide_line(size_t n, size_t e)
{
    char *s = malloc(16 + n * e * 8);
    assert_non_null(s);
    strcpy(s, "d ");
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < e; j++)
            sprintf(s + strlen(s), "%sk=%zu", j ? "," : (i ? ";" : ""), j);
    return s;
}

static void file_errors_name_their_line(void **unused)
{
    (void)unused;
    char long_line[WEIR_BENCH_MAX_LINE + 32];
    memset(long_line, 'v', sizeof long_line);
    memcpy(long_line, "d k=", 4);
    long_line[WEIR_BENCH_MAX_LINE + 1] = '\0'; /* one byte over */
    char *many_descs = wide_line(WEIR_BENCH_MAX_DESCRIPTORS + 1, 1);
    char *many_entries = wide_line(1, WEIR_BENCH_MAX_ENTRIES + 1);
    char *most = wide_line(WEIR_BENCH_MAX_DESCRIPTORS, 1);
    static const char nul[] = "d a=b\nd a=\0b\n";
    const struct {
        const char *text;
        size_t len; /* 0: strlen */
        uint64_t line;
        const char *says;
    } bad[] = {
        {"d a=b\napi\n", 0, 2, "domain 'api' has no descriptors"},
        {"d a=b\n\n# c\napi user\n", 0, 4, "'user' has no '='"},
        {"d =v\n", 0, 1, "'=v' has an empty key"},
        {"d a=b;;c=d\n", 0, 1, "empty descriptor"},
        {"d a=b;\n", 0, 1, "empty descriptor"},
        {"d ;a=b\n", 0, 1, "empty descriptor"},
        {"d a=b,,c=d\n", 0, 1, "empty entry"},
        {"d a=b,\n", 0, 1, "empty entry"},
        {"d a=b c=d\n", 0, 1, "holds a space"},
        {"a=b c=d\n", 0, 1, "no domain"},
        {"d\x01 a=b\n", 0, 1, "control character in the domain"},
        {"d a=\x7f\n", 0, 1, "holds a space or a control character"},
        {long_line, 0, 1, "longer than 4096 bytes"},
        {many_descs, 0, 1, "more than 64 descriptors"},
        {many_entries, 0, 1, "more than 64 entries"},
        {nul, sizeof nul - 1, 2, "a NUL byte"},
        {"# nothing\n\n", 0, 2, "no requests in the file"},
        {"", 0, 0, "no requests in the file"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        weir_bench_mix m;
        weir_bench_mix_init(&m);
        weir_bench_mix_error err = {99, ""};
        size_t len = bad[i].len ? bad[i].len : strlen(bad[i].text);
        bool ok = weir_bench_mix_parse_file(&m, bad[i].text, len, &err);
        if (ok || err.line != bad[i].line || !strstr(err.reason, bad[i].says))
            fail_msg("case %zu: ok %d, line %llu '%s'; wanted line %llu '%s'", i, ok,
                     (unsigned long long)err.line, err.reason, (unsigned long long)bad[i].line,
                     bad[i].says);
        weir_bench_mix_free(&m);
    }

    /* the caps themselves pass */
    weir_bench_mix m;
    weir_bench_mix_init(&m);
    weir_bench_mix_error err;
    assert_true(weir_bench_mix_parse_file(&m, most, strlen(most), &err));
    assert_int_equal(m.t[0].n_descs, WEIR_BENCH_MAX_DESCRIPTORS);
    weir_bench_mix_free(&m);
    long_line[WEIR_BENCH_MAX_LINE] = '\0';
    weir_bench_mix_init(&m);
    assert_true(weir_bench_mix_parse_file(&m, long_line, strlen(long_line), &err));
    weir_bench_mix_free(&m);
    free(many_descs);
    free(many_entries);
    free(most);
}

static void flag_descriptors(void **unused)
{
    (void)unused;
    weir_bench_mix m;
    weir_bench_mix_error err;
    weir_bench_mix_init(&m);
    const char *const two[] = {"user=u{n}", "path=/a,method=GET"};
    assert_true(weir_bench_mix_add_flags(&m, "api", two, 2, &err));
    assert_int_equal(m.n, 1);
    assert_int_equal(m.t[0].n_descs, 2);
    expect_entry(&m.t[0].descs[0], 0, "user", "u{n}");
    expect_entry(&m.t[0].descs[1], 1, "method", "GET");
    weir_bench_mix_free(&m);

    const struct {
        const char *desc;
        const char *says;
    } bad[] = {
        {"a=b;c=d", "one descriptor per flag"},
        {"", "empty descriptor"},
        {"user", "'user' has no '='"},
        {"a=b,", "empty entry"},
        {"a=b c", "holds a space"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        weir_bench_mix_init(&m);
        if (weir_bench_mix_add_flags(&m, "d", &bad[i].desc, 1, &err) ||
            !strstr(err.reason, bad[i].says) || err.line != 0)
            fail_msg("--descriptor '%s': '%s'; wanted '%s'", bad[i].desc, err.reason, bad[i].says);
        weir_bench_mix_free(&m);
    }
    weir_bench_mix_init(&m);
    assert_false(weir_bench_mix_add_flags(&m, "", two, 1, &err));
    assert_false(weir_bench_mix_add_flags(&m, "d", two, 0, &err));
    weir_bench_mix_free(&m);
}

static char *write_temp(const char *text)
{
    char *path = strdup("/tmp/weir-test-bench-XXXXXX");
    assert_non_null(path);
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

/* weir_bench_grpc_load_mix() after parsing @args; stderr into @err. */
static int load(const char *const *args, weir_bench_mix *m, char *err, size_t len)
{
    weir_bench_grpc_opts o;
    int rc = parse(&o, err, len, args);
    if (rc >= 0)
        return rc;
    FILE *tmp = tmpfile();
    fflush(stderr);
    int saved = dup(fileno(stderr));
    dup2(fileno(tmp), fileno(stderr));
    rc = weir_bench_grpc_load_mix(&o, m);
    fflush(stderr);
    dup2(saved, fileno(stderr));
    close(saved);
    rewind(tmp);
    size_t got = fread(err, 1, len - 1, tmp);
    err[got] = '\0';
    fclose(tmp);
    weir_bench_grpc_opts_free(&o);
    return rc;
}

static void loads_the_mix_of_the_flags(void **unused)
{
    (void)unused;
    char err[1024];
    weir_bench_mix m;

    weir_bench_mix_init(&m);
    assert_int_equal(load(ARGS("--keys", "5"), &m, err, sizeof err), 2);
    assert_non_null(strstr(err, "--keys has nothing to do"));
    weir_bench_mix_free(&m);

    weir_bench_mix_init(&m); /* the default request */
    const char *const none[] = {NULL};
    assert_int_equal(load(none, &m, err, sizeof err), -1);
    assert_int_equal(m.n, 1);
    assert_memory_equal(m.t[0].domain, "bench", 5);
    expect_entry(&m.t[0].descs[0], 0, "key", "k1");
    weir_bench_mix_free(&m);

    char *good = write_temp("d a=u{n}\nd b=c\n");
    weir_bench_mix_init(&m);
    assert_int_equal(load(ARGS("--file", good, "--keys", "7"), &m, err, sizeof err), -1);
    assert_int_equal(m.n, 2);
    assert_true(weir_bench_mix_distinct(&m, 7) == 8);
    weir_bench_mix_free(&m);
    unlink(good);
    free(good);

    char *bad = write_temp("d a=b\n# ok\nd a=b;\n");
    weir_bench_mix_init(&m);
    assert_int_equal(load(ARGS("--file", bad), &m, err, sizeof err), 2);
    char want[128];
    snprintf(want, sizeof want, "%s:3: empty descriptor", bad);
    if (!strstr(err, want))
        fail_msg("stderr '%s' lacks '%s'", err, want);
    weir_bench_mix_free(&m);
    unlink(bad);
    free(bad);

    weir_bench_mix_init(&m);
    assert_int_equal(load(ARGS("--file", "/nonexistent/mix.txt"), &m, err, sizeof err), 2);
    assert_non_null(strstr(err, "/nonexistent/mix.txt"));
    weir_bench_mix_free(&m);

    weir_bench_mix_init(&m);
    assert_int_equal(load(ARGS("--descriptor", "x"), &m, err, sizeof err), 2);
    assert_non_null(strstr(err, "'x' has no '='"));
    weir_bench_mix_free(&m);
}

/* ------------------------------------------------------------------------ */
/* {n} and the encoding                                                     */

static void substitutes_marks(void **unused)
{
    (void)unused;
    static const struct {
        const char *value;
        uint64_t n;
        const char *want;
    } cases[] = {
        {"u{n}", 42, "u42"},   {"{n}", 0, "0"},
        {"{n}-{n}", 7, "7-7"}, {"{{n}}", 7, "{7}"},
        {"{n", 7, "{n"},       {"n}", 7, "n}"},
        {"{N}", 7, "{N}"},     {"plain", 7, "plain"},
        {"", 7, ""},           {"k{n}", UINT64_MAX, "k18446744073709551615"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[128];
        size_t n = weir_bench_expand(cases[i].value, strlen(cases[i].value), cases[i].n, out);
        out[n] = '\0';
        assert_string_equal(out, cases[i].want);
    }
}

/* Decode the gRPC message @p (@len bytes, prefix included). */
static const weir_request *decode(weir_rls_decoder *d, const uint8_t *p, size_t len)
{
    assert_true(len >= WEIR_GRPC_PREFIX_BYTES);
    assert_int_equal(p[0], 0); /* not compressed */
    size_t msg_len = (size_t)p[1] << 24 | (size_t)p[2] << 16 | (size_t)p[3] << 8 | p[4];
    assert_int_equal(msg_len, len - WEIR_GRPC_PREFIX_BYTES);
    weir_grpc_error err;
    assert_true(weir_rls_decode(d, p + WEIR_GRPC_PREFIX_BYTES, msg_len, &err));
    return weir_rls_request(d);
}

static void expect_decoded(const weir_request *r, size_t desc, size_t entry, const char *key,
                           const char *value)
{
    assert_true(desc < r->n_descriptors);
    const weir_descriptor *d = &r->descriptors[desc];
    assert_true(entry < d->n_entries);
    const weir_entry *e = &d->entries[entry];
    assert_int_equal(e->key_len, strlen(key));
    assert_memory_equal(e->key, key, e->key_len);
    assert_int_equal(e->value_len, strlen(value));
    assert_memory_equal(e->value, value, e->value_len);
}

static void encodes_requests(void **unused)
{
    (void)unused;
    const char text[] = "api user=u{n},tier=gold;path=/x{n}y{n}\n"
                        "other k=v\n";
    weir_bench_mix m;
    weir_bench_mix_init(&m);
    weir_bench_mix_error merr;
    assert_true(weir_bench_mix_parse_file(&m, text, strlen(text), &merr));
    weir_rls_decoder *d = weir_rls_decoder_new(NULL);
    assert_non_null(d);
    weir_bench_scratch s;
    assert_true(weir_bench_scratch_init(&s, &m));
    weir_buf out;
    weir_buf_init(&out, 1 << 20);

    /* live: per request */
    assert_true(weir_bench_encode(&m.t[0], 12345, 3, &s, &out));
    const weir_request *r = decode(d, (const uint8_t *)out.p, out.len);
    assert_int_equal(r->domain_len, 3);
    assert_memory_equal(r->domain, "api", 3);
    assert_int_equal(r->n_descriptors, 2);
    expect_decoded(r, 0, 0, "user", "u12345");
    expect_decoded(r, 0, 1, "tier", "gold");
    expect_decoded(r, 1, 0, "path", "/x12345y12345");
    assert_true(r->hits == 3);

    weir_buf_clear(&out);
    assert_true(weir_bench_encode(&m.t[1], 9, 0, &s, &out));
    r = decode(d, (const uint8_t *)out.p, out.len);
    assert_memory_equal(r->domain, "other", 5);
    expect_decoded(r, 0, 0, "k", "v");
    assert_true(r->hits == 0 || r->hits == 1); /* not sent: the server's 1 */

    /* the table holds the same bytes, one request per key number */
    assert_true(weir_bench_mix_encode_all(&m, 50, 3));
    assert_int_equal(m.n_encoded, 51);
    for (uint64_t n = 0; n < 50; n += 7) {
        weir_buf_clear(&out);
        assert_true(weir_bench_encode(&m.t[0], n, 3, &s, &out));
        size_t len;
        const uint8_t *p = weir_bench_mix_encoded(&m, 0, n, &len);
        assert_int_equal(len, out.len);
        assert_memory_equal(p, out.p, len);
    }
    size_t len;
    const uint8_t *p = weir_bench_mix_encoded(&m, 1, 0, &len);
    r = decode(d, p, len);
    assert_memory_equal(r->domain, "other", 5);
    assert_true(r->hits == 3);

    /* too many distinct requests for a table */
    assert_false(weir_bench_mix_encode_all(&m, (uint64_t)WEIR_BENCH_MAX_TABLE + 1, 0));

    weir_buf_free(&out);
    weir_bench_scratch_free(&s);
    weir_rls_decoder_free(d);
    weir_bench_mix_free(&m);
}

static void picks_uniformly(void **unused)
{
    (void)unused;
    uint64_t state = 1, seen[10] = {0};
    for (int i = 0; i < 100000; i++) {
        uint64_t v = weir_bench_below(&state, 10);
        assert_true(v < 10);
        seen[v]++;
    }
    for (int i = 0; i < 10; i++)
        assert_true(seen[i] > 9500 && seen[i] < 10500);
    assert_true(weir_bench_below(&state, 1) == 0);
}

/* ------------------------------------------------------------------------ */
/* The histogram                                                            */

static void buckets_cover_every_value(void **unused)
{
    (void)unused;
    /* exact below 128 */
    for (uint64_t v = 0; v < 128; v++) {
        assert_int_equal(weir_hist_index(v), v);
        assert_true(weir_hist_bucket_low((uint32_t)v) == v);
        assert_true(weir_hist_bucket_width((uint32_t)v) == 1);
    }
    /* the buckets tile the values in order, each at most 1/64 of its low */
    for (uint32_t i = 1; i < WEIR_HIST_BUCKETS; i++) {
        uint64_t low = weir_hist_bucket_low(i), width = weir_hist_bucket_width(i);
        uint64_t prev = weir_hist_bucket_low(i - 1) + weir_hist_bucket_width(i - 1);
        assert_true(low == prev);
        assert_true(width * 64 <= low || i < 128);
        assert_int_equal(weir_hist_index(low), i);
        assert_int_equal(weir_hist_index(low + width - 1), i);
    }
    assert_int_equal(weir_hist_index(UINT64_MAX), WEIR_HIST_BUCKETS - 1);
    uint64_t seed = test_seed(__func__);
    test_rng rng = {seed};
    for (int i = 0; i < 100000; i++) {
        uint64_t v = rng_next(&rng) >> rng_below(&rng, 64);
        uint32_t idx = weir_hist_index(v);
        uint64_t low = weir_hist_bucket_low(idx);
        assert_true(low <= v && v - low < weir_hist_bucket_width(idx));
    }
}

/* |got - want| <= want * 0.8% */
static void near(uint64_t got, uint64_t want, const char *what)
{
    double err = ((double)got - (double)want) / (double)want;
    if (err > 0.008 || err < -0.008)
        fail_msg("%s: %llu, wanted %llu within 0.8%% (off by %.3f%%)", what,
                 (unsigned long long)got, (unsigned long long)want, err * 100);
}

static void percentiles_of_known_distributions(void **unused)
{
    (void)unused;
    weir_hist h;
    weir_hist_init(&h);
    assert_true(weir_hist_percentile(&h, 500000) == 0);

    /* uniform: 1 us .. 10 ms, 1 us apart (ns values) */
    for (uint64_t v = 1000; v <= 10000000; v += 1000)
        weir_hist_record(&h, v);
    assert_true(h.count == 10000);
    assert_true(h.min == 1000);
    assert_true(h.max == 10000000);
    near(weir_hist_percentile(&h, 500000), 5000000, "p50");
    near(weir_hist_percentile(&h, 900000), 9000000, "p90");
    near(weir_hist_percentile(&h, 990000), 9900000, "p99");
    near(weir_hist_percentile(&h, 999000), 9990000, "p999");
    assert_true(weir_hist_percentile(&h, 1000000) == 10000000);
    assert_true(weir_hist_percentile(&h, 0) == 1000); /* the first value */

    /* a tail: 99% at 200 us, 0.9% at 5 ms, 0.1% at 80 ms */
    weir_hist t;
    weir_hist_init(&t);
    for (int i = 0; i < 99000; i++)
        weir_hist_record(&t, 200000);
    for (int i = 0; i < 900; i++)
        weir_hist_record(&t, 5000000);
    for (int i = 0; i < 100; i++)
        weir_hist_record(&t, 80000000);
    near(weir_hist_percentile(&t, 500000), 200000, "tail p50");
    near(weir_hist_percentile(&t, 990000), 200000, "tail p99");
    near(weir_hist_percentile(&t, 991000), 5000000, "tail p99.1");
    near(weir_hist_percentile(&t, 999000), 5000000, "tail p999");
    near(weir_hist_percentile(&t, 999001), 80000000, "tail p99.9001");
    assert_true(weir_hist_percentile(&t, 1000000) == 80000000);

    /* small values are exact */
    weir_hist e;
    weir_hist_init(&e);
    for (uint64_t v = 1; v <= 100; v++)
        weir_hist_record(&e, v);
    assert_true(weir_hist_percentile(&e, 500000) == 50);
    assert_true(weir_hist_percentile(&e, 990000) == 99);
    assert_true(weir_hist_percentile(&e, 10000) == 1);

    /* merging two halves gives the whole */
    weir_hist a, b;
    weir_hist_init(&a);
    weir_hist_init(&b);
    for (uint64_t v = 1000; v <= 10000000; v += 1000)
        weir_hist_record(v % 2000 ? &a : &b, v);
    weir_hist_merge(&a, &b);
    assert_true(a.count == h.count && a.min == h.min && a.max == h.max);
    assert_memory_equal(a.buckets, h.buckets, sizeof h.buckets);
    weir_hist empty;
    weir_hist_init(&empty);
    weir_hist_merge(&a, &empty);
    assert_true(a.min == h.min);
}

static void percentiles_of_random_samples(void **unused)
{
    (void)unused;
    /* log-uniform samples from 10 us to 1 s; every percentile within 0.8%
     * of the exact order statistic */
    enum { N = 20001 };
    uint64_t *v = malloc(N * sizeof *v);
    assert_non_null(v);
    test_rng rng = {test_seed(__func__)};
    weir_hist h;
    weir_hist_init(&h);
    for (int i = 0; i < N; i++) {
        uint64_t base = 10000u << rng_below(&rng, 17);
        v[i] = base + rng_below(&rng, base);
        weir_hist_record(&h, v[i]);
    }
    /* sort (insertion sort is too slow; a simple shell sort) */
    for (size_t gap = N / 2; gap > 0; gap /= 2)
        for (size_t i = gap; i < N; i++)
            for (size_t j = i; j >= gap && v[j - gap] > v[j]; j -= gap) {
                uint64_t x = v[j];
                v[j] = v[j - gap];
                v[j - gap] = x;
            }
    static const uint32_t ppm[] = {1000, 250000, 500000, 900000, 990000, 999000};
    for (size_t k = 0; k < sizeof ppm / sizeof ppm[0]; k++) {
        size_t rank = (size_t)(((uint64_t)N * ppm[k] + 999999) / 1000000);
        near(weir_hist_percentile(&h, ppm[k]), v[rank - 1], "random percentile");
    }
    assert_true(weir_hist_percentile(&h, 1000000) == v[N - 1]);
    free(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(defaults),
        cmocka_unit_test(values),
        cmocka_unit_test(refuses_bad_flags),
        cmocka_unit_test(parses_seconds_and_targets),
        cmocka_unit_test(parses_a_file),
        cmocka_unit_test(file_errors_name_their_line),
        cmocka_unit_test(flag_descriptors),
        cmocka_unit_test(loads_the_mix_of_the_flags),
        cmocka_unit_test(substitutes_marks),
        cmocka_unit_test(encodes_requests),
        cmocka_unit_test(picks_uniformly),
        cmocka_unit_test(buckets_cover_every_value),
        cmocka_unit_test(percentiles_of_known_distributions),
        cmocka_unit_test(percentiles_of_random_samples),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
