/*
 * test_discovery.c - the xDS messages of frontends/xds: DiscoveryRequests
 * (subscription, ACK, NACK) read back with protobuf-c field by field, the
 * node metadata setting, DiscoveryResponses with bare and wrapped
 * resources decoded into rule documents that load, every refusal (another
 * type, malformed bytes, nesting past the cap, a NUL or invalid UTF-8 in
 * a string, a response that is no DiscoveryResponse), upstream's unit and
 * unlimited rules, and strings that must reach the rules byte for byte
 * however YAML would read them.
 */
#define _GNU_SOURCE /* memmem */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "envoy/service/discovery/v3/discovery.pb-c.h"
#include "grpc/rls.h"
#include "ratelimit/config/ratelimit/v3/rls_conf.pb-c.h"
#include "weir/weir.h"
#include "xds/discovery.h"

typedef Ratelimit__Config__Ratelimit__V3__RateLimitConfig rl_config;
typedef Ratelimit__Config__Ratelimit__V3__RateLimitDescriptor rl_descriptor;
typedef Ratelimit__Config__Ratelimit__V3__RateLimitPolicy rl_policy;

#define UNIT(u) RATELIMIT__CONFIG__RATELIMIT__V3__RATE_LIMIT_UNIT__##u

/* ------------------------------------------------------------ helpers */

/* A packed message (malloc'd, *len bytes). */
static uint8_t *pack(const ProtobufCMessage *m, size_t *len)
{
    *len = protobuf_c_message_get_packed_size(m);
    uint8_t *p = malloc(*len ? *len : 1);
    assert_non_null(p);
    protobuf_c_message_pack(m, p);
    return p;
}

/* A RateLimitConfig with one descriptor @key limited by @policy. */
static uint8_t *one_limit(const char *name, const char *domain, const char *key, rl_policy *policy,
                          size_t *len)
{
    rl_descriptor d = RATELIMIT__CONFIG__RATELIMIT__V3__RATE_LIMIT_DESCRIPTOR__INIT;
    d.key = (char *)key;
    d.rate_limit = policy;
    rl_descriptor *ds[] = {&d};
    rl_config c = RATELIMIT__CONFIG__RATELIMIT__V3__RATE_LIMIT_CONFIG__INIT;
    c.name = (char *)name;
    c.domain = (char *)domain;
    c.n_descriptors = 1;
    c.descriptors = ds;
    return pack(&c.base, len);
}

/* A DiscoveryResponse of @n resources, each (type URL, bytes). */
static uint8_t *response(const char *version, const char *nonce, const char *type_url, size_t n,
                         const char *const *types, uint8_t *const *values, const size_t *lens,
                         size_t *len)
{
    Google__Protobuf__Any anys[8], *ptrs[8];
    assert_true(n <= 8);
    for (size_t i = 0; i < n; i++) {
        google__protobuf__any__init(&anys[i]);
        anys[i].type_url = (char *)types[i];
        anys[i].value.data = values[i];
        anys[i].value.len = lens[i];
        ptrs[i] = &anys[i];
    }
    Envoy__Service__Discovery__V3__DiscoveryResponse r =
        ENVOY__SERVICE__DISCOVERY__V3__DISCOVERY_RESPONSE__INIT;
    r.version_info = (char *)version;
    r.nonce = (char *)nonce;
    r.type_url = (char *)type_url;
    r.n_resources = n;
    r.resources = ptrs;
    return pack(&r.base, len);
}

/* Decodes one bare RateLimitConfig resource (@cfg, @cfg_len, freed). */
static weir_xds_result decode_one(uint8_t *cfg, size_t cfg_len, weir_xds_response *out)
{
    const char *type = WEIR_XDS_RLS_TYPE_URL;
    size_t len;
    uint8_t *msg = response("v", "n", WEIR_XDS_RLS_TYPE_URL, 1, &type, &cfg, &cfg_len, &len);
    weir_xds_result res = weir_xds_response_decode(msg, len, out);
    free(msg);
    free(cfg);
    return res;
}

