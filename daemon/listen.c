/*
 * listen.c - the listening sockets of one protocol: one per worker on one
 * address, sharing the port through SO_REUSEPORT so the kernel spreads the
 * connections over the workers.
 */
#include "listen.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "options.h"

/* Splits "HOST:PORT" or "[V6]:PORT". */
static bool split_addr(const char *addr, char *host, size_t cap, char *port, size_t pcap)
{
    const char *colon;
    if (addr[0] == '[') {
        const char *end = strchr(addr, ']');
        if (!end || end[1] != ':')
            return false;
        if ((size_t)(end - addr - 1) >= cap)
            return false;
        memcpy(host, addr + 1, (size_t)(end - addr - 1));
        host[end - addr - 1] = '\0';
        colon = end + 1;
    } else {
        colon = strrchr(addr, ':');
        if (!colon || (size_t)(colon - addr) >= cap)
            return false;
        memcpy(host, addr, (size_t)(colon - addr));
        host[colon - addr] = '\0';
    }
    if (!colon[1] || strlen(colon + 1) >= pcap)
        return false;
    strcpy(port, colon + 1);
    return true;
}

/* Whether nothing listens on @a yet. The workers' sockets share their port
 * through SO_REUSEPORT, which would as gladly let a second weir serve (or
 * anything of the same user) join them, the kernel then splitting the
 * connections between the two processes and their counters: so a socket
 * without SO_REUSEPORT binds there first, which fails when anything is
 * bound to the port. Port 0 picks a port nothing holds. Between this
 * probe and the workers' binds a second process could still slip in; it
 * would have to start within microseconds of this one. */
static bool port_is_free(const struct sockaddr_storage *a, socklen_t len)
{
    in_port_t port = a->ss_family == AF_INET6 ? ((const struct sockaddr_in6 *)a)->sin6_port
                                              : ((const struct sockaddr_in *)a)->sin_port;
    if (port == 0)
        return true;
    int one = 1;
    int fd = socket(a->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return true; /* the workers' own binds will say what is wrong */
    /* SO_REUSEADDR: a port whose last connections linger in TIME_WAIT is
     * free; one that something listens on is not */
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    bool free_port = bind(fd, (const struct sockaddr *)a, len) == 0 || errno != EADDRINUSE;
    close(fd);
    return free_port;
}

/* Opens @n listening sockets on @addr sharing one port (SO_REUSEPORT);
 * with port 0 the first socket's port is used for the rest. Writes the
 * URL to @url. Returns NULL with @err set. */
int *listen_all(const char *addr, unsigned n, const char *scheme, char *url, size_t ucap, char *err,
                size_t ecap)
{
    char host[SERVE_ADDR_BYTES], port[32];
    if (!split_addr(addr, host, sizeof(host), port, sizeof(port))) {
        snprintf(err, ecap, "'%s' is not HOST:PORT", addr);
        return NULL;
    }
    struct addrinfo hints = {0}, *ai = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    int gai = getaddrinfo(host[0] ? host : NULL, port, &hints, &ai);
    if (gai != 0) {
        snprintf(err, ecap, "%s: %s", addr, gai_strerror(gai));
        return NULL;
    }
    int *fds = calloc(n, sizeof(*fds));
    if (!fds) {
        freeaddrinfo(ai);
        snprintf(err, ecap, "out of memory");
        return NULL;
    }
    struct sockaddr_storage bound;
    socklen_t blen = (socklen_t)ai->ai_addrlen;
    memcpy(&bound, ai->ai_addr, ai->ai_addrlen);
    freeaddrinfo(ai);
    if (!port_is_free(&bound, blen)) {
        snprintf(err, ecap, "%s: address already in use", addr);
        free(fds);
        return NULL;
    }
    for (unsigned i = 0; i < n; i++) {
        int one = 1;
        int fd = socket(bound.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
            setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0 ||
            bind(fd, (struct sockaddr *)&bound, blen) < 0 || listen(fd, 1024) < 0) {
            snprintf(err, ecap, "%s: %s", addr, strerror(errno));
            if (fd >= 0)
                close(fd);
            for (unsigned j = 0; j < i; j++)
                close(fds[j]);
            free(fds);
            return NULL;
        }
        fds[i] = fd;
        if (i == 0 && getsockname(fd, (struct sockaddr *)&bound, &blen) < 0) {
            snprintf(err, ecap, "%s: %s", addr, strerror(errno));
            close(fd);
            free(fds);
            return NULL;
        }
    }
    unsigned p = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                   : ((struct sockaddr_in *)&bound)->sin_port);
    bool v6 = strchr(host, ':') != NULL;
    snprintf(url, ucap, "%s://%s%s%s:%u", scheme, v6 ? "[" : "", host[0] ? host : "0.0.0.0",
             v6 ? "]" : "", p);
    return fds;
}
