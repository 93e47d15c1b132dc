/*
 * upstream_env.c - envoyproxy/ratelimit's environment variables, read as
 * weir's settings (serve_options_upstream()), so a deployment moves over
 * with its manifests as they are. Each maps onto one of weir's flags;
 * weir's own WEIR_* variables and the flags are applied afterwards and win.
 * docs/ENVOY.md has the table.
 *
 * Where upstream's default would differ from weir's (upstream listens on
 * every interface), weir keeps its own unless the variable says otherwise:
 * PORT=8080 alone listens on 127.0.0.1:8080, HOST=0.0.0.0 PORT=8080 on
 * every interface.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "options.h"

/* The variable, or NULL when unset or empty. */
static const char *env(const char *name)
{
    const char *v = getenv(name);
    return v && v[0] ? v : NULL;
}

static bool set_or_say(serve_options *o, FILE *err, const char *var, const char *flag,
                       const char *value)
{
    if (serve_options_set(o, flag, value))
        return true;
    fprintf(err, "weir serve: %s='%s': not a valid value for --%s\n", var, value, flag);
    return false;
}

/* PORT (or GRPC_PORT), with HOST (GRPC_HOST) when set, as one listener
 * address. A HOST without its PORT is not read: shells such as zsh and
 * tcsh set HOST to the machine's name. */
static bool listener(serve_options *o, FILE *err, const char *host_var, const char *port_var,
                     const char *flag)
{
    const char *host = env(host_var), *port = env(port_var);
    if (!port)
        return true;
    char addr[SERVE_ADDR_BYTES];
    bool v6 = host && strchr(host, ':');
    int n = snprintf(addr, sizeof(addr), "%s%s%s:%s", v6 ? "[" : "", host ? host : "127.0.0.1",
                     v6 ? "]" : "", port);
    if (n < 0 || (size_t)n >= sizeof(addr)) {
        fprintf(err, "weir serve: %s/%s: the address is too long\n", host_var, port_var);
        return false;
    }
    return set_or_say(o, err, port_var, flag, addr);
}

/* LOG_LEVEL in logrus's words (trace, warning, fatal, panic included). */
static bool log_level(serve_options *o, FILE *err)
{
    const char *v = env("LOG_LEVEL");
    if (!v)
        return true;
    char low[16];
    size_t n = 0;
    for (; v[n] && n < sizeof(low) - 1; n++)
        low[n] = (char)tolower((unsigned char)v[n]);
    low[n] = '\0';
    const char *level = !strcmp(low, "trace")                            ? "debug"
                        : !strcmp(low, "warning")                        ? "warn"
                        : !strcmp(low, "fatal") || !strcmp(low, "panic") ? "error"
                                                                         : low;
    return set_or_say(o, err, "LOG_LEVEL", "log-level", level);
}

/* Appends @s to @out percent-encoded where a URL's userinfo needs it. */
static void put_escaped(char *out, size_t cap, size_t *len, const char *s, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    for (size_t i = 0; i < n && *len + 4 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        if (isalnum(c) || strchr("-._~", c)) {
            out[(*len)++] = (char)c;
        } else {
            out[(*len)++] = '%';
            out[(*len)++] = hex[c >> 4];
            out[(*len)++] = hex[c & 15];
        }
    }
    out[*len] = '\0';
}

/* REDIS_TYPE (single, cluster, sentinel), REDIS_SOCKET_TYPE, REDIS_URL
 * and REDIS_AUTH ("password" or "user:password") as --store: a cluster's
 * REDIS_URL is its nodes, "host:port,host:port"; a sentinel's is the
 * master's name and then the sentinels, "mymaster,host:port,host:port".
 * REDIS_TLS is refused by name rather than ignored. */
