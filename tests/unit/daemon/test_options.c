/*
 * test_options.c - `weir serve` settings: defaults, WEIR_* variables, flags
 * over variables, value syntax, and the errors a typo gets.
 */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "options.h"

/* Parses @argv (NULL-terminated, without "serve") into *o; returns the
 * exit code and leaves what went to stderr in @err_text. */
static int parse(serve_options *o, bool *done, char *err_text, size_t cap, ...)
{
    static char serve[] = "serve";
    char *argv[32] = {serve};
    int argc = 1;
    va_list ap;
    va_start(ap, cap);
    for (char *a; (a = va_arg(ap, char *)) != NULL && argc < 31;)
        argv[argc++] = a;
    va_end(ap);
    FILE *out = fopen("/dev/null", "w");
    FILE *err = tmpfile();
    assert_non_null(out);
    assert_non_null(err);
    int rc = serve_options_parse(o, argc, argv, out, err, done);
    rewind(err);
    size_t n = fread(err_text, 1, cap - 1, err);
    err_text[n] = '\0';
    fclose(out);
    fclose(err);
    return rc;
}

static void clear_env(void)
{
    static const char *const vars[] = {"WEIR_HTTP",
                                       "WEIR_THREADS",
                                       "WEIR_MAX_MEMORY",
                                       "WEIR_CHECK_HEADERS",
                                       "WEIR_IDLE_TIMEOUT",
                                       "WEIR_HEADERS",
                                       "WEIR_LOG_FORMAT",
                                       "WEIR_DEFAULT_ALGORITHM",
                                       "HOST",
                                       "PORT",
                                       "GRPC_HOST",
                                       "GRPC_PORT",
                                       "LOG_LEVEL",
                                       "LOG_FORMAT",
                                       "MERGE_DOMAIN_CONFIG",
                                       "SHADOW_MODE",
                                       "LIMIT_RESPONSE_HEADERS_ENABLED",
                                       "LIMIT_LIMIT_HEADER",
                                       "LIMIT_REMAINING_HEADER",
                                       "LIMIT_RESET_HEADER",
                                       "WEIR_UPSTREAM_HEADER_NAMES",
                                       "REDIS_URL",
                                       "REDIS_AUTH",
                                       "REDIS_SOCKET_TYPE",
                                       "REDIS_TYPE",
                                       "REDIS_TLS",
                                       "RUNTIME_ROOT",
                                       "RUNTIME_SUBDIRECTORY",
                                       "RUNTIME_APPDIRECTORY",
                                       "FORCE_START_WITHOUT_INITIAL_CONFIG",
                                       "HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED",
                                       "USE_STATSD",
                                       "STATSD_HOST",
                                       "STATSD_PORT",
                                       "STATS_FLUSH_INTERVAL",
                                       "NEAR_LIMIT_RATIO",
                                       "WEIR_TOP_KEYS"};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
        unsetenv(vars[i]);
}

static void defaults(void **unused)
{
    (void)unused;
    clear_env();
    serve_options o;
    bool done;
    char err[512];
    assert_int_equal(parse(&o, &done, err, sizeof(err), NULL), 0);
    assert_false(done);
    assert_string_equal(o.http, "127.0.0.1:8080");
    assert_string_equal(o.grpc, "127.0.0.1:8081");
    assert_string_equal(o.resp, "127.0.0.1:6380");
    assert_string_equal(o.resp_password, "");
    assert_int_equal(o.resp_idle_timeout_ms, 0); /* never, as Redis */
    assert_string_equal(o.store, "memory");
    assert_int_equal(o.threads, 0);
    assert_int_equal(o.max_memory, 512u << 20); /* bounded, as nginx's zones */
    assert_int_equal(o.max_header_bytes, 16 * 1024);
    assert_int_equal(o.max_body_bytes, 64 * 1024);
    assert_int_equal(o.idle_timeout_ms, 60000);
    assert_int_equal(o.request_timeout_ms, 10000);
    assert_int_equal(o.default_algorithm, WEIR_ALGO_FIXED_WINDOW);
    assert_true(o.headers.ietf && o.headers.legacy && o.headers.retry_after);
    assert_true(o.watch);
    assert_false(o.log_json);
    assert_int_equal(o.n_check_headers, 0);
}

