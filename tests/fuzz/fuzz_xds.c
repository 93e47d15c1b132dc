/*
 * fuzz_xds.c - fuzzes what weir reads from an xDS management server
 * (frontends/xds/): the bytes as a DiscoveryResponse, its resources
 * rendered as rule documents and loaded as weir serve loads them; and the
 * same bytes as a bare RateLimitConfig, rendered and loaded.
 *
 * Checked: a decoded response has a version, a nonce and a type URL
 * within the caps, one document per resource named "xds:...", each
 * NUL-terminated at its length; a rendering that succeeded is always
 * YAML libyaml reads (the loader may refuse the rules, never with a YAML
 * syntax error: every string was escaped). A broken invariant aborts, so
 * the fuzzer reports it like a crash.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "weir/weir.h"
#include "xds/discovery.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_ERRORS 8u

static void check(int ok)
{
    if (!ok)
        abort();
}

/* Loads @n documents; no error may be libyaml's. */
static void load(weir_ctx *ctx, const weir_rules_doc *docs, size_t n)
{
    weir_rules_error errs[MAX_ERRORS];
    size_t n_errs = 0;
    weir_rules *rules = NULL;
    weir_status st = weir_rules_parse_many(ctx, docs, n, NULL, &rules, errs, MAX_ERRORS, &n_errs);
    check(st == WEIR_OK || st == WEIR_EPARSE || st == WEIR_ENOMEM);
    check((st == WEIR_OK) == (rules != NULL));
    for (size_t i = 0; i < n_errs && i < MAX_ERRORS; i++)
        check(strncmp(errs[i].message, "YAML syntax error", 17) != 0);
    weir_rules_free(rules);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    weir_ctx *ctx;
    if (weir_ctx_new(NULL, &ctx) != WEIR_OK)
        return 0;

    weir_xds_response r;
    weir_xds_result res = weir_xds_response_decode(data, size, &r);
    if (res == WEIR_XDS_OK || res == WEIR_XDS_BAD_RESOURCE) {
        check(r.version && r.nonce && r.type_url);
        check(strlen(r.version) <= WEIR_XDS_MAX_TEXT && strlen(r.nonce) <= WEIR_XDS_MAX_TEXT);
        check(r.n_docs <= WEIR_XDS_MAX_RESOURCES);
        for (size_t i = 0; i < r.n_docs; i++) {
            check(strncmp(r.docs[i].name, "xds:", 4) == 0);
            check(((const char *)r.docs[i].data)[r.docs[i].len] == '\0');
        }
        if (res == WEIR_XDS_OK)
            load(ctx, r.docs, r.n_docs);
        else
            check(r.error[0] != '\0');
    } else {
        check(r.error[0] != '\0' && r.n_docs == 0);
    }
    weir_xds_response_free(&r);

    weir_buf yaml;
    weir_buf_init(&yaml, WEIR_RULES_MAX_FILE_BYTES);
    char name[64];
    if (!weir_xds_config_yaml(data, size, &yaml, name, sizeof(name))) {
        weir_rules_doc doc = {"xds:fuzz", yaml.p, yaml.len};
        load(ctx, &doc, 1);
    }
    weir_buf_free(&yaml);
    weir_ctx_free(ctx);
    return 0;
}