static bool redis(serve_options *o, FILE *err)
{
    const char *url = env("REDIS_URL");
    if (!url)
        return true;
    const char *type = env("REDIS_TYPE"), *tls = env("REDIS_TLS");
    bool cluster = type && !strcasecmp(type, "cluster");
    bool sentinel = type && !strcasecmp(type, "sentinel");
    if (type && !cluster && !sentinel && strcasecmp(type, "single") != 0) {
        fprintf(err, "weir serve: REDIS_TYPE=%s: single, cluster or sentinel\n", type);
        return false;
    }
    if (tls && (!strcasecmp(tls, "true") || !strcmp(tls, "1"))) {
        fprintf(err, "weir serve: REDIS_TLS: this build's hiredis (Debian 12's 0.14) has no TLS; "
                     "reach Redis over a TLS tunnel on loopback instead (docs/OPERATIONS.md)\n");
        return false;
    }
    const char *socket = env("REDIS_SOCKET_TYPE"), *auth = env("REDIS_AUTH");
    bool unix_socket = socket && !strcasecmp(socket, "unix");
    if (socket && !unix_socket && strcasecmp(socket, "tcp") != 0) {
        fprintf(err, "weir serve: REDIS_SOCKET_TYPE=%s: tcp or unix\n", socket);
        return false;
    }
    if (unix_socket && (cluster || sentinel)) {
        fprintf(err, "weir serve: REDIS_SOCKET_TYPE=unix: only for REDIS_TYPE=single\n");
        return false;
    }
    const char *comma = sentinel ? strchr(url, ',') : NULL;
    if (sentinel && (!comma || comma == url)) {
        fprintf(err,
                "weir serve: REDIS_URL='%s': REDIS_TYPE=sentinel takes "
                "mymaster,host:port,host:port\n",
                url);
        return false;
    }
    char store[SERVE_ADDR_BYTES];
    size_t len = (size_t)snprintf(store, sizeof(store), "%s",
                                  unix_socket ? "redis+unix://"
                                  : cluster   ? "redis+cluster://"
                                  : sentinel  ? "redis+sentinel://"
                                              : "redis://");
    if (auth) {
        const char *colon = strchr(auth, ':');
        if (colon)
            put_escaped(store, sizeof(store), &len, auth, (size_t)(colon - auth));
        store[len++] = ':';
        const char *pw = colon ? colon + 1 : auth;
        put_escaped(store, sizeof(store), &len, pw, strlen(pw));
        store[len++] = '@';
        store[len] = '\0';
    }
    if (len + strlen(url) + 1 >= sizeof(store)) {
        fprintf(err, "weir serve: REDIS_URL: too long\n");
        return false;
    }
    if (sentinel) {
        /* the master's name, escaped as the URL wants it, then its '@' */
        put_escaped(store, sizeof(store), &len, url, (size_t)(comma - url));
        if (len + strlen(comma) + 1 >= sizeof(store)) {
            fprintf(err, "weir serve: REDIS_URL: too long\n");
            return false;
        }
        store[len++] = '@';
        strcpy(store + len, comma + 1);
    } else {
        strcpy(store + len, url);
    }
    if (serve_options_set(o, "store", store))
        return true;
    /* the store's own check, with its reason, comes at start-up; this one
     * only refuses what is not even a setting */
    fprintf(err, "weir serve: REDIS_URL='%s': not a valid Redis address\n", url);
    return false;
}

/* RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY (config by
 * default): where upstream reads its rule files. */
static bool runtime_root(serve_options *o, FILE *err)
{
    const char *root = env("RUNTIME_ROOT");
    if (!root)
        return true;
    const char *sub = env("RUNTIME_SUBDIRECTORY"), *app = env("RUNTIME_APPDIRECTORY");
    char path[sizeof(o->rules)];
    int n = snprintf(path, sizeof(path), "%s/%s%s%s", root, sub ? sub : "", sub ? "/" : "",
                     app ? app : "config");
    if (n < 0 || (size_t)n >= sizeof(path)) {
        fprintf(err, "weir serve: RUNTIME_ROOT/RUNTIME_SUBDIRECTORY: the path is too long\n");
        return false;
    }
    return set_or_say(o, err, "RUNTIME_ROOT", "rules", path);
}

/* LIMIT_RESPONSE_HEADERS_ENABLED=true: Envoy gets upstream's three fields
 * (RateLimit-Limit, -Remaining, -Reset, renamed by LIMIT_LIMIT_HEADER,
 * LIMIT_REMAINING_HEADER and LIMIT_RESET_HEADER) in
 * response_headers_to_add; weir's HTTP answers carry them too. */
static bool response_headers(serve_options *o, FILE *err)
{
    const char *on = env("LIMIT_RESPONSE_HEADERS_ENABLED");
    if (!on)
        return true;
    if (!set_or_say(o, err, "LIMIT_RESPONSE_HEADERS_ENABLED", "grpc-response-headers", on))
        return false;
    if (!o->grpc_response_headers)
        return true;
    if (!serve_options_set(o, "headers", "upstream,retry-after"))
        return false;
    const char *limit = env("LIMIT_LIMIT_HEADER"), *remaining = env("LIMIT_REMAINING_HEADER"),
               *reset = env("LIMIT_RESET_HEADER");
    char names[3 * 80];
    int n =
        snprintf(names, sizeof(names), "%s,%s,%s", limit ? limit : "RateLimit-Limit",
                 remaining ? remaining : "RateLimit-Remaining", reset ? reset : "RateLimit-Reset");
    if (n < 0 || (size_t)n >= sizeof(names) ||
        !serve_options_set(o, "upstream-header-names", names)) {
        fprintf(err, "weir serve: LIMIT_LIMIT_HEADER, LIMIT_REMAINING_HEADER, LIMIT_RESET_HEADER: "
                     "each must be a header field name of at most 63 bytes, without ','\n");
        return false;
    }
    return true;
}