static void environment_then_flags(void **unused)
{
    (void)unused;
    clear_env();
    setenv("WEIR_HTTP", "127.0.0.1:9000", 1);
    setenv("WEIR_THREADS", "3", 1);
    setenv("WEIR_MAX_MEMORY", "512MiB", 1);
    setenv("WEIR_CHECK_HEADERS", "X-Real-IP=remote_address,X-User=user", 1);
    setenv("WEIR_IDLE_TIMEOUT", "1500ms", 1);
    setenv("WEIR_LOG_FORMAT", "json", 1);
    serve_options o;
    bool done;
    char err[512];
    assert_int_equal(parse(&o, &done, err, sizeof(err), "--threads", "2", NULL), 0);
    assert_string_equal(o.http, "127.0.0.1:9000");
    assert_int_equal(o.threads, 2); /* the flag wins */
    assert_int_equal(o.max_memory, 512u * 1024 * 1024);
    assert_int_equal(o.idle_timeout_ms, 1500);
    assert_true(o.log_json);
    assert_int_equal(o.n_check_headers, 2);
    assert_string_equal(o.check_headers[0].header, "X-Real-IP");
    assert_string_equal(o.check_headers[0].key, "remote_address");
    assert_string_equal(o.check_headers[1].header, "X-User");
    assert_string_equal(o.check_headers[1].key, "user");
    /* flags replace the environment's list; --flag=value works too */
    assert_int_equal(parse(&o, &done, err, sizeof(err), "--check-header=A=a", "--check-header",
                           "B=b", "--http", "", "--headers", "legacy", NULL),
                     0);
    assert_int_equal(o.n_check_headers, 2);
    assert_string_equal(o.check_headers[0].header, "A");
    assert_string_equal(o.check_headers[1].key, "b");
    assert_string_equal(o.http, ""); /* an empty value disables the listener */
    assert_false(o.headers.ietf);
    assert_true(o.headers.legacy);
    assert_false(o.headers.retry_after);
    assert_int_equal(parse(&o, &done, err, sizeof(err), "--headers", "none", "--default-algorithm",
                           "gcra", "--request-timeout", "2m", "--max-body-bytes", "1k", NULL),
                     0);
    assert_false(o.headers.ietf || o.headers.legacy || o.headers.retry_after);
    assert_int_equal(o.default_algorithm, WEIR_ALGO_GCRA);
    assert_int_equal(o.request_timeout_ms, 120000);
    assert_int_equal(o.max_body_bytes, 1000);
    clear_env();
}

/* envoyproxy/ratelimit's variables, read as weir's settings; weir's own
 * variables and the flags win. */
