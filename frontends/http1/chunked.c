/*
 * chunked.c - the chunked body's framing (chunked.h). Sizes and their
 * bounds stay http-parser's to check; this follows the lines.
 */
#include "chunked.h"

enum {
    C_HEAD_LF, /* the header section's last LF */
    C_SIZE,    /* hex digits of a chunk size */
    C_EXT,     /* after the size: whitespace and extensions, up to CR */
    C_SIZE_LF, /* the LF of the size line */
    C_DATA,
    C_DATA_CR, /* the CRLF after the data */
    C_DATA_LF,
    C_TRAILER_START, /* a trailer line, or the CR of the empty line */
    C_TRAILER,
    C_TRAILER_LF,
    C_END_LF,
    C_DONE,
};

static const char msg_data_crlf[] = "chunk data not followed by CRLF";
static const char msg_bare_lf[] = "a chunk line or trailer ends in LF without CR";
static const char msg_size[] = "malformed chunk size";
static const char msg_trailer[] = "trailer section too large";

void weir__chunked_init(weir__chunked *c, int lf_first)
{
    c->state = lf_first ? C_HEAD_LF : C_SIZE;
    c->left = 0;
    c->trailer = 0;
}

static int hex(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* A byte of a trailer line: false for a bare LF, or past the cap (431). */
static int trailer_byte(weir__chunked *c, char ch, size_t max_trailer, int *status)
{
    if (ch == '\r') {
        c->state = C_TRAILER_LF;
        return 1;
    }
    if (ch == '\n')
        return 0;
    if (++c->trailer > max_trailer) {
        *status = 431;
        return 0;
    }
    return 1;
}

const char *weir__chunked_scan(weir__chunked *c, const char *s, size_t n, size_t max_trailer,
                               int *status)
{
    *status = 400;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        switch (c->state) {
        case C_HEAD_LF:
            if (ch != '\n')
                return msg_bare_lf;
            c->state = C_SIZE;
            c->left = 0;
            break;
        case C_SIZE: {
            int d = hex(ch);
            if (d >= 0) {
                /* http-parser refuses a size past 64 bits: stop counting */
                if (c->left < ((uint64_t)1 << 59))
                    c->left = c->left * 16 + (uint64_t)d;
                break;
            }
            if (ch == '\r')
                c->state = C_SIZE_LF;
            else if (ch == ';' || ch == ' ' || ch == '\t')
                c->state = C_EXT;
            else
                return ch == '\n' ? msg_bare_lf : msg_size;
            break;
        }
        case C_EXT:
            if (ch == '\r')
                c->state = C_SIZE_LF;
            else if (ch == '\n')
                return msg_bare_lf;
            break;
        case C_SIZE_LF:
            if (ch != '\n')
                return msg_bare_lf;
            c->state = c->left ? C_DATA : C_TRAILER_START;
            break;
        case C_DATA: {
            /* the data itself: skipped whole */
            size_t take = n - i;
            if (take > c->left)
                take = (size_t)c->left;
            c->left -= take;
            i += take - 1;
            if (c->left == 0)
                c->state = C_DATA_CR;
            break;
        }
        case C_DATA_CR:
            if (ch != '\r')
                return msg_data_crlf;
            c->state = C_DATA_LF;
            break;
        case C_DATA_LF:
            if (ch != '\n')
                return msg_data_crlf;
            c->state = C_SIZE;
            c->left = 0;
            break;
        case C_TRAILER_START:
            if (ch == '\r') {
                c->state = C_END_LF;
                break;
            }
            c->state = C_TRAILER;
            if (!trailer_byte(c, ch, max_trailer, status))
                return *status == 431 ? msg_trailer : msg_bare_lf;
            break;
        case C_TRAILER:
            if (!trailer_byte(c, ch, max_trailer, status))
                return *status == 431 ? msg_trailer : msg_bare_lf;
            break;
        case C_TRAILER_LF:
            if (ch != '\n')
                return msg_bare_lf;
            c->state = C_TRAILER_START;
            break;
        case C_END_LF:
            if (ch != '\n')
                return msg_bare_lf;
            c->state = C_DONE;
            break;
        default:
            break; /* C_DONE: the next request's bytes are not ours */
        }
    }
    return NULL;
}
