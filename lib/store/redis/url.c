/*
 * url.c - weir_redis_url_parse(): where Redis is, from a URL.
 *
 *   redis://[[user]:password@]host[:port][/db]
 *   redis+unix://[[user]:password@]/path/to.sock[?db=N]
 *   redis+cluster://[[user]:password@]host:port,host:port,...
 *   redis+sentinel://[[user]:password@]master@host:port,...[/db]
 *
 * Hand-written: the grammar is this small one, and the messages must
 * never echo the password (a general URL parser's errors would).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/redis/redis_internal.h"

#define MAX_URL 2048u

typedef struct out_buf {
    char *p;
    size_t left;
} out_buf;

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Copy s[0..n) into @ob, percent-decoded when @decode, NUL-terminated.
 * Returns the copy, or NULL when it does not fit, is too long, holds a bad
 * escape or a NUL. */
static const char *put(out_buf *ob, const char *s, size_t n, bool decode)
{
    char *start = ob->p;
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (decode && c == '%') {
            if (i + 2 >= n)
                return NULL;
            int hi = hexval(s[i + 1]), lo = hexval(s[i + 2]);
            if (hi < 0 || lo < 0)
                return NULL;
            c = (char)(hi * 16 + lo);
            i += 2;
        }
        if (c == '\0' || len >= WEIR_REDIS_MAX_FIELD || ob->left < 2)
            return NULL;
        *ob->p++ = c;
        ob->left--;
        len++;
    }
    *ob->p++ = '\0';
    ob->left--;
    return start;
}

static bool parse_uint(const char *s, size_t n, long max, long *out)
{
    if (n == 0 || n > 9)
        return false;
    long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (s[i] - '0');
    }
    if (v > max)
        return false;
    *out = v;
    return true;
}

static weir_status fail(char *err, size_t cap, const char *what)
{
    if (err && cap)
        snprintf(err, cap, "%s", what);
    return WEIR_EPARSE;
}

/* [[user]:password@]: fills user and password; @rest after the '@'. The
 * '@' searched for is the last one before the host part, so a password
 * may hold one percent-encoded or not. */
static weir_status userinfo(const char *s, const char *end, out_buf *ob, weir_redis_options *o,
                            const char **rest, char *err, size_t cap)
{
    const char *at = NULL;
    for (const char *p = s; p < end; p++)
        if (*p == '@')
            at = p;
    *rest = s;
    if (!at)
        return WEIR_OK;
    const char *colon = memchr(s, ':', (size_t)(at - s));
    if (!colon)
        return fail(err, cap, "a user without a password: write user:password@ or :password@");
    if (colon > s && !(o->user = put(ob, s, (size_t)(colon - s), true)))
        return fail(err, cap, "the user name is too long or badly escaped");
    if (!(o->password = put(ob, colon + 1, (size_t)(at - colon - 1), true)))
        return fail(err, cap, "the password is too long or badly escaped");
    if (!*o->password)
        o->password = NULL;
    *rest = at + 1;
    return WEIR_OK;
}

static weir_status parse_tcp(const char *s, out_buf *ob, weir_redis_options *o, char *err,
                             size_t cap)
{
    const char *end = s + strlen(s);
    /* the path (/db) starts at the first '/' after the userinfo */
    const char *rest;
    const char *slash = end;
    const char *at = NULL;
    for (const char *p = s; p < end; p++)
        if (*p == '@')
            at = p;
    for (const char *p = at ? at + 1 : s; p < end; p++)
        if (*p == '/') {
            slash = p;
            break;
        }
    weir_status st = userinfo(s, slash, ob, o, &rest, err, cap);
    if (st != WEIR_OK)
        return st;
    const char *host = rest, *host_end, *port = NULL;
    if (*host == '[') {
        const char *close = memchr(host, ']', (size_t)(slash - host));
        if (!close)
            return fail(err, cap, "an IPv6 address without its closing ']'");
        host_end = close;
        host++;
        if (close + 1 < slash) {
            if (close[1] != ':')
                return fail(err, cap, "unexpected text after the IPv6 address");
            port = close + 2;
        }
    } else {
        const char *colon = memchr(host, ':', (size_t)(slash - host));
        host_end = colon ? colon : slash;
        port = colon ? colon + 1 : NULL;
    }
    if (host_end == host)
        return fail(err, cap, "no host: write redis://host:port");
    if (!(o->host = put(ob, host, (size_t)(host_end - host), false)))
        return fail(err, cap, "the host name is too long");
    o->port = 6379;
    if (port) {
        long v;
        if (!parse_uint(port, (size_t)(slash - port), 65535, &v) || v == 0)
            return fail(err, cap, "the port must be a number from 1 to 65535");
        o->port = (int)v;
    }
    o->db = 0;
    if (slash < end && slash + 1 < end) {
        long v;
        if (!parse_uint(slash + 1, (size_t)(end - slash - 1), 1000000, &v))
            return fail(err, cap, "the database (after '/') must be a number");
        o->db = (int)v;
    }
    o->unix_path = NULL;
    return WEIR_OK;
}

