"""
test_redis_sync.py - `sync: local` (the hybrid mode) on a real
redis-server: instances decide from capacity they reserved ahead in
Redis, most decisions without a round trip; what they admit together
stays within the limit (the overshoot measured against interval x
instances x rate); while Redis is away they decide at their share and
charge it to Redis when it is back.
"""

import struct
import threading
import time

from redis_server import redis_factory  # noqa: F401  (a fixture)

PATIENT = ("--redis-timeout", "1s")


def away_from_hour_boundary():
    """Hour windows must not turn over mid-test."""
    left = 3600 - time.time() % 3600
    if left < 30:
        time.sleep(left + 1)


def hammer(weirs, domain, descriptor, seconds, threads_per_weir=2):
    """Requests as fast as each client can for @seconds, spread over the
    instances: (admitted, asked, failure-mode answers)."""
    admitted, asked, failed = [0], [0], [0]
    lock = threading.Lock()
    errors = []
    stop = time.monotonic() + seconds

    def client(w):
        try:
            a = n = f = 0
            while time.monotonic() < stop:
                r = w.check(domain, descriptor)
                assert r.status in (200, 429), r
                n += 1
                a += r.status == 200
                f += "failure_mode" in r.text()
            with lock:
                admitted[0] += a
                asked[0] += n
                failed[0] += f
        except Exception as e:  # reported by the main thread
            errors.append(repr(e))

    ts = [threading.Thread(target=client, args=(w,)) for w in weirs for _ in range(threads_per_weir)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors
    return admitted[0], asked[0], failed[0]


RULES = """\
domain: hy
descriptors:
  - key: window
    rate_limit: {unit: hour, requests_per_unit: 300, sync: local, sync_interval: 100ms}
  - key: bucket
    rate_limit: {unit: second, requests_per_unit: 100, algorithm: token_bucket, burst: 100,
                 sync: local, sync_interval: 100ms}
"""


def test_three_instances_stay_within_the_limit(weir_factory, redis_factory):
    """A fixed window of 300 an hour asked far more often through three
    instances: at most 300 admitted in the window (a reservation is made
    in Redis before it is spent), nearly all of them, and most admissions
    made without a call."""
    away_from_hour_boundary()
    rd = redis_factory()
    weirs = [weir_factory(RULES, "--store", rd.url, *PATIENT) for _ in range(3)]
    admitted, asked, failed = hammer(weirs, "hy", {"window": "shared"}, 3.0)
    assert failed == 0
    assert asked > 600, asked  # demand well past the limit
    # interval x instances x rate = 0.1 s x 3 x 300/h: far below one request
    assert admitted <= 300, admitted
    assert admitted >= 290, admitted
    local = sum(w.metric("weir_redis_sync_local_total") for w in weirs)
    reserved = sum(w.metric("weir_redis_sync_reserved_total") for w in weirs)
    print(f"\nfixed window: asked {asked}, admitted {admitted}, "
          f"from reservations {local}, reserved {reserved}")
    assert local > 0 and reserved > 0
    # Redis was there all along: nothing was decided at the share
    assert sum(w.metric("weir_redis_sync_outage_total") for w in weirs) == 0
    # Redis counted what was admitted: the window's state holds it
    (key,) = rd.client().keys("weir:2:hy:*")
    algo, _, count = struct.unpack("<Bdd", rd.client().get(key))
    assert algo == 5
    assert admitted <= count <= 300


def test_token_bucket_overshoot_against_the_formula(weir_factory, redis_factory):
    """A token bucket of 100 a second (burst 100) asked far more often
    through three instances for 3 s: what they admit together stays within
    burst + rate x time, plus at most half of interval x instances x rate
    (15); most admissions are made from reservations."""
    rd = redis_factory()
    weirs = [weir_factory(RULES, "--store", rd.url, *PATIENT) for _ in range(3)]
    t0 = time.monotonic()
    admitted, asked, failed = hammer(weirs, "hy", {"bucket": "shared"}, 3.0)
    elapsed = time.monotonic() - t0
    assert failed == 0
    allowed_max = 100 + 100 * elapsed
    formula = 0.1 * 3 * 100
    overshoot = max(0, admitted - allowed_max)
    local = sum(w.metric("weir_redis_sync_local_total") for w in weirs)
    calls = sum(w.metric("weir_redis_calls_total") for w in weirs)
    print(f"\ntoken bucket: asked {asked} in {elapsed:.2f} s, admitted {admitted} "
          f"(at most {allowed_max:.0f} exactly), overshoot {overshoot:.0f} against "
          f"{formula:.0f} = interval x instances x rate; {local} from reservations, "
          f"{calls} calls to Redis")
    assert asked > 2 * allowed_max, asked
    assert overshoot <= formula / 2, overshoot
    assert admitted >= 0.8 * (100 * elapsed), admitted  # capacity is not left unused
    assert local > admitted / 4, (local, admitted)
    assert calls < asked, (calls, asked)
    assert sum(w.metric("weir_redis_sync_outage_total") for w in weirs) == 0


def test_unused_reservations_go_back(weir_factory, redis_factory):
    """A key asked steadily, then not at all: what its reservation did not
    spend goes back to Redis at the next syncs, so Redis ends holding what
    was admitted, no more."""
    away_from_hour_boundary()
    rd = redis_factory()
    w = weir_factory(RULES, "--store", rd.url, *PATIENT, threads=1)
    admitted = 0
    stop = time.monotonic() + 1.0
    while time.monotonic() < stop:
        admitted += w.check("hy", {"window": "steady"}).status == 200
        time.sleep(0.004)
    assert 0 < admitted <= 300
    assert w.metric("weir_redis_sync_reserved_total") > 0
    (key,) = rd.client().keys("weir:2:hy:*")
    w.wait_until(lambda: state_count(rd, key) == admitted, timeout=3, interval=0.05,
                 what="Redis holding exactly what was admitted")
    assert w.metric("weir_redis_sync_returned_total") > 0
    assert w.metric("weir_redis_sync_local_total") > admitted / 2
    assert w.metric("weir_redis_sync_outage_total") == 0


OUTAGE_RULES = """\
domain: hy
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 20, sync: local, sync_interval: 1s}
"""


def state_count(rd, key):
    v = rd.client().get(key)
    return None if v is None else struct.unpack("<Bdd", v)[2]


def test_redis_away_then_back(weir_factory, redis_factory):
    """Redis killed: a sync: local limit keeps deciding at the instance's
    share (20 / 2 instances = 10), not by failure mode; when Redis is back
    (from its append-only file) what was admitted meanwhile is charged to
    it. A key Redis holds full by then cannot take what was admitted while
    it was away: that is the measured overshoot."""
    away_from_hour_boundary()
    rd = redis_factory("--appendonly", "yes", "--appendfsync", "always")
    w = weir_factory(OUTAGE_RULES, "--store", rd.url, "--instances", "2",
                     "--redis-timeout", "50ms", "--redis-breaker-cooldown", "200ms")
    assert w.check("hy", {"user": "a"}).status == 200
    (key,) = rd.client().keys("weir:2:hy:*")
    w.wait_until(lambda: w.metric("weir_redis_sync_age_seconds") >= 0, what="a first sync")
    reserved = w.metric("weir_redis_sync_reserved_total")  # unspent: one request so far
    before = state_count(rd, key)
    # value "b"'s counter, full in Redis (weir has not met it yet)
    bkey = key[:-1] + b"b"
    rd.client().set(bkey, struct.pack("<Bdd", 5, int(time.time() // 3600), 20), px=600000)
    rd.kill()

    answers = [w.check("hy", {"user": "a"}) for _ in range(15)]
    assert all("failure_mode" not in r.text() for r in answers)
    # what was reserved before, then the share
    assert sum(r.status == 200 for r in answers) == reserved + 10
    answers = [w.check("hy", {"user": "b"}) for _ in range(4)]
    assert sum(r.status == 200 for r in answers) == 4
    assert w.metric("weir_redis_sync_outage_total") == 15 - reserved + 4

    rd.restart()
    w.wait_until(lambda: state_count(rd, key) == before + 10, timeout=10, interval=0.1,
                 what="the admissions made while Redis was away charged to it")
    w.wait_until(lambda: w.metric("weir_redis_sync_overshoot_total") == 4, timeout=10,
                 interval=0.1, what="the overshoot measured")
    assert state_count(rd, bkey) == 20
    assert w.check("hy", {"user": "b"}).status == 429
    assert w.metric("weir_redis_sync_age_seconds") < 5
