/*
 * decoder.c - the API decoder's storage (the JSON parser's arrays, the
 * pools of requests, descriptors and entries, the query scratch buffer)
 * and the error reporting its decoders share.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode_internal.h"

#define DEFAULT_MAX_BATCH 100u

weir_api_decoder *weir_api_decoder_new(const weir_api_limits *limits)
{
    weir_api_decoder *d = calloc(1, sizeof(*d));
    if (!d)
        return NULL;
    weir_api_limits l = {WEIR_ENGINE_MAX_DESCRIPTORS, WEIR_ENGINE_MAX_ENTRIES, DEFAULT_MAX_BATCH};
    if (limits) {
        if (limits->max_descriptors && limits->max_descriptors < l.max_descriptors)
            l.max_descriptors = limits->max_descriptors;
        if (limits->max_entries && limits->max_entries < l.max_entries)
            l.max_entries = limits->max_entries;
        if (limits->max_batch)
            l.max_batch = limits->max_batch;
    }
    d->lim = l;
    d->reqs = calloc(l.max_batch, sizeof(*d->reqs));
    if (!d->reqs) {
        free(d);
        return NULL;
    }
    return d;
}

void weir_api_decoder_free(weir_api_decoder *d)
{
    if (!d)
        return;
    weir_json_release(&d->json);
    free(d->reqs);
    free(d->descs);
    free(d->overrides);
    free(d->entries);
    free(d->scratch);
    free(d);
}

size_t weir_api_count(const weir_api_decoder *d)
{
    return d ? d->count : 0;
}

const weir_request *weir_api_request(const weir_api_decoder *d, size_t i)
{
    return d && i < d->count ? &d->reqs[i] : NULL;
}

void weir_api_dec_reset(weir_api_decoder *d)
{
    d->json.n_nodes = 0;
    d->count = 0;
    d->n_descs = 0;
    d->n_entries = 0;
}

bool weir_api_dec_reserve(weir_api_decoder *d, size_t n_descs, size_t n_entries)
{
    if (n_descs > d->descs_cap) {
        free(d->descs);
        free(d->overrides);
        d->descs_cap = 0;
        d->descs = malloc(n_descs * sizeof(*d->descs));
        d->overrides = malloc(n_descs * sizeof(*d->overrides));
        if (!d->descs || !d->overrides)
            return false;
        d->descs_cap = n_descs;
    }
    if (n_entries > d->entries_cap) {
        free(d->entries);
        d->entries_cap = 0;
        d->entries = malloc(n_entries * sizeof(*d->entries));
        if (!d->entries)
            return false;
        d->entries_cap = n_entries;
    }
    return true;
}

/* ------------------------------------------------------------ errors */

bool weir_api_dec_verror(weir_api_error *err, int status, const char *where, const char *fmt,
                         va_list ap)
{
    err->status = status;
    size_t at = 0;
    if (where && where[0]) {
        int n = snprintf(err->message, sizeof(err->message), "%s: ", where);
        at = n > 0 ? (size_t)n : 0;
        if (at >= sizeof(err->message))
            return false;
    }
    vsnprintf(err->message + at, sizeof(err->message) - at, fmt, ap);
    return false;
}

bool weir_api_dec_error(weir_api_error *err, int status, const char *where, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    weir_api_dec_verror(err, status, where, fmt, ap);
    va_end(ap);
    return false;
}

bool weir_api_dec_oom(weir_api_error *err)
{
    return weir_api_dec_error(err, 500, NULL, "out of memory");
}

const char *weir_api_dec_quote(char *out, const char *s, size_t n)
{
    size_t k = n > WEIR_API_QUOTE_MAX ? WEIR_API_QUOTE_MAX : n;
    for (size_t i = 0; i < k; i++) {
        unsigned char c = (unsigned char)s[i];
        out[i] = c >= 0x20 && c < 0x7f && c != '\'' ? (char)c : '?';
    }
    if (n > k) {
        memcpy(out + k, "...", 4);
    } else {
        out[k] = '\0';
    }
    return out;
}

bool weir_api_dec_decimal(const char *s, size_t n, uint64_t max, uint64_t *out)
{
    if (n == 0)
        return false;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        unsigned digit = (unsigned)(s[i] - '0');
        if (v > (max - digit) / 10)
            return false;
        v = v * 10 + digit;
    }
    *out = v;
    return true;
}

bool weir_api_dec_key_is(const char *key, size_t len, const char *name)
{
    return name && strlen(name) == len && memcmp(key, name, len) == 0;
}

const weir_json_node *weir_api_dec_members(const weir_json_node *obj, const char *const *names,
                                           size_t n, const weir_json_node **out, bool *twice)
{
    for (size_t i = 0; i < n; i++)
        out[i] = NULL;
    uint32_t seen = 0;
    const weir_json_node *key = obj + 1;
    for (uint32_t m = 0; m < obj->n; m++, key = weir_json_next(key + 1)) {
        size_t i = 0;
        while (i < n && !weir_api_dec_key_is(key->s, key->n, names[i]))
            i++;
        *twice = i < n && (seen & (1u << i));
        if (i == n || *twice)
            return key;
        seen |= 1u << i;
        const weir_json_node *v = key + 1;
        out[i] = v->type == WEIR_JSON_NULL ? NULL : v;
    }
    return NULL;
}