/* Loads a decoded response's documents; the first error into @err. */
static weir_status load(const weir_xds_response *r, weir_rules **rules, char *err, size_t cap)
{
    static weir_ctx *ctx;
    if (!ctx)
        assert_int_equal(weir_ctx_new(NULL, &ctx), WEIR_OK);
    weir_rules_error e[4];
    size_t n = 0;
    *rules = NULL;
    weir_status st = weir_rules_parse_many(ctx, r->docs, r->n_docs, NULL, rules, e, 4, &n);
    if (err)
        snprintf(err, cap, "%s", n ? e[0].message : "");
    return st;
}

/* ------------------------------------------------------------ requests */

static Envoy__Service__Discovery__V3__DiscoveryRequest *read_request(const weir_buf *b)
{
    const uint8_t *msg;
    size_t msg_len, used;
    weir_grpc_error err;
    assert_int_equal(
        weir_grpc_frame_parse((const uint8_t *)b->p, b->len, 1u << 20, &msg, &msg_len, &used, &err),
        WEIR_GRPC_FRAME_MESSAGE);
    assert_int_equal(used, b->len);
    Envoy__Service__Discovery__V3__DiscoveryRequest *r =
        envoy__service__discovery__v3__discovery_request__unpack(NULL, msg_len, msg);
    assert_non_null(r);
    return r;
}

static void requests(void **unused)
{
    (void)unused;
    weir_xds_metadata md;
    assert_true(weir_xds_metadata_parse("zone=a,bare,team=edge=x", &md));
    weir_xds_node node = {"rl-node", &md, "1.2.3"};

    weir_buf b;
    weir_buf_init(&b, SIZE_MAX);
    assert_true(weir_xds_request(&b, &node, "", "", NULL));
    Envoy__Service__Discovery__V3__DiscoveryRequest *r = read_request(&b);
    assert_string_equal(r->type_url, WEIR_XDS_RLS_TYPE_URL);
    assert_string_equal(r->version_info, "");
    assert_string_equal(r->response_nonce, "");
    assert_int_equal(r->n_resource_names, 0);
    assert_null(r->error_detail);
    assert_string_equal(r->node->id, "rl-node");
    assert_string_equal(r->node->user_agent_name, "weir");
    assert_string_equal(r->node->user_agent_version, "1.2.3");
    assert_int_equal(r->node->metadata->n_fields, 2);
    assert_string_equal(r->node->metadata->fields[0]->key, "zone");
    assert_string_equal(r->node->metadata->fields[0]->value->string_value, "a");
    assert_string_equal(r->node->metadata->fields[1]->key, "team");
    assert_string_equal(r->node->metadata->fields[1]->value->string_value, "edge=x");
    envoy__service__discovery__v3__discovery_request__free_unpacked(r, NULL);

    /* a NACK: the version in force, the response's nonce, the reason */
    weir_buf_clear(&b);
    assert_true(weir_xds_request(&b, &node, "v1", "n7", "xds:a:3:5: bad"));
    r = read_request(&b);
    assert_string_equal(r->version_info, "v1");
    assert_string_equal(r->response_nonce, "n7");
    assert_non_null(r->error_detail);
    assert_int_equal(r->error_detail->code, WEIR_GRPC_INVALID_ARGUMENT);
    assert_string_equal(r->error_detail->message, "xds:a:3:5: bad");
    envoy__service__discovery__v3__discovery_request__free_unpacked(r, NULL);
    weir_buf_free(&b);
}

