/*
 * options.c - the table of `weir serve` settings and its parser. Each row
 * is a flag, its environment variable, its default (parsed by the same
 * code as a user's value) and its help line.
 */
#include "options.h"

#include "statsd.h"
#include "stores.h"
#include "top_keys.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef enum kind {
    K_TEXT,     /* string into a char array */
    K_BOOL,     /* true|false|1|0|yes|no|on|off */
    K_COUNT,    /* unsigned integer */
    K_BYTES,    /* weir_size_parse(): 64KiB, 16MiB, 1g ... */
    K_DURATION, /* weir_duration_parse(): 500ms, 1.5s, 2m; a bare number is seconds */
    K_LEVEL,    /* error|warn|info|debug */
    K_FORMAT,   /* text|json */
    K_ALGO,     /* an algorithm name */
    K_HEADERS,  /* comma list of ietf,legacy,retry-after,upstream | none */
    K_UPNAMES,  /* LIMIT,REMAINING,RESET: the upstream family's names */
    K_NETS,     /* CIDR,CIDR,... */
    K_PREFIX,   /* V4,V6: the bits of a client address kept */
    K_CHECK,    /* HEADER=KEY, repeatable; the environment gives a comma list */
    K_CLOCK,    /* redis|local: false for redis */
    K_FAILURE,  /* allow|deny|local */
    K_CONFIG,   /* file|grpc-xds-sotw (upstream's FILE, GRPC_XDS_SOTW): true for xDS */
    K_RATIO,    /* 0..1, kept in millionths (uint32_t) */
} kind;

typedef struct option {
    const char *flag;
    const char *env;
    const char *metavar;
    const char *dflt;
    kind kind;
    size_t offset;
    size_t size; /* K_TEXT: the array's size */
    const char *help;
} option;

#define AT(field) offsetof(serve_options, field), sizeof(((serve_options *)0)->field)

