/*
 * statsd.c - the statsd sink (see statsd.h): a thread that sleeps for the
 * interval, takes the counters' growth from the metrics and sends it as
 * statsd counter lines, `name:value|c\n` as upstream's gostats writes
 * them, packed into datagrams of at most STATSD_DATAGRAM_BYTES.
 *
 * Invariant: nothing here runs on a worker or the main loop; a decision
 * meets the sink only in the shard lock a flush takes briefly, as a
 * scrape does. Every send is non-blocking, and a failed one is not
 * retried: a missing listener loses datagrams, nothing else.
 */
#include "statsd.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "stat_key.h"

/* Longest host name taken (as SERVE_ADDR_BYTES, a whole setting). */
#define HOST_BYTES 256u

struct statsd {
    metrics *m;
    int64_t interval_ms;
    char host[HOST_BYTES];
    char port[16];
    int fd;      /* connected UDP socket, -1 until the name resolves */
    int wake[2]; /* a byte on wake[1] ends the thread */
    bool warned; /* the name's failure to resolve was logged */
    pthread_t thread;
    /* the datagram being packed */
    char dgram[STATSD_DATAGRAM_BYTES];
    size_t len;
    uint64_t sent, dropped; /* datagrams, for the debug log */
};

/* Splits "host:port" or "[v6]:port" into @host and @port (of
 * HOST_BYTES and 16 bytes). */
static bool split_addr(const char *addr, char *host_out, char *port_out)
{
    const char *colon = strrchr(addr, ':');
    if (!colon || !colon[1] || strlen(colon + 1) > 5)
        return false;
    const char *host = addr;
    size_t n = (size_t)(colon - addr);
    if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
        host++;
        n -= 2;
    }
    if (!n || n >= HOST_BYTES)
        return false;
    for (const char *p = colon + 1; *p; p++)
        if (*p < '0' || *p > '9')
            return false;
    long port = strtol(colon + 1, NULL, 10);
    if (port < 1 || port > 65535)
        return false;
    memcpy(host_out, host, n);
    host_out[n] = '\0';
    snprintf(port_out, 16, "%ld", port);
    return true;
}

bool statsd_check(const char *addr)
{
    char host[HOST_BYTES], port[16];
    return split_addr(addr, host, port);
}

/* A connected socket to the first address the name resolves to; false
 * (logged once) while it does not resolve. */
static bool connect_sink(statsd *s)
{
    if (s->fd >= 0)
        return true;
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_socktype = SOCK_DGRAM;
    hints.ai_protocol = IPPROTO_UDP;
    int rc = getaddrinfo(s->host, s->port, &hints, &res);
    for (struct addrinfo *a = rc == 0 ? res : NULL; a; a = a->ai_next) {
        int fd = socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
            continue;
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
            s->fd = fd;
            break;
        }
        close(fd);
    }
    if (res)
        freeaddrinfo(res);
    if (s->fd < 0 && !s->warned) {
        s->warned = true;
        dlog(WEIR_LOG_WARN, "statsd_unreachable", "host", s->host, "port", s->port, "reason",
             rc ? gai_strerror(rc) : "no address could be used", NULL);
    }
    return s->fd >= 0;
}

static void send_dgram(statsd *s, const char *p, size_t n)
{
    if (!n)
        return;
    if (connect_sink(s) && send(s->fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)n)
        s->sent++;
    else
        s->dropped++;
}

/* metrics_emit_fn: one counter line, into the datagram being packed. */
static void emit(void *arg, const char *prefix, const char *key, const char *stat, uint64_t delta)
{
    statsd *s = arg;
    char line[STAT_KEY_MAX_BYTES + 128];
    int n = snprintf(line, sizeof(line), "%s%s%s%s:%llu|c\n", prefix, key, stat ? "." : "",
                     stat ? stat : "", (unsigned long long)delta);
    if (n < 0 || (size_t)n >= sizeof(line)) {
        s->dropped++;
        return;
    }
    if (s->len + (size_t)n > sizeof(s->dgram)) {
        send_dgram(s, s->dgram, s->len);
        s->len = 0;
    }
    if ((size_t)n > sizeof(s->dgram)) {
        send_dgram(s, line, (size_t)n); /* too long to share a datagram */
        return;
    }
    memcpy(s->dgram + s->len, line, (size_t)n);
    s->len += (size_t)n;
}

static void flush(statsd *s)
{
    s->len = 0;
    metrics_deltas(s->m, emit, s);
    send_dgram(s, s->dgram, s->len);
    s->len = 0;
}

static void *run(void *arg)
{
    statsd *s = arg;
    for (;;) {
        struct pollfd p = {s->wake[0], POLLIN, 0};
        int timeout = s->interval_ms > 24 * 3600 * 1000 ? 24 * 3600 * 1000 : (int)s->interval_ms;
        int rc = poll(&p, 1, timeout);
        if (rc > 0)
            break;
        if (rc < 0 && errno != EINTR)
            break;
        flush(s);
    }
    flush(s);
    if (dlog_enabled(WEIR_LOG_DEBUG)) {
        char sent[24], dropped[24];
        snprintf(sent, sizeof(sent), "%llu", (unsigned long long)s->sent);
        snprintf(dropped, sizeof(dropped), "%llu", (unsigned long long)s->dropped);
        dlog(WEIR_LOG_DEBUG, "statsd_stopped", "datagrams", sent, "dropped", dropped, NULL);
    }
    return NULL;
}

statsd *statsd_start(const char *addr, int64_t interval_ms, metrics *m, char *why, size_t why_len)
{
    statsd *s = calloc(1, sizeof(*s));
    if (!s) {
        snprintf(why, why_len, "out of memory");
        return NULL;
    }
    s->m = m;
    s->interval_ms = interval_ms;
    s->fd = -1;
    s->wake[0] = s->wake[1] = -1;
    if (interval_ms <= 0 || !split_addr(addr, s->host, s->port)) {
        snprintf(why, why_len, "%s",
                 interval_ms <= 0 ? "the interval must be positive"
                                  : "not HOST:PORT (a port 1..65535)");
        free(s);
        return NULL;
    }
    if (pipe2(s->wake, O_CLOEXEC) != 0) {
        snprintf(why, why_len, "pipe: %s", strerror(errno));
        free(s);
        return NULL;
    }
    int rc = pthread_create(&s->thread, NULL, run, s);
    if (rc != 0) {
        snprintf(why, why_len, "cannot start its thread: %s", strerror(rc));
        close(s->wake[0]);
        close(s->wake[1]);
        free(s);
        return NULL;
    }
    return s;
}

void statsd_stop(statsd *s)
{
    if (!s)
        return;
    char c = 0;
    while (write(s->wake[1], &c, 1) < 0 && errno == EINTR)
        ;
    pthread_join(s->thread, NULL);
    close(s->wake[0]);
    close(s->wake[1]);
    if (s->fd >= 0)
        close(s->fd);
    free(s);
}