static weir_status parse_unix(const char *s, out_buf *ob, weir_redis_options *o, char *err,
                              size_t cap)
{
    const char *end = s + strlen(s);
    const char *q = strchr(s, '?');
    const char *path_end = q ? q : end;
    /* the path starts at the first '/' after the userinfo */
    const char *at = NULL;
    for (const char *p = s; p < path_end; p++)
        if (*p == '@')
            at = p;
    const char *rest = s;
    weir_status st = userinfo(s, at ? at + 1 : s, ob, o, &rest, err, cap);
    if (st != WEIR_OK)
        return st;
    if (*rest != '/')
        return fail(err, cap, "the socket path must be absolute: redis+unix:///path/to.sock");
    if (!(o->unix_path = put(ob, rest, (size_t)(path_end - rest), false)))
        return fail(err, cap, "the socket path is too long");
    o->host = NULL;
    o->db = 0;
    if (q) {
        long v;
        if (strncmp(q, "?db=", 4) != 0 || !parse_uint(q + 4, (size_t)(end - q - 4), 1000000, &v))
            return fail(err, cap, "the only setting after '?' is db=N");
        o->db = (int)v;
    }
    return WEIR_OK;
}

/* One "host:port" (an IPv6 host in brackets) of a list, s[0..n). */
static bool seed_ok(const char *s, size_t n)
{
    const char *end = s + n, *port;
    if (n > 0 && *s == '[') {
        const char *close = memchr(s, ']', n);
        if (!close || close == s + 1 || close + 1 >= end || close[1] != ':')
            return false;
        port = close + 2;
    } else {
        const char *colon = memchr(s, ':', n);
        if (!colon || colon == s || memchr(colon + 1, ':', (size_t)(end - colon - 1)))
            return false;
        port = colon + 1;
    }
    long v;
    return port - s <= (long)WEIR_REDIS_MAX_FIELD &&
           parse_uint(port, (size_t)(end - port), 65535, &v) && v > 0;
}

int weir__redis_seed_split(const char *seeds, weir__redis_seed *out, size_t max)
{
    size_t n = 0;
    const char *s = seeds;
    if (!s || !*s)
        return -1;
    for (;;) {
        const char *comma = strchr(s, ',');
        size_t len = comma ? (size_t)(comma - s) : strlen(s);
        if (n >= max || !seed_ok(s, len))
            return -1;
        weir__redis_seed *o = &out[n++];
        const char *colon = s + len;
        while (*--colon != ':')
            ;
        const char *h = s, *he = colon;
        if (*h == '[')
            h++, he--;
        memcpy(o->host, h, (size_t)(he - h));
        o->host[he - h] = '\0';
        o->port = (int)strtol(colon + 1, NULL, 10);
        if (!comma)
            return (int)n;
        s = comma + 1;
    }
}

/* The seed list after the userinfo: copied whole, checked, the first one
 * made host and port. */
static weir_status seed_list(const char *s, size_t n, out_buf *ob, weir_redis_options *o,
                             int default_port, char *err, size_t cap)
{
    char list[MAX_URL + 1];
    size_t len = 0;
    /* a seed without a port gets the default one */
    for (const char *p = s, *end = s + n; p < end;) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *e = comma ? comma : end;
        const char *last = e;
        while (last > p && last[-1] != ':' && last[-1] != ']')
            last--;
        bool has_port = last > p && last[-1] == ':';
        if (len + (size_t)(e - p) + 8 > MAX_URL)
            return fail(err, cap, "the list of servers is too long");
        memcpy(list + len, p, (size_t)(e - p));
        len += (size_t)(e - p);
        if (!has_port)
            len += (size_t)snprintf(list + len, 8, ":%d", default_port);
        if (comma)
            list[len++] = ',';
        p = comma ? comma + 1 : end;
    }
    list[len] = '\0';
    weir__redis_seed seeds[WEIR_REDIS_MAX_SEEDS];
    int k = weir__redis_seed_split(list, seeds, WEIR_REDIS_MAX_SEEDS);
    if (k < 0)
        return fail(err, cap,
                    "the servers must be host:port,host:port,... (at most 16; IPv6 in brackets)");
    /* the seeds go unescaped (a host holds no '%'); host and port are the first's */
    o->seeds = put(ob, list, len, false);
    o->host = o->seeds ? put(ob, seeds[0].host, strlen(seeds[0].host), false) : NULL;
    if (!o->seeds || !o->host)
        return fail(err, cap, "the list of servers is too long");
    o->port = seeds[0].port;
    o->unix_path = NULL;
    return WEIR_OK;
}