static void upstream_environment(void **unused)
{
    (void)unused;
    serve_options o;
    bool done;
    char err[512];
    clear_env();
    setenv("HOST", "myhost", 1); /* without PORT: a shell's HOST, not read */
    assert_int_equal(parse(&o, &done, err, sizeof(err), NULL), 0);
    assert_string_equal(o.http, "127.0.0.1:8080");
    setenv("PORT", "9090", 1);
    setenv("HOST", "0.0.0.0", 1);
    setenv("GRPC_PORT", "9091", 1);
    setenv("LOG_LEVEL", "WARNING", 1);
    setenv("LOG_FORMAT", "json", 1);
    setenv("MERGE_DOMAIN_CONFIG", "true", 1);
    setenv("SHADOW_MODE", "true", 1);
    setenv("LIMIT_RESPONSE_HEADERS_ENABLED", "true", 1);
    setenv("REDIS_URL", "localhost:6379", 1);
    setenv("REDIS_AUTH", "user:p@ss/word", 1);
    setenv("RUNTIME_ROOT", "/srv/runtime", 1);
    setenv("RUNTIME_SUBDIRECTORY", "ratelimit", 1);
    setenv("FORCE_START_WITHOUT_INITIAL_CONFIG", "true", 1);
    setenv("HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", "true", 1);
    assert_int_equal(parse(&o, &done, err, sizeof(err), NULL), 0);
    assert_true(o.force_start);
    assert_true(o.health_needs_rules);
    assert_string_equal(o.http, "0.0.0.0:9090");
    assert_string_equal(o.grpc, "127.0.0.1:9091");
    assert_int_equal(o.log_level, WEIR_LOG_WARN);
    assert_true(o.log_json);
    assert_true(o.merge_domains);
    assert_true(o.shadow_mode);
    assert_true(o.grpc_response_headers);
    /* upstream's three fields, under upstream's names, and Retry-After */
    assert_true(o.headers.upstream && o.headers.retry_after);
    assert_false(o.headers.ietf || o.headers.legacy);
    assert_string_equal(o.headers.upstream_names[0], "RateLimit-Limit");
    assert_string_equal(o.store, "redis://user:p%40ss%2Fword@localhost:6379");
    assert_string_equal(o.rules, "/srv/runtime/ratelimit/config");
    /* weir's variables win over upstream's, the flags over both */
    setenv("WEIR_HTTP", "127.0.0.1:7070", 1);
    assert_int_equal(parse(&o, &done, err, sizeof(err), "--rules", "r.yaml", NULL), 0);
    assert_string_equal(o.http, "127.0.0.1:7070");
    assert_string_equal(o.rules, "r.yaml");
    /* the names, renamed; a bad one refused by name */
    clear_env();
    setenv("LIMIT_RESPONSE_HEADERS_ENABLED", "true", 1);
    setenv("LIMIT_REMAINING_HEADER", "X-Left", 1);
    assert_int_equal(parse(&o, &done, err, sizeof(err), NULL), 0);
    assert_string_equal(o.headers.upstream_names[0], "RateLimit-Limit");
    assert_string_equal(o.headers.upstream_names[1], "X-Left");
    assert_string_equal(o.headers.upstream_names[2], "RateLimit-Reset");
    /* --headers wins over the variable */
    assert_int_equal(parse(&o, &done, err, sizeof(err), "--headers", "legacy", NULL), 0);
    assert_true(o.headers.legacy && !o.headers.upstream);
    assert_string_equal(o.headers.upstream_names[1], "X-Left");
    setenv("LIMIT_RESET_HEADER", "Bad Name", 1);
    assert_int_equal(parse(&o, &done, err, sizeof(err), NULL), 2);
    assert_non_null(strstr(err, "LIMIT_RESET_HEADER"));
    clear_env();
    assert_int_equal(parse(&o, &done, err, sizeof(err), "--upstream-header-names", "A,B", NULL), 2);
    assert_int_equal(parse(&o, &done, err, sizeof(err), "--upstream-header-names", "A,B,C", NULL),
                     0);
    assert_string_equal(o.headers.upstream_names[2], "C");
    clear_env();
    setenv("REDIS_SOCKET_TYPE", "unix", 1);
    setenv("REDIS_URL", "/run/redis.sock", 1);
    setenv("REDIS_AUTH", "secret", 1);
    assert_int_equal(parse(&o, &done, err, sizeof(err), NULL), 0);
    assert_string_equal(o.store, "redis+unix://:secret@/run/redis.sock");
    /* what weir cannot take is refused by name */
    setenv("REDIS_TYPE", "CLUSTER", 1);
    assert_int_equal(parse(&o, &done, err, sizeof(err), NULL), 2);
    assert_non_null(strstr(err, "REDIS_SOCKET_TYPE=unix"));
    unsetenv("REDIS_SOCKET_TYPE");
    /* upstream's cluster and sentinel forms */
    setenv("REDIS_URL", "10.0.0.1:7000,10.0.0.2:7000", 1);
    assert_int_equal(parse(&o, &done, err, sizeof(err), NULL), 0);
    assert_string_equal(o.store, "redis+cluster://:secret@10.0.0.1:7000,10.0.0.2:7000");
    setenv("REDIS_TYPE", "sentinel", 1);
    setenv("REDIS_URL", "mymaster,10.0.0.1:26379,10.0.0.2:26379", 1);
    assert_int_equal(parse(&o, &done, err, sizeof(err), NULL), 0);
    assert_string_equal(o.store, "redis+sentinel://:secret@mymaster@10.0.0.1:26379,10.0.0.2:26379");
    setenv("REDIS_URL", "10.0.0.1:26379", 1);
    assert_int_equal(parse(&o, &done, err, sizeof(err), NULL), 2);
    assert_non_null(strstr(err, "mymaster,host:port"));
    setenv("REDIS_TYPE", "replicated", 1);
    assert_int_equal(parse(&o, &done, err, sizeof(err), NULL), 2);
    assert_non_null(strstr(err, "REDIS_TYPE=replicated"));
    unsetenv("REDIS_TYPE");
    setenv("REDIS_URL", "/run/redis.sock", 1);
    setenv("REDIS_TLS", "true", 1);
    assert_int_equal(parse(&o, &done, err, sizeof(err), NULL), 2);
    assert_non_null(strstr(err, "REDIS_TLS"));
    clear_env();
    setenv("LOG_LEVEL", "chatty", 1);
    assert_int_equal(parse(&o, &done, err, sizeof(err), NULL), 2);
    assert_string_equal(err, "weir serve: LOG_LEVEL='chatty': not a valid value for --log-level\n");
    clear_env();
}

