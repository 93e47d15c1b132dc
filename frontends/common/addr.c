/*
 * addr.c - client addresses (addr.h). Text to address and back goes
 * through inet_pton()/inet_ntop(), which parse and print exactly the
 * forms the RFCs define; this file adds the caps, the walk and the masks.
 */
#include "common/addr.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

/* Longest address text taken (a full IPv6 with an embedded IPv4). */
#define MAX_ADDR_TEXT 45u

bool weir_addr_parse(const char *s, size_t n, weir_addr *out)
{
    char text[MAX_ADDR_TEXT + 1];
    if (n == 0 || n > MAX_ADDR_TEXT || memchr(s, '\0', n))
        return false;
    memcpy(text, s, n);
    text[n] = '\0';
    weir_addr a;
    memset(&a, 0, sizeof(a));
    if (inet_pton(AF_INET, text, a.b) == 1) {
        a.v6 = false;
    } else if (inet_pton(AF_INET6, text, a.b) == 1) {
        a.v6 = true;
    } else {
        return false;
    }
    *out = a;
    return true;
}

/* @a's first @bits bits, the rest zero. */
static weir_addr masked(const weir_addr *a, unsigned bits)
{
    weir_addr m = *a;
    unsigned total = a->v6 ? 128u : 32u;
    if (bits > total)
        bits = total;
    for (unsigned i = bits; i < total; i++)
        m.b[i / 8] &= (uint8_t) ~(0x80u >> (i % 8));
    return m;
}

/* The @n digits at @s as a prefix length of at most @total bits. */
static bool prefix_bits(const char *s, size_t n, unsigned total, unsigned *out)
{
    unsigned bits = 0;
    if (n == 0 || n > 3)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        bits = bits * 10 + (unsigned)(s[i] - '0');
    }
    if (bits > total)
        return false;
    *out = bits;
    return true;
}

bool weir_nets_parse(const char *s, weir_nets *out, char *why, size_t why_cap)
{
    weir_nets nets = {.n = 0};
    for (const char *p = s; *p;) {
        while (*p == ' ' || *p == ',')
            p++;
        if (!*p)
            break;
        size_t len = strcspn(p, ", ");
        const char *slash = memchr(p, '/', len);
        size_t alen = slash ? (size_t)(slash - p) : len;
        weir_net net;
        if (!weir_addr_parse(p, alen, &net.a)) {
            snprintf(why, why_cap, "'%.*s' is not an address (e.g. 10.0.0.0/8, 2001:db8::/32)",
                     (int)(alen > 60 ? 60 : alen), p);
            return false;
        }
        unsigned total = net.a.v6 ? 128u : 32u;
        net.bits = total;
        if (slash && !prefix_bits(slash + 1, len - alen - 1, total, &net.bits)) {
            snprintf(why, why_cap, "'%.*s': a prefix is 0 .. %u", (int)(len > 60 ? 60 : len), p,
                     total);
            return false;
        }
        if (nets.n == WEIR_ADDR_MAX_NETS) {
            snprintf(why, why_cap, "more than %u networks", WEIR_ADDR_MAX_NETS);
            return false;
        }
        net.a = masked(&net.a, net.bits);
        nets.net[nets.n++] = net;
        p += len;
    }
    *out = nets;
    return true;
}

bool weir_nets_contain(const weir_nets *nets, const weir_addr *a)
{
    for (size_t i = 0; i < nets->n; i++) {
        const weir_net *n = &nets->net[i];
        if (n->a.v6 != a->v6)
            continue;
        weir_addr m = masked(a, n->bits);
        if (memcmp(m.b, n->a.b, a->v6 ? 16 : 4) == 0)
            return true;
    }
    return false;
}

/* The entry of @s ending at @end (exclusive), spaces trimmed; its start
 * in *@start. */
static size_t entry_before(const char *s, size_t end, size_t *start)
{
    size_t e = end;
    while (e > 0 && (s[e - 1] == ' ' || s[e - 1] == '\t'))
        e--;
    size_t b = e;
    while (b > 0 && s[b - 1] != ',')
        b--;
    size_t from = b;
    while (from < e && (s[from] == ' ' || s[from] == '\t'))
        from++;
    *start = b;
    return e - from;
}

weir_addr weir_addr_client(const weir_addr *peer, const char *xff, size_t xff_len,
                           const weir_nets *trusted)
{
    weir_addr client = *peer;
    if (!xff || !weir_nets_contain(trusted, peer))
        return client;
    size_t end = xff_len;
    for (unsigned hops = 0; hops < WEIR_ADDR_MAX_HOPS; hops++) {
        size_t start;
        size_t n = entry_before(xff, end, &start);
        size_t from = start;
        while (from < end && (xff[from] == ' ' || xff[from] == '\t'))
            from++;
        weir_addr a;
        if (!weir_addr_parse(xff + from, n, &a))
            return client; /* what the nearest trusted hop saw */
        client = a;
        if (!weir_nets_contain(trusted, &a) || start == 0)
            return client;
        end = start - 1; /* before the comma */
    }
    return client;
}

size_t weir_addr_key(const weir_addr *a, unsigned v4_bits, unsigned v6_bits, char *out)
{
    unsigned total = a->v6 ? 128u : 32u, bits = a->v6 ? v6_bits : v4_bits;
    if (bits > total)
        bits = total;
    weir_addr m = masked(a, bits);
    if (!inet_ntop(a->v6 ? AF_INET6 : AF_INET, m.b, out, WEIR_ADDR_TEXT_BYTES)) {
        out[0] = '\0';
        return 0;
    }
    size_t len = strlen(out);
    if (bits < total)
        len += (size_t)snprintf(out + len, WEIR_ADDR_TEXT_BYTES - len, "/%u", bits);
    return len;
}
