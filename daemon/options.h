/*
 * options.h - `weir serve`'s settings: every flag has a WEIR_* environment
 * variable; flags win over the environment, the environment over defaults.
 */
#ifndef WEIR_DAEMON_OPTIONS_H
#define WEIR_DAEMON_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "api/api.h"
#include "common/addr.h"
#include "shed.h"
#include "weir/weir.h"

/** Most --check-header mappings. */
#define SERVE_MAX_CHECK_HEADERS 16u
/** Longest HOST:PORT or path setting. */
#define SERVE_ADDR_BYTES 256u

typedef struct serve_options {
    char rules[4096];
    char http[SERVE_ADDR_BYTES]; /* "" disables the listener */
    char grpc[SERVE_ADDR_BYTES];
    char resp[SERVE_ADDR_BYTES];
    char admin[SERVE_ADDR_BYTES];            /* the admin API's own listener */
    char admin_token_file[SERVE_ADDR_BYTES]; /* "" = no token: loopback only */
    char quota_db[1024];                     /* "" = no quota database */
    int64_t quota_refresh_ms;                /* the whole table read again at least this often */
    char resp_password[SERVE_ADDR_BYTES];    /* "" = no AUTH needed */
    int64_t resp_idle_timeout_ms;            /* 0 = never */
    unsigned threads;                        /* 0 = one per core */
    char store[SERVE_ADDR_BYTES];
    uint64_t max_memory;
    /* the Redis store (--redis-*) */
    int64_t redis_timeout_ms;
    int64_t redis_connect_timeout_ms;
    int64_t redis_batch_window_ms;
    bool redis_clock_local; /* --redis-clock local */
    uint64_t redis_breaker_failures;
    int64_t redis_breaker_window_ms;
    int64_t redis_breaker_cooldown_ms;
    uint64_t redis_over_limit_cache; /* slots; 0 = off */
    weir_failure_mode failure_mode;  /* of limits that name none */
    uint64_t instances;              /* sharing the store: local limits are 1/N */
    weir_log_level log_level;
    bool log_json;
    char statsd[SERVE_ADDR_BYTES]; /* "" = no statsd sink */
    int64_t statsd_interval_ms;
    uint32_t near_limit_ppm; /* near_limit's threshold, millionths of a limit */
    uint64_t top_keys;       /* counters of a top keys sketch; 0 = none */
    /* priorities and weir's own shedding (shed.h): as given, and read */
    char priorities[SHED_MAX_PRIORITIES * SHED_NAME_BYTES];
    char default_priority[SHED_NAME_BYTES];
    char priority_key[64];
    char shed_lag[512];
    shed_config shed;
    int64_t retry_jitter_s;
    weir_algorithm default_algorithm;
    bool merge_domains;
    bool strict;             /* rule warnings are errors */
    bool force_start;        /* start with no rules when they do not load */
    bool health_needs_rules; /* unhealthy until rules with a domain are in force */
    bool shadow_mode;        /* every descriptor in shadow mode (upstream's SHADOW_MODE) */
    bool watch;
    bool allow_request_overrides; /* false: the engine refuses them */
    weir_nets trusted_proxies;    /* whose X-Forwarded-For is believed */
    unsigned address_prefix[2];   /* IPv4, IPv6 bits kept of a client address */
    uint64_t max_connections;
    uint64_t max_header_bytes;
    uint64_t max_unsent_bytes; /* answers a connection may hold unsent */
    uint64_t max_body_bytes;
    uint64_t max_descriptors;
    uint64_t max_batch;
    uint64_t check_deny_status;  /* GET /v1/check's status for a denial */
    uint64_t max_pipelined;      /* answers pending per HTTP or RESP connection */
    int64_t decision_timeout_ms; /* 0 = none of the daemon's */
    int64_t idle_timeout_ms;
    int64_t request_timeout_ms;
    int64_t drain_delay_ms;
    int64_t shutdown_timeout_ms;
    weir_api_header_opts headers;
    bool grpc_response_headers; /* ShouldRateLimit's response_headers_to_add */
    bool grpc_raw_body;         /* and its raw_body on OVER_LIMIT */
    uint64_t grpc_max_streams;
    uint64_t grpc_max_message_bytes;
    /* rules over xDS (--config-type grpc-xds-sotw, daemon/xds/) */
    bool config_xds;
    char xds_server[SERVE_ADDR_BYTES]; /* HOST:PORT, h2c */
    char xds_node_id[SERVE_ADDR_BYTES];
    char xds_node_metadata[1024]; /* key=value,key2=value2 */
    char xds_headers[1024];       /* name:value,name2:value2 */
    int64_t xds_connect_retry_ms;
    int64_t xds_backoff_initial_ms;
    int64_t xds_backoff_max_ms;
    char xds_backoff_random_factor[16]; /* 0 .. 1 */
    bool xds_backoff_jitter;
    uint64_t xds_max_message_bytes;
    /* --check-header HEADER=KEY, backed by check_header_text. */
    weir_api_header_entry check_headers[SERVE_MAX_CHECK_HEADERS];
    size_t n_check_headers;
    char check_header_text[SERVE_MAX_CHECK_HEADERS][128];
} serve_options;

/**
 * serve_options_parse() - fill @o from the defaults, then the environment
 * @envp-style lookup getenv(), then @argv (argv[0] is "serve").
 * Returns 0 to go on, or an exit code: 0 after --help was printed to
 * @out (then *done is set), 2 after an error was printed to @err.
 */
int serve_options_parse(serve_options *o, int argc, char **argv, FILE *out, FILE *err, bool *done);

/** Set the setting of flag @flag (without "--") from @value, as the flag
 *  would; false for an unknown flag or a value it does not take. */
bool serve_options_set(serve_options *o, const char *flag, const char *value);

/**
 * serve_options_upstream() - envoyproxy/ratelimit's environment (HOST,
 * PORT, GRPC_HOST, GRPC_PORT, LOG_LEVEL, LOG_FORMAT, MERGE_DOMAIN_CONFIG,
 * SHADOW_MODE, LIMIT_RESPONSE_HEADERS_ENABLED, REDIS_SOCKET_TYPE,
 * REDIS_URL, REDIS_AUTH, REDIS_TLS, RUNTIME_ROOT, USE_STATSD, STATSD_HOST,
 * STATSD_PORT, NEAR_LIMIT_RATIO, ...) read into @o, for
 * a deployment moved over as it is (docs/ENVOY.md maps each). Applied
 * after the defaults and before WEIR_* variables and flags, which win.
 * Returns false after printing to @err a variable it cannot take.
 */
bool serve_options_upstream(serve_options *o, FILE *err);

/** Whether HOST:PORT names only this machine: an address in 127.0.0.0/8,
 *  ::1, or localhost (an empty host is every interface). */
bool serve_on_loopback(const char *addr);

/** Write --help. */
void serve_options_usage(FILE *f);

#endif /* WEIR_DAEMON_OPTIONS_H */
