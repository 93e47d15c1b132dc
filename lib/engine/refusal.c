/*
 * refusal.c - the words of weir_engine_refusal()'s reasons, one table for
 * every protocol.
 */
#include <stdio.h>

#include "weir/engine.h"

static const char *const texts[] = {
#define WEIR_REFUSAL_TEXT(name, num, text) [num] = text,
    WEIR_REFUSAL_MAP(WEIR_REFUSAL_TEXT)
#undef WEIR_REFUSAL_TEXT
};

size_t weir_refusal_text(weir_refusal r, char *buf, size_t cap)
{
    unsigned code = (unsigned)r.code;
    const char *text =
        code < sizeof(texts) / sizeof(texts[0]) && texts[code] ? texts[code] : "refused";
    int n = r.descriptor >= 0 ? snprintf(buf, cap, "descriptors[%d]%s", (int)r.descriptor, text)
                              : snprintf(buf, cap, "%s", text);
    return n < 0 ? 0 : (size_t)n;
}
