/*
 * test_addr.c - client addresses: parsing, trusted networks, the walk of
 * X-Forwarded-For from the right, and the masked keys.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/addr.h"

static weir_addr A(const char *s)
{
    weir_addr a;
    assert_true(weir_addr_parse(s, strlen(s), &a));
    return a;
}

static weir_nets nets(const char *s)
{
    weir_nets n;
    char why[128];
    if (!weir_nets_parse(s, &n, why, sizeof(why)))
        fail_msg("%s: %s", s, why);
    return n;
}

static void key_is(const weir_addr *a, unsigned v4, unsigned v6, const char *want)
{
    char out[WEIR_ADDR_TEXT_BYTES];
    size_t n = weir_addr_key(a, v4, v6, out);
    assert_int_equal(n, strlen(want));
    assert_string_equal(out, want);
}

static void parses_addresses(void **unused)
{
    (void)unused;
    weir_addr a;
    static const char *const ok[] = {"192.0.2.7",   "0.0.0.0",          "::1",
                                     "2001:db8::5", "::ffff:192.0.2.1", "2001:db8:0:0:0:0:2:1"};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
        assert_true(weir_addr_parse(ok[i], strlen(ok[i]), &a));
    static const char *const bad[] = {"",          "192.0.2",      "192.0.2.256", "1.2.3.4:80",
                                      "[::1]",     "fe80::1%eth0", " 1.2.3.4",    "unknown",
                                      "1.2.3.4.5", "2001:db8:::1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (weir_addr_parse(bad[i], strlen(bad[i]), &a))
            fail_msg("'%s' parsed", bad[i]);
    /* a NUL inside, and past the longest text */
    assert_false(weir_addr_parse("1.2.3.4\0", 8, &a));
    char lng[64];
    memset(lng, '1', sizeof(lng));
    assert_false(weir_addr_parse(lng, sizeof(lng), &a));
}

static void trusted_networks(void **unused)
{
    (void)unused;
    weir_nets n = nets("127.0.0.0/8, 10.0.0.0/8,::1,2001:db8::/32");
    assert_int_equal(n.n, 4);
    weir_addr in[] = {A("127.0.0.1"), A("10.255.0.1"), A("::1"), A("2001:db8:ffff::1")};
    for (size_t i = 0; i < 4; i++)
        assert_true(weir_nets_contain(&n, &in[i]));
    weir_addr out[] = {A("11.0.0.1"), A("::2"), A("2001:db9::1"), A("::ffff:127.0.0.1")};
    for (size_t i = 0; i < 4; i++)
        assert_false(weir_nets_contain(&n, &out[i]));
    assert_int_equal(nets("").n, 0);
    weir_addr any = A("198.51.100.1");
    weir_nets all = nets("0.0.0.0/0");
    assert_true(weir_nets_contain(&all, &any));
    weir_nets bad;
    char why[128];
    static const char *const refused[] = {"10.0.0.0/33", "10.0.0.0/", "10.0.0.0/x",
                                          "::/129",      "nothing",   "10.0.0.0/0008"};
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
        if (weir_nets_parse(refused[i], &bad, why, sizeof(why)))
            fail_msg("'%s' parsed", refused[i]);
    assert_false(weir_nets_parse("nothing", &bad, why, sizeof(why)));
    assert_non_null(strstr(why, "'nothing' is not an address"));
}

static void client_from_the_right(void **unused)
{
    (void)unused;
    weir_nets t = nets("127.0.0.0/8,10.0.0.0/8");
    weir_addr peer = A("127.0.0.1"), stranger = A("198.51.100.9");
    static const struct {
        const char *xff, *client;
    } rows[] = {
        {"203.0.113.9", "203.0.113.9"},
        {"203.0.113.9, 10.0.0.1", "203.0.113.9"},
        /* what the client wrote itself, on the left, is never reached */
        {"1.1.1.1, 203.0.113.9, 10.0.0.2", "203.0.113.9"},
        {"1.1.1.1,203.0.113.9,10.0.0.2", "203.0.113.9"},
        /* all trusted: the leftmost */
        {"10.0.0.3, 10.0.0.2", "10.0.0.3"},
        /* not an address: what the hop right of it saw */
        {"garbage, 10.0.0.5", "10.0.0.5"},
        {"203.0.113.1, unknown", "127.0.0.1"},
        {"", "127.0.0.1"},
        {" , ", "127.0.0.1"},
        {"2001:db8::7, 10.0.0.1", "2001:db8::7"},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        weir_addr c = weir_addr_client(&peer, rows[i].xff, strlen(rows[i].xff), &t);
        weir_addr want = A(rows[i].client);
        if (c.v6 != want.v6 || memcmp(c.b, want.b, 16) != 0)
            fail_msg("'%s' gave the wrong client", rows[i].xff);
    }
    /* a peer that is not trusted: its header means nothing */
    weir_addr c = weir_addr_client(&stranger, "203.0.113.9", 11, &t);
    assert_memory_equal(c.b, stranger.b, 4);
    /* no header: the peer */
    c = weir_addr_client(&peer, NULL, 0, &t);
    assert_memory_equal(c.b, peer.b, 4);
    /* a long chain of trusted hops stops after WEIR_ADDR_MAX_HOPS */
    char chain[40 * 12] = "";
    for (int i = 0; i < 40; i++)
        strcat(chain, i ? ", 10.0.0.1" : "203.0.113.9");
    c = weir_addr_client(&peer, chain, strlen(chain), &t);
    weir_addr ten = A("10.0.0.1");
    assert_memory_equal(c.b, ten.b, 4);
}

static void masked_keys(void **unused)
{
    (void)unused;
    weir_addr v4 = A("192.0.2.7"), v6 = A("2001:db8:1:2:3:4:5:6");
    key_is(&v4, 32, 64, "192.0.2.7");
    key_is(&v4, 24, 64, "192.0.2.0/24");
    key_is(&v4, 0, 64, "0.0.0.0/0");
    key_is(&v6, 32, 64, "2001:db8:1:2::/64");
    key_is(&v6, 32, 128, "2001:db8:1:2:3:4:5:6");
    key_is(&v6, 32, 56, "2001:db8:1::/56");
    key_is(&v6, 32, 200, "2001:db8:1:2:3:4:5:6");
    weir_addr other = A("2001:db8:1:2:ffff::1");
    key_is(&other, 32, 64, "2001:db8:1:2::/64"); /* one /64, one key */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parses_addresses),
        cmocka_unit_test(trusted_networks),
        cmocka_unit_test(client_from_the_right),
        cmocka_unit_test(masked_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
