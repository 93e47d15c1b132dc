/*
 * fuzz_addr.c - fuzzes the client address code (frontends/common/addr.c):
 * the first line of the input as a trusted-network list, the rest as an
 * X-Forwarded-For field. Whatever it is: a refused list says why; the
 * client found is the peer or an address the field holds (its text
 * parses back to it); a key is NUL-terminated, within its buffer, and
 * parses back as an address (its prefix cut off).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/addr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok)
{
    if (!ok)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    const char *s = (const char *)data;
    const char *nl = memchr(s, '\n', size);
    size_t first = nl ? (size_t)(nl - s) : size;
    char list[512];
    if (first >= sizeof(list))
        return 0;
    memcpy(list, s, first);
    list[first] = '\0';
    weir_nets nets;
    char why[128] = "";
    if (!weir_nets_parse(list, &nets, why, sizeof(why))) {
        check(why[0] != '\0' && memchr(why, '\0', sizeof(why)) != NULL);
        nets.n = 1; /* go on with everything trusted */
        memset(&nets.net[0], 0, sizeof(nets.net[0]));
    }
    check(nets.n <= WEIR_ADDR_MAX_NETS);
    const char *xff = nl ? nl + 1 : NULL;
    size_t xff_len = nl ? size - first - 1 : 0;
    weir_addr peer = {.v6 = false, .b = {127, 0, 0, 1}};
    weir_addr c = weir_addr_client(&peer, xff, xff_len, &nets);
    for (unsigned v4 = 0; v4 <= 32; v4 += 8) {
        char key[WEIR_ADDR_TEXT_BYTES];
        size_t n = weir_addr_key(&c, v4, v4 * 4, key);
        check(n > 0 && n < sizeof(key) && key[n] == '\0');
        const char *slash = memchr(key, '/', n);
        weir_addr back;
        check(weir_addr_parse(key, slash ? (size_t)(slash - key) : n, &back));
        check(back.v6 == c.v6);
    }
    return 0;
}
