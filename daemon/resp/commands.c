/*
 * commands.c - the command table (commands.h) and the connection
 * commands: PING, ECHO, HELLO, AUTH, SELECT, QUIT, CLIENT, INFO, COMMAND.
 * Errors are worded as Redis 7 words them, so client libraries and
 * redis-cli recognise them.
 */
#include "commands.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "weir/redis.h"
#include "worker.h"

/* The Redis version weir answers to HELLO and INFO: clients choose their
 * features by it, and weir speaks the protocol of Redis 7.0 (RESP3,
 * HELLO, COMMAND DOCS). weir's own is weir_version in INFO. */
#define REDIS_COMPAT_VERSION "7.0.0"

static void cmd_ping(resp_conn *c, const weir_resp_arg *argv, size_t argc);
static void cmd_echo(resp_conn *c, const weir_resp_arg *argv, size_t argc);
static void cmd_hello(resp_conn *c, const weir_resp_arg *argv, size_t argc);
static void cmd_auth(resp_conn *c, const weir_resp_arg *argv, size_t argc);
static void cmd_select(resp_conn *c, const weir_resp_arg *argv, size_t argc);
static void cmd_quit(resp_conn *c, const weir_resp_arg *argv, size_t argc);
static void cmd_client(resp_conn *c, const weir_resp_arg *argv, size_t argc);
static void cmd_info(resp_conn *c, const weir_resp_arg *argv, size_t argc);
static void cmd_command(resp_conn *c, const weir_resp_arg *argv, size_t argc);

#define NOAUTH RESP_CMD_NOAUTH
#define WRITE RESP_CMD_WRITE
#define READONLY RESP_CMD_READONLY

static const resp_command table[] = {
    {"cl.throttle", -1, WRITE, resp_cl_throttle,
     "GCRA rate limit, redis-cell's contract: limited, limit, remaining, retry_after, reset_after",
     "key max_burst count period [quantity]", 1, 1, 1},
    {"gcra", -5, WRITE, resp_gcra,
     "GCRA rate limit with a decimal period in seconds; the reply of CL.THROTTLE",
     "key max_burst tokens_per_period period [TOKENS n]", 1, 1, 1},
    {"weir.check", -4, WRITE, resp_weir_check,
     "a decision through the rules: per descriptor code, limit, remaining, reset and retry "
     "(ms), rule",
     "domain key value [key value ...] [HITS n] [DESCRIPTOR key value ...]", 0, 0, 0},
    {"weir.peek", -4, READONLY, resp_weir_peek, "WEIR.CHECK without consuming anything",
     "domain key value [key value ...] [DESCRIPTOR key value ...]", 0, 0, 0},
    {"weir.acquire", -4, WRITE, resp_weir_acquire,
     "WEIR.CHECK that holds its concurrency limits' units: a lease token (null when denied) "
     "and the statuses",
     "domain key value [key value ...] [HITS n] [DESCRIPTOR key value ...]", 0, 0, 0},
    {"weir.settle", -5, WRITE, resp_weir_settle,
     "settle a request decided with an estimated cost (its HITS) at its true cost: the "
     "statuses after the refund or the overrun",
     "cost domain key value [key value ...] [HITS n] [DESCRIPTOR key value ...]", 0, 0, 0},
    {"weir.release", -2, WRITE, resp_weir_release,
     "give back the leases of a WEIR.ACQUIRE token: the number still held; DROPPED: the work "
     "failed from overload (an adaptive limit backs off)",
     "token [DROPPED]", 0, 0, 0},
    {"weir.reset", -2, WRITE, resp_weir_reset,
     "forget CL.THROTTLE/GCRA keys: the number that held a state", "key [key ...]", 1, -1, 1},
    {"del", -2, WRITE, resp_del, "WEIR.RESET under Redis's name", "key [key ...]", 1, -1, 1},
    {"ping", -1, 0, cmd_ping, "PONG, or the message", "[message]", 0, 0, 0},
    {"echo", 2, 0, cmd_echo, "the message", "message", 0, 0, 0},
    {"hello", -1, NOAUTH, cmd_hello,
     "choose the protocol (2 or 3), authenticate, name the connection",
     "[protover [AUTH username password] [SETNAME clientname]]", 0, 0, 0},
    {"auth", -2, NOAUTH, cmd_auth, "authenticate (--resp-password)", "[username] password", 0, 0,
     0},
    {"select", 2, 0, cmd_select, "database 0, the only one", "index", 0, 0, 0},
    {"quit", -1, NOAUTH, cmd_quit, "close the connection", "", 0, 0, 0},
    {"client", -2, 0, cmd_client, "ID, SETNAME, GETNAME, SETINFO of this connection",
     "subcommand [arg ...]", 0, 0, 0},
    {"info", -1, 0, cmd_info, "weir's state in INFO's format", "[section ...]", 0, 0, 0},
    {"command", -1, 0, cmd_command, "this table: COMMAND, COUNT, INFO, LIST, DOCS",
     "[subcommand [name ...]]", 0, 0, 0},
};
#define N_COMMANDS (sizeof(table) / sizeof(table[0]))