static void metadata_setting(void **unused)
{
    (void)unused;
    weir_xds_metadata md;
    assert_true(weir_xds_metadata_parse("", &md));
    assert_int_equal(md.n, 0);
    assert_true(weir_xds_metadata_parse(",,k=,=v", &md));
    assert_int_equal(md.n, 2);
    assert_string_equal(md.key[0], "k");
    assert_string_equal(md.value[0], "");
    assert_string_equal(md.key[1], "");
    char many[WEIR_XDS_METADATA_BYTES + 1];
    size_t n = 0;
    for (unsigned i = 0; i < WEIR_XDS_MAX_METADATA; i++)
        n += (size_t)snprintf(many + n, sizeof(many) - n, "k%u=v,", i);
    assert_true(weir_xds_metadata_parse(many, &md)); /* the cap */
    assert_int_equal(md.n, WEIR_XDS_MAX_METADATA);
    snprintf(many + n, sizeof(many) - n, "one=more");
    assert_false(weir_xds_metadata_parse(many, &md));
    memset(many, 'a', sizeof(many) - 1); /* WEIR_XDS_METADATA_BYTES: one too many */
    many[sizeof(many) - 1] = '\0';
    assert_false(weir_xds_metadata_parse(many, &md));
    many[sizeof(many) - 2] = '\0';
    assert_true(weir_xds_metadata_parse(many, &md));
}

/* ------------------------------------------------------------ responses */

static void resources_become_rules(void **unused)
{
    (void)unused;
    rl_policy p1 = RATELIMIT__CONFIG__RATELIMIT__V3__RATE_LIMIT_POLICY__INIT;
    p1.unit = UNIT(MINUTE);
    p1.requests_per_unit = 7;
    rl_policy p2 = p1;
    p2.unit = UNIT(WEEK);
    p2.requests_per_unit = 2;
    size_t l1, l2;
    uint8_t *c1 = one_limit("first", "d1", "user", &p1, &l1);
    uint8_t *c2 = one_limit("", "d2", "ip", &p2, &l2);

    /* the second wrapped in a Resource */
    Google__Protobuf__Any inner = GOOGLE__PROTOBUF__ANY__INIT;
    inner.type_url = (char *)WEIR_XDS_RLS_TYPE_URL;
    inner.value.data = c2;
    inner.value.len = l2;
    Envoy__Service__Discovery__V3__Resource res = ENVOY__SERVICE__DISCOVERY__V3__RESOURCE__INIT;
    res.name = (char *)"d2";
    res.resource = &inner;
    size_t lw;
    uint8_t *wrapped = pack(&res.base, &lw);

    const char *types[] = {WEIR_XDS_RLS_TYPE_URL,
                           "type.googleapis.com/envoy.service.discovery.v3.Resource"};
    uint8_t *values[] = {c1, wrapped};
    size_t lens[] = {l1, lw};
    size_t len;
    uint8_t *msg = response("v9", "abc", WEIR_XDS_RLS_TYPE_URL, 2, types, values, lens, &len);
    weir_xds_response r;
    assert_int_equal(weir_xds_response_decode(msg, len, &r), WEIR_XDS_OK);
    assert_string_equal(r.version, "v9");
    assert_string_equal(r.nonce, "abc");
    assert_string_equal(r.type_url, WEIR_XDS_RLS_TYPE_URL);
    assert_int_equal(r.n_docs, 2);
    assert_string_equal(r.docs[0].name, "xds:first");
    assert_string_equal(r.docs[1].name, "xds:d2"); /* no name: its domain */

    weir_rules *rules;
    assert_int_equal(load(&r, &rules, NULL, 0), WEIR_OK);
    const weir_rule *u = weir_rules_domain_rule(weir_rules_find_domain(rules, "d1"), 0);
    assert_string_equal(weir_rule_key(u), "user");
    assert_null(weir_rule_value(u));
    assert_int_equal(weir_rule_limit_at(u, 0)->requests_per_unit, 7);
    assert_int_equal(weir_rule_limit_at(u, 0)->unit, WEIR_UNIT_MINUTE);
    const weir_rule *ip = weir_rules_domain_rule(weir_rules_find_domain(rules, "d2"), 0);
    assert_int_equal(weir_rule_limit_at(ip, 0)->unit, WEIR_UNIT_WEEK);
    weir_rules_free(rules);
    weir_xds_response_free(&r);
    free(msg);
    free(c1);
    free(c2);
    free(wrapped);

    /* another type altogether: decoded, no documents, the caller decides */
    msg = response("1", "2", "type.googleapis.com/envoy.config.cluster.v3.Cluster", 0, NULL, NULL,
                   NULL, &len);
    assert_int_equal(weir_xds_response_decode(msg, len, &r), WEIR_XDS_OK);
    assert_int_equal(r.n_docs, 0);
    assert_string_equal(r.type_url, "type.googleapis.com/envoy.config.cluster.v3.Cluster");
    weir_xds_response_free(&r);
    free(msg);
}

