/*
 * decode_internal.h - what the API decoders share: the decoder and its
 * pools (the JSON parser's included), and error reporting. Private to
 * frontends/api; the quota admin codec (daemon/quota/json.c) borrows its
 * quoting and number helpers.
 */
#ifndef WEIR_FRONTENDS_API_DECODE_INTERNAL_H
#define WEIR_FRONTENDS_API_DECODE_INTERNAL_H

#include <stdarg.h>

#include "api.h"
#include "json.h"

/** Largest integer a JSON number carries exactly (weir's own formats). */
#define WEIR_API_MAX_EXACT_INT ((uint64_t)1 << 53)
/** Bytes of a name or value quoted in an error message. */
#define WEIR_API_QUOTE_MAX 32u

struct weir_api_decoder {
    weir_api_limits lim;
    weir_json json; /* the parsed body: strings stay in its copy */
    size_t count;
    weir_request *reqs; /* lim.max_batch of them */
    weir_descriptor *descs;
    weir_limit_override *overrides; /* one per descs[] slot */
    size_t descs_cap, n_descs;
    weir_entry *entries;
    size_t entries_cap, n_entries;
    char *scratch; /* percent-decoded query bytes */
    size_t scratch_cap;
};

/** Forgets the previous decode (the pools stay). */
void weir_api_dec_reset(weir_api_decoder *d);
/** Grows the pools to hold @n_descs descriptors and @n_entries entries.
 *  Only called before a decode hands out pointers into them. */
bool weir_api_dec_reserve(weir_api_decoder *d, size_t n_descs, size_t n_entries);

/** Fills *err with "<where>: <message>" (just the message when @where is
 *  NULL or empty); always false, so decoders can `return` it. */
bool weir_api_dec_error(weir_api_error *err, int status, const char *where, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
bool weir_api_dec_verror(weir_api_error *err, int status, const char *where, const char *fmt,
                         va_list ap) __attribute__((format(printf, 4, 0)));
/** A 500 "out of memory". */
bool weir_api_dec_oom(weir_api_error *err);
/** Up to WEIR_API_QUOTE_MAX bytes of @s for an error message: bytes outside
 *  printable ASCII (and quotes) become '?', and "..." marks a cut. @out
 *  holds WEIR_API_QUOTE_MAX + 4 bytes. */
const char *weir_api_dec_quote(char *out, const char *s, size_t n);
/** Decimal digits only, at most @max; false on anything else. */
bool weir_api_dec_decimal(const char *s, size_t n, uint64_t max, uint64_t *out);
/** Whether the @len bytes of @key are exactly @name (NULL: never). */
bool weir_api_dec_key_is(const char *key, size_t len, const char *name);
/**
 * weir_api_dec_members() - the members of object @obj sorted into @out,
 * one slot per name of @names (at most 32; NULL when absent or null).
 * Returns NULL, or the key of the first member that is unknown (*@twice
 * false) or given twice (*@twice true): a body that names a member twice
 * would be read differently by parsers that keep the first and the last.
 */
const weir_json_node *weir_api_dec_members(const weir_json_node *obj, const char *const *names,
                                           size_t n, const weir_json_node **out, bool *twice);

#endif /* WEIR_FRONTENDS_API_DECODE_INTERNAL_H */