static const option options[] = {
    {"rules", "WEIR_RULES", "PATH", "examples/rules.yaml", K_TEXT, AT(rules),
     "rule file, or directory of *.yaml/*.yml (envoyproxy/ratelimit format)"},
    {"config-type", "WEIR_CONFIG_TYPE", "TYPE", "file", K_CONFIG, AT(config_xds),
     "where the rules come from: file (--rules) or grpc-xds-sotw (an xDS management server, "
     "--xds-server; docs/OPERATIONS.md)"},
    {"xds-server", "WEIR_XDS_SERVER", "HOST:PORT", "localhost:18000", K_TEXT, AT(xds_server),
     "xDS: the management server (plain-text gRPC, h2c)"},
    {"xds-node-id", "WEIR_XDS_NODE_ID", "ID", "default", K_TEXT, AT(xds_node_id),
     "xDS: the node id the server picks the rules by"},
    {"xds-node-metadata", "WEIR_XDS_NODE_METADATA", "K=V,...", "", K_TEXT, AT(xds_node_metadata),
     "xDS: the node's metadata, as strings"},
    {"xds-headers", "WEIR_XDS_HEADERS", "NAME:VALUE,...", "", K_TEXT, AT(xds_headers),
     "xDS: headers added to the stream's request"},
    {"xds-connect-retry", "WEIR_XDS_CONNECT_RETRY", "DURATION", "3s", K_DURATION,
     AT(xds_connect_retry_ms), "xDS: retry a connection that failed after this (+-50% jitter)"},
    {"xds-backoff-initial", "WEIR_XDS_BACKOFF_INITIAL", "DURATION", "10s", K_DURATION,
     AT(xds_backoff_initial_ms), "xDS: first wait before reopening a stream that ended"},
    {"xds-backoff-max", "WEIR_XDS_BACKOFF_MAX", "DURATION", "60s", K_DURATION,
     AT(xds_backoff_max_ms), "xDS: the wait doubles up to this"},
    {"xds-backoff-random-factor", "WEIR_XDS_BACKOFF_RANDOM_FACTOR", "0..1", "0.5", K_TEXT,
     AT(xds_backoff_random_factor), "xDS: each wait is moved by up to this fraction at random"},
    {"xds-backoff-jitter", "WEIR_XDS_BACKOFF_JITTER", "BOOL", "true", K_BOOL,
     AT(xds_backoff_jitter), "xDS: randomize the waits (false: exactly the backoff)"},
    {"xds-max-message-bytes", "WEIR_XDS_MAX_MESSAGE_BYTES", "BYTES", "4MiB", K_BYTES,
     AT(xds_max_message_bytes), "xDS: the largest response (all the rules at once)"},
    {"http", "WEIR_HTTP", "HOST:PORT", "127.0.0.1:8080", K_TEXT, AT(http),
     "HTTP/1.1 listener (JSON API, /metrics, /healthz); empty disables it"},
    {"grpc", "WEIR_GRPC", "HOST:PORT", "127.0.0.1:8081", K_TEXT, AT(grpc),
     "gRPC listener (Envoy ShouldRateLimit); empty disables it"},
    {"grpc-response-headers", "WEIR_GRPC_RESPONSE_HEADERS", "BOOL", "false", K_BOOL,
     AT(grpc_response_headers),
     "gRPC: add the --headers rate limit headers to response_headers_to_add"},
    {"grpc-raw-body", "WEIR_GRPC_RAW_BODY", "BOOL", "false", K_BOOL, AT(grpc_raw_body),
     "gRPC: put a problem+json body in raw_body when over the limit"},
    {"grpc-max-streams", "WEIR_GRPC_MAX_STREAMS", "N", "1024", K_COUNT, AT(grpc_max_streams),
     "gRPC: concurrent calls on one connection (HTTP/2 MAX_CONCURRENT_STREAMS)"},
    {"grpc-max-message-bytes", "WEIR_GRPC_MAX_MESSAGE_BYTES", "BYTES", "64KiB", K_BYTES,
     AT(grpc_max_message_bytes), "gRPC: one request message (RESOURCE_EXHAUSTED beyond)"},
    {"resp", "WEIR_RESP", "HOST:PORT", "127.0.0.1:6380", K_TEXT, AT(resp),
     "Redis-protocol listener (CL.THROTTLE, GCRA, WEIR.CHECK: docs/RESP.md); empty disables it"},
    {"admin", "WEIR_ADMIN", "HOST:PORT", "127.0.0.1:8082", K_TEXT, AT(admin),
     "admin API listener (/admin/v1/..., docs/QUOTAS.md), never the decision routes; empty "
     "disables it"},
    {"admin-token-file", "WEIR_ADMIN_TOKEN_FILE", "PATH", "", K_TEXT, AT(admin_token_file),
     "the admin API's bearer tokens, one 'NAME TOKEN' a line; without it the admin listener "
     "only opens on a loopback address and refuses every request"},
    {"quota-db", "WEIR_QUOTA_DB", "URL", "", K_TEXT, AT(quota_db),
     "tenants and their overrides: sqlite:///PATH.db (an embedded file) or postgres://... (shared "
     "by the instances); empty: tiers from the rule files only (docs/QUOTAS.md)"},
    {"quota-refresh", "WEIR_QUOTA_REFRESH", "DURATION", "30s", K_DURATION, AT(quota_refresh_ms),
     "read every tenant again at least this often (changes come sooner: notified or seen)"},
    {"resp-password", "WEIR_RESP_PASSWORD", "TEXT", "", K_TEXT, AT(resp_password),
     "RESP: clients must AUTH with it (Redis's requirepass); required off loopback"},
    {"resp-idle-timeout", "WEIR_RESP_IDLE_TIMEOUT", "DURATION", "0", K_DURATION,
     AT(resp_idle_timeout_ms), "RESP: close a connection idle this long; 0 = never, as Redis"},
    {"threads", "WEIR_THREADS", "N", "0", K_COUNT, AT(threads),
     "worker threads, each with its own event loop; 0 = one per core"},
    {"store", "WEIR_STORE", "URL", "memory", K_TEXT, AT(store),
     "where counters live: memory, redis://[[user]:password@]host:port[/db], "
     "redis+unix:///path/to.sock, redis+cluster://host:port,host:port,... or "
     "redis+sentinel://[[user]:password@]master@host:port,... (password also from "
     "WEIR_REDIS_PASSWORD)"},
    {"max-memory", "WEIR_MAX_MEMORY", "BYTES", "512MiB", K_BYTES, AT(max_memory),
     "memory store cap, about 15 million keys by default; 0 = no cap. Keys at rest are "
     "evicted first, then those asked least"},
    {"failure-mode", "WEIR_FAILURE_MODE", "MODE", "allow", K_FAILURE, AT(failure_mode),
     "when the store fails, limits without failure_mode: allow, deny, or local (decide on "
     "this instance's memory at 1/--instances of the limit)"},
    {"instances", "WEIR_INSTANCES", "N", "1", K_COUNT, AT(instances),
     "instances sharing the store: a limit's local share under failure_mode local is 1/N"},
    {"redis-timeout", "WEIR_REDIS_TIMEOUT", "DURATION", "5ms", K_DURATION, AT(redis_timeout_ms),
     "Redis: a decision not answered by then follows its failure_mode"},
    {"redis-connect-timeout", "WEIR_REDIS_CONNECT_TIMEOUT", "DURATION", "1s", K_DURATION,
     AT(redis_connect_timeout_ms), "Redis: give up a connection not made by then, and retry"},
    {"redis-batch-window", "WEIR_REDIS_BATCH_WINDOW", "DURATION", "0ms", K_DURATION,
     AT(redis_batch_window_ms),
     "Redis: hold decisions up to this long to send more in one call (at most the timeout)"},
    {"redis-clock", "WEIR_REDIS_CLOCK", "redis|local", "redis", K_CLOCK, AT(redis_clock_local),
     "Redis: decide at Redis's time (instances agree) or at each instance's own"},
    {"redis-over-limit-cache", "WEIR_REDIS_OVER_LIMIT_CACHE", "N", "4096", K_COUNT,
     AT(redis_over_limit_cache),
     "Redis: keys denied until a time are denied here until then, without a call (slots per "
     "worker; 0 = off)"},
    {"redis-breaker-failures", "WEIR_REDIS_BREAKER_FAILURES", "N", "5", K_COUNT,
     AT(redis_breaker_failures), "Redis: open the circuit breaker after N failures in a window"},
    {"redis-breaker-window", "WEIR_REDIS_BREAKER_WINDOW", "DURATION", "1s", K_DURATION,
     AT(redis_breaker_window_ms), "Redis: the breaker's window for counting failures"},
    {"redis-breaker-cooldown", "WEIR_REDIS_BREAKER_COOLDOWN", "DURATION", "1s", K_DURATION,
     AT(redis_breaker_cooldown_ms), "Redis: an open breaker lets a probe through after this"},
    {"log-level", "WEIR_LOG_LEVEL", "LEVEL", "info", K_LEVEL, AT(log_level),
     "error, warn, info or debug"},
    {"log-format", "WEIR_LOG_FORMAT", "FORMAT", "text", K_FORMAT, AT(log_json),
     "text (key=value) or json, one line per event on stderr"},
    {"statsd", "WEIR_STATSD", "HOST:PORT", "", K_TEXT, AT(statsd),
     "send upstream's counters by UDP to this statsd server (upstream's USE_STATSD, "
     "STATSD_HOST, STATSD_PORT); empty: none"},
    {"statsd-interval", "WEIR_STATSD_INTERVAL", "DURATION", "10s", K_DURATION,
     AT(statsd_interval_ms), "how often --statsd sends (upstream's STATS_FLUSH_INTERVAL)"},
    {"near-limit-ratio", "WEIR_NEAR_LIMIT_RATIO", "RATIO", "0.8", K_RATIO, AT(near_limit_ppm),
     "the part of a limit past which hits count as near_limit (upstream's NEAR_LIMIT_RATIO)"},
    {"priorities", "WEIR_PRIORITIES", "LIST", "critical,normal,sheddable,test", K_TEXT,
     AT(priorities), "request priorities, most important first (docs/OPERATIONS.md)"},
    {"default-priority", "WEIR_DEFAULT_PRIORITY", "NAME", "normal", K_TEXT, AT(default_priority),
     "the priority of a request that names none"},
    {"priority-key", "WEIR_PRIORITY_KEY", "KEY", "priority", K_TEXT, AT(priority_key),
     "a descriptor whose one entry has this key names the request's priority (\"\": none); "
     "HTTP's Weir-Priority header comes first"},
    {"shed-lag", "WEIR_SHED_LAG", "LIST", "test=20ms,sheddable=100ms", K_TEXT, AT(shed_lag),
     "PRIORITY=DURATION,...: past this event loop lag a worker answers the priority's requests "
     "503 (overloaded) instead of deciding them; a priority not listed is never shed "
     "(\"\": none)"},
    {"top-keys", "WEIR_TOP_KEYS", "N", "1024", K_COUNT, AT(top_keys),
     "counters of each sketch of the keys denied most (GET /admin/v1/top), one a worker, "
     "domain and minute; 0 = none kept"},
    {"retry-jitter", "WEIR_RETRY_JITTER", "SECONDS", "0", K_COUNT, AT(retry_jitter_s),
     "add 0..SECONDS of random jitter to Retry-After"},
    {"default-algorithm", "WEIR_DEFAULT_ALGORITHM", "NAME", "fixed_window", K_ALGO,
     AT(default_algorithm), "algorithm of limits that name none (docs/CONFIG.md)"},
    {"merge-domains", "WEIR_MERGE_DOMAINS", "BOOL", "false", K_BOOL, AT(merge_domains),
     "merge files that share a domain instead of refusing them"},
    {"shadow-mode", "WEIR_SHADOW_MODE", "BOOL", "false", K_BOOL, AT(shadow_mode),
     "every descriptor in shadow mode: counted and reported, never denied (upstream's "
     "SHADOW_MODE)"},
    {"force-start", "WEIR_FORCE_START", "BOOL", "false", K_BOOL, AT(force_start),
     "start even when the rules do not load: every request is allowed until a reload loads "
     "them (upstream's FORCE_START_WITHOUT_INITIAL_CONFIG)"},
    {"health-needs-rules", "WEIR_HEALTH_NEEDS_RULES", "BOOL", "false", K_BOOL,
     AT(health_needs_rules),
     "/healthz and gRPC health fail until rules with a domain are in force (upstream's "
     "HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED)"},
    {"strict", "WEIR_STRICT", "BOOL", "false", K_BOOL, AT(strict),
     "rule warnings (no domain loaded, an empty rate_limit, ...) are errors: the rules are "
     "refused"},
    {"watch", "WEIR_WATCH", "BOOL", "true", K_BOOL, AT(watch),
     "reload when the rule files change (SIGHUP always reloads)"},
    {"headers", "WEIR_HEADERS", "LIST", "ietf,legacy,retry-after", K_HEADERS, AT(headers),
     "rate limit headers to send: ietf, legacy, retry-after, upstream (envoyproxy/ratelimit's "
     "RateLimit-Limit, -Remaining, -Reset), or none"},
    {"upstream-header-names", "WEIR_UPSTREAM_HEADER_NAMES", "LIMIT,REMAINING,RESET",
     "RateLimit-Limit,RateLimit-Remaining,RateLimit-Reset", K_UPNAMES, AT(headers),
     "names of the upstream family's fields (upstream's LIMIT_LIMIT_HEADER, "
     "LIMIT_REMAINING_HEADER, LIMIT_RESET_HEADER)"},
    {"allow-request-overrides", "WEIR_ALLOW_REQUEST_OVERRIDES", "BOOL", "true", K_BOOL,
     AT(allow_request_overrides),
     "take a descriptor's limit from the request (Envoy's RateLimitDescriptor.limit, as "
     "upstream does); false refuses such requests (HTTP 403, gRPC PERMISSION_DENIED)"},
    {"check-deny-status", "WEIR_CHECK_DENY_STATUS", "STATUS", "429", K_COUNT, AT(check_deny_status),
     "GET /v1/check: the status of a denial (403 lets nginx's auth_request take it without "
     "logging an error; the example turns it back into 429)"},
    {"trusted-proxies", "WEIR_TRUSTED_PROXIES", "CIDR,...", "127.0.0.0/8,::1", K_NETS,
     AT(trusted_proxies),
     "proxies whose X-Forwarded-For / X-Real-IP is believed (--check-header): the client is "
     "the first address from the right that is not one of them; \"\" trusts none"},
    {"address-prefix", "WEIR_ADDRESS_PREFIX", "V4,V6", "32,64", K_PREFIX, AT(address_prefix),
     "bits of a client address kept in its key: one IPv6 client holds a whole /64"},
    {"check-header", "WEIR_CHECK_HEADERS", "HEADER=KEY", "", K_CHECK, AT(n_check_headers),
     "GET /v1/check: add header HEADER's value as descriptor entry KEY (repeatable)"},
    {"max-connections", "WEIR_MAX_CONNECTIONS", "N", "10000", K_COUNT, AT(max_connections),
     "connections held at once over all listeners; more are closed at once"},
    {"max-header-bytes", "WEIR_MAX_HEADER_BYTES", "BYTES", "16KiB", K_BYTES, AT(max_header_bytes),
     "request line and headers of one HTTP request (431 beyond)"},
    {"max-unsent-bytes", "WEIR_MAX_UNSENT_BYTES", "BYTES", "256KiB", K_BYTES, AT(max_unsent_bytes),
     "answers one connection may hold while its client takes none: then HTTP/1.1 and RESP stop "
     "reading, gRPC refuses new calls (REFUSED_STREAM)"},
    {"max-body-bytes", "WEIR_MAX_BODY_BYTES", "BYTES", "64KiB", K_BYTES, AT(max_body_bytes),
     "body of one HTTP request (413 beyond)"},
    {"max-descriptors", "WEIR_MAX_DESCRIPTORS", "N", "64", K_COUNT, AT(max_descriptors),
     "descriptors in one request (at most 64)"},
    {"max-batch", "WEIR_MAX_BATCH", "N", "100", K_COUNT, AT(max_batch),
     "requests in one POST /v1/check/batch"},
    {"idle-timeout", "WEIR_IDLE_TIMEOUT", "DURATION", "60s", K_DURATION, AT(idle_timeout_ms),
     "close a keep-alive connection idle this long"},
    {"request-timeout", "WEIR_REQUEST_TIMEOUT", "DURATION", "10s", K_DURATION,
     AT(request_timeout_ms), "a request must arrive whole within this (slow clients)"},
    {"max-pipelined", "WEIR_MAX_PIPELINED", "N", "64", K_COUNT, AT(max_pipelined),
     "HTTP, RESP: decisions one connection may have in flight; reading pauses beyond"},
    {"decision-timeout", "WEIR_DECISION_TIMEOUT", "DURATION", "1s", K_DURATION,
     AT(decision_timeout_ms),
     "answer a decision the store has not made by then (HTTP 504, gRPC DEADLINE_EXCEEDED); "
     "0 = wait"},
    {"drain-delay", "WEIR_DRAIN_DELAY", "DURATION", "0s", K_DURATION, AT(drain_delay_ms),
     "on SIGTERM, keep serving (with /healthz failing) this long before closing listeners"},
    {"shutdown-timeout", "WEIR_SHUTDOWN_TIMEOUT", "DURATION", "10s", K_DURATION,
     AT(shutdown_timeout_ms), "then give in-flight requests this long to finish"},
};

