/*
 * bench_mix.h - the requests a load generator sends: request templates
 * (a domain and its descriptors) from `--descriptor` flags or a `--file`
 * of them, the `{n}` placeholder substituted with a random key number per
 * request, and each request encoded as a gRPC message (5-byte prefix and
 * a serialized RateLimitRequest), either ahead of time into a table or
 * when it is sent.
 *
 * File syntax, one request per line:
 *
 *     DOMAIN KEY=VALUE[,KEY=VALUE...][;KEY=VALUE[,KEY=VALUE...]...]
 *
 * `,` separates the entries of a descriptor, `;` the descriptors of the
 * request; blank lines and lines starting with `#` are skipped; spaces or
 * tabs separate the domain from the descriptors. A key is not empty and
 * holds no `=`; neither keys nor values hold spaces, `,` or `;`. Every
 * `{n}` in a value is replaced by the request's key number.
 *
 * Threads: a mix is built by one thread and then only read (the table
 * too); each sending thread has a scratch of its own.
 */
#ifndef WEIR_TOOLS_BENCH_MIX_H
#define WEIR_TOOLS_BENCH_MIX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "weir/engine.h"

/** Longest line of a --file, or value of --descriptor (bytes). */
#define WEIR_BENCH_MAX_LINE 4096u
/** Most descriptors in one request, entries in one descriptor. */
#define WEIR_BENCH_MAX_DESCRIPTORS WEIR_ENGINE_MAX_DESCRIPTORS
#define WEIR_BENCH_MAX_ENTRIES WEIR_ENGINE_MAX_ENTRIES
/** Most requests (lines) in a --file; largest --file. */
#define WEIR_BENCH_MAX_TEMPLATES 100000u
#define WEIR_BENCH_MAX_FILE_BYTES ((size_t)64 << 20)
/** Most distinct requests encoded ahead of time, and their bytes. */
#define WEIR_BENCH_MAX_TABLE 4000000u
#define WEIR_BENCH_MAX_TABLE_BYTES ((size_t)512 << 20)

/** The placeholder substituted in values. */
#define WEIR_BENCH_MARK "{n}"

typedef struct weir_bench_entry {
    const char *key;
    size_t key_len;
    const char *value;
    size_t value_len;
    /** How many WEIR_BENCH_MARK the value holds. */
    uint32_t marks;
} weir_bench_entry;

typedef struct weir_bench_desc {
    const weir_bench_entry *entries;
    size_t n_entries;
} weir_bench_desc;

/** One request: a domain and its descriptors. */
typedef struct weir_bench_template {
    char *text; /* owns the strings below */
    const char *domain;
    size_t domain_len;
    weir_bench_desc *descs; /* owns the entries too */
    size_t n_descs;
    size_t n_entries;
    /** Some value holds WEIR_BENCH_MARK: one request per key number. */
    bool has_mark;
    /** Bytes of its values with every mark replaced by a 20-digit number. */
    size_t expanded_max;
} weir_bench_template;

typedef struct weir_bench_mix {
    weir_bench_template *t;
    size_t n, cap;
    /** The largest request: entries, descriptors, expanded values. */
    size_t max_entries, max_descs, max_expanded;
    bool has_mark;

    /* The table (weir_bench_mix_encode_all()): request r spans
     * table[off[r]] .. table[off[r + 1]]; template i's requests start at
     * first[i] (one per key number when it has a mark, else one). */
    uint8_t *table;
    size_t *off;
    size_t *first;
    size_t n_encoded;
} weir_bench_mix;

/** Where a parse failed: the line (1-based; 0 for a flag) and why. */
typedef struct weir_bench_mix_error {
    uint64_t line;
    char reason[160];
} weir_bench_mix_error;

void weir_bench_mix_init(weir_bench_mix *m);
void weir_bench_mix_free(weir_bench_mix *m);

/**
 * weir_bench_mix_add_flags() - one template: @domain with one descriptor
 * per @descs string ("key=value[,key=value...]"). false with @err when a
 * string is malformed or over a cap.
 */
bool weir_bench_mix_add_flags(weir_bench_mix *m, const char *domain, const char *const *descs,
                              size_t n_descs, weir_bench_mix_error *err);

/**
 * weir_bench_mix_parse_file() - one template per line of @data (@len
 * bytes, the syntax above). false with @err (its line) when a line is
 * malformed or over a cap, or the file has no requests.
 */
bool weir_bench_mix_parse_file(weir_bench_mix *m, const char *data, size_t len,
                               weir_bench_mix_error *err);

/** Distinct requests with key numbers 0 .. @keys - 1 (saturating). */
uint64_t weir_bench_mix_distinct(const weir_bench_mix *m, uint64_t keys);

/**
 * weir_bench_expand() - @value (@len bytes) with every mark replaced by
 * the decimal @n, written to @out (room for at least @len + 17 bytes per
 * mark). Returns the bytes written.
 */
size_t weir_bench_expand(const char *value, size_t len, uint64_t n, char *out);

/** What a sending thread needs to encode any request of a mix. */
typedef struct weir_bench_scratch {
    weir_entry *entries;
    weir_descriptor *descs;
    char *text;
    weir_buf msg;
} weir_bench_scratch;

bool weir_bench_scratch_init(weir_bench_scratch *s, const weir_bench_mix *m);
void weir_bench_scratch_free(weir_bench_scratch *s);

/**
 * weir_bench_encode() - append request @t with key number @n (ignored
 * without a mark) and @hits (0: not sent) to @out as a gRPC message:
 * prefix and RateLimitRequest. false when out of memory.
 */
bool weir_bench_encode(const weir_bench_template *t, uint64_t n, uint64_t hits,
                       weir_bench_scratch *s, weir_buf *out);

/**
 * weir_bench_mix_encode_all() - encode every distinct request (key
 * numbers 0 .. @keys - 1) into the table. false when there are more than
 * WEIR_BENCH_MAX_TABLE or they take more than WEIR_BENCH_MAX_TABLE_BYTES,
 * or memory runs out.
 */
bool weir_bench_mix_encode_all(weir_bench_mix *m, uint64_t keys, uint64_t hits);

/** The encoded request @t (template index), key number @n, from the table. */
static inline const uint8_t *weir_bench_mix_encoded(const weir_bench_mix *m, size_t t, uint64_t n,
                                                    size_t *len)
{
    size_t r = m->first[t] + (m->t[t].has_mark ? (size_t)n : 0);
    *len = m->off[r + 1] - m->off[r];
    return m->table + m->off[r];
}

/* ------------------------------------------------------------ randomness */

/** splitmix64: a fast generator for picking requests (not for secrets). */
static inline uint64_t weir_bench_rand(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

/** Uniform in 0 .. @n - 1 (@n > 0), by multiply and shift. */
static inline uint64_t weir_bench_below(uint64_t *state, uint64_t n)
{
    __extension__ typedef unsigned __int128 u128;
    return (uint64_t)(((u128)weir_bench_rand(state) * n) >> 64);
}

#endif /* WEIR_TOOLS_BENCH_MIX_H */
