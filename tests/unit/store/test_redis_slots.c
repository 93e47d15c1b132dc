/*
 * test_redis_slots.c - what the cluster store routes by, without a
 * cluster: hash slots (against values Redis's CLUSTER KEYSLOT gives), the
 * slot map read from a CLUSTER SLOTS reply and redirections.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>
#include <hiredis/hiredis.h>

#include "store/redis/cluster/slots.h"
#include "weir/weir.h"

static void key_slots_as_redis_computes_them(void **unused)
{
    (void)unused;
    /* CLUSTER KEYSLOT on Redis 7.0 */
    assert_int_equal(weir__key_slot("a", 1), 15495);
    assert_int_equal(weir__key_slot("b", 1), 3300);
    assert_int_equal(weir__key_slot("h", 1), 11694);
    /* the XMODEM check value, 0x31c3, mod 16384 */
    assert_int_equal(weir__key_slot("123456789", 9), 0x31c3 & 16383);
    /* a hash tag: only what is between the first braces */
    assert_int_equal(weir__key_slot("{b}x", 4), 3300);
    assert_int_equal(weir__key_slot("x{b}y{a}", 8), 3300);
    /* an empty tag, or none closed: the whole key */
    assert_int_equal(weir__key_slot("{}b", 3), weir__key_slot("{}b", 3));
    assert_int_not_equal(weir__key_slot("{}b", 3), 3300);
    assert_int_not_equal(weir__key_slot("{b", 2), 3300);
    assert_int_equal(weir__key_slot("{}{b}", 5), weir__key_slot("{}{b}", 5));
}

static redisReply *reply_of(const char *resp)
{
    redisReader *r = redisReaderCreate();
    assert_non_null(r);
    assert_int_equal(redisReaderFeed(r, resp, strlen(resp)), REDIS_OK);
    void *out = NULL;
    assert_int_equal(redisReaderGetReply(r, &out), REDIS_OK);
    assert_non_null(out);
    redisReaderFree(r);
    return out;
}

static weir__node_addr nodes[WEIR__MAX_NODES];

static void slot_map_from_cluster_slots(void **unused)
{
    (void)unused;
    weir__slot_map m = {.nodes = nodes};
    char err[128];
    /* two masters, one with a replica; the second's host "" is the node
     * that answered */
    redisReply *r = reply_of("*2\r\n"
                             "*4\r\n:0\r\n:8191\r\n*3\r\n$9\r\n127.0.0.1\r\n:7001\r\n$2\r\nid\r\n"
                             "*3\r\n$9\r\n127.0.0.1\r\n:7004\r\n$2\r\nr1\r\n"
                             "*3\r\n:8192\r\n:16383\r\n*3\r\n$0\r\n\r\n:7002\r\n$2\r\ni2\r\n");
    assert_int_equal(weir__slot_map_parse(r, "10.0.0.9", &m, err, sizeof(err)), 16384);
    assert_int_equal(m.n_nodes, 2);
    assert_string_equal(m.nodes[m.node_of[0]].host, "127.0.0.1");
    assert_int_equal(m.nodes[m.node_of[8191]].port, 7001);
    assert_string_equal(m.nodes[m.node_of[8192]].host, "10.0.0.9");
    assert_int_equal(m.nodes[m.node_of[16383]].port, 7002);
    freeReplyObject(r);

    /* slots left out are held by no node */
    r = reply_of("*1\r\n*3\r\n:100\r\n:200\r\n*2\r\n$1\r\nh\r\n:1\r\n");
    assert_int_equal(weir__slot_map_parse(r, "x", &m, err, sizeof(err)), 101);
    assert_int_equal(m.node_of[99], WEIR__NO_NODE);
    assert_int_equal(m.node_of[100], 0);
    assert_int_equal(m.node_of[201], WEIR__NO_NODE);
    freeReplyObject(r);

    /* what is not a map: refused with a reason */
    const char *bad[] = {
        "-ERR This instance has cluster support disabled\r\n",
        ":1\r\n",
        "*1\r\n:1\r\n",
        "*1\r\n*3\r\n:5\r\n:4\r\n*2\r\n$1\r\nh\r\n:1\r\n",     /* end before start */
        "*1\r\n*3\r\n:0\r\n:16384\r\n*2\r\n$1\r\nh\r\n:1\r\n", /* past the last slot */
        "*1\r\n*3\r\n:0\r\n:1\r\n*2\r\n$1\r\nh\r\n:0\r\n",     /* port 0 */
        "*1\r\n*3\r\n:0\r\n:1\r\n*1\r\n$1\r\nh\r\n",           /* no port */
        "*1\r\n*2\r\n:0\r\n:1\r\n",                            /* no master */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        r = reply_of(bad[i]);
        err[0] = '\0';
        assert_int_equal(weir__slot_map_parse(r, "x", &m, err, sizeof(err)), -1);
        assert_non_null(strstr(err, "not a slot map"));
        freeReplyObject(r);
    }
}

static void redirections(void **unused)
{
    (void)unused;
    weir__redirect d;
    const char moved[] = "MOVED 3999 127.0.0.1:6381";
    assert_true(weir__redirect_parse(moved, strlen(moved), &d));
    assert_false(d.ask);
    assert_int_equal(d.slot, 3999);
    assert_string_equal(d.to.host, "127.0.0.1");
    assert_int_equal(d.to.port, 6381);
    const char ask[] = "ASK 16383 ::1:7000";
    assert_true(weir__redirect_parse(ask, strlen(ask), &d));
    assert_true(d.ask);
    assert_string_equal(d.to.host, "::1");
    assert_int_equal(d.to.port, 7000);
    const char *no[] = {"MOVED",        "MOVED 16384 h:1", "MOVED x h:1",    "MOVED 1 h",
                        "MOVED 1 h:0",  "MOVED 1 :1",      "ASK 1 h:123456", "ERR no",
                        "MOVED 1 h:1x", "MOVED 1h:1"};
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
        assert_false(weir__redirect_parse(no[i], strlen(no[i]), &d));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(key_slots_as_redis_computes_them),
        cmocka_unit_test(slot_map_from_cluster_slots),
        cmocka_unit_test(redirections),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
