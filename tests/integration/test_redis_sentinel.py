"""
test_redis_sentinel.py - weir serve on a Redis master found through real
Redis Sentinel (redis_sentinel.py: a master, a replica and sentinels
started by the tests): exact decisions on the master the sentinels name,
a failover followed with the decisions in the gap answered by their
failure modes, and the start-up errors and outages an operator meets.
"""

import json
import time

from redis_sentinel import FakeSentinel, sentinel_factory  # noqa: F401  (a fixture)
from redis_server import free_port, redis_factory  # noqa: F401  (a fixture)
from test_redis import FAIL_RULES, answered_by_failure_mode, recovers, run_weir

# 5 a minute in a token bucket: no window turns over mid-test to admit 5 more
RULES = FAIL_RULES + """\
  - key: five
    rate_limit: {unit: minute, requests_per_unit: 5, algorithm: token_bucket, failure_mode: deny}
"""

# decisions of a live master answer within the timeout even on a sanitizer
# build; while there is none they fail at once, whatever the timeout
FLAGS = ("--redis-timeout", "100ms")


def from_redis(r):
    return r.status == 200 and "failure_mode" not in r.text()


def connected(w):
    """Every worker's session up on the master (each finds it on its own)."""
    w.wait_until(lambda: w.metric("weir_redis_connections") == w.threads, timeout=10,
                 what="every worker connected to the master")


def admitted(w, value, n=8):
    """How many of @n requests to the 5/minute limit were admitted; every
    answer must come from Redis (a 429 of its failure mode is marked)."""
    ok = 0
    for _ in range(n):
        r = w.check("api", {"five": value})
        assert r.status in (200, 429), r
        assert "failure_mode" not in r.text(), r.text()
        ok += r.status == 200
    return ok


def test_exact_through_the_master_sentinel_names(weir_factory, sentinel_factory):
    ws = sentinel_factory(sentinels=2)
    # a dead sentinel first in the list: the start-up check and the
    # sessions move on to the next
    dead = free_port()
    w = weir_factory(RULES, "--store", ws.url(extra_hosts=[dead]), *FLAGS)
    line = w.wait_for_log(r"event=store_checked")
    assert f"names master 'mymaster' at 127.0.0.1:{ws.master.port}" in line, line
    w.wait_for_log(rf"event=redis_sentinel_master master=mymaster addr=127.0.0.1:{ws.master.port}")
    connected(w)
    assert admitted(w, "exact") == 5
    assert ws.master.client().keys("weir:2:api:*")
    assert w.metric("weir_redis_sentinel_master", address=f"127.0.0.1:{ws.master.port}") == 1
    assert w.metric("weir_redis_sentinel_failovers_total") == 0
    assert w.metric("weir_redis_sentinel_not_master_total") == 0


def test_failover_is_followed(weir_factory, sentinel_factory):
    ws = sentinel_factory()
    w = weir_factory(RULES, "--store", ws.url(), *FLAGS)
    connected(w)
    assert admitted(w, "before") == 5
    old, new = ws.master, ws.replica

    killed = time.monotonic()
    old.kill()
    # the gap: every answer fast, by its failure mode, until the new master
    # decides
    worst, answers, back = 0.0, 0, None
    while time.monotonic() - killed < 30:
        t0 = time.monotonic()
        r_open = w.check("api", {"open": f"gap{answers}"})
        r_closed = w.check("api", {"closed": f"gap{answers}"})
        worst = max(worst, time.monotonic() - t0)
        answers += 1
        # the first answer from Redis ends the gap (the pair may straddle
        # the switch; the other worker may follow a moment later)
        if from_redis(r_open) or from_redis(r_closed):
            back = time.monotonic()
            break
        assert r_open.status == 200, r_open
        assert json.loads(r_open.text())["statuses"][0].get("failure_mode") is True, r_open.text()
        assert r_closed.status == 429, r_closed
        time.sleep(0.01)
    assert back is not None, "weir did not follow the failover within 30 s; log:\n" + w.log_text()
    gap = back - killed
    print(f"\nfailover gap: decisions followed their failure_mode for {gap:.2f} s "
          f"({answers} pairs of requests, the slowest pair {worst * 1000:.0f} ms)")
    assert worst < 0.5, worst
    assert gap < 15, gap

    assert ws.sentinels[0].master_addr() == ("127.0.0.1", str(new.port))
    w.wait_for_log(rf"event=redis_sentinel_switch master=mymaster from=127.0.0.1:{old.port} "
                   rf"to=127.0.0.1:{new.port}")
    # counting again, on the new master
    connected(w)
    assert admitted(w, "after") == 5
    keys = [k.decode() for k in new.client().keys("weir:2:api:*")]
    assert any("after" in k for k in keys), keys
    recovers(w)
    assert w.metric("weir_redis_sentinel_master", address=f"127.0.0.1:{new.port}") == 1
    assert w.metric("weir_redis_sentinel_failovers_total") >= 1
    assert w.get("/healthz").text().startswith('{"status":"ok"')


