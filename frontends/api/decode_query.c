/*
 * decode_query.c - the GET /v1/check query string decoded into one engine
 * request: percent-decoded pairs become the descriptor's entries (in
 * order), "domain" and "hits" are parameters, and the configured request
 * headers are appended as further entries.
 *
 * Decoded bytes go to the decoder's scratch buffer, sized once from the
 * query (decoding never lengthens it).
 */
#include <stdlib.h>
#include <string.h>

#include "decode_internal.h"

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

size_t weir_api_percent_decode(const char *s, size_t n, char *out, bool plus_is_space)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (ch == '%') {
            int hi = i + 2 < n ? hex_value(s[i + 1]) : -1;
            int lo = hi >= 0 ? hex_value(s[i + 2]) : -1;
            if (hi < 0 || lo < 0)
                return SIZE_MAX;
            out[k++] = (char)(hi * 16 + lo);
            i += 2;
        } else {
            out[k++] = ch == '+' && plus_is_space ? ' ' : ch;
        }
    }
    return k;
}

bool weir_api_decode_query(weir_api_decoder *d, const char *query, size_t len,
                           const weir_api_header_entry *headers, size_t n_headers,
                           const char *(*get_header)(void *arg, const char *name, size_t *len),
                           void *arg, weir_api_error *err)
{
    weir_api_dec_reset(d);
    if (!query)
        len = 0;
    if (len > d->scratch_cap) {
        free(d->scratch);
        d->scratch_cap = 0;
        d->scratch = malloc(len);
        if (!d->scratch)
            return weir_api_dec_oom(err);
        d->scratch_cap = len;
    }
    /* every pair but domain and hits is an entry: bound the pool by them */
    size_t bound = n_headers + 1;
    for (size_t i = 0; i < len; i++)
        bound += query[i] == '&';
    if (bound > d->lim.max_entries)
        bound = d->lim.max_entries;
    if (!weir_api_dec_reserve(d, 1, bound))
        return weir_api_dec_oom(err);

    weir_request *r = &d->reqs[0];
    memset(r, 0, sizeof(*r));
    bool has_domain = false, has_hits = false;
    size_t n_entries = 0, used = 0;
    char q[WEIR_API_QUOTE_MAX + 4];
    for (size_t at = 0; at < len;) {
        const char *pair = query + at;
        const char *amp = memchr(pair, '&', len - at);
        size_t pair_len = amp ? (size_t)(amp - pair) : len - at;
        at += pair_len + 1;
        if (pair_len == 0)
            continue;
        const char *eq = memchr(pair, '=', pair_len);
        size_t key_raw = eq ? (size_t)(eq - pair) : pair_len;
        char *key = d->scratch + used;
        size_t key_len = weir_api_percent_decode(pair, key_raw, key, true);
        if (key_len == SIZE_MAX)
            return weir_api_dec_error(err, 400, NULL, "bad percent-escape in query");
        used += key_len;
        if (!eq)
            return weir_api_dec_error(err, 400, NULL, "query parameter '%s' has no value",
                                      weir_api_dec_quote(q, key, key_len));
        char *value = d->scratch + used;
        size_t value_len = weir_api_percent_decode(eq + 1, pair_len - key_raw - 1, value, true);
        if (value_len == SIZE_MAX)
            return weir_api_dec_error(err, 400, NULL, "bad percent-escape in query");
        used += value_len;
        if (weir_api_dec_key_is(key, key_len, "domain") ||
            weir_api_dec_key_is(key, key_len, "hits")) {
            bool is_domain = key[0] == 'd';
            if (is_domain ? has_domain : has_hits)
                return weir_api_dec_error(err, 400, NULL, "duplicate query parameter '%s'",
                                          is_domain ? "domain" : "hits");
            if (is_domain) {
                has_domain = true;
                r->domain = value;
                r->domain_len = value_len;
            } else {
                has_hits = true;
                if (!weir_api_dec_decimal(value, value_len, WEIR_API_MAX_EXACT_INT, &r->hits))
                    return weir_api_dec_error(
                        err, 400, NULL, "query parameter 'hits': must be an integer from 0 to %llu",
                        (unsigned long long)WEIR_API_MAX_EXACT_INT);
            }
            continue;
        }
        if (n_entries < d->lim.max_entries)
            d->entries[n_entries] = (weir_entry){key, key_len, value, value_len};
        n_entries++;
    }
    if (!has_domain)
        return weir_api_dec_error(err, 400, NULL, "missing query parameter 'domain'");
    for (size_t i = 0; get_header && i < n_headers; i++) {
        if (!headers[i].header || !headers[i].key)
            continue;
        size_t value_len = 0;
        const char *value = get_header(arg, headers[i].header, &value_len);
        if (!value)
            continue;
        if (n_entries < d->lim.max_entries)
            d->entries[n_entries] =
                (weir_entry){headers[i].key, strlen(headers[i].key), value, value_len};
        n_entries++;
    }
    if (n_entries > d->lim.max_entries)
        return weir_api_dec_error(err, 413, NULL, "too many entries (%zu > %zu)", n_entries,
                                  d->lim.max_entries);
    if (n_entries == 0 && r->domain_len > 0)
        /* the engine would say "descriptors[0] has no entries": here, what
         * to add (an empty domain is the engine's to refuse first) */
        return weir_api_dec_error(err, 400, NULL,
                                  "no descriptor entries: add them as query parameters "
                                  "(/v1/check?domain=%.*s&remote_address=192.0.2.1), or start "
                                  "weir serve with --check-header HEADER=KEY",
                                  (int)(r->domain_len > 64 ? 64 : r->domain_len), r->domain);
    d->descs[0] = (weir_descriptor){.entries = d->entries, .n_entries = n_entries};
    r->descriptors = d->descs;
    r->n_descriptors = 1;
    d->count = 1;
    return true;
}
