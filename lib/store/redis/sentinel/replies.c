/*
 * replies.c - what sentinels and a master answer, read into addresses and
 * roles (sentinel.h). hiredis has parsed the RESP; the fields inside are
 * checked here, each with a cap, as a sentinel's answer decides where
 * every decision goes next.
 */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <string.h>

#include "store/redis/sentinel/sentinel.h"

/* A host as a sentinel names one: 1 to WEIR_REDIS_MAX_FIELD printable
 * bytes, no space (hosts go into messages and metric labels). */
static bool host_ok(const char *s, size_t len)
{
    if (len == 0 || len > WEIR_REDIS_MAX_FIELD)
        return false;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] <= ' ' || (unsigned char)s[i] >= 0x7f)
            return false;
    return true;
}

/* A port in decimal, 1 to 65535; 0 when it is not one. */
static int port_of(const char *s, size_t len)
{
    if (len == 0 || len > 5)
        return 0;
    int v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return 0;
        v = v * 10 + (s[i] - '0');
    }
    return v <= 65535 ? v : 0;
}

static bool set_addr(weir__redis_seed *out, const char *host, size_t hlen, const char *port,
                     size_t plen)
{
    int p = port_of(port, plen);
    if (!host_ok(host, hlen) || p == 0)
        return false;
    memcpy(out->host, host, hlen);
    out->host[hlen] = '\0';
    out->port = p;
    return true;
}

static bool is_string(const redisReply *r)
{
    return r && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS);
}

int weir__sentinel_addr_parse(const redisReply *r, weir__redis_seed *out, char *err, size_t cap)
{
    if (!r) {
        snprintf(err, cap, "no reply");
        return -1;
    }
    if (r->type == REDIS_REPLY_NIL)
        return 0;
    if (r->type == REDIS_REPLY_ERROR) {
        snprintf(err, cap, "%.200s", r->str);
        return -1;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 || !is_string(r->element[0]) ||
        !is_string(r->element[1]) ||
        !set_addr(out, r->element[0]->str, r->element[0]->len, r->element[1]->str,
                  r->element[1]->len)) {
        snprintf(err, cap, "not an address ([host, port])");
        return -1;
    }
    return 1;
}

bool weir__sentinel_switch_parse(const char *msg, size_t len, const char *name,
                                 weir__redis_seed *out)
{
    if (len > WEIR__SENTINEL_MAX_MESSAGE)
        return false;
    /* five fields, single spaces between */
    const char *f[5];
    size_t n[5], k = 0;
    const char *p = msg, *end = msg + len;
    while (k < 5) {
        const char *sp = memchr(p, ' ', (size_t)(end - p));
        const char *e = sp ? sp : end;
        f[k] = p;
        n[k++] = (size_t)(e - p);
        if (!sp)
            break;
        p = sp + 1;
    }
    if (k != 5 || f[4] + n[4] != end)
        return false;
    size_t name_len = strlen(name);
    if (n[0] != name_len || memcmp(f[0], name, name_len) != 0)
        return false;
    /* the old address is checked as well: a message with a bad one is
     * not a sentinel's */
    weir__redis_seed old;
    return set_addr(&old, f[1], n[1], f[2], n[2]) && set_addr(out, f[3], n[3], f[4], n[4]);
}

int weir__sentinel_switch_reply(const redisReply *r, const char *name, weir__redis_seed *out)
{
    static const char channel[] = "+switch-master";
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 3 || !is_string(r->element[0]) ||
        !is_string(r->element[1]))
        return -1;
    const redisReply *kind = r->element[0], *chan = r->element[1], *payload = r->element[2];
    if (kind->len != 7 || memcmp(kind->str, "message", 7) != 0)
        return 0; /* subscribe, unsubscribe: the subscription's own */
    if (chan->len != sizeof(channel) - 1 || memcmp(chan->str, channel, chan->len) != 0 ||
        !is_string(payload))
        return -1;
    if (weir__sentinel_switch_parse(payload->str, payload->len, name, out))
        return 1;
    /* another master's switch, or a message that says nothing usable */
    size_t name_len = strlen(name);
    bool ours = payload->len > name_len && memcmp(payload->str, name, name_len) == 0 &&
                payload->str[name_len] == ' ';
    return ours ? -1 : 0;
}

int weir__sentinel_role_parse(const redisReply *r, char *role, size_t cap)
{
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 1 || !is_string(r->element[0]))
        return -1;
    const redisReply *e = r->element[0];
    if (e->len == 6 && memcmp(e->str, "master", 6) == 0)
        return 1;
    /* "slave", "sentinel", or a role a later Redis adds */
    size_t n = e->len < 32 ? e->len : 32;
    snprintf(role, cap, "%.*s", (int)n, e->str);
    for (char *c = role; *c; c++)
        if ((unsigned char)*c <= ' ' || (unsigned char)*c >= 0x7f || *c == '"')
            *c = '?';
    return 0;
}

void weir__sentinel_addr_format(const weir__redis_seed *a, char *out, size_t cap)
{
    if (strchr(a->host, ':'))
        snprintf(out, cap, "[%s]:%d", a->host, a->port);
    else
        snprintf(out, cap, "%s:%d", a->host, a->port);
}
