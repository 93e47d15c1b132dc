/*
 * discovery.h - the state-of-the-world xDS messages of weir's rule
 * subscription, without the transport: a DiscoveryRequest (subscription,
 * ACK or NACK) encoded as one gRPC-framed message, and a
 * DiscoveryResponse decoded into its version, nonce and one rule document
 * (upstream's YAML) per RateLimitConfig resource. No I/O.
 *
 * The subscription is envoyproxy/ratelimit's: the type URL
 * WEIR_XDS_RLS_TYPE_URL over the aggregated discovery service, every
 * resource of the type (no resource names), the node's id and metadata.
 *
 * Caps: the message itself is capped by the transport (--xds-max-message-
 * bytes); here, at most WEIR_XDS_MAX_RESOURCES resources, version and nonce
 * of at most WEIR_XDS_MAX_TEXT bytes, messages nested at most
 * WEIR_XDS_MAX_NESTING deep (checked on the wire before protobuf-c, which
 * would recurse without a bound).
 */
#ifndef WEIR_FRONTENDS_XDS_DISCOVERY_H
#define WEIR_FRONTENDS_XDS_DISCOVERY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "weir/rules.h"

/** The resource type of weir's (and envoyproxy/ratelimit's) rules. */
#define WEIR_XDS_RLS_TYPE_URL "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig"
/** The gRPC method of the subscription. */
#define WEIR_XDS_ADS_PATH \
    "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources"

#define WEIR_XDS_MAX_RESOURCES WEIR_RULES_MAX_FILES
#define WEIR_XDS_MAX_TEXT 1024u
#define WEIR_XDS_MAX_NESTING 64u
/** Node metadata pairs and the bytes of their text (--xds-node-metadata). */
#define WEIR_XDS_MAX_METADATA 32u
#define WEIR_XDS_METADATA_BYTES 1024u

/** The node's metadata, "key=value,key2=value2" split (entries without
 *  '=' are skipped, as upstream does). */
typedef struct weir_xds_metadata {
    size_t n;
    const char *key[WEIR_XDS_MAX_METADATA];
    const char *value[WEIR_XDS_MAX_METADATA];
    char text[WEIR_XDS_METADATA_BYTES];
} weir_xds_metadata;

/** Splits @s into @m (which points into its own copy); false when @s is
 *  longer than WEIR_XDS_METADATA_BYTES - 1 or has more than
 *  WEIR_XDS_MAX_METADATA pairs. */
bool weir_xds_metadata_parse(const char *s, weir_xds_metadata *m);

/** Who asks: Node.id, Node.metadata, and the user agent ("weir" and
 *  @version). */
typedef struct weir_xds_node {
    const char *id;
    const weir_xds_metadata *metadata; /* may be NULL */
    const char *version;
} weir_xds_node;

/**
 * weir_xds_request() - append one gRPC-framed DiscoveryRequest for
 * WEIR_XDS_RLS_TYPE_URL to @out: @version the last version taken ("" for
 * none yet), @nonce the response answered ("" on a new stream), @error
 * NULL for a subscription or ACK, or the reason of a NACK (sent as
 * error_detail, code INVALID_ARGUMENT). False (and @out failed) when out
 * of memory.
 */
bool weir_xds_request(weir_buf *out, const weir_xds_node *node, const char *version,
                      const char *nonce, const char *error);

typedef enum weir_xds_result {
    WEIR_XDS_OK,           /* every resource became a rule document */
    WEIR_XDS_BAD_RESOURCE, /* a resource is not a RateLimitConfig or is malformed: NACK
                              with the reason (version and nonce were read) */
    WEIR_XDS_MALFORMED,    /* not a DiscoveryResponse at all: nothing to answer */
    WEIR_XDS_NOMEM
} weir_xds_result;

/** A decoded DiscoveryResponse. Owns everything it points to. */
typedef struct weir_xds_response {
    char *version;  /* version_info, NUL-terminated, never NULL after a decode */
    char *nonce;    /* nonce, likewise */
    char *type_url; /* type_url, likewise */
    /* one rule document per resource, in order: name "xds:NAME" (the
     * resource's name, or its domain when it has none), data the YAML */
    weir_rules_doc *docs;
    size_t n_docs;
    char **texts; /* the names and YAML texts the docs point to */
    size_t n_texts;
    char error[512]; /* WEIR_XDS_BAD_RESOURCE or WEIR_XDS_MALFORMED: why */
} weir_xds_response;

/**
 * weir_xds_response_decode() - decode the message @msg (@len bytes, no
 * gRPC prefix) into @r (cleared first; weir_xds_response_free() it on
 * every return). A response of another type than WEIR_XDS_RLS_TYPE_URL
 * decodes as WEIR_XDS_OK with its type_url and no documents: the caller
 * decides. Resources may come bare (Any of the RateLimitConfig) or
 * wrapped in an envoy.service.discovery.v3.Resource.
 */
weir_xds_result weir_xds_response_decode(const uint8_t *msg, size_t len, weir_xds_response *r);
void weir_xds_response_free(weir_xds_response *r);

/**
 * weir_xds_config_yaml() - the RateLimitConfig message @msg (@len bytes)
 * as upstream's rule document (YAML) appended to @out, its name (or its
 * domain, when it has no name) into @name (@name_cap bytes, cut). Returns
 * NULL, or why the message is not a RateLimitConfig (malformed, nested
 * too deep, out of memory). Field by field as upstream converts it: an
 * empty value, name or unit-less unlimited limit is left out, a unit
 * UNKNOWN or out of the enum is kept as written, so the rule loader
 * refuses it with upstream's words; `metadata` becomes `metadata: {}`
 * (weir keeps only that a descriptor has some).
 */
const char *weir_xds_config_yaml(const uint8_t *msg, size_t len, weir_buf *out, char *name,
                                 size_t name_cap);

#endif /* WEIR_FRONTENDS_XDS_DISCOVERY_H */