/* redis+cluster://[userinfo@]host:port,...: no database (a cluster has
 * only 0) */
static weir_status parse_cluster(const char *s, out_buf *ob, weir_redis_options *o, char *err,
                                 size_t cap)
{
    const char *end = s + strlen(s), *rest;
    if (memchr(s, '/', (size_t)(end - s)))
        return fail(err, cap, "a Redis Cluster has only database 0: no /db in the URL");
    weir_status st = userinfo(s, end, ob, o, &rest, err, cap);
    if (st != WEIR_OK)
        return st;
    o->topology = WEIR_REDIS_CLUSTER;
    o->db = 0;
    return seed_list(rest, (size_t)(end - rest), ob, o, 6379, err, cap);
}

/* redis+sentinel://[userinfo@]master@host:port,...[/db] */
static weir_status parse_sentinel(const char *s, out_buf *ob, weir_redis_options *o, char *err,
                                  size_t cap)
{
    const char *end = s + strlen(s);
    const char *at = NULL;
    for (const char *p = s; p < end; p++)
        if (*p == '@')
            at = p;
    if (!at)
        return fail(err, cap, "no master name: write redis+sentinel://master-name@host:port,...");
    const char *slash = memchr(at, '/', (size_t)(end - at));
    const char *hosts_end = slash ? slash : end;
    /* the master's name follows the credentials' '@', if there are any */
    const char *name = s;
    for (const char *p = s; p < at; p++)
        if (*p == '@')
            name = p + 1;
    if (name > s) {
        const char *rest;
        weir_status st = userinfo(s, name, ob, o, &rest, err, cap);
        if (st != WEIR_OK)
            return st;
    }
    if (name == at || !(o->master_name = put(ob, name, (size_t)(at - name), true)))
        return fail(err, cap, "the master name is empty, too long or badly escaped");
    o->topology = WEIR_REDIS_SENTINEL;
    o->db = 0;
    if (slash && slash + 1 < end) {
        long v;
        if (!parse_uint(slash + 1, (size_t)(end - slash - 1), 1000000, &v))
            return fail(err, cap, "the database (after '/') must be a number");
        o->db = (int)v;
    }
    return seed_list(at + 1, (size_t)(hosts_end - at - 1), ob, o, 26379, err, cap);
}

weir_status weir_redis_url_parse(const char *url, weir_redis_options *o, char *buf, size_t cap,
                                 char *err, size_t err_cap)
{
    if (!url || !o || !buf || cap == 0)
        return fail(err, err_cap, "no URL");
    if (strlen(url) > MAX_URL)
        return fail(err, err_cap, "the URL is too long");
    out_buf ob = {buf, cap};
    o->user = NULL;
    o->password = NULL;
    o->topology = WEIR_REDIS_SINGLE;
    o->seeds = NULL;
    o->master_name = NULL;
    if (strncmp(url, "redis+cluster://", 16) == 0)
        return parse_cluster(url + 16, &ob, o, err, err_cap);
    if (strncmp(url, "redis+sentinel://", 17) == 0)
        return parse_sentinel(url + 17, &ob, o, err, err_cap);
    if (strncmp(url, "redis://", 8) == 0)
        return parse_tcp(url + 8, &ob, o, err, err_cap);
    if (strncmp(url, "redis+unix://", 13) == 0)
        return parse_unix(url + 13, &ob, o, err, err_cap);
    if (strncmp(url, "rediss://", 9) == 0)
        return fail(err, err_cap,
                    "rediss:// (TLS) is not supported: this build's hiredis (Debian 12's 0.14) "
                    "has no TLS; reach Redis over a TLS tunnel on loopback instead "
                    "(docs/OPERATIONS.md)");
    return fail(err, err_cap,
                "not a Redis URL: expected redis://host:port, redis+unix:///path/to.sock, "
                "redis+cluster://host:port,... or redis+sentinel://master@host:port,...");
}
