/*
 * redis_support.c - a real redis-server per test (redis_support.h).
 *
 * The server only ever listens on loopback and on a socket in its own
 * directory; it dies with the test process (PR_SET_PDEATHSIG) if the test
 * crashes before stopping it.
 */
#define _GNU_SOURCE /* mkdtemp, prctl */

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "redis_support.h"

#define START_ATTEMPTS 5
#define START_TIMEOUT_MS 10000
#define STOP_TIMEOUT_MS 10000
#define MAX_EXTRA 32

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* redis-server's path in $PATH, or NULL */
static const char *find_server(char *buf, size_t size)
{
    const char *path = getenv("PATH");
    if (!path)
        path = "/usr/local/bin:/usr/bin:/bin";
    while (*path) {
        const char *end = strchr(path, ':');
        size_t len = end ? (size_t)(end - path) : strlen(path);
        if (len > 0 && (size_t)snprintf(buf, size, "%.*s/redis-server", (int)len, path) < size &&
            access(buf, X_OK) == 0)
            return buf;
        path += len + (end != NULL);
    }
    return NULL;
}

/* A TCP port free on 127.0.0.1 right now: the kernel's pick for port 0. */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t len = sizeof(a);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

/* The tail of the server's log, for a failure message. */
static void read_log(const redis_server *rs, char *buf, size_t size)
{
    char path[160];
    snprintf(path, sizeof(path), "%s/redis.log", rs->dir);
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    if (fseek(f, 0, SEEK_END) == 0) {
        long n = ftell(f);
        if (n > (long)size - 1)
            fseek(f, n - (long)size + 1, SEEK_SET);
        else
            fseek(f, 0, SEEK_SET);
    }
    size_t got = fread(buf, 1, size - 1, f);
    buf[got] = '\0';
    fclose(f);
}

static pid_t spawn(const char *server, const redis_server *rs, const char *const *extra)
{
    char port[16], log[160];
    snprintf(port, sizeof(port), "%d", rs->port);
    snprintf(log, sizeof(log), "%s/redis.log", rs->dir);
    /* loopback only; no persistence; the log in the directory */
    const char *const opts[][2] = {{"--port", port},
                                   {"--bind", "127.0.0.1"},
                                   {"--unixsocket", rs->sock},
                                   {"--unixsocketperm", "700"},
                                   {"--dir", rs->dir},
                                   {"--logfile", log},
                                   {"--save", ""},
                                   {"--appendonly", "no"},
                                   {"--daemonize", "no"},
                                   {"--protected-mode", "yes"}};
    const char *argv[2 + 2 * sizeof(opts) / sizeof(opts[0]) + MAX_EXTRA];
    size_t n = 0;
    argv[n++] = "redis-server";
    for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++) {
        argv[n++] = opts[i][0];
        argv[n++] = opts[i][1];
    }
    for (size_t i = 0; extra && extra[i]; i++) {
        assert_true(i < MAX_EXTRA);
        argv[n++] = extra[i];
    }
    argv[n] = NULL;

    pid_t parent = getpid();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* die with the test; and if it died before this line, now */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent)
            _exit(1);
        int devnull = open("/dev/null", O_RDWR);
        if (devnull >= 0) {
            dup2(devnull, STDIN_FILENO);
            dup2(devnull, STDOUT_FILENO);
        }
        execv(server, (char *const *)argv);
        _exit(127);
    }
    return pid;
}

/* PONG, or (a password set and not given) NOAUTH: the server is up. */
static int answers(const redis_server *rs, const char *password)
{
    struct timeval tv = {1, 0};
    redisContext *c = redisConnectUnixWithTimeout(rs->sock, tv);
    if (!c)
        return 0;
    int up = 0;
    if (!c->err) {
        redisReply *r;
        if (password) {
            r = redisCommand(c, "AUTH %s", password);
            freeReplyObject(r);
        }
        r = redisCommand(c, "PING");
        up = r && ((r->type == REDIS_REPLY_STATUS && strcmp(r->str, "PONG") == 0) ||
                   (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOAUTH", 6) == 0));
        freeReplyObject(r);
    }
    redisFree(c);
    return up;
}

static void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            char path[512];
            snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
            unlink(path);
        }
        closedir(d);
    }
    rmdir(dir);
}

void redis_start(redis_server *rs, const char *const *extra, const char *password)
{
    char server[4096];
    memset(rs, 0, sizeof(*rs));
    if (!find_server(server, sizeof(server)))
        fail_msg("redis-server is not installed (not in $PATH): the Redis store's tests need "
                 "it (Debian: apt-get install redis-server; see scripts/deps.sh)");
    const char *tmp = getenv("TMPDIR");
    /* a unix socket's path has room for about 100 bytes */
    if (!tmp || strlen(tmp) > 40)
        tmp = "/tmp";
    snprintf(rs->dir, sizeof(rs->dir), "%s/weir-redis-XXXXXX", tmp);
    if (!mkdtemp(rs->dir))
        fail_msg("mkdtemp(%s): %s", rs->dir, strerror(errno));
    snprintf(rs->sock, sizeof(rs->sock), "%s/redis.sock", rs->dir);

    char log[2048];
    for (int attempt = 0; attempt < START_ATTEMPTS; attempt++) {
        rs->port = free_port();
        rs->pid = spawn(server, rs, extra);
        for (int waited = 0; waited < START_TIMEOUT_MS; waited += 10) {
            if (answers(rs, password))
                return;
            int status;
            if (waitpid(rs->pid, &status, WNOHANG) == rs->pid) {
                rs->pid = 0;
                break;
            }
            sleep_ms(10);
        }
        read_log(rs, log, sizeof(log));
        if (rs->pid == 0 && strstr(log, "ddress already in use"))
            continue; /* someone took the port first: another one */
        redis_stop(rs);
        fail_msg("redis-server did not come up:\n%s", log);
    }
    read_log(rs, log, sizeof(log));
    redis_stop(rs);
    fail_msg("redis-server found no free port in %d attempts:\n%s", START_ATTEMPTS, log);
}

void redis_stop(redis_server *rs)
{
    if (rs->pid > 0) {
        kill(rs->pid, SIGTERM);
        int status, waited = 0;
        while (waitpid(rs->pid, &status, WNOHANG) == 0) {
            if (waited >= STOP_TIMEOUT_MS) {
                kill(rs->pid, SIGKILL);
                waitpid(rs->pid, &status, 0);
                break;
            }
            sleep_ms(5);
            waited += 5;
        }
        rs->pid = 0;
    }
    if (rs->dir[0]) {
        remove_dir(rs->dir);
        rs->dir[0] = '\0';
    }
}

redisContext *redis_connect(const redis_server *rs)
{
    struct timeval tv = {10, 0};
    redisContext *c = redisConnectUnixWithTimeout(rs->sock, tv);
    assert_non_null(c);
    if (c->err)
        fail_msg("connect %s: %s", rs->sock, c->errstr);
    return c;
}

redisContext *redis_connect_tcp(const redis_server *rs)
{
    struct timeval tv = {10, 0};
    redisContext *c = redisConnectWithTimeout("127.0.0.1", rs->port, tv);
    assert_non_null(c);
    if (c->err)
        fail_msg("connect 127.0.0.1:%d: %s", rs->port, c->errstr);
    return c;
}
