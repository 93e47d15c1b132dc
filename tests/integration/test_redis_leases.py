"""
test_redis_leases.py - concurrency leases shared through Redis: several
instances of weir on one redis-server (loopback, a port chosen at run
time) hold exactly the limit between them, a token taken on one is given
back on another, over any protocol, and a lease not given back times
out in Redis too.
"""
import threading
import time

import redis

from redis_server import redis_factory  # noqa: F401  (a fixture)
from test_leases import RULES, acquire, release

PATIENT = ("--redis-timeout", "1s")
RESP_ON = ("--resp", "127.0.0.1:0")


def test_instances_share_leases(weir_factory, redis_factory):
    rd = redis_factory()
    weirs = [weir_factory(RULES, "--store", rd.url, *PATIENT, *RESP_ON) for _ in range(3)]
    results = []
    lock = threading.Lock()

    def client(w):
        for _ in range(6):
            got = acquire(w, conn="shared")
            with lock:
                results.append(got)

    threads = [threading.Thread(target=client, args=(w,)) for w in weirs for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    tokens = [t for s, t in results if s == 200]
    assert len(results) == 54 and len(tokens) == 5, [s for s, _ in results]
    # given back round the instances, whichever made them, twice each
    counts = [release(weirs[i % 3], t)["released"] for i, t in enumerate(tokens * 2)]
    assert counts == [1] * 5 + [0] * 5, counts
    # and over RESP: WEIR.ACQUIRE on one, WEIR.RELEASE on another
    r0, r1 = (redis.Redis(port=w.resp_port) for w in weirs[:2])
    got = r0.execute_command("WEIR.ACQUIRE", "api", "conn", "shared")
    assert got[0] is not None
    assert r1.execute_command("WEIR.RELEASE", got[0]) == 1
    assert [acquire(weirs[2], conn="shared")[0] for _ in range(6)] == [200] * 5 + [429]


def test_leases_time_out_in_redis(weir_factory, redis_factory):
    rd = redis_factory()
    a, b = (weir_factory(RULES, "--store", rd.url, *PATIENT) for _ in range(2))
    tokens = [acquire(a, quick="q")[1] for _ in range(2)]
    assert all(tokens) and acquire(b, quick="q")[0] == 429
    time.sleep(1.1)
    assert acquire(b, quick="q")[0] == 200
    assert [release(b, t)["released"] for t in tokens] == [0, 0]


def test_adaptive_limits_on_redis(weir_factory, redis_factory):
    """The counter is the fleet's, each instance's controller its own: an
    instance admits while the fleet's leases are under its controller's
    limit, and a lease given back teaches the instance it comes back to."""
    from test_adaptive_limits import acquire as adaptive_acquire, limit_metric, rules
    rd = redis_factory()
    a, b = (weir_factory(rules(), "--store", rd.url, *PATIENT) for _ in range(2))
    held = [adaptive_acquire(a if i % 2 else b) for i in range(10)]
    assert [s for s, _, _ in held] == [200] * 10
    assert adaptive_acquire(a)[0] == 429 and adaptive_acquire(b)[0] == 429
    # five dropped, given back to b: b's limit halves, a's stays
    for _, token, _ in held[:5]:
        assert b.post("/v1/release?dropped=true", {"lease": token}).json()["released"] == 1
    assert (limit_metric(a), limit_metric(b)) == (10, 5)
    # five in flight in the fleet: a admits up to 10, b none
    assert adaptive_acquire(b)[0] == 429
    assert [adaptive_acquire(a)[0] for _ in range(6)] == [200] * 5 + [429]
