/*
 * chunked.h - the chunked body's framing, checked byte by byte beside
 * http-parser, which (built without its strict mode, as Debian ships it)
 * skips the two bytes after a chunk's data whatever they are, takes a
 * bare LF for a CRLF in chunk lines and trailers, and bounds trailers at
 * its own 80 KB. A proxy in front may read such framing otherwise
 * (request smuggling), so each is refused here (RFC 9112 7.1): chunk data
 * followed by anything but CRLF, a bare LF, and a trailer section longer
 * than the header section may be.
 */
#ifndef WEIR_HTTP1_CHUNKED_H
#define WEIR_HTTP1_CHUNKED_H

#include <stddef.h>
#include <stdint.h>

typedef struct weir__chunked {
    uint8_t state;
    uint64_t left;  /* data bytes of the current chunk still to come */
    size_t trailer; /* bytes of the trailer section so far */
} weir__chunked;

/* Start at the body's first byte; @lf_first when the LF that ends the
 * header section comes first (http-parser hands it over with the body). */
void weir__chunked_init(weir__chunked *c, int lf_first);

/* Scan @n more bytes of the body (as http-parser consumed them). Returns
 * NULL, or the reason the framing is refused (*status: 400, or 431 for a
 * trailer section over @max_trailer bytes). */
const char *weir__chunked_scan(weir__chunked *c, const char *s, size_t n, size_t max_trailer,
                               int *status);

#endif /* WEIR_HTTP1_CHUNKED_H */