/* upstream's statsd and near_limit settings: the sink only when asked
 * for, the ratio in millionths */
static void statsd_and_near_ratio(void **unused)
{
    (void)unused;
    serve_options o;
    bool done;
    char err[512];
    clear_env();
    assert_int_equal(parse(&o, &done, err, sizeof(err), NULL), 0);
    assert_string_equal(o.statsd, ""); /* upstream would send to localhost:8125 */
    assert_int_equal(o.statsd_interval_ms, 10000);
    assert_int_equal(o.near_limit_ppm, 800000);
    setenv("USE_STATSD", "true", 1);
    setenv("NEAR_LIMIT_RATIO", ".95", 1);
    setenv("STATS_FLUSH_INTERVAL", "500ms", 1);
    assert_int_equal(parse(&o, &done, err, sizeof(err), NULL), 0);
    assert_string_equal(o.statsd, "localhost:8125");
    assert_int_equal(o.statsd_interval_ms, 500);
    assert_int_equal(o.near_limit_ppm, 950000);
    setenv("STATSD_HOST", "::1", 1);
    setenv("STATSD_PORT", "9125", 1);
    assert_int_equal(parse(&o, &done, err, sizeof(err), NULL), 0);
    assert_string_equal(o.statsd, "[::1]:9125");
    setenv("USE_STATSD", "False", 1); /* off, whatever the host says */
    assert_int_equal(parse(&o, &done, err, sizeof(err), NULL), 0);
    assert_string_equal(o.statsd, "");
    unsetenv("USE_STATSD"); /* a host named is a sink asked for */
    assert_int_equal(parse(&o, &done, err, sizeof(err), "--near-limit-ratio", "0", NULL), 0);
    assert_string_equal(o.statsd, "[::1]:9125");
    assert_int_equal(o.near_limit_ppm, 0);
    assert_int_equal(parse(&o, &done, err, sizeof(err), "--near-limit-ratio", "1", NULL), 0);
    assert_int_equal(o.near_limit_ppm, 1000000);
    clear_env();
    static const char *const bad_ratio[] = {"1.01", "-0.5", "0.5s", "", " 0.5", "nan", "inf"};
    for (size_t i = 0; i < sizeof(bad_ratio) / sizeof(bad_ratio[0]); i++) {
        assert_int_equal(
            parse(&o, &done, err, sizeof(err), "--near-limit-ratio", bad_ratio[i], NULL), 2);
        assert_non_null(strstr(err, "not a valid RATIO"));
    }
    static const char *const bad_addr[] = {"localhost", "localhost:", "host:0", "host:65536",
                                           ":8125",     "[::1]:x",    "h:8125x"};
    for (size_t i = 0; i < sizeof(bad_addr) / sizeof(bad_addr[0]); i++) {
        assert_int_equal(parse(&o, &done, err, sizeof(err), "--statsd", bad_addr[i], NULL), 2);
        assert_non_null(strstr(err, "HOST:PORT (a port 1..65535)"));
    }
    assert_int_equal(parse(&o, &done, err, sizeof(err), "--statsd", "127.0.0.1:8125",
                           "--statsd-interval", "0", NULL),
                     2);
    setenv("USE_STATSD", "maybe", 1);
    assert_int_equal(parse(&o, &done, err, sizeof(err), NULL), 2);
    assert_string_equal(err, "weir serve: USE_STATSD='maybe': true or false\n");
    clear_env();
}