def test_unknown_master_name_is_a_clear_error(sentinel_factory):
    ws = sentinel_factory(name="mymaster")
    r = run_weir("--store", f"redis+sentinel://nosuchmaster@127.0.0.1:{ws.sentinels[0].port}")
    assert r.returncode != 0
    assert "no sentinel knows a master named 'nosuchmaster'" in r.stderr, r.stderr


def test_no_sentinel_at_start_then_one(weir_factory, sentinel_factory):
    ws = sentinel_factory(sentinels=0)
    port = free_port()
    w = weir_factory(RULES, "--store", f"redis+sentinel://mymaster@127.0.0.1:{port}", *FLAGS,
                     "--redis-breaker-cooldown", "300ms")
    assert w.count_log(r"event=store_checked.*cannot reach sentinel 127\.0\.0\.1") == 1
    answered_by_failure_mode(w, 0.5)
    sentinel_factory.add_sentinel(ws, port=port)
    recovers(w)
    connected(w)
    assert admitted(w, "late") == 5
    assert w.metric("weir_redis_sentinel_errors_total") >= 1


def test_passwords_of_the_master_and_the_sentinels(weir_factory, sentinel_factory):
    ws = sentinel_factory(password="master-pw", sentinel_password="sentinel-pw")
    url = ws.url(credentials=":master-pw@")
    w = weir_factory(RULES, "--store", url, *FLAGS,
                     env={"WEIR_REDIS_SENTINEL_PASSWORD": "sentinel-pw"})
    connected(w)
    assert admitted(w, "pw") == 5
    text = w.log_text()
    assert "master-pw" not in text and "sentinel-pw" not in text
    assert ":***@mymaster@127.0.0.1:" in text
    # without the sentinels' password: refused, a configuration error
    r = run_weir("--store", url)
    assert r.returncode != 0
    assert "refused: the password" not in r.stderr  # none was sent
    assert "NOAUTH" in r.stderr, r.stderr
    assert "master-pw" not in r.stderr


def test_a_replica_named_as_master_is_not_written_to(weir_factory, redis_factory):
    # a sentinel whose view is behind names a replica: ROLE says so, the
    # connection is not made, and the sentinel is asked again until it
    # names the master (the poll: no +switch-master comes)
    master = redis_factory()
    replica = redis_factory("--replicaof", "127.0.0.1", str(master.port))
    fake = FakeSentinel("mymaster")
    fake.addr = ("127.0.0.1", replica.port)
    try:
        w = weir_factory(RULES, "--store", f"redis+sentinel://mymaster@127.0.0.1:{fake.port}",
                         *FLAGS, "--redis-breaker-cooldown", "300ms")
        w.wait_for_log(rf"event=redis_sentinel_not_master master=mymaster "
                       rf"addr=127.0.0.1:{replica.port} role=slave")
        answered_by_failure_mode(w, 0.5)
        assert w.metric("weir_redis_sentinel_not_master_total") >= 1
        assert w.metric("weir_redis_connections") == 0
        asked = fake.asked
        fake.addr = ("127.0.0.1", master.port)
        recovers(w)
        connected(w)
        assert fake.asked > asked
        assert admitted(w, "role") == 5
        assert master.client().keys("weir:2:api:*")
    finally:
        fake.close()
