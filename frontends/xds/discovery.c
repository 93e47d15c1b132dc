/*
 * discovery.c - DiscoveryRequest out, DiscoveryResponse in
 * (envoy.service.discovery.v3, state of the world), with the node's
 * metadata setting parsed on the way. Resources become rule documents
 * through rls_yaml.c.
 *
 * Invariant: a decoded response owns copies of everything it holds; the
 * protobuf-c messages are freed before a decode returns.
 */
#include <protobuf-c/protobuf-c.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envoy/service/discovery/v3/discovery.pb-c.h"
#include "grpc/pb.h"
#include "grpc/rls.h"
#include "xds/discovery.h"

typedef Envoy__Service__Discovery__V3__DiscoveryRequest ds_request;
typedef Envoy__Service__Discovery__V3__DiscoveryResponse ds_response;
typedef Envoy__Service__Discovery__V3__Resource ds_resource;

#define RESOURCE_TYPE_URL "type.googleapis.com/envoy.service.discovery.v3.Resource"

bool weir_xds_metadata_parse(const char *s, weir_xds_metadata *m)
{
    size_t len = strlen(s);
    m->n = 0;
    if (len >= sizeof(m->text))
        return false;
    memcpy(m->text, s, len + 1);
    for (char *e = m->text; e;) {
        char *comma = strchr(e, ',');
        if (comma)
            *comma = '\0';
        char *eq = strchr(e, '=');
        if (eq) {
            if (m->n == WEIR_XDS_MAX_METADATA)
                return false;
            *eq = '\0';
            m->key[m->n] = e;
            m->value[m->n] = eq + 1;
            m->n++;
        }
        e = comma ? comma + 1 : NULL;
    }
    return true;
}

bool weir_xds_request(weir_buf *out, const weir_xds_node *node, const char *version,
                      const char *nonce, const char *error)
{
    Google__Protobuf__Value values[WEIR_XDS_MAX_METADATA];
    Google__Protobuf__Struct__FieldsEntry entries[WEIR_XDS_MAX_METADATA];
    Google__Protobuf__Struct__FieldsEntry *entry_ptrs[WEIR_XDS_MAX_METADATA];
    Google__Protobuf__Struct meta = GOOGLE__PROTOBUF__STRUCT__INIT;
    const weir_xds_metadata *md = node->metadata;
    size_t n_meta = md ? md->n : 0;
    for (size_t i = 0; i < n_meta; i++) {
        google__protobuf__value__init(&values[i]);
        values[i].kind_case = GOOGLE__PROTOBUF__VALUE__KIND_STRING_VALUE;
        values[i].string_value = (char *)(uintptr_t)md->value[i];
        google__protobuf__struct__fields_entry__init(&entries[i]);
        entries[i].key = (char *)(uintptr_t)md->key[i];
        entries[i].value = &values[i];
        entry_ptrs[i] = &entries[i];
    }
    meta.n_fields = n_meta;
    meta.fields = entry_ptrs;

    Envoy__Config__Core__V3__Node nd = ENVOY__CONFIG__CORE__V3__NODE__INIT;
    nd.id = (char *)(uintptr_t)(node->id ? node->id : "");
    nd.metadata = &meta;
    nd.user_agent_name = (char *)(uintptr_t) "weir";
    if (node->version) {
        nd.user_agent_version_type_case =
            ENVOY__CONFIG__CORE__V3__NODE__USER_AGENT_VERSION_TYPE_USER_AGENT_VERSION;
        nd.user_agent_version = (char *)(uintptr_t)node->version;
    }

    Google__Rpc__Status status = GOOGLE__RPC__STATUS__INIT;
    ds_request req = ENVOY__SERVICE__DISCOVERY__V3__DISCOVERY_REQUEST__INIT;
    req.version_info = (char *)(uintptr_t)(version ? version : "");
    req.node = &nd;
    req.type_url = (char *)(uintptr_t)WEIR_XDS_RLS_TYPE_URL;
    req.response_nonce = (char *)(uintptr_t)(nonce ? nonce : "");
    if (error) {
        status.code = WEIR_GRPC_INVALID_ARGUMENT;
        status.message = (char *)(uintptr_t)error;
        req.error_detail = &status;
    }
    size_t n = protobuf_c_message_get_packed_size(&req.base);
    weir_grpc_frame_prefix(out, n);
    weir_pb_append(out, &req.base);
    return weir_buf_ok(out);
}

/* A malloc'd copy of @s. */
static char *copy_text(const char *s)
{
    size_t n = strlen(s);
    char *p = malloc(n + 1);
    if (p)
        memcpy(p, s, n + 1);
    return p;
}

void weir_xds_response_free(weir_xds_response *r)
{
    free(r->version);
    free(r->nonce);
    free(r->type_url);
    for (size_t i = 0; i < r->n_texts; i++)
        free(r->texts[i]);
    free(r->texts);
    free(r->docs);
    memset(r, 0, sizeof(*r));
}

static weir_xds_result fail(weir_xds_response *r, weir_xds_result res, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static weir_xds_result fail(weir_xds_response *r, weir_xds_result res, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->error, sizeof(r->error), fmt, ap);
    va_end(ap);
    return res;
}

