/*
 * fuzz_redis_url.c - fuzzes weir_redis_url_parse(): any input parses or
 * fails with a message; what it accepts is within the caps (fields of at
 * most WEIR_REDIS_MAX_FIELD bytes inside the caller's buffer, a port and a
 * database in range, a host or a socket path, never both), and a message
 * never holds the password of the input.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "weir/redis.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
    if (!ok)
        abort();
}

static void check_field(const char *f, const char *buf, size_t cap)
{
    if (!f)
        return;
    check(f >= buf && f < buf + cap);
    const char *end = memchr(f, '\0', (size_t)(buf + cap - f));
    check(end != NULL && (size_t)(end - f) <= WEIR_REDIS_MAX_FIELD);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    char *url = malloc(size + 1);
    if (!url)
        return 0;
    memcpy(url, data, size);
    url[size] = '\0';
    weir_redis_options o;
    weir_redis_options_init(&o);
    char buf[1024], err[256];
    err[0] = '\0';
    weir_status st = weir_redis_url_parse(url, &o, buf, sizeof(buf), err, sizeof(err));
    if (st == WEIR_OK) {
        check((o.host != NULL) != (o.unix_path != NULL));
        check_field(o.host, buf, sizeof(buf));
        check_field(o.unix_path, buf, sizeof(buf));
        check_field(o.user, buf, sizeof(buf));
        check_field(o.password, buf, sizeof(buf));
        check(o.host == NULL || (o.port >= 1 && o.port <= 65535));
        check(o.db >= 0 && o.db <= 1000000);
        check(o.unix_path == NULL || o.unix_path[0] == '/');
    } else {
        check(st == WEIR_EPARSE);
        check(memchr(err, '\0', sizeof(err)) != NULL && err[0] != '\0');
    }
    free(url);
    return 0;
}
