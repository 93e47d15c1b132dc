/*
 * listen.h - the listening sockets of one protocol (listen.c).
 */
#ifndef WEIR_DAEMON_LISTEN_H
#define WEIR_DAEMON_LISTEN_H

#include <stddef.h>

/**
 * listen_all() - @n listening sockets on @addr ("HOST:PORT" or
 * "[V6]:PORT") sharing one port (SO_REUSEPORT); with port 0 the first
 * socket's port is used for the rest. Writes the URL (@scheme://HOST:PORT)
 * to @url. Returns the descriptors (malloc'd), or NULL with @err set.
 */
int *listen_all(const char *addr, unsigned n, const char *scheme, char *url, size_t ucap, char *err,
                size_t ecap);

#endif /* WEIR_DAEMON_LISTEN_H */
