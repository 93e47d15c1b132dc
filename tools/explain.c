/*
 * explain.c - `weir explain RULES REQUEST`: load a rule file or directory
 * as the daemon does, decide a request (a POST /v1/check body) on a fresh
 * memory store, and show how each descriptor walked the rules and what
 * every limit of the rule it reached decided. Offline: nothing listens,
 * nothing is shared; --times N decides the request N times first, to see
 * where a limit starts denying.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "cli.h"
#include "readfile.h"
#include "weir/weir.h"

/* A request body is at most this long (as --max-body's default). */
#define MAX_REQUEST_BYTES (1u << 20)
/* --times at most. */
#define MAX_TIMES 1000000ul

typedef struct explain_args {
    const char *rules;
    const char *request;
    weir_rules_options opts;
    bool json;
    unsigned long times;
} explain_args;

static void usage(FILE *f)
{
    fprintf(f, "usage: weir explain [--json] [--times N] [--merge] [--default-algorithm NAME]\n"
               "                    RULES REQUEST\n"
               "\n"
               "Show how REQUEST walks the rules of RULES (a file or directory, loaded as\n"
               "'weir serve' loads it): per descriptor, which rule each entry matched (exact\n"
               "value, pattern or default), where and why a walk found no limit, and every\n"
               "limit of the rule reached with its verdict on a fresh memory store.\n"
               "\n"
               "REQUEST is a POST /v1/check body (docs/API.md): JSON text, '@FILE', or '-'\n"
               "for standard input.\n"
               "\n"
               "  --json               the explanation as POST /v1/check?explain=1 answers it\n"
               "  --times N            decide the request N times and explain the last\n"
               "                       (default 1)\n"
               "  --merge              several files may name one domain (--merge-domains)\n"
               "  --default-algorithm  the algorithm of limits without one\n"
               "\n"
               "Exit status: 0 allowed, 3 over the limit, 1 rules or request refused, 2 usage.\n"
               "\n"
               "example: weir explain examples/rules.yaml \\\n"
               "  '{\"domain\":\"api\",\"descriptors\":[{\"entries\":[{\"key\":\"remote_address\","
               "\"value\":\"10.0.0.1\"}]}]}'\n");
}

static int parse_args(int argc, char **argv, explain_args *a)
{
    memset(a, 0, sizeof(*a));
    a->opts.size = sizeof(a->opts);
    a->times = 1;
    const char *pos[2];
    int n_pos = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(arg, "--json") == 0) {
            a->json = true;
        } else if (strcmp(arg, "--merge") == 0) {
            a->opts.merge_domains = true;
        } else if (strcmp(arg, "--default-algorithm") == 0 && i + 1 < argc) {
            if (weir_algorithm_parse(argv[++i], &a->opts.default_algorithm) != WEIR_OK) {
                fprintf(stderr, "weir explain: unknown algorithm '%s'\n", argv[i]);
                return 2;
            }
        } else if (strcmp(arg, "--times") == 0 && i + 1 < argc) {
            char *end;
            a->times = strtoul(argv[++i], &end, 10);
            if (*end || argv[i][0] == '-' || a->times < 1 || a->times > MAX_TIMES) {
                fprintf(stderr, "weir explain: --times takes 1 .. %lu, e.g. --times 5\n",
                        MAX_TIMES);
                return 2;
            }
        } else if (arg[0] == '-' && arg[1] != '\0') {
            fprintf(stderr, "weir explain: unknown option '%s'\n\n", arg);
            usage(stderr);
            return 2;
        } else if (n_pos < 2) {
            pos[n_pos++] = arg;
        } else {
            fprintf(stderr, "weir explain: RULES and REQUEST only\n");
            return 2;
        }
    }
    if (n_pos < 2) {
        usage(stderr);
        return 2;
    }
    a->rules = pos[0];
    a->request = pos[1];
    return -1;
}

/* The request body: the argument itself, a file's content (@FILE), or
 * standard input (-). Into *out (malloc'd when *owned). */
static bool read_request(const char *arg, char **out, size_t *len, bool *owned)
{
    *owned = false;
    if (arg[0] == '@') {
        *owned = true;
        return weir_cli_read_file("weir explain: ", arg + 1, MAX_REQUEST_BYTES, out, len);
    }
    if (strcmp(arg, "-") != 0) {
        *out = (char *)arg;
        *len = strlen(arg);
        return true;
    }
    char *buf = malloc(MAX_REQUEST_BYTES + 1);
    if (!buf) {
        fprintf(stderr, "weir explain: out of memory\n");
        return false;
    }
    size_t n = fread(buf, 1, MAX_REQUEST_BYTES + 1, stdin);
    if (n > MAX_REQUEST_BYTES || ferror(stdin)) {
        fprintf(stderr, "weir explain: standard input: %s\n",
                n > MAX_REQUEST_BYTES ? "longer than 1 MiB" : "read error");
        free(buf);
        return false;
    }
    *out = buf;
    *len = n;
    *owned = true;
    return true;
}