/* A message nesting @depth descriptors, by hand: each level is field 4
 * (descriptors) of the one above, the outermost field 3 of the config. */
static uint8_t *nested(unsigned depth, size_t *len)
{
    size_t cap = 16 + (size_t)depth * 8;
    uint8_t *buf = malloc(cap), *tmp = malloc(cap);
    assert_non_null(buf);
    assert_non_null(tmp);
    size_t n = 0;
    buf[n++] = 0x0a; /* key = "k" */
    buf[n++] = 1;
    buf[n++] = 'k';
    for (unsigned i = 0; i < depth; i++) {
        uint8_t tag =
            i + 1 == depth ? 0x1a : 0x22; /* config.descriptors : descriptor.descriptors */
        size_t m = 0;
        if (i + 1 < depth) {
            tmp[m++] = 0x0a;
            tmp[m++] = 1;
            tmp[m++] = 'k';
        }
        tmp[m++] = tag;
        size_t v = n; /* a varint of the length */
        do {
            tmp[m++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
            v >>= 7;
        } while (v);
        memcpy(tmp + m, buf, n);
        m += n;
        memcpy(buf, tmp, m);
        n = m;
    }
    free(tmp);
    *len = n;
    return buf;
}

static void refused_resources(void **unused)
{
    (void)unused;
    weir_xds_response r;
    size_t len;

    /* not a RateLimitConfig */
    const char *type = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
    uint8_t *empty = malloc(1);
    size_t zero = 0;
    uint8_t *msg = response("v", "n", WEIR_XDS_RLS_TYPE_URL, 1, &type, &empty, &zero, &len);
    assert_int_equal(weir_xds_response_decode(msg, len, &r), WEIR_XDS_BAD_RESOURCE);
    assert_non_null(strstr(r.error, "not a ratelimit.config.ratelimit.v3.RateLimitConfig"));
    assert_string_equal(r.version, "v"); /* still read: the NACK needs the nonce */
    assert_string_equal(r.nonce, "n");
    weir_xds_response_free(&r);
    free(msg);
    free(empty);

    /* bytes that are no message */
    uint8_t *junk = malloc(2);
    junk[0] = 0x0a;
    junk[1] = 0xff;
    assert_int_equal(decode_one(junk, 2, &r), WEIR_XDS_BAD_RESOURCE);
    assert_string_equal(r.error, "resource #0: malformed RateLimitConfig");
    weir_xds_response_free(&r);

    /* nesting: 63 levels pass the walk (the loader refuses past 32), 65 not */
    uint8_t *deep = nested(WEIR_XDS_MAX_NESTING - 1, &len);
    assert_int_equal(decode_one(deep, len, &r), WEIR_XDS_OK);
    char err[512];
    weir_rules *rules;
    assert_int_equal(load(&r, &rules, err, sizeof(err)), WEIR_EPARSE);
    assert_non_null(strstr(err, "deep"));
    weir_xds_response_free(&r);
    deep = nested(WEIR_XDS_MAX_NESTING + 1, &len);
    assert_int_equal(decode_one(deep, len, &r), WEIR_XDS_BAD_RESOURCE);
    assert_non_null(strstr(r.error, "nested more than 64 messages deep"));
    weir_xds_response_free(&r);
    deep = nested(100000, &len); /* would overflow protobuf-c's stack */
    assert_int_equal(decode_one(deep, len, &r), WEIR_XDS_BAD_RESOURCE);
    weir_xds_response_free(&r);

    /* a NUL inside a key, and a key that is not UTF-8 */
    rl_policy p = RATELIMIT__CONFIG__RATELIMIT__V3__RATE_LIMIT_POLICY__INIT;
    p.unit = UNIT(SECOND);
    uint8_t *cfg = one_limit("n", "d", "ab", &p, &len);
    uint8_t *k = memmem(cfg, len, "ab", 2);
    k[1] = '\0';
    assert_int_equal(decode_one(cfg, len, &r), WEIR_XDS_BAD_RESOURCE);
    assert_non_null(strstr(r.error, "NUL"));
    weir_xds_response_free(&r);
    cfg = one_limit("n", "d", "ab", &p, &len);
    k = memmem(cfg, len, "ab", 2);
    k[1] = (uint8_t)0xc3; /* a cut two-byte sequence */
    weir_xds_result res = decode_one(cfg, len, &r);
    assert_int_equal(res, WEIR_XDS_BAD_RESOURCE); /* by protobuf-c or by the renderer */
    assert_true(strstr(r.error, "not UTF-8") || strstr(r.error, "malformed"));
    weir_xds_response_free(&r);

    /* not a DiscoveryResponse at all */
    static const uint8_t garbage[] = {0x12, 0x05, 0x01};
    assert_int_equal(weir_xds_response_decode(garbage, sizeof(garbage), &r), WEIR_XDS_MALFORMED);
    assert_string_equal(r.error, "malformed DiscoveryResponse");
    weir_xds_response_free(&r);
}

/* Units and unlimited as upstream converts them, judged by the loader. */
static void units_as_upstream(void **unused)
{
    (void)unused;
    static const struct {
        int unit;
        bool unlimited;
        const char *error; /* NULL: loads */
    } cases[] = {
        {UNIT(SECOND), false, NULL},
        {UNIT(YEAR), false, NULL},
        {UNIT(UNKNOWN), true, NULL},
        {UNIT(UNKNOWN), false, "invalid rate limit unit 'UNKNOWN'"},
        {9, false, "invalid rate limit unit '9'"},
        {UNIT(HOUR), true, "should not specify rate limit unit when unlimited"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        rl_policy p = RATELIMIT__CONFIG__RATELIMIT__V3__RATE_LIMIT_POLICY__INIT;
        p.unit = (Ratelimit__Config__Ratelimit__V3__RateLimitUnit)cases[i].unit;
        p.unlimited = cases[i].unlimited;
        p.requests_per_unit = 3;
        size_t len;
        weir_xds_response r;
        uint8_t *cfg = one_limit("n", "d", "k", &p, &len);
        assert_int_equal(decode_one(cfg, len, &r), WEIR_XDS_OK);
        weir_rules *rules;
        char err[512];
        weir_status st = load(&r, &rules, err, sizeof(err));
        if (cases[i].error) {
            assert_int_equal(st, WEIR_EPARSE);
            assert_string_equal(err, cases[i].error);
        } else {
            assert_int_equal(st, WEIR_OK);
            const weir_rule *k = weir_rules_domain_rule(weir_rules_domain_at(rules, 0), 0);
            assert_int_equal(weir_rule_limit_at(k, 0)->unlimited, cases[i].unlimited);
            weir_rules_free(rules);
        }
        weir_xds_response_free(&r);
    }
}

/* Every field of a descriptor, and strings YAML would otherwise read
 * differently, reach the rules as sent. */
static void fields_and_strings(void **unused)
{
    (void)unused;
    static const char *const keys[] = {
        "plain",
        "q\"uote",
        "back\\slash",
        "new\nline",
        "tab\tx",
        "colon: x",
        "- dash",
        "#hash",
        "nel\xc2\x85x",
        "ls\xe2\x80\xa8x",
        "c1\xc2\x90x",
        "bom\xef\xbb\xbfx",
        "fffe\xef\xbf\xbex",
        "emoji\xf0\x9f\x98\x80",
        "  spaced  ",
        "yes",
    };
    size_t n = sizeof(keys) / sizeof(keys[0]);
    rl_policy p = RATELIMIT__CONFIG__RATELIMIT__V3__RATE_LIMIT_POLICY__INIT;
    p.unit = UNIT(DAY);
    p.requests_per_unit = 5;
    p.name = (char *)"lim\"it";
    Ratelimit__Config__Ratelimit__V3__RateLimitReplace rep =
        RATELIMIT__CONFIG__RATELIMIT__V3__RATE_LIMIT_REPLACE__INIT;
    rep.name = (char *)"other";
    Ratelimit__Config__Ratelimit__V3__RateLimitReplace *reps[] = {&rep};
    p.n_replaces = 1;
    p.replaces = reps;
    Google__Protobuf__Struct meta = GOOGLE__PROTOBUF__STRUCT__INIT;
    rl_descriptor d[16], *dp[16];
    rl_descriptor child = RATELIMIT__CONFIG__RATELIMIT__V3__RATE_LIMIT_DESCRIPTOR__INIT;
    child.key = (char *)"sub";
    child.value = (char *)"v*";
    child.rate_limit = &p;
    rl_descriptor *children[] = {&child};
    for (size_t i = 0; i < n; i++) {
        rl_descriptor init = RATELIMIT__CONFIG__RATELIMIT__V3__RATE_LIMIT_DESCRIPTOR__INIT;
        d[i] = init;
        d[i].key = (char *)keys[i];
        d[i].value = (char *)keys[i];
        dp[i] = &d[i];
    }
    d[0].shadow_mode = d[0].quota_mode = d[0].detailed_metric = true;
    d[0].metadata = &meta;
    d[0].n_descriptors = 1;
    d[0].descriptors = children;
    rl_config c = RATELIMIT__CONFIG__RATELIMIT__V3__RATE_LIMIT_CONFIG__INIT;
    c.name = (char *)"all";
    c.domain = (char *)"dom\"ain";
    c.n_descriptors = n;
    c.descriptors = dp;
    size_t len;
    weir_xds_response r;
    uint8_t *cfg = pack(&c.base, &len);
    assert_int_equal(decode_one(cfg, len, &r), WEIR_XDS_OK);
    weir_rules *rules;
    char err[512];
    assert_int_equal(load(&r, &rules, err, sizeof(err)), WEIR_OK);
    const weir_rules_domain *dom = weir_rules_find_domain(rules, "dom\"ain");
    assert_non_null(dom);
    assert_int_equal(weir_rules_domain_rule_count(dom), n);
    for (size_t i = 0; i < n; i++) {
        const weir_rule *k = weir_rules_domain_rule(dom, i);
        assert_string_equal(weir_rule_key(k), keys[i]);
        assert_string_equal(weir_rule_value(k), keys[i]);
    }
    const weir_rule *first = weir_rules_domain_rule(dom, 0);
    uint32_t want = WEIR_RULE_SHADOW_MODE | WEIR_RULE_QUOTA_MODE | WEIR_RULE_DETAILED_METRIC;
    assert_int_equal(weir_rule_flags(first) & want, want);
    assert_true(weir_rule_has_metadata(first));
    const weir_rule *sub = weir_rule_child(first, 0);
    assert_true(weir_rule_is_wildcard(sub));
    const weir_rule_limit *l = weir_rule_limit_at(sub, 0);
    assert_string_equal(l->name, "lim\"it");
    assert_int_equal(l->n_replaces, 1);
    assert_string_equal(l->replaces[0], "other");
    assert_int_equal(l->requests_per_unit, 5);
    weir_rules_free(rules);
    weir_xds_response_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(requests),
        cmocka_unit_test(metadata_setting),
        cmocka_unit_test(resources_become_rules),
        cmocka_unit_test(refused_resources),
        cmocka_unit_test(units_as_upstream),
        cmocka_unit_test(fields_and_strings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
