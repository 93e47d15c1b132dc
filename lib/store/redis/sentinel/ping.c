/*
 * ping.c - the start-up check's first step on Sentinel: the sentinels
 * asked in turn, synchronously, where the master is. What it tells apart
 * is what an operator must hear: a name no sentinel knows or a refusal
 * (a configuration error: the start stops) from no sentinel reachable
 * (an outage: weir serves by the failure modes until one answers).
 */
#define _POSIX_C_SOURCE 200809L

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <string.h>

#include "store/redis/reader.h"
#include "store/redis/sentinel/sentinel.h"

/* Ask one sentinel: 1 (named: @out), 0 (does not know the name), -1
 * (refused: @why), -2 (unreachable: @why). */
static int ask_one(const redis_store *rs, const weir__redis_seed *s, weir__redis_seed *out,
                   char *why, size_t cap)
{
    const weir_redis_options *o = &rs->o;
    struct timeval tv = {(time_t)(o->connect_timeout_us / 1000000),
                         (suseconds_t)(o->connect_timeout_us % 1000000)};
    redisContext *c = redisConnectWithTimeout(s->host, s->port, tv);
    if (!c || c->err) {
        snprintf(why, cap, "%s", c ? c->errstr : "out of memory");
        redisFree(c);
        return -2;
    }
    redisSetTimeout(c, tv);
    weir__redis_reader_caps caps;
    weir__redis_reader_cap(c->reader, &caps);
    const char *pw = o->sentinel_password;
    const char *auth[2] = {"AUTH", pw};
    size_t auth_lens[2] = {4, pw ? strlen(pw) : 0};
    const char *q[3] = {"SENTINEL", "get-master-addr-by-name", o->master_name};
    size_t q_lens[3] = {8, 23, strlen(o->master_name)};
    redisReply *r = pw ? redisCommandArgv(c, 2, auth, auth_lens) : NULL;
    int k;
    if (pw && r && r->type == REDIS_REPLY_ERROR) {
        snprintf(why, cap, "the password (AUTH): %.200s", r->str);
        k = -1;
    } else if (pw && !r) {
        k = -2;
    } else {
        freeReplyObject(r);
        r = redisCommandArgv(c, 3, q, q_lens);
        k = r ? weir__sentinel_addr_parse(r, out, why, cap) : -2;
    }
    if (!r)
        snprintf(why, cap, "no answer: %s", c->errstr);
    freeReplyObject(r);
    redisFree(c);
    return k;
}

weir_status weir__sentinel_find(redis_store *rs, weir__redis_seed *out, char *msg, size_t cap)
{
    const rsentinel *st = rs->sentinel;
    const char *name = rs->o.master_name;
    char unknown_at[WEIR_REDIS_ADDR_BYTES] = "", refused[600] = "", down[600] = "";
    for (size_t i = 0; i < st->n_seeds; i++) {
        char where[WEIR_REDIS_ADDR_BYTES], why[240];
        weir__sentinel_addr_format(&st->seeds[i], where, sizeof(where));
        int k = ask_one(rs, &st->seeds[i], out, why, sizeof(why));
        if (k == 1) {
            char addr[WEIR_REDIS_ADDR_BYTES];
            weir__sentinel_addr_format(out, addr, sizeof(addr));
            snprintf(msg, cap, "sentinel %s names master '%s' at %s", where, name, addr);
            return WEIR_OK;
        }
        if (k == 0 && !unknown_at[0])
            memcpy(unknown_at, where, sizeof(where));
        else if (k == -1 && !refused[0])
            snprintf(refused, sizeof(refused), "sentinel %s refused: %s", where, why);
        else if (k == -2 && !down[0])
            snprintf(down, sizeof(down), "cannot reach sentinel %s: %s", where, why);
    }
    if (unknown_at[0]) {
        snprintf(msg, cap,
                 "no sentinel knows a master named '%s' (sentinel %s does not): check the name "
                 "in the URL against their sentinel monitor lines",
                 name, unknown_at);
        return WEIR_EINVAL;
    }
    if (refused[0]) {
        snprintf(msg, cap, "%s", refused);
        return WEIR_EINVAL;
    }
    snprintf(msg, cap, "%s%s", st->n_seeds > 1 ? "no sentinel answers; " : "", down);
    return WEIR_EUNAVAIL;
}