#define N_OPTIONS (sizeof(options) / sizeof(options[0]))

static bool parse_u64(const char *s, uint64_t *out, const char **rest)
{
    if (*s < '0' || *s > '9')
        return false;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return false;
    *out = v;
    *rest = end;
    return true;
}

/* Durations and sizes in weir's one grammar (weir/units.h); a duration
 * setting is kept in whole milliseconds, rounded up. */
static bool parse_duration_ms(const char *s, int64_t *out)
{
    int64_t us;
    if (weir_duration_parse(s, &us) != WEIR_OK)
        return false;
    *out = us / 1000 + (us % 1000 != 0);
    return true;
}

/* A decimal ratio 0..1 ("0.8", ".95", "1") in millionths. */
static bool parse_ratio(const char *s, uint32_t *ppm)
{
    if (!((*s >= '0' && *s <= '9') || *s == '.'))
        return false;
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (errno || *end || !(v >= 0.0 && v <= 1.0))
        return false;
    *ppm = (uint32_t)(v * 1e6 + 0.5);
    return true;
}

static bool parse_bool(const char *s, bool *out)
{
    static const char *const yes[] = {"true", "1", "yes", "on"};
    static const char *const no[] = {"false", "0", "no", "off"};
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(s, yes[i]) == 0)
            return *out = true, true;
        if (strcasecmp(s, no[i]) == 0)
            return *out = false, true;
    }
    return false;
}

