/*
 * resp_hiredis.c - a C client of weir's Redis-protocol listener, with
 * hiredis as any C program would use it (test_resp.py runs it and checks
 * what it prints).
 *
 * Usage: resp_hiredis PORT
 *
 * On 127.0.0.1:PORT it runs CL.THROTTLE c 3 1 60 five times with
 * redisCommand(), then one pipelined batch with redisAppendCommand() and
 * redisGetReply(), and prints each reply on a line of its own:
 *
 *   cmd 1: [0 4 3 -1 60]
 *   ...
 *   pipe 1: PONG
 *
 * Integers print as numbers, strings and statuses as they are, an error
 * as "(error) message", a nil as "(nil)", an array as "[a b ...]". Exits 0
 * when every command got a reply, 1 otherwise.
 */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>

static void print_reply(const redisReply *r)
{
    switch (r->type) {
    case REDIS_REPLY_INTEGER:
        printf("%lld", r->integer);
        break;
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
        fwrite(r->str, 1, r->len, stdout);
        break;
    case REDIS_REPLY_ERROR:
        printf("(error) ");
        fwrite(r->str, 1, r->len, stdout);
        break;
    case REDIS_REPLY_NIL:
        printf("(nil)");
        break;
    case REDIS_REPLY_ARRAY:
        putchar('[');
        for (size_t i = 0; i < r->elements; i++) {
            if (i > 0)
                putchar(' ');
            print_reply(r->element[i]);
        }
        putchar(']');
        break;
    default:
        printf("(type %d)", r->type);
        break;
    }
}

static void print_line(const char *what, int n, redisReply *r)
{
    printf("%s %d: ", what, n);
    print_reply(r);
    putchar('\n');
    freeReplyObject(r);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: resp_hiredis PORT\n");
        return 2;
    }
    struct timeval timeout = {10, 0};
    redisContext *ctx = redisConnectWithTimeout("127.0.0.1", atoi(argv[1]), timeout);
    if (ctx == NULL || ctx->err) {
        fprintf(stderr, "resp_hiredis: connect: %s\n", ctx ? ctx->errstr : "out of memory");
        return 1;
    }
    redisSetTimeout(ctx, timeout);
    int status = 0;

    for (int i = 1; i <= 5; i++) {
        redisReply *r = redisCommand(ctx, "CL.THROTTLE %s %d %d %d", "c", 3, 1, 60);
        if (r == NULL) {
            fprintf(stderr, "resp_hiredis: cmd %d: %s\n", i, ctx->errstr);
            status = 1;
            goto out;
        }
        print_line("cmd", i, r);
    }

    /* one batch: every command is sent before the first reply is read */
    redisAppendCommand(ctx, "PING");
    redisAppendCommand(ctx, "CL.THROTTLE %s %d %d %d %d", "c", 3, 1, 60, 0);
    redisAppendCommand(ctx, "CL.THROTTLE %s %d %d %d", "d", 3, 1, 60);
    redisAppendCommand(ctx, "ECHO %b", "a b", (size_t)3);
    redisAppendCommand(ctx, "DEL %s %s", "c", "nothing");
    redisAppendCommand(ctx, "CL.THROTTLE %s %d %d %d", "c", 3, 1, 60);
    redisAppendCommand(ctx, "NOSUCH %s", "x");
    for (int i = 1; i <= 7; i++) {
        void *r = NULL;
        if (redisGetReply(ctx, &r) != REDIS_OK || r == NULL) {
            fprintf(stderr, "resp_hiredis: pipe %d: %s\n", i, ctx->errstr);
            status = 1;
            goto out;
        }
        print_line("pipe", i, r);
    }
out:
    redisFree(ctx);
    fflush(stdout);
    return status;
}
