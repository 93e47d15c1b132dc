/*
 * fuzz_grpc.c - fuzzes the gRPC request path the way the server drives it:
 * a request body cut into length-prefixed messages, each decoded as a
 * RateLimitRequest (and as a HealthCheckRequest, a leases ReleaseRequest:
 * an accepted lease fits the caller's buffer, and a Costs SettleRequest:
 * an accepted one has a cost within its cap), and a RateLimitResponse
 * encoded for a synthetic decision of the decoded request's shape. Any
 * bytes must decode or fail cleanly, never crash, leak or hang.
 *
 * The first input byte picks the caps (the defaults or small ones) and
 * the largest message; the rest is the body. Oracles, a broken one aborts:
 *   - framing: a message lies inside the body; a prefix of the body is
 *     NEED_MORE or the same verdict; errors carry their status;
 *   - protobuf-c's own unpack (default allocator, no caps): when weir's
 *     decoder accepts a message, it accepts it too and finds the same
 *     domain, hits, descriptors, entries, hits_addend and limit; when
 *     weir's decoder calls it unparseable, protobuf-c refuses it too;
 *   - the decoded request keeps within the caps, its units within the enum;
 *   - weir_rls_encode_request() of the decoded request decodes back to the
 *     same request;
 *   - the encoded response unpacks (protobuf-c) to exactly the statuses,
 *     headers and raw body given.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "envoy/service/ratelimit/v3/rls.pb-c.h"
#include "grpc/rls.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef Envoy__Service__Ratelimit__V3__RateLimitRequest pb_request;
typedef Envoy__Service__Ratelimit__V3__RateLimitResponse pb_response;

static void check(int ok)
{
    if (!ok)
        abort();
}

static weir_rls_decoder *dec_default, *dec_small, *dec_again;
static weir_buf out, again;
static weir_headers hdrs;

static void cleanup(void)
{
    weir_rls_decoder_free(dec_default);
    weir_rls_decoder_free(dec_small);
    weir_rls_decoder_free(dec_again);
    weir_buf_free(&out);
    weir_headers_free(&hdrs);
    weir_buf_free(&again);
}

static void setup(void)
{
    if (dec_default)
        return;
    static const weir_api_limits small = {3, 4, 1};
    dec_default = weir_rls_decoder_new(NULL);
    dec_small = weir_rls_decoder_new(&small);
    dec_again = weir_rls_decoder_new(NULL);
    check(dec_default && dec_small && dec_again);
    weir_buf_init(&out, 1 << 22);
    weir_headers_init(&hdrs, 1 << 16);
    weir_buf_init(&again, 1 << 22);
    atexit(cleanup);
}

static bool same_str(const char *a, size_t a_len, const char *b)
{
    b = b ? b : "";
    return strlen(b) == a_len && memcmp(a, b, a_len) == 0;
}

static bool same_request(const weir_request *a, const weir_request *b)
{
    if (a->domain_len != b->domain_len || memcmp(a->domain, b->domain, a->domain_len) ||
        a->hits != b->hits || a->n_descriptors != b->n_descriptors)
        return false;
    for (size_t i = 0; i < a->n_descriptors; i++) {
        const weir_descriptor *x = &a->descriptors[i], *y = &b->descriptors[i];
        if (x->n_entries != y->n_entries || x->has_hits != y->has_hits ||
            (x->has_hits && x->hits != y->hits) || !x->limit != !y->limit)
            return false;
        if (x->limit && (x->limit->requests_per_unit != y->limit->requests_per_unit ||
                         x->limit->unit != y->limit->unit))
            return false;
        for (size_t j = 0; j < x->n_entries; j++) {
            const weir_entry *e = &x->entries[j], *f = &y->entries[j];
            if (e->key_len != f->key_len || memcmp(e->key, f->key, e->key_len) ||
                e->value_len != f->value_len || memcmp(e->value, f->value, e->value_len))
                return false;
        }
    }
    return true;
}

/* protobuf-c's unpack, the oracle, agrees with the decoded request. */
static void check_against_protobuf_c(const weir_request *r, const pb_request *m)
{
    check(m != NULL);
    check(same_str(r->domain, r->domain_len, m->domain));
    check(r->hits == m->hits_addend);
    check(r->n_descriptors == m->n_descriptors);
    for (size_t i = 0; i < r->n_descriptors; i++) {
        const weir_descriptor *d = &r->descriptors[i];
        const Envoy__Extensions__Common__Ratelimit__V3__RateLimitDescriptor *pd = m->descriptors[i];
        check(d->n_entries == pd->n_entries);
        for (size_t j = 0; j < d->n_entries; j++) {
            check(same_str(d->entries[j].key, d->entries[j].key_len, pd->entries[j]->key));
            check(same_str(d->entries[j].value, d->entries[j].value_len, pd->entries[j]->value));
            check(!memchr(d->entries[j].key, 0, d->entries[j].key_len));
            check(!memchr(d->entries[j].value, 0, d->entries[j].value_len));
        }
        check(d->has_hits == (pd->hits_addend != NULL));
        if (d->has_hits)
            check(d->hits == pd->hits_addend->value);
        check(!d->limit == !pd->limit);
        if (d->limit) {
            check(d->limit->requests_per_unit == pd->limit->requests_per_unit);
            check((int)d->limit->unit == (int)pd->limit->unit);
            check(d->limit->unit <= WEIR_UNIT_YEAR);
        }
    }
}