/* One decision, kept for the explanation. */
typedef struct outcome {
    bool done;
    weir_code overall;
    weir_descriptor_status *st;
    size_t n;
    const weir_request *req;
    bool json;
    weir_engine_reader *reader;
    bool last;
    weir_buf out;
    weir_status explained;
} outcome;

static void on_explained(void *arg, const weir_match_trace *traces, size_t n)
{
    (void)n;
    outcome *o = arg;
    weir_api_decision dec = {o->overall, o->st, o->n};
    if (o->json) {
        weir_api_render_decision_explained(&o->out, &dec, o->req, traces);
        weir_buf_putc(&o->out, '\n');
    } else {
        weir_api_explain_text(&o->out, o->req, &dec, traces);
    }
}

/* The memory store completes inline: the statuses and the rules they
 * point to are explained here, inside the decision's callback. */
static void on_decided(void *arg, weir_code overall, weir_descriptor_status *st, size_t n)
{
    outcome *o = arg;
    (void)st; /* o->st, given to weir_engine_decide() */
    o->done = true;
    o->overall = overall;
    o->n = n;
    if (o->last)
        o->explained = weir_engine_explain(o->reader, o->req, on_explained, o);
}

static int run(const explain_args *a, weir_ctx *ctx, weir_rules *rules, const weir_request *req)
{
    weir_store *store = NULL;
    weir_engine *engine = NULL;
    weir_engine_reader *reader = NULL;
    outcome o = {.req = req, .json = a->json};
    weir_buf_init(&o.out, SIZE_MAX);
    weir_memstore_options mo = {sizeof(mo), 0, 0, 0, 0};
    if (weir_memstore_new(ctx, &mo, &store) != WEIR_OK) {
        weir_rules_free(rules);
        fprintf(stderr, "weir explain: out of memory\n");
        return 1;
    }
    weir_engine_options eo = {.size = sizeof(eo), .store = store, .instances = 1};
    int rc = 1;
    if (weir_engine_new(ctx, &eo, rules, &engine) != WEIR_OK) {
        weir_rules_free(rules);
        fprintf(stderr, "weir explain: out of memory\n");
        goto out;
    }
    if (weir_engine_reader_new(engine, &reader) != WEIR_OK) {
        fprintf(stderr, "weir explain: out of memory\n");
        goto out;
    }
    o.reader = reader;
    o.st = calloc(req->n_descriptors, sizeof(*o.st));
    int64_t now = weir_ctx_now_us(ctx);
    for (unsigned long i = 0; o.st && i < a->times; i++) {
        o.last = i + 1 == a->times;
        weir_status st = weir_engine_decide(reader, req, now, o.st, on_decided, &o);
        if (st != WEIR_OK) {
            char why[256];
            weir_refusal_text(weir_engine_refusal(reader), why, sizeof(why));
            fprintf(stderr, "weir explain: the request is refused: %s\n", why);
            goto out;
        }
    }
    if (!o.st || !o.done || o.explained != WEIR_OK || !weir_buf_ok(&o.out)) {
        fprintf(stderr, "weir explain: out of memory\n");
        goto out;
    }
    fwrite(o.out.p, 1, o.out.len, stdout);
    rc = o.overall == WEIR_CODE_OK ? 0 : 3;
out:
    weir_buf_free(&o.out);
    free(o.st);
    weir_engine_reader_free(reader);
    weir_engine_free(engine);
    weir_store_free(store);
    return rc;
}

int weir_cli_explain(int argc, char **argv)
{
    explain_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0)
        return rc;
    char *body;
    size_t len;
    bool owned;
    if (!read_request(a.request, &body, &len, &owned))
        return 1;
    weir_api_limits lim = {WEIR_ENGINE_MAX_DESCRIPTORS, WEIR_ENGINE_MAX_ENTRIES, 1};
    weir_api_decoder *dec = weir_api_decoder_new(&lim);
    weir_ctx *ctx = NULL;
    rc = 1;
    if (!dec || weir_ctx_new(NULL, &ctx) != WEIR_OK) {
        fprintf(stderr, "weir explain: out of memory\n");
        goto out;
    }
    weir_api_error err;
    if (!weir_api_decode_check(dec, body, len, &err)) {
        fprintf(stderr, "weir explain: the request: %s\n", err.message);
        goto out;
    }
    weir_rules *rules;
    if (weir_cli_load_rules("weir explain", a.rules, &a.opts, false, ctx, &rules) != 0)
        goto out;
    rc = run(&a, ctx, rules, weir_api_request(dec, 0));
out:
    weir_ctx_free(ctx);
    weir_api_decoder_free(dec);
    if (owned)
        free(body);
    return rc;
}