/* the top keys' counters: 1024 by default, 0 turns them off, a cap */
static void top_keys(void **unused)
{
    (void)unused;
    serve_options o;
    bool done;
    char err[512];
    clear_env();
    assert_int_equal(parse(&o, &done, err, sizeof(err), NULL), 0);
    assert_int_equal(o.top_keys, 1024);
    assert_int_equal(parse(&o, &done, err, sizeof(err), "--top-keys", "0", NULL), 0);
    assert_int_equal(o.top_keys, 0);
    setenv("WEIR_TOP_KEYS", "65536", 1);
    assert_int_equal(parse(&o, &done, err, sizeof(err), NULL), 0);
    assert_int_equal(o.top_keys, 65536);
    assert_int_equal(parse(&o, &done, err, sizeof(err), "--top-keys", "65537", NULL), 2);
    assert_string_equal(err, "weir serve: --top-keys must be 0..65536\n");
    clear_env();
}

static void errors_name_the_setting(void **unused)
{
    (void)unused;
    clear_env();
    static const struct {
        const char *flag, *value, *message;
    } rows[] = {
        {"--threads", "many", "weir serve: --threads 'many': not a valid N\n"},
        {"--max-memory", "12parsecs",
         "weir serve: --max-memory '12parsecs': not a valid BYTES (e.g. 4096, 64KiB, 512MiB, "
         "1.5GB)\n"},
        {"--idle-timeout", "soon",
         "weir serve: --idle-timeout 'soon': not a valid DURATION (e.g. 500ms, 30s, 1.5s, 5m, "
         "1h30m, 2d)\n"},
        {"--log-level", "loud", "weir serve: --log-level 'loud': not a valid LEVEL\n"},
        {"--default-algorithm", "magic",
         "weir serve: --default-algorithm 'magic': not a valid NAME\n"},
        {"--headers", "ietf,bogus", "weir serve: --headers 'ietf,bogus': not a valid LIST\n"},
        {"--check-header", "NoEquals",
         "weir serve: --check-header 'NoEquals': not a valid "
         "HEADER=KEY\n"},
        {"--store", "etcd://127.0.0.1",
         "weir serve: --store 'etcd://127.0.0.1': not a store of this build (stores: "
         "memory redis redis+unix redis+cluster redis+sentinel)\n"},
        {"--store", "rediss://:pw@127.0.0.1",
         "weir serve: --store 'rediss://:***@127.0.0.1': rediss:// (TLS) is not supported: "
         "this build's hiredis (Debian 12's 0.14) has no TLS; reach Redis over a TLS tunnel "
         "on loopback instead (docs/OPERATIONS.md)\n"},
        {"--store", "redis://:secret@127.0.0.1:0",
         "weir serve: --store 'redis://:***@127.0.0.1:0': the port must be a number from 1 "
         "to 65535\n"},
        {"--store", "redis+sentinel://app:s3cret@mymaster@127.0.0.1:0",
         "weir serve: --store 'redis+sentinel://app:***@mymaster@127.0.0.1:0': the servers "
         "must be host:port,host:port,... (at most 16; IPv6 in brackets)\n"},
        {"--store", "redis+sentinel://my:master@127.0.0.1:0",
         "weir serve: --store 'redis+sentinel://my:master@127.0.0.1:0': the servers must be "
         "host:port,host:port,... (at most 16; IPv6 in brackets)\n"},
        {"--failure-mode", "open", "weir serve: --failure-mode 'open': not a valid MODE\n"},
        {"--instances", "0", "weir serve: --instances must be 1..1000000\n"},
        {"--redis-clock", "ntp", "weir serve: --redis-clock 'ntp': not a valid redis|local\n"},
        {"--redis-timeout", "0",
         "weir serve: --redis-timeout, --redis-connect-timeout and the --redis-breaker-* "
         "settings must be positive, --redis-batch-window at most --redis-timeout, "
         "--redis-over-limit-cache at most 16777216\n"},
        {"--max-descriptors", "65", "weir serve: --max-descriptors must be 1..64\n"},
        {"--max-pipelined", "0", "weir serve: --max-pipelined must be positive\n"},
        {"--check-deny-status", "200",
         "weir serve: --check-deny-status must be a 4xx or 5xx status\n"},
        {"--decision-timeout", "soon",
         "weir serve: --decision-timeout 'soon': not a valid DURATION (e.g. 500ms, 30s, 1.5s, 5m, "
         "1h30m, 2d)\n"},
        {"--max-memory", "99999999999999999999",
         "weir serve: --max-memory "
         "'99999999999999999999': not a valid BYTES (e.g. 4096, 64KiB, 512MiB, 1.5GB)\n"},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        serve_options o;
        bool done;
        char err[512];
        assert_int_equal(parse(&o, &done, err, sizeof(err), rows[i].flag, rows[i].value, NULL), 2);
        assert_string_equal(err, rows[i].message);
    }
    serve_options o;
    bool done;
    char err[512];
    /* the RESP listener off loopback needs a password; on it, none */
    static const char *const open_addrs[] = {"0.0.0.0:6380", ":6380", "[::]:6380", "10.0.0.1:6380",
                                             "localhost.example:6380"};
    for (size_t i = 0; i < sizeof(open_addrs) / sizeof(open_addrs[0]); i++) {
        assert_int_equal(parse(&o, &done, err, sizeof(err), "--resp", open_addrs[i], NULL), 2);
        assert_non_null(strstr(err, "no --resp-password"));
        assert_int_equal(parse(&o, &done, err, sizeof(err), "--resp", open_addrs[i],
                               "--resp-password", "s3cret", NULL),
                         0);
    }
    static const char *const loopback[] = {"127.0.0.1:6380", "127.1.2.3:1", "[::1]:6380",
                                           "localhost:6380", ""};
    for (size_t i = 0; i < sizeof(loopback) / sizeof(loopback[0]); i++)
        assert_int_equal(parse(&o, &done, err, sizeof(err), "--resp", loopback[i], NULL), 0);
    assert_int_equal(parse(&o, &done, err, sizeof(err), "--nope", "1", NULL), 2);
    assert_string_equal(err, "weir serve: unknown option '--nope' (see weir serve --help)\n");
    assert_int_equal(parse(&o, &done, err, sizeof(err), "--threads", NULL), 2);
    assert_string_equal(err, "weir serve: --threads needs a value (N)\n");
    assert_int_equal(parse(&o, &done, err, sizeof(err), "stray", NULL), 2);
    assert_string_equal(err, "weir serve: unexpected argument 'stray' (see weir serve --help)\n");
    setenv("WEIR_THREADS", "x", 1);
    assert_int_equal(parse(&o, &done, err, sizeof(err), NULL), 2);
    assert_string_equal(err, "weir serve: WEIR_THREADS='x': not a valid N\n");
    clear_env();
    assert_int_equal(parse(&o, &done, err, sizeof(err), "--help", NULL), 0);
    assert_true(done);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(defaults),
        cmocka_unit_test(environment_then_flags),
        cmocka_unit_test(errors_name_the_setting),
        cmocka_unit_test(upstream_environment),
        cmocka_unit_test(statsd_and_near_ratio),
        cmocka_unit_test(top_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