static const weir_rule_limit limits[3] = {
    {.name = "named", .requests_per_unit = 10, .unit = WEIR_UNIT_MINUTE},
    {.name = NULL, .requests_per_unit = 3, .unit = WEIR_UNIT_WEEK},
    {.name = "", .requests_per_unit = 0, .unit = WEIR_UNIT_NONE},
};

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15u + (h << 6) + (h >> 2);
    return h;
}

/* A synthetic decision of @r's shape, encoded and read back. */
static void respond(const weir_request *r, uint64_t seed)
{
    weir_descriptor_status st[WEIR_ENGINE_MAX_DESCRIPTORS];
    size_t n = r->n_descriptors;
    check(n <= WEIR_ENGINE_MAX_DESCRIPTORS);
    bool over = false;
    weir_headers_clear(&hdrs);
    for (size_t i = 0; i < n; i++) {
        const weir_descriptor *d = &r->descriptors[i];
        uint64_t h = mix(seed, i);
        for (size_t j = 0; j < d->n_entries; j++)
            h = mix(h, d->entries[j].key_len * 31 + d->entries[j].value_len);
        memset(&st[i], 0, sizeof st[i]);
        st[i].code = h & 1 ? WEIR_CODE_OVER_LIMIT : WEIR_CODE_OK;
        over |= st[i].code == WEIR_CODE_OVER_LIMIT;
        switch ((h >> 1) % 4) {
        case 0: /* unmatched */
            st[i].code = WEIR_CODE_OK;
            break;
        case 1:
            st[i].code = WEIR_CODE_OK;
            st[i].unlimited = true;
            st[i].remaining = WEIR_ENGINE_UNLIMITED_REMAINING;
            break;
        default:
            st[i].limit = &limits[(h >> 3) % 3];
            st[i].requests_per_unit = (uint32_t)(h >> 8);
            st[i].unit = (weir_rule_unit)((h >> 40) % 8);
            st[i].remaining = h >> (h >> 41 & 31);
            st[i].reset_after_us = (int64_t)(h >> 20) - (int64_t)1000000;
            break;
        }
        /* the entries as header fields, whatever bytes they hold */
        if (d->n_entries && hdrs.n < WEIR_HEADERS_MAX)
            weir_headers_add(&hdrs, d->entries[0].key, d->entries[0].key_len, d->entries[0].value,
                             d->entries[0].value_len);
    }
    weir_api_decision dec = {over ? WEIR_CODE_OVER_LIMIT : WEIR_CODE_OK, st, n};
    bool body = seed & 1;
    weir_buf_clear(&out);
    weir_rls_encode_response(&out, &dec, &hdrs, body ? r->domain : NULL, body ? r->domain_len : 0);
    check(weir_buf_ok(&out));

    pb_response *m = envoy__service__ratelimit__v3__rate_limit_response__unpack(
        NULL, out.len, (const uint8_t *)(out.p ? out.p : ""));
    check(m != NULL);
    check((int)m->overall_code == (int)dec.overall);
    check(m->n_statuses == n);
    for (size_t i = 0; i < n; i++) {
        const Envoy__Service__Ratelimit__V3__RateLimitResponse__DescriptorStatus *s =
            m->statuses[i];
        check((int)s->code == (int)st[i].code);
        if (st[i].unlimited) {
            check(!s->current_limit && !s->duration_until_reset);
            check(s->limit_remaining == UINT32_MAX);
        } else if (!st[i].limit) {
            check(!s->current_limit && !s->duration_until_reset && s->limit_remaining == 0);
        } else {
            check(s->current_limit && s->duration_until_reset);
            check(s->current_limit->requests_per_unit == st[i].requests_per_unit);
            check((int)s->current_limit->unit == (int)st[i].unit);
            const char *name = st[i].limit->name ? st[i].limit->name : "";
            check(strcmp(s->current_limit->name, name) == 0);
            uint64_t want = st[i].remaining > UINT32_MAX ? UINT32_MAX : st[i].remaining;
            check(s->limit_remaining == want);
            int64_t us = st[i].reset_after_us > 0 ? st[i].reset_after_us : 0;
            check(s->duration_until_reset->seconds == us / 1000000);
            check(s->duration_until_reset->nanos == (int32_t)(us % 1000000) * 1000);
        }
    }
    /* every field as given (up to a NUL in its bytes), in order */
    check(m->n_response_headers_to_add == hdrs.n);
    for (size_t i = 0; i < m->n_response_headers_to_add; i++) {
        const Envoy__Config__Core__V3__HeaderValue *hv = m->response_headers_to_add[i];
        check(strcmp(hv->key, weir_headers_name(&hdrs, i)) == 0);
        check(strcmp(hv->value, weir_headers_value(&hdrs, i)) == 0 && hv->raw_value.len == 0);
    }
    check(m->n_request_headers_to_add == 0);
    if (body) {
        check(m->raw_body.len == r->domain_len);
        check(!r->domain_len || memcmp(m->raw_body.data, r->domain, r->domain_len) == 0);
    } else {
        check(m->raw_body.len == 0);
    }
    envoy__service__ratelimit__v3__rate_limit_response__free_unpacked(m, NULL);
}