static bool parse_headers(const char *s, weir_api_header_opts *h)
{
    weir_api_header_opts r = *h;
    r.ietf = r.legacy = r.retry_after = r.upstream = false;
    char tmp[128];
    if (strlen(s) >= sizeof(tmp))
        return false;
    strcpy(tmp, s);
    char *save = NULL;
    for (char *tok = strtok_r(tmp, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
        if (strcasecmp(tok, "ietf") == 0)
            r.ietf = true;
        else if (strcasecmp(tok, "legacy") == 0)
            r.legacy = true;
        else if (strcasecmp(tok, "retry-after") == 0)
            r.retry_after = true;
        else if (strcasecmp(tok, "upstream") == 0)
            r.upstream = true;
        else if (strcasecmp(tok, "none") != 0)
            return false;
    }
    *h = r;
    return true;
}

/* Whether @s (@n bytes) is an HTTP field name (RFC 9110 token). */
static bool field_name(const char *s, size_t n)
{
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!isalnum(c) && !strchr("!#$%&'*+-.^_`|~", c))
            return false;
    }
    return true;
}

/* --upstream-header-names LIMIT,REMAINING,RESET: the names of the
 * upstream family's three fields. */
static bool parse_upstream_names(const char *s, weir_api_header_opts *h)
{
    char names[3][WEIR_HEADER_NAME_BYTES];
    for (int i = 0; i < 3; i++) {
        const char *end = i < 2 ? strchr(s, ',') : s + strlen(s);
        if (!end || (size_t)(end - s) >= WEIR_HEADER_NAME_BYTES ||
            !field_name(s, (size_t)(end - s)))
            return false;
        memcpy(names[i], s, (size_t)(end - s));
        names[i][end - s] = '\0';
        s = end + (i < 2);
    }
    memcpy(h->upstream_names, names, sizeof(names));
    return true;
}

