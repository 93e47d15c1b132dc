/*
 * addr.h - client addresses for rate limit keys: which address a request
 * comes from when it passed through proxies (X-Forwarded-For read right
 * to left through a list of trusted proxies, as nginx's realip module
 * does), and that address masked to a prefix (one IPv6 client holds a
 * whole /64: counting its addresses apart would give it billions of
 * quotas). No I/O; every input has a cap.
 */
#ifndef WEIR_FRONTENDS_COMMON_ADDR_H
#define WEIR_FRONTENDS_COMMON_ADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/** Most networks in a trusted list. */
#define WEIR_ADDR_MAX_NETS 64u
/** Most entries of one X-Forwarded-For read (the rest, leftmost, are
 *  never reached: a walk that gets that far takes the last one read). */
#define WEIR_ADDR_MAX_HOPS 32u
/** Room for an address as text, with a "/128" prefix. */
#define WEIR_ADDR_TEXT_BYTES 48u

/** An IPv4 or IPv6 address; IPv4 kept as such (not v4-mapped). */
typedef struct weir_addr {
    bool v6;
    uint8_t b[16]; /* v4: the first 4 bytes */
} weir_addr;

/** A network: an address and a prefix length. */
typedef struct weir_net {
    weir_addr a;
    unsigned bits;
} weir_net;

typedef struct weir_nets {
    weir_net net[WEIR_ADDR_MAX_NETS];
    size_t n;
} weir_nets;

/** @s (@n bytes) as an address: IPv4 dotted quad or IPv6 text (no zone,
 *  no brackets, no port). False when it is not one. */
bool weir_addr_parse(const char *s, size_t n, weir_addr *out);

/** "CIDR,CIDR,..." (a bare address is its own /32 or /128; "" is none)
 *  into @out; false with a reason in @why (@why_cap bytes) otherwise. */
bool weir_nets_parse(const char *s, weir_nets *out, char *why, size_t why_cap);

bool weir_nets_contain(const weir_nets *nets, const weir_addr *a);

/**
 * weir_addr_client() - the address a request comes from: @peer (the
 * connection's) unless it is a trusted proxy, in which case the entries
 * of @xff (@xff_len bytes: one X-Forwarded-For field, "a, b, c") are
 * read from the right, each trusted one skipped, and the first that is
 * not trusted is the client. An entry that is not an address ends the
 * walk: the client is then the entry read last before it (what the
 * trusted hop nearest to it saw). With no @xff (NULL), or all of it
 * trusted, the leftmost address read is the client.
 */
weir_addr weir_addr_client(const weir_addr *peer, const char *xff, size_t xff_len,
                           const weir_nets *trusted);

/** @a masked to its first @v4_bits or @v6_bits bits, as text into @out
 *  (WEIR_ADDR_TEXT_BYTES): the address alone at /32 or /128, else the
 *  network with its prefix ("2001:db8:1:2::/64", "192.0.2.0/24"). Returns
 *  the length. */
size_t weir_addr_key(const weir_addr *a, unsigned v4_bits, unsigned v6_bits, char *out);

#endif /* WEIR_FRONTENDS_COMMON_ADDR_H */