static void one_message(weir_rls_decoder *d, size_t max_desc, size_t max_entries,
                        const uint8_t *msg, size_t len, uint64_t seed)
{
    weir_grpc_error err = {0};
    bool ok = weir_rls_decode(d, msg, len, &err);
    static const uint8_t empty[1];
    pb_request *m =
        envoy__service__ratelimit__v3__rate_limit_request__unpack(NULL, len, msg ? msg : empty);
    if (!ok) {
        check(err.code == WEIR_GRPC_INVALID_ARGUMENT || err.code == WEIR_GRPC_RESOURCE_EXHAUSTED);
        check(err.message[0] != '\0' && memchr(err.message, 0, sizeof err.message));
        check(weir_rls_request(d)->n_descriptors == 0);
        if (strncmp(err.message, "cannot parse", 12) == 0)
            check(m == NULL);
        if (strstr(err.message, ".limit.unit"))
            check(m != NULL);
        if (m)
            envoy__service__ratelimit__v3__rate_limit_request__free_unpacked(m, NULL);
        return;
    }
    const weir_request *r = weir_rls_request(d);
    check_against_protobuf_c(r, m);
    envoy__service__ratelimit__v3__rate_limit_request__free_unpacked(m, NULL);
    check(r->n_descriptors <= max_desc);
    for (size_t i = 0; i < r->n_descriptors; i++)
        check(r->descriptors[i].n_entries <= max_entries);

    /* the client's encoding of it decodes back the same */
    weir_buf_clear(&again);
    weir_rls_encode_request(&again, r);
    check(weir_buf_ok(&again));
    check(weir_rls_decode(dec_again, (const uint8_t *)again.p, again.len, &err));
    check(same_request(r, weir_rls_request(dec_again)));

    respond(r, seed);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    setup();
    if (size == 0)
        return 0;
    uint8_t mode = data[0];
    bool small = mode & 1;
    weir_rls_decoder *d = small ? dec_small : dec_default;
    size_t max_desc = small ? 3 : WEIR_ENGINE_MAX_DESCRIPTORS;
    size_t max_entries = small ? 4 : WEIR_ENGINE_MAX_ENTRIES;
    size_t max_message = mode & 2 ? 64 : 1 << 20;
    const uint8_t *body = data + 1;
    size_t len = size - 1;

    /* the body as gRPC messages, one after another */
    size_t at = 0;
    for (unsigned k = 0; k < 64; k++) {
        const uint8_t *msg = NULL;
        size_t msg_len = 0, used = 0;
        weir_grpc_error err = {0};
        weir_grpc_frame_result fr =
            weir_grpc_frame_parse(body + at, len - at, max_message, &msg, &msg_len, &used, &err);
        if (fr == WEIR_GRPC_FRAME_NEED_MORE)
            break;
        if (fr == WEIR_GRPC_FRAME_ERROR) {
            check(err.code == WEIR_GRPC_UNIMPLEMENTED || err.code == WEIR_GRPC_INVALID_ARGUMENT ||
                  err.code == WEIR_GRPC_RESOURCE_EXHAUSTED);
            check(err.message[0] != '\0');
            break;
        }
        check(fr == WEIR_GRPC_FRAME_MESSAGE);
        check(used == WEIR_GRPC_PREFIX_BYTES + msg_len && used <= len - at);
        check(msg == body + at + WEIR_GRPC_PREFIX_BYTES && msg_len <= max_message);
        /* a body cut inside this message is not whole yet */
        if (used > 1) {
            const uint8_t *m2 = NULL;
            size_t l2 = 0, u2 = 0;
            check(weir_grpc_frame_parse(body + at, used - 1, max_message, &m2, &l2, &u2, &err) ==
                  WEIR_GRPC_FRAME_NEED_MORE);
        }

        one_message(d, max_desc, max_entries, msg, msg_len, mode ^ k);
        char service[32];
        (void)weir_health_decode(msg, msg_len, service, mode & 4 ? 4 : sizeof service, &err);
        char lease[64];
        size_t lease_cap = mode & 4 ? 4 : sizeof lease, lease_len = SIZE_MAX;
        bool dropped;
        if (weir_leases_decode_release(msg, msg_len, lease, lease_cap, &lease_len, &dropped, &err))
            check(lease_len <= lease_cap);
        else
            check(err.code == WEIR_GRPC_INVALID_ARGUMENT && lease_len == SIZE_MAX);
        uint64_t cost = UINT64_MAX;
        if (weir_costs_decode_settle(d, msg, msg_len, &cost, &err))
            check(cost <= 1000000000000000000ull);
        else
            check(err.code != WEIR_GRPC_OK);
        at += used;
    }

    /* the whole body, unframed, as one message too */
    one_message(d, max_desc, max_entries, body, len, mode);
    return 0;
}