/* Adds one HEADER=KEY mapping. */
static bool add_check_header(serve_options *o, const char *s, size_t n)
{
    if (!n)
        return true;
    if (o->n_check_headers >= SERVE_MAX_CHECK_HEADERS)
        return false;
    char *t = o->check_header_text[o->n_check_headers];
    if (n >= sizeof(o->check_header_text[0]))
        return false;
    memcpy(t, s, n);
    t[n] = '\0';
    char *eq = strchr(t, '=');
    if (!eq || eq == t || !eq[1])
        return false;
    *eq = '\0';
    o->check_headers[o->n_check_headers].header = t;
    o->check_headers[o->n_check_headers].key = eq + 1;
    o->n_check_headers++;
    return true;
}

/* The index of @v in the NULL-terminated @names, any case; -1 if absent. */
static int name_index(const char *v, const char *const *names)
{
    for (int i = 0; names[i]; i++)
        if (strcasecmp(v, names[i]) == 0)
            return i;
    return -1;
}

/* Sets one option from text; false when the text is not a valid value. */
static bool set(serve_options *o, const option *opt, const char *v, bool from_env)
{
    void *field = (char *)o + opt->offset; /* offsetof keeps it aligned */
    uint64_t n;
    const char *rest;
    switch (opt->kind) {
    case K_TEXT:
        if (strlen(v) >= opt->size)
            return false;
        strcpy(field, v);
        return true;
    case K_BOOL:
        return parse_bool(v, (bool *)field);
    case K_COUNT:
        if (!parse_u64(v, &n, &rest) || *rest)
            return false;
        if (opt->size == sizeof(unsigned)) {
            if (n > 4096)
                return false;
            *(unsigned *)field = (unsigned)n;
        } else if (opt->size == sizeof(uint64_t)) {
            if (n > INT64_MAX)
                return false;
            memcpy(field, &n, sizeof(n));
        }
        return true;
    case K_BYTES:
        return weir_size_parse(v, (uint64_t *)field) == WEIR_OK;
    case K_DURATION:
        return parse_duration_ms(v, (int64_t *)field);
    case K_LEVEL: {
        static const char *const names[] = {"error", "warn", "info", "debug", NULL};
        int i = name_index(v, names);
        return i >= 0 && (*(weir_log_level *)field = (weir_log_level)i, true);
    }
    case K_FORMAT: {
        static const char *const names[] = {"text", "json", NULL};
        int i = name_index(v, names);
        return i >= 0 && (*(bool *)field = i == 1, true);
    }
    case K_ALGO:
        return weir_algorithm_parse(v, (weir_algorithm *)field) == WEIR_OK;
    case K_FAILURE: {
        static const char *const names[] = {"allow", "deny", "local", NULL};
        int i = name_index(v, names);
        return i >= 0 && (*(weir_failure_mode *)field = (weir_failure_mode)i, true);
    }
    case K_CONFIG: {
        static const char *const names[] = {"file", "grpc-xds-sotw", "grpc_xds_sotw", NULL};
        int i = name_index(v, names);
        return i >= 0 && (*(bool *)field = i > 0, true);
    }
    case K_CLOCK: {
        static const char *const names[] = {"redis", "local", NULL};
        int i = name_index(v, names);
        return i >= 0 && (*(bool *)field = i == 1, true);
    }
    case K_HEADERS:
        return parse_headers(v, (weir_api_header_opts *)field);
    case K_UPNAMES:
        return parse_upstream_names(v, (weir_api_header_opts *)field);
    case K_NETS: {
        char why[128];
        return weir_nets_parse(v, (weir_nets *)field, why, sizeof(why));
    }
    case K_PREFIX: {
        unsigned *bits = field;
        uint64_t a, b;
        if (!parse_u64(v, &a, &rest) || *rest != ',' || !parse_u64(rest + 1, &b, &rest) || *rest ||
            a > 32 || b > 128)
            return false;
        bits[0] = (unsigned)a;
        bits[1] = (unsigned)b;
        return true;
    }
    case K_RATIO:
        return parse_ratio(v, (uint32_t *)field);
    case K_CHECK:
        if (!from_env)
            return add_check_header(o, v, strlen(v));
        for (const char *p = v;;) {
            const char *comma = strchr(p, ',');
            size_t len = comma ? (size_t)(comma - p) : strlen(p);
            if (!add_check_header(o, p, len))
                return false;
            if (!comma)
                return true;
            p = comma + 1;
        }
    }
    return false;
}