/* USE_STATSD, STATSD_HOST (localhost) and STATSD_PORT (8125) as
 * --statsd. Upstream sends by default; weir sends only when asked:
 * USE_STATSD true, or STATSD_HOST or STATSD_PORT set and USE_STATSD not
 * false. */
static bool statsd(serve_options *o, FILE *err)
{
    const char *use = env("USE_STATSD"), *host = env("STATSD_HOST"), *port = env("STATSD_PORT");
    bool on = host || port;
    if (use) {
        static const char *const yes[] = {"1", "t", "true"}, *const no[] = {"0", "f", "false"};
        bool known = false;
        for (size_t i = 0; i < 3; i++) {
            if (!strcasecmp(use, yes[i]))
                on = known = true;
            else if (!strcasecmp(use, no[i]))
                on = false, known = true;
        }
        if (!known) {
            fprintf(err, "weir serve: USE_STATSD='%s': true or false\n", use);
            return false;
        }
    }
    if (!on)
        return true;
    host = host ? host : "localhost";
    char addr[SERVE_ADDR_BYTES];
    bool v6 = strchr(host, ':') != NULL;
    int n = snprintf(addr, sizeof(addr), "%s%s%s:%s", v6 ? "[" : "", host, v6 ? "]" : "",
                     port ? port : "8125");
    if (n < 0 || (size_t)n >= sizeof(addr)) {
        fprintf(err, "weir serve: STATSD_HOST/STATSD_PORT: the address is too long\n");
        return false;
    }
    return set_or_say(o, err, "STATSD_HOST/STATSD_PORT", "statsd", addr);
}

/* Variables that map onto one flag with the value as it is. */
static const struct {
    const char *var, *flag;
} same_value[] = {
    {"LOG_FORMAT", "log-format"},
    {"MERGE_DOMAIN_CONFIG", "merge-domains"},
    {"SHADOW_MODE", "shadow-mode"},
    {"FORCE_START_WITHOUT_INITIAL_CONFIG", "force-start"},
    {"HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", "health-needs-rules"},
    {"CONFIG_TYPE", "config-type"},
    {"CONFIG_GRPC_XDS_SERVER_URL", "xds-server"},
    {"CONFIG_GRPC_XDS_NODE_ID", "xds-node-id"},
    {"CONFIG_GRPC_XDS_NODE_METADATA", "xds-node-metadata"},
    {"CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", "xds-headers"},
    {"CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL", "xds-connect-retry"},
    {"XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", "xds-backoff-initial"},
    {"XDS_CLIENT_BACKOFF_MAX_INTERVAL", "xds-backoff-max"},
    {"XDS_CLIENT_BACKOFF_RANDOM_FACTOR", "xds-backoff-random-factor"},
    {"XDS_CLIENT_BACKOFF_JITTER", "xds-backoff-jitter"},
    {"XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES", "xds-max-message-bytes"},
    {"STATS_FLUSH_INTERVAL", "statsd-interval"},
    {"NEAR_LIMIT_RATIO", "near-limit-ratio"},
};

/* CONFIG_GRPC_XDS_SERVER_USE_TLS: the xDS client speaks plain-text gRPC
 * only, so TLS (and its certificate settings, which upstream reads only
 * with it) is refused by name rather than ignored. */
static bool xds_tls(FILE *err)
{
    const char *tls = env("CONFIG_GRPC_XDS_SERVER_USE_TLS");
    if (!tls || !strcasecmp(tls, "false") || !strcmp(tls, "0"))
        return true;
    fprintf(err,
            "weir serve: CONFIG_GRPC_XDS_SERVER_USE_TLS=%s: weir's xDS client speaks plain-text "
            "gRPC (h2c) only; reach the management server through a TLS proxy on loopback "
            "(docs/OPERATIONS.md, \"Rules over xDS\")\n",
            tls);
    return false;
}

bool serve_options_upstream(serve_options *o, FILE *err)
{
    if (!listener(o, err, "HOST", "PORT", "http") ||
        !listener(o, err, "GRPC_HOST", "GRPC_PORT", "grpc") || !log_level(o, err) ||
        !redis(o, err) || !runtime_root(o, err) || !response_headers(o, err) || !xds_tls(err) ||
        !statsd(o, err))
        return false;
    for (size_t i = 0; i < sizeof(same_value) / sizeof(same_value[0]); i++) {
        const char *v = env(same_value[i].var);
        if (v && !set_or_say(o, err, same_value[i].var, same_value[i].flag, v))
            return false;
    }
    return true;
}
