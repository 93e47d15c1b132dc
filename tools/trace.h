/*
 * trace.h - the CSV request trace of `weir sim --trace`: a codec that parses
 * a buffer into requests and does no I/O.
 *
 * A trace is text, one request per line: `time_us,key[,cost]`. Blank lines
 * and lines starting with '#' are ignored, and a header line `time_us,key`
 * or `time_us,key,cost` may come before the first request. Fields may be
 * padded with spaces or tabs; there is no quoting (a key cannot hold a
 * comma). A line ends with "\n" or "\r\n"; a UTF-8 byte order mark at the
 * start of the buffer is skipped.
 *
 *   time_us  a non-negative integer (leading zeros allowed), at most
 *            WEIR_TRACE_MAX_TIME_US, never less than the previous request's:
 *            a trace must be sorted by time, and an earlier time is an error;
 *   key      1 .. WEIR_TRACE_MAX_KEY_BYTES bytes, no control characters;
 *   cost     1 .. WEIR_TRACE_MAX_COST, default 1.
 *
 * Keys are interned: each distinct key gets an index 0, 1, ... in order of
 * first appearance, and a request refers to its key by index.
 *
 * Invariant of a weir_trace: events are sorted by time; every event's key is
 * < n_keys; n_events <= WEIR_TRACE_MAX_LINES; n_keys <= WEIR_TRACE_MAX_KEYS.
 */
#ifndef WEIR_TOOLS_TRACE_H
#define WEIR_TOOLS_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "weir/status.h"
#include "weir/store.h"

/* Caps. Each one is checked with a test at its edge. */
/** Longest line in bytes, not counting its "\n" or "\r\n". */
#define WEIR_TRACE_MAX_LINE_BYTES 8192u
/** Longest key, the memory store's cap. */
#define WEIR_TRACE_MAX_KEY_BYTES WEIR_MAX_KEY_BYTES
/** Largest cost: no sliding log or concurrency limit admits more at once. */
#define WEIR_TRACE_MAX_COST 65536u
/** Latest time, about 31,700 years of microseconds: far from overflow when
 *  a window or a delay is added to it. */
#define WEIR_TRACE_MAX_TIME_US ((int64_t)1000000000000000000)
/** Most lines in a trace, comments and blank lines included. */
#define WEIR_TRACE_MAX_LINES 1000000u
/** Most distinct keys in a trace. */
#define WEIR_TRACE_MAX_KEYS 100000u

/** Room for an error's reason, NUL included. */
#define WEIR_TRACE_REASON_BYTES 128u

/** One request. */
typedef struct weir_trace_event {
    int64_t time_us;
    uint64_t cost;
    uint32_t key;  /* index of the key, < n_keys */
    uint32_t line; /* 1-based source line; 0 for a generated trace */
} weir_trace_event;

/** A parsed (or generated) trace. Zero-filled (weir_trace_init) is empty. */
typedef struct weir_trace {
    weir_trace_event *events;
    size_t n_events;
    size_t cap_events;
    uint32_t n_keys;
    /* Parsed traces only: the keys' bytes back to back; key i is
     * key_bytes[key_off[i] .. key_off[i + 1]). */
    char *key_bytes;
    size_t key_bytes_len;
    size_t key_bytes_cap;
    size_t *key_off; /* n_keys + 1 entries once a key exists */
    size_t key_off_cap;
    /* Key index: open addressing, slot = key index + 1, 0 = empty. */
    uint32_t *slots;
    size_t n_slots; /* a power of two, or 0 */
} weir_trace;

/** Why a parse failed: the 1-based line and a reason without the line. */
typedef struct weir_trace_error {
    uint64_t line;
    char reason[WEIR_TRACE_REASON_BYTES];
} weir_trace_error;

/** Make @t an empty trace. */
void weir_trace_init(weir_trace *t);

/** Free what @t holds and make it empty again. NULL is a no-op. */
void weir_trace_free(weir_trace *t);

/**
 * weir_trace_parse() - parse a whole trace.
 *
 * @t:   an empty trace (weir_trace_init); filled on success. On failure it
 *       is left empty, with nothing to free.
 * @buf: @len bytes, borrowed; need not be NUL-terminated and may hold any
 *       bytes. A last line without a newline is a line.
 * @err: on failure, the line and the reason (may be NULL).
 *
 * Returns WEIR_OK; WEIR_EPARSE for a malformed line or a cap crossed;
 * WEIR_ENOMEM (err->line is the line being parsed); WEIR_EINVAL for NULL
 * @t, NULL @buf with @len > 0, or a @t that is not empty.
 */
weir_status weir_trace_parse(weir_trace *t, const char *buf, size_t len, weir_trace_error *err);

/**
 * weir_trace_push() - append a request by key index, for generated traces.
 * Grows n_keys to cover @key. The caller keeps the events sorted (or sorts
 * them with weir_trace_sort()). Returns WEIR_OK or WEIR_ENOMEM; WEIR_ERANGE
 * past WEIR_TRACE_MAX_LINES events or WEIR_TRACE_MAX_KEYS keys.
 */
weir_status weir_trace_push(weir_trace *t, int64_t time_us, uint32_t key, uint64_t cost);

/** Sort the events by time, then key (the order is total and stable for
 *  equal requests, so the result is deterministic). */
void weir_trace_sort(weir_trace *t);

/** Key @key's bytes and length, or NULL (and *len = 0) for a generated
 *  trace or an index out of range. Not NUL-terminated. */
const char *weir_trace_key(const weir_trace *t, uint32_t key, size_t *len);

#endif /* WEIR_TOOLS_TRACE_H */