/* Valid values of @opt's kind, for its error message; "" when the
 * metavar says enough. */
static const char *examples(const option *opt)
{
    switch (opt->kind) {
    case K_DURATION:
        return " (e.g. " WEIR_DURATION_EXAMPLES ")";
    case K_BYTES:
        return " (e.g. " WEIR_SIZE_EXAMPLES ")";
    case K_BOOL:
        return " (true or false)";
    case K_NETS:
        return " (e.g. 127.0.0.0/8,10.0.0.0/8,2001:db8::/32)";
    case K_PREFIX:
        return " (IPv4 bits 0-32, IPv6 bits 0-128, e.g. 32,64)";
    default:
        return "";
    }
}

void serve_options_usage(FILE *f)
{
    fprintf(f, "usage: weir serve [OPTIONS]\n\n"
               "Runs the rate limit service: it loads the rules, listens, and answers\n"
               "\"may this request proceed?\" over HTTP/JSON and over gRPC (Envoy's\n"
               "rate limit service, ShouldRateLimit, and grpc.health.v1). Every option\n"
               "can also be set with the environment variable shown; a flag wins over\n"
               "the environment.\n\n"
               "  weir serve --rules examples/rules.yaml\n"
               "  curl -si localhost:8080/v1/check -d '{\"domain\":\"api\","
               "\"descriptors\":[{\"entries\":[{\"key\":\"api_key\",\"value\":\"k1\"}]}]}'\n\n"
               "options:\n");
    for (size_t i = 0; i < N_OPTIONS; i++) {
        const option *o = &options[i];
        char left[64];
        snprintf(left, sizeof(left), "--%s %s", o->flag, o->metavar);
        fprintf(f, "  %-30s %s\n  %-30s [%s", left, o->help, "", o->env);
        if (o->dflt[0])
            fprintf(f, ", default %s", o->dflt);
        fprintf(f, "]\n");
    }
    fprintf(f, "\nSignals: SIGHUP reloads the rules; SIGTERM or SIGINT drains and stops.\n"
               "Docs: docs/API.md (HTTP API), docs/CONFIG.md (rules), docs/OPERATIONS.md.\n");
}