/* The type of an Any: the part of its type URL after the last '/'. */
static bool type_is(const char *url, const char *want)
{
    const char *slash = strrchr(url, '/'), *w = strrchr(want, '/');
    return slash && w && strcmp(slash, w) == 0;
}

/* Resource @i (@any) into document @i: unwrapped from a Resource if it is
 * one, then rendered. */
static weir_xds_result add_resource(weir_xds_response *r, size_t i,
                                    const Google__Protobuf__Any *any)
{
    const char *url = any->type_url ? any->type_url : "";
    ds_resource *wrapped = NULL;
    const ProtobufCBinaryData *value = &any->value;
    if (type_is(url, RESOURCE_TYPE_URL)) {
        wrapped = envoy__service__discovery__v3__resource__unpack(NULL, value->len, value->data);
        if (!wrapped || !wrapped->resource) {
            if (wrapped)
                envoy__service__discovery__v3__resource__free_unpacked(wrapped, NULL);
            return fail(r, WEIR_XDS_BAD_RESOURCE, "resource #%zu: malformed Resource", i);
        }
        url = wrapped->resource->type_url ? wrapped->resource->type_url : "";
        value = &wrapped->resource->value;
    }
    weir_xds_result res = WEIR_XDS_OK;
    if (!type_is(url, WEIR_XDS_RLS_TYPE_URL)) {
        res = fail(r, WEIR_XDS_BAD_RESOURCE,
                   "resource '%.200s' #%zu: not a ratelimit.config.ratelimit.v3.RateLimitConfig",
                   url, i);
    } else {
        char name[WEIR_RULES_MAX_STRING_BYTES];
        weir_buf yaml;
        weir_buf_init(&yaml, WEIR_RULES_MAX_FILE_BYTES);
        const char *why = weir_xds_config_yaml(value->data, value->len, &yaml, name, sizeof(name));
        weir_buf_putc(&yaml, '\0');
        size_t nlen = strlen(name);
        char *shown = malloc(nlen + 5);
        if (why || !weir_buf_ok(&yaml) || !shown) {
            res = why && strcmp(why, "out of memory") != 0
                      ? fail(r, WEIR_XDS_BAD_RESOURCE, "resource #%zu: %s", i, why)
                      : fail(r, WEIR_XDS_NOMEM, "out of memory");
            weir_buf_free(&yaml);
            free(shown);
        } else {
            memcpy(shown, "xds:", 4);
            memcpy(shown + 4, name, nlen + 1);
            r->texts[r->n_texts++] = shown;
            r->texts[r->n_texts++] = yaml.p;
            r->docs[i].name = shown;
            r->docs[i].data = yaml.p;
            r->docs[i].len = yaml.len - 1;
            r->n_docs = i + 1;
        }
    }
    if (wrapped)
        envoy__service__discovery__v3__resource__free_unpacked(wrapped, NULL);
    return res;
}

weir_xds_result weir_xds_response_decode(const uint8_t *msg, size_t len, weir_xds_response *r)
{
    memset(r, 0, sizeof(*r));
    /* The response's own fields are flat (the resources stay bytes inside
     * their Any), so protobuf-c's unpacker is safe on it as it is. */
    ds_response *m = envoy__service__discovery__v3__discovery_response__unpack(NULL, len, msg);
    if (!m)
        return fail(r, WEIR_XDS_MALFORMED, "malformed DiscoveryResponse");
    weir_xds_result res = WEIR_XDS_OK;
    const char *version = m->version_info ? m->version_info : "";
    const char *nonce = m->nonce ? m->nonce : "";
    if (strlen(version) > WEIR_XDS_MAX_TEXT || strlen(nonce) > WEIR_XDS_MAX_TEXT ||
        strlen(m->type_url ? m->type_url : "") > WEIR_XDS_MAX_TEXT) {
        res = fail(r, WEIR_XDS_MALFORMED, "version_info, nonce or type_url longer than %u bytes",
                   WEIR_XDS_MAX_TEXT);
        goto out;
    }
    r->version = copy_text(version);
    r->nonce = copy_text(nonce);
    r->type_url = copy_text(m->type_url ? m->type_url : "");
    if (!r->version || !r->nonce || !r->type_url) {
        res = fail(r, WEIR_XDS_NOMEM, "out of memory");
        goto out;
    }
    if (!type_is(r->type_url, WEIR_XDS_RLS_TYPE_URL) || !m->n_resources)
        goto out;
    if (m->n_resources > WEIR_XDS_MAX_RESOURCES) {
        res = fail(r, WEIR_XDS_BAD_RESOURCE, "more than %u resources", WEIR_XDS_MAX_RESOURCES);
        goto out;
    }
    r->docs = calloc(m->n_resources, sizeof(*r->docs));
    r->texts = calloc(m->n_resources * 2, sizeof(*r->texts));
    if (!r->docs || !r->texts) {
        res = fail(r, WEIR_XDS_NOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < m->n_resources && res == WEIR_XDS_OK; i++)
        res = add_resource(r, i, m->resources[i]);
out:
    envoy__service__discovery__v3__discovery_response__free_unpacked(m, NULL);
    return res;
}