static _Atomic uint64_t next_client_id = 1;

uint64_t resp_next_client_id(server *srv)
{
    (void)srv;
    return atomic_fetch_add_explicit(&next_client_id, 1, memory_order_relaxed);
}

bool resp_arg_is(const weir_resp_arg *a, const char *lit)
{
    size_t n = strlen(lit);
    return a->n == n && strncasecmp(a->p, lit, n) == 0;
}

/* A decimal integer: an optional sign, digits, nothing else, within
 * int64 (what redis-cell's parse::<i64>() takes). */
bool resp_arg_i64(const weir_resp_arg *a, int64_t *out)
{
    size_t i = 0;
    bool neg = false;
    if (a->n > 0 && (a->p[0] == '-' || a->p[0] == '+'))
        neg = a->p[i++] == '-';
    if (i == a->n)
        return false;
    uint64_t v = 0, lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    for (; i < a->n; i++) {
        unsigned d = (unsigned)(a->p[i] - '0');
        if (d > 9 || v > (lim - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return true;
}

static const resp_command *lookup(const weir_resp_arg *name)
{
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (resp_arg_is(name, table[i].name))
            return &table[i];
    return NULL;
}

/* "unknown command 'x', with args beginning with: 'a' 'b' ", as Redis
 * writes it: the name to 128 bytes, the arguments until 128 bytes. */
static void unknown_command(resp_conn *c, const weir_resp_arg *argv, size_t argc)
{
    char args[300];
    size_t n = 0;
    for (size_t i = 1; i < argc && n < 128; i++) {
        int room = 128 - (int)n;
        int len = argv[i].n < (size_t)room ? (int)argv[i].n : room;
        n += (size_t)snprintf(args + n, sizeof(args) - n, "'%.*s' ", len, argv[i].p);
    }
    args[n] = '\0';
    int name_len = argv[0].n < 128 ? (int)argv[0].n : 128;
    weir_resp_errorf(resp_out(c), "ERR unknown command '%.*s', with args beginning with: %s",
                     name_len, argv[0].p, args);
}

void resp_command_run(resp_conn *c, const weir_resp_command *cmd)
{
    const resp_command *k = lookup(&cmd->argv[0]);
    if (!k) {
        unknown_command(c, cmd->argv, cmd->argc);
        return;
    }
    if (!c->authed && !(k->flags & NOAUTH)) {
        weir_resp_error(resp_out(c), "NOAUTH Authentication required.", 31);
        return;
    }
    if ((k->arity > 0 && cmd->argc != (size_t)k->arity) ||
        (k->arity < 0 && cmd->argc < (size_t)-k->arity)) {
        weir_resp_errorf(resp_out(c), "ERR wrong number of arguments for '%s' command", k->name);
        return;
    }
    k->handler(c, cmd->argv, cmd->argc);
}

/* ------------------------------------------------------------ connection */

static void cmd_ping(resp_conn *c, const weir_resp_arg *argv, size_t argc)
{
    if (argc > 2) {
        weir_resp_errorf(resp_out(c), "ERR wrong number of arguments for 'ping' command");
        return;
    }
    if (argc == 2)
        weir_resp_bulk(resp_out(c), argv[1].p, argv[1].n);
    else
        weir_resp_simple(resp_out(c), "PONG");
}

static void cmd_echo(resp_conn *c, const weir_resp_arg *argv, size_t argc)
{
    (void)argc;
    weir_resp_bulk(resp_out(c), argv[1].p, argv[1].n);
}

static void cmd_select(resp_conn *c, const weir_resp_arg *argv, size_t argc)
{
    (void)argc;
    if (resp_arg_is(&argv[1], "0"))
        weir_resp_simple(resp_out(c), "OK");
    else if (argv[1].n > 0 && argv[1].n < 20 && strspn(argv[1].p, "-0123456789") >= argv[1].n)
        weir_resp_errorf(resp_out(c), "ERR DB index is out of range");
    else
        weir_resp_errorf(resp_out(c), "ERR value is not an integer or out of range");
}

static void cmd_quit(resp_conn *c, const weir_resp_arg *argv, size_t argc)
{
    (void)argv, (void)argc;
    weir_resp_simple(resp_out(c), "OK");
    resp_close_after(c);
}

/* Whether @user and @pass are the default user's: the only user, whose
 * password is --resp-password. Compared in time independent of where the
 * bytes differ. */
static bool credentials_ok(resp_conn *c, const weir_resp_arg *user, const weir_resp_arg *pass)
{
    const char *want = c->base.w->srv->opt.resp_password;
    if (user && !resp_arg_is(user, "default"))
        return false;
    if (!want[0])
        return true; /* the default user needs no password (Redis's nopass) */
    size_t n = strlen(want);
    unsigned char diff = pass->n != n;
    for (size_t i = 0; i < pass->n; i++)
        diff |= (unsigned char)(pass->p[i] ^ want[i < n ? i : 0]);
    return diff == 0;
}

static void cmd_auth(resp_conn *c, const weir_resp_arg *argv, size_t argc)
{
    if (argc > 3) {
        weir_resp_errorf(resp_out(c), "ERR syntax error");
        return;
    }
    if (argc == 2 && !c->base.w->srv->opt.resp_password[0]) {
        weir_resp_errorf(resp_out(c), "ERR AUTH <password> called without any password configured "
                                      "for the default user. Are you sure your configuration is "
                                      "correct?");
        return;
    }
    if (!credentials_ok(c, argc == 3 ? &argv[1] : NULL, &argv[argc - 1])) {
        weir_resp_errorf(resp_out(c),
                         "WRONGPASS invalid username-password pair or user is disabled.");
        return;
    }
    c->authed = true;
    weir_resp_parser_preauth(c->parser, false);
    weir_resp_simple(resp_out(c), "OK");
}

/* CLIENT SETNAME's rule: no spaces, newlines or other special bytes. */
static bool name_ok(const weir_resp_arg *a)
{
    for (size_t i = 0; i < a->n; i++)
        if (a->p[i] < '!' || a->p[i] > '~')
            return false;
    return true;
}

/* Sets the connection's name; false (the error written) when refused. */
static bool set_name(resp_conn *c, const weir_resp_arg *a)
{
    if (!name_ok(a)) {
        weir_resp_errorf(resp_out(c), "ERR Client names cannot contain spaces, newlines or "
                                      "special characters.");
        return false;
    }
    if (a->n > RESP_NAME_MAX) {
        weir_resp_errorf(resp_out(c), "ERR Client names are at most %u bytes here", RESP_NAME_MAX);
        return false;
    }
    memcpy(c->name, a->p, a->n);
    c->name_len = a->n;
    return true;
}

static void cmd_hello(resp_conn *c, const weir_resp_arg *argv, size_t argc)
{
    bool resp3 = c->resp3;
    size_t i = 1;
    if (argc >= 2) {
        char v[24];
        size_t n = argv[1].n < sizeof(v) - 1 ? argv[1].n : sizeof(v) - 1;
        memcpy(v, argv[1].p, n);
        v[n] = '\0';
        char *end;
        long long ver = strtoll(v, &end, 10);
        if (n == 0 || *end || argv[1].n >= sizeof(v)) {
            weir_resp_errorf(resp_out(c), "ERR Protocol version is not an integer or out of range");
            return;
        }
        if (ver != 2 && ver != 3) {
            weir_resp_errorf(resp_out(c), "NOPROTO unsupported protocol version");
            return;
        }
        resp3 = ver == 3;
        i = 2;
    }
    const weir_resp_arg *user = NULL, *pass = NULL, *name = NULL;
    for (; i < argc; i++) {
        if (resp_arg_is(&argv[i], "AUTH") && i + 2 < argc) {
            user = &argv[i + 1];
            pass = &argv[i + 2];
            i += 2;
        } else if (resp_arg_is(&argv[i], "SETNAME") && i + 1 < argc) {
            name = &argv[++i];
        } else {
            weir_resp_errorf(resp_out(c), "ERR Syntax error in HELLO option '%.*s'",
                             (int)(argv[i].n > 128 ? 128 : argv[i].n), argv[i].p);
            return;
        }
    }
    if (user && !credentials_ok(c, user, pass)) {
        weir_resp_errorf(resp_out(c),
                         "WRONGPASS invalid username-password pair or user is disabled.");
        return;
    }
    if (!c->authed && !user) {
        weir_resp_errorf(resp_out(c),
                         "NOAUTH HELLO must be called with the client already authenticated, "
                         "otherwise the HELLO <proto> AUTH <user> <pass> option can be used to "
                         "authenticate the client and select the RESP protocol version at the "
                         "same time");
        return;
    }
    if (name && !set_name(c, name))
        return;
    if (user) {
        c->authed = true;
        weir_resp_parser_preauth(c->parser, false);
    }
    c->resp3 = resp3;
    weir_buf *b = resp_out(c);
    weir_resp_map(b, 7, resp3);
    weir_resp_bulk_str(b, "server");
    weir_resp_bulk_str(b, "weir");
    weir_resp_bulk_str(b, "version");
    weir_resp_bulk_str(b, REDIS_COMPAT_VERSION);
    weir_resp_bulk_str(b, "proto");
    weir_resp_int(b, resp3 ? 3 : 2);
    weir_resp_bulk_str(b, "id");
    weir_resp_int(b, (int64_t)c->id);
    weir_resp_bulk_str(b, "mode");
    weir_resp_bulk_str(b, "standalone");
    weir_resp_bulk_str(b, "role");
    weir_resp_bulk_str(b, "master");
    weir_resp_bulk_str(b, "modules");
    weir_resp_array(b, 0);
}

static void cmd_client(resp_conn *c, const weir_resp_arg *argv, size_t argc)
{
    const weir_resp_arg *sub = &argv[1];
    weir_buf *b = resp_out(c);
    if (resp_arg_is(sub, "ID") && argc == 2) {
        weir_resp_int(b, (int64_t)c->id);
    } else if (resp_arg_is(sub, "GETNAME") && argc == 2) {
        if (c->name_len)
            weir_resp_bulk(b, c->name, c->name_len);
        else
            weir_resp_null(b, c->resp3);
    } else if (resp_arg_is(sub, "SETNAME") && argc == 3) {
        if (set_name(c, &argv[2]))
            weir_resp_simple(resp_out(c), "OK");
    } else if (resp_arg_is(sub, "SETINFO") && argc == 4) {
        /* what client libraries tell of themselves (lib-name, lib-ver):
         * taken and not kept */
        weir_resp_simple(b, "OK");
    } else if (resp_arg_is(sub, "ID") || resp_arg_is(sub, "GETNAME") ||
               resp_arg_is(sub, "SETNAME") || resp_arg_is(sub, "SETINFO")) {
        weir_resp_errorf(b, "ERR wrong number of arguments for 'client|%.*s' command", (int)sub->n,
                         sub->p);
    } else {
        weir_resp_errorf(b, "ERR unknown subcommand '%.*s'. Try CLIENT HELP.",
                         (int)(sub->n > 128 ? 128 : sub->n), sub->p);
    }
}

/* ------------------------------------------------------------ INFO */

static void info_text(resp_conn *c, weir_buf *t)
{
    server *srv = c->base.w->srv;
    const char *url = "";
    for (unsigned i = 0; i < srv->n_listeners; i++)
        if (srv->listeners[i].proto == c->base.l->proto)
            url = srv->listeners[i].url;
    const char *port = strrchr(url, ':');
    weir_buf_printf(t,
                    "# Server\r\n"
                    "redis_version:%s\r\n"
                    "redis_mode:standalone\r\n"
                    "weir_version:%s\r\n"
                    "process_id:%ld\r\n"
                    "tcp_port:%s\r\n"
                    "io_threads_active:%u\r\n"
                    "\r\n# Clients\r\n"
                    "connected_clients:%lld\r\n"
                    "maxclients:%llu\r\n"
                    "\r\n# Weir\r\n"
                    "store:%s\r\n"
                    "rules:%s\r\n",
                    REDIS_COMPAT_VERSION, weir_version(), (long)getpid(), port ? port + 1 : "",
                    srv->n_workers, (long long)atomic_load(&srv->connections),
                    (unsigned long long)srv->opt.max_connections,
                    strchr(srv->opt.store, '@') ? "redis (credentials hidden)" : srv->opt.store,
                    srv->opt.rules);
    /* the store's own counters: the memory store's keys and bytes, or the
     * Redis store's breaker and calls */
    weir_store_stats ms;
    weir_redis_stats rs;
    if (weir_store_stats_get(srv->store, &ms) == WEIR_OK)
        weir_buf_printf(t,
                        "store_keys:%llu\r\nstore_bytes:%llu\r\nstore_max_bytes:%llu\r\n"
                        "store_evictions:%llu\r\n",
                        (unsigned long long)ms.keys, (unsigned long long)ms.bytes,
                        (unsigned long long)ms.max_bytes, (unsigned long long)ms.evictions);
    else if (weir_redis_stats_get(srv->store, &rs) == WEIR_OK)
        weir_buf_printf(t,
                        "redis_breaker:%s\r\nredis_connections:%llu\r\nredis_calls:%llu\r\n"
                        "redis_timeouts:%llu\r\nredis_errors:%llu\r\n",
                        weir_redis_breaker_name(rs.breaker), (unsigned long long)rs.connections,
                        (unsigned long long)rs.calls, (unsigned long long)rs.timeouts,
                        (unsigned long long)rs.errors);
}

static void cmd_info(resp_conn *c, const weir_resp_arg *argv, size_t argc)
{
    (void)argv, (void)argc;
    weir_buf t;
    weir_buf_init(&t, 64 * 1024);
    info_text(c, &t);
    if (weir_buf_ok(&t))
        weir_resp_bulk(resp_out(c), t.p, t.len);
    else
        weir_resp_errorf(resp_out(c), "ERR out of memory");
    weir_buf_free(&t);
}

/* ------------------------------------------------------------ COMMAND */

static void put_info(weir_buf *b, const resp_command *k, bool resp3)
{
    weir_resp_array(b, 10);
    weir_resp_bulk_str(b, k->name);
    weir_resp_int(b, k->arity);
    size_t nflags = (size_t)((k->flags & WRITE) != 0) + ((k->flags & READONLY) != 0) +
                    ((k->flags & NOAUTH) != 0);
    weir_resp_set(b, nflags, resp3);
    if (k->flags & WRITE)
        weir_resp_simple(b, "write");
    if (k->flags & READONLY)
        weir_resp_simple(b, "readonly");
    if (k->flags & NOAUTH)
        weir_resp_simple(b, "no_auth");
    weir_resp_int(b, k->first_key);
    weir_resp_int(b, k->last_key);
    weir_resp_int(b, k->key_step);
    weir_resp_set(b, 0, resp3); /* ACL categories */
    weir_resp_set(b, 0, resp3); /* tips */
    weir_resp_array(b, 0);      /* key specs */
    weir_resp_array(b, 0);      /* subcommands */
}

/* COMMAND DOCS's arguments from the usage text: one per word (a bracketed
 * word is optional), each a map of name, type and flags. */
static size_t usage_words(const char *u, const char **w, size_t *len, bool *opt, size_t max)
{
    size_t n = 0;
    int depth = 0;
    while (*u && n < max) {
        while (*u == ' ' || *u == '[' || *u == ']') {
            depth += *u == '[' ? 1 : *u == ']' ? -1 : 0;
            u++;
        }
        if (!*u)
            break;
        const char *s = u;
        while (*u && *u != ' ' && *u != '[' && *u != ']')
            u++;
        if (u - s == 3 && strncmp(s, "...", 3) == 0)
            continue;
        w[n] = s;
        len[n] = (size_t)(u - s);
        opt[n] = depth > 0;
        n++;
    }
    return n;
}

static void put_docs(weir_buf *b, const resp_command *k, bool resp3)
{
    const char *w[16];
    size_t len[16];
    bool opt[16];
    size_t nw = usage_words(k->usage, w, len, opt, 16);
    weir_resp_bulk_str(b, k->name);
    weir_resp_map(b, 4, resp3);
    weir_resp_bulk_str(b, "summary");
    weir_resp_bulk_str(b, k->summary);
    weir_resp_bulk_str(b, "since");
    weir_resp_bulk_str(b, "1.0.0");
    weir_resp_bulk_str(b, "group");
    weir_resp_bulk_str(b,
                       strchr(k->name, '.') || !strcmp(k->name, "gcra") ? "module" : "connection");
    weir_resp_bulk_str(b, "arguments");
    weir_resp_array(b, nw);
    for (size_t i = 0; i < nw; i++) {
        weir_resp_map(b, opt[i] ? 3 : 2, resp3);
        weir_resp_bulk_str(b, "name");
        weir_resp_bulk(b, w[i], len[i]);
        weir_resp_bulk_str(b, "type");
        weir_resp_bulk_str(b, "string");
        if (opt[i]) {
            weir_resp_bulk_str(b, "flags");
            weir_resp_array(b, 1);
            weir_resp_simple(b, "optional");
        }
    }
}

static void cmd_command(resp_conn *c, const weir_resp_arg *argv, size_t argc)
{
    weir_buf *b = resp_out(c);
    if (argc == 1) {
        weir_resp_array(b, N_COMMANDS);
        for (size_t i = 0; i < N_COMMANDS; i++)
            put_info(b, &table[i], c->resp3);
        return;
    }
    const weir_resp_arg *sub = &argv[1];
    if (resp_arg_is(sub, "COUNT") && argc == 2) {
        weir_resp_int(b, (int64_t)N_COMMANDS);
    } else if (resp_arg_is(sub, "LIST") && argc == 2) {
        weir_resp_array(b, N_COMMANDS);
        for (size_t i = 0; i < N_COMMANDS; i++)
            weir_resp_bulk_str(b, table[i].name);
    } else if (resp_arg_is(sub, "INFO")) {
        size_t n = argc == 2 ? N_COMMANDS : argc - 2;
        weir_resp_array(b, n);
        for (size_t i = 0; i < n; i++) {
            const resp_command *k = argc == 2 ? &table[i] : lookup(&argv[2 + i]);
            if (k)
                put_info(b, k, c->resp3);
            else
                weir_resp_null(b, c->resp3);
        }
    } else if (resp_arg_is(sub, "DOCS")) {
        size_t found = 0;
        for (size_t i = 2; i < argc; i++)
            found += lookup(&argv[i]) != NULL;
        weir_resp_map(b, argc == 2 ? N_COMMANDS : found, c->resp3);
        for (size_t i = 0; i < (argc == 2 ? N_COMMANDS : argc - 2); i++) {
            const resp_command *k = argc == 2 ? &table[i] : lookup(&argv[2 + i]);
            if (k)
                put_docs(b, k, c->resp3);
        }
    } else {
        weir_resp_errorf(b, "ERR unknown subcommand '%.*s'. Try COMMAND HELP.",
                         (int)(sub->n > 128 ? 128 : sub->n), sub->p);
    }
}