static const option *find(const char *flag, size_t n)
{
    for (size_t i = 0; i < N_OPTIONS; i++)
        if (strlen(options[i].flag) == n && strncmp(options[i].flag, flag, n) == 0)
            return &options[i];
    return NULL;
}

/* Whether HOST:PORT names only this machine: an address in 127.0.0.0/8,
 * ::1, or localhost (an empty host is every interface; any other name
 * may resolve anywhere). */
bool serve_on_loopback(const char *addr)
{
    const char *colon = strrchr(addr, ':');
    size_t n = colon ? (size_t)(colon - addr) : strlen(addr);
    if (n >= 2 && addr[0] == '[' && addr[n - 1] == ']') {
        addr++;
        n -= 2;
    }
    char host[SERVE_ADDR_BYTES];
    if (n >= sizeof(host))
        return false;
    memcpy(host, addr, n);
    host[n] = '\0';
    struct in_addr v4;
    struct in6_addr v6;
    if (inet_pton(AF_INET, host, &v4) == 1)
        return (ntohl(v4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, host, &v6) == 1)
        return IN6_IS_ADDR_LOOPBACK(&v6);
    return strcmp(host, "localhost") == 0;
}

/* The xDS settings that must agree with one another. */
static bool xds_options_valid(const serve_options *o, FILE *err)
{
    char *end;
    double f = strtod(o->xds_backoff_random_factor, &end);
    if (end == o->xds_backoff_random_factor || *end || !(f >= 0 && f <= 1)) {
        fprintf(err, "weir serve: --xds-backoff-random-factor '%s': a number from 0 to 1\n",
                o->xds_backoff_random_factor);
        return false;
    }
    const char *colon = strrchr(o->xds_server, ':');
    if (!colon || colon == o->xds_server || !colon[1] || strstr(o->xds_server, "://")) {
        fprintf(err, "weir serve: --xds-server '%s': HOST:PORT\n", o->xds_server);
        return false;
    }
    if (o->xds_backoff_initial_ms <= 0 || o->xds_backoff_max_ms < o->xds_backoff_initial_ms ||
        o->xds_connect_retry_ms <= 0 || o->xds_max_message_bytes < 1024 ||
        o->xds_max_message_bytes > (1u << 30)) {
        fprintf(err, "weir serve: --xds-backoff-initial and --xds-connect-retry must be positive, "
                     "--xds-backoff-max at least --xds-backoff-initial, "
                     "--xds-max-message-bytes 1KiB..1GiB\n");
        return false;
    }
    return true;
}

bool serve_options_set(serve_options *o, const char *flag, const char *value)
{
    const option *opt = find(flag, strlen(flag));
    return opt && set(o, opt, value, true);
}

