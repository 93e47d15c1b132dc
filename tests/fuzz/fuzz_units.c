/*
 * fuzz_units.c - fuzzes weir_duration_parse() and weir_size_parse(): any
 * input parses or is refused with WEIR_EPARSE or WEIR_ERANGE, never
 * anything else; an accepted duration is within 0 .. 100 years, and
 * writing it back in microseconds ("<n>us") parses to the same value; an
 * accepted size written back as bytes parses to the same value.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weir/weir.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
    if (!ok)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 256)
        return 0;
    char text[257];
    memcpy(text, data, size);
    text[size] = '\0';

    int64_t us = -1;
    weir_status st = weir_duration_parse(text, &us);
    check(st == WEIR_OK || st == WEIR_EPARSE || st == WEIR_ERANGE);
    if (st == WEIR_OK) {
        check(us >= 0 && us <= WEIR_MAX_WINDOW_US);
        char again[32];
        snprintf(again, sizeof(again), "%" PRId64 "us", us);
        int64_t us2 = -1;
        check(weir_duration_parse(again, &us2) == WEIR_OK && us2 == us);
    } else {
        check(us == -1);
    }

    uint64_t bytes = 7;
    st = weir_size_parse(text, &bytes);
    check(st == WEIR_OK || st == WEIR_EPARSE || st == WEIR_ERANGE);
    if (st == WEIR_OK) {
        char again[32];
        snprintf(again, sizeof(again), "%" PRIu64, bytes);
        uint64_t b2 = 0;
        check(weir_size_parse(again, &b2) == WEIR_OK && b2 == bytes);
    } else {
        check(bytes == 7);
    }
    return 0;
}