int serve_options_parse(serve_options *o, int argc, char **argv, FILE *out, FILE *err, bool *done)
{
    memset(o, 0, sizeof(*o));
    *done = false;
    for (size_t i = 0; i < N_OPTIONS; i++)
        if (!set(o, &options[i], options[i].dflt, true)) {
            fprintf(err, "weir serve: bad built-in default for --%s\n", options[i].flag);
            return 2;
        }
    /* upstream's variables, then weir's (which win), then the flags */
    if (!serve_options_upstream(o, err))
        return 2;
    for (size_t i = 0; i < N_OPTIONS; i++) {
        const char *v = getenv(options[i].env);
        if (!v)
            continue;
        if (options[i].kind == K_CHECK)
            o->n_check_headers = 0;
        if (!set(o, &options[i], v, true)) {
            fprintf(err, "weir serve: %s='%s': not a valid %s%s\n", options[i].env, v,
                    options[i].metavar, examples(&options[i]));
            return 2;
        }
    }
    bool cleared_check = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            serve_options_usage(out);
            *done = true;
            return 0;
        }
        if (strncmp(a, "--", 2) != 0) {
            fprintf(err, "weir serve: unexpected argument '%s' (see weir serve --help)\n", a);
            return 2;
        }
        const char *name = a + 2, *eq = strchr(name, '=');
        const option *opt = find(name, eq ? (size_t)(eq - name) : strlen(name));
        if (!opt) {
            fprintf(err, "weir serve: unknown option '%s' (see weir serve --help)\n", a);
            return 2;
        }
        const char *v = eq ? eq + 1 : NULL;
        /* a switch alone (--strict) is true; --strict false still works */
        if (!v && opt->kind == K_BOOL && (i + 1 >= argc || strncmp(argv[i + 1], "--", 2) == 0))
            v = "true";
        if (!v) {
            if (i + 1 >= argc) {
                fprintf(err, "weir serve: --%s needs a value (%s)\n", opt->flag, opt->metavar);
                return 2;
            }
            v = argv[++i];
        }
        if (opt->kind == K_CHECK && !cleared_check) {
            o->n_check_headers = 0; /* flags replace the environment's list */
            cleared_check = true;
        }
        if (!set(o, opt, v, false)) {
            fprintf(err, "weir serve: --%s '%s': not a valid %s%s\n", opt->flag, v, opt->metavar,
                    examples(opt));
            return 2;
        }
    }
    if (o->max_descriptors == 0 || o->max_descriptors > WEIR_ENGINE_MAX_DESCRIPTORS) {
        fprintf(err, "weir serve: --max-descriptors must be 1..%u\n", WEIR_ENGINE_MAX_DESCRIPTORS);
        return 2;
    }
    if (o->max_unsent_bytes < 4096) {
        fprintf(err, "weir serve: --max-unsent-bytes must be at least 4KiB\n");
        return 2;
    }
    if (o->max_batch == 0 || o->max_header_bytes < 256 || o->max_body_bytes == 0) {
        fprintf(err, "weir serve: --max-batch, --max-header-bytes (>= 256) and "
                     "--max-body-bytes must be positive\n");
        return 2;
    }
    if (o->grpc_max_streams == 0 || o->grpc_max_streams > INT32_MAX ||
        o->grpc_max_message_bytes == 0 || o->grpc_max_message_bytes > UINT32_MAX) {
        fprintf(err,
                "weir serve: --grpc-max-streams must be 1..%d and "
                "--grpc-max-message-bytes 1..4GiB\n",
                INT32_MAX);
        return 2;
    }
    char why[256], shown[SERVE_ADDR_BYTES + 8];
    if (!stores_check(o->store, why, sizeof(why))) {
        stores_describe(o->store, shown, sizeof(shown));
        fprintf(err, "weir serve: --store '%s': %s\n", shown, why);
        return 2;
    }
    if (o->redis_timeout_ms == 0 || o->redis_connect_timeout_ms == 0 ||
        o->redis_batch_window_ms > o->redis_timeout_ms || o->redis_breaker_failures == 0 ||
        o->redis_breaker_failures > UINT32_MAX || o->redis_breaker_window_ms == 0 ||
        o->redis_breaker_cooldown_ms == 0 || o->redis_over_limit_cache > (1u << 24)) {
        fprintf(err, "weir serve: --redis-timeout, --redis-connect-timeout and the "
                     "--redis-breaker-* settings must be positive, --redis-batch-window "
                     "at most --redis-timeout, --redis-over-limit-cache at most 16777216\n");
        return 2;
    }
    if (o->instances == 0 || o->instances > 1000000) {
        fprintf(err, "weir serve: --instances must be 1..1000000\n");
        return 2;
    }
    if (o->check_deny_status < 400 || o->check_deny_status > 599) {
        fprintf(err, "weir serve: --check-deny-status must be a 4xx or 5xx status\n");
        return 2;
    }
    if (o->statsd[0] && (!statsd_check(o->statsd) || o->statsd_interval_ms == 0)) {
        fprintf(err,
                "weir serve: --statsd '%s': HOST:PORT (a port 1..65535) and a positive "
                "--statsd-interval\n",
                o->statsd);
        return 2;
    }
    if (o->top_keys > TOP_KEYS_MAX_COUNTERS) {
        fprintf(err, "weir serve: --top-keys must be 0..%u\n", TOP_KEYS_MAX_COUNTERS);
        return 2;
    }
    if (o->max_pipelined == 0) {
        fprintf(err, "weir serve: --max-pipelined must be positive\n");
        return 2;
    }
    if (!shed_configure(&o->shed, o->priorities, o->default_priority, o->priority_key, o->shed_lag,
                        why, sizeof(why))) {
        fprintf(err, "weir serve: %s\n", why);
        return 2;
    }
    if (o->config_xds && !xds_options_valid(o, err))
        return 2;
    if (o->resp[0] && !o->resp_password[0] && !serve_on_loopback(o->resp)) {
        fprintf(err,
                "weir serve: --resp %s: not a loopback address, and no --resp-password: "
                "anyone who reaches it could spend or reset any counter (set a password, which "
                "clients give with AUTH, or listen on 127.0.0.1)\n",
                o->resp);
        return 2;
    }
    return 0;
}
