"""
test_redis.py - weir serve on the Redis store, against a real redis-server
started by the tests (redis_server.py): several instances sharing exact
counters over HTTP and gRPC, and every failure a production Redis has —
killed, paused, its scripts flushed, its clients killed, a password.
"""

import json
import os
import subprocess
import threading
import time

import pytest

from conftest import weir_bin
from redis_server import redis_factory  # noqa: F401  (a fixture)
from test_grpc import GRPC_ON, Client, Pb

ALGORITHMS = {
    "tb": "algorithm: token_bucket",
    "gcra": "algorithm: gcra, burst: 25",
    "leaky": "algorithm: leaky_bucket, burst: 25",
    "shaper": "algorithm: leaky_bucket_shaper",
    "fixed": "algorithm: fixed_window",
    "log": "algorithm: sliding_window_log",
    "counter": "algorithm: sliding_window_counter",
    "conc": "algorithm: concurrency",
}
LIMIT = 25

EXACT_RULES = "domain: exact\ndescriptors:\n" + "".join(
    f"  - key: {k}\n    rate_limit: {{unit: day, requests_per_unit: {LIMIT}, {a}}}\n"
    for k, a in ALGORITHMS.items())

# Tests of what Redis decides (not of how weir waits for it) give it a
# generous timeout: a sanitizer build on a busy machine can take longer
# than the default 5 ms, and such a decision would follow its failure mode.
PATIENT = ("--redis-timeout", "1s")

FAIL_RULES = """\
domain: api
descriptors:
  - key: open
    rate_limit: {unit: hour, requests_per_unit: 1000, failure_mode: allow}
  - key: closed
    rate_limit: {unit: hour, requests_per_unit: 1000, failure_mode: deny}
"""


@pytest.fixture(scope="module")
def pb(tmp_path_factory):
    return Pb(tmp_path_factory.mktemp("proto"))


def away_from_midnight():
    """Day windows (fixed, sliding counter) must not turn over mid-test."""
    left = 86400 - time.time() % 86400
    if left < 60:
        time.sleep(left + 1)


def test_instances_share_exact_counters(weir_factory, redis_factory, pb):
    away_from_midnight()
    rd = redis_factory()
    weirs = [weir_factory(EXACT_RULES, "--store", rd.url, *PATIENT, *GRPC_ON) for _ in range(3)]
    clients = [Client(pb, w.grpc_port, own_connection=True) for w in weirs]
    admitted = {k: 0 for k in ALGORITHMS}
    errors = []
    lock = threading.Lock()

    def client(n):
        try:
            for i in range(12):
                for k in ALGORITHMS:
                    target = (n + i) % 3
                    if (n + i) % 2:  # gRPC
                        r = clients[target].check("exact", {k: "shared"})
                        ok = r.overall_code == 1
                    else:
                        r = weirs[target].check("exact", {k: "shared"})
                        assert r.status in (200, 429), r
                        assert "failure_mode" not in r.text(), r.text()
                        ok = r.status == 200
                    with lock:
                        admitted[k] += ok
        except Exception as e:  # reported by the main thread
            errors.append(repr(e))

    threads = [threading.Thread(target=client, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for c in clients:
        c.close()
    assert not errors, errors
    # 8 clients x 12 requests = 96 per algorithm, over three instances
    assert admitted == {k: LIMIT for k in ALGORITHMS}
    # the counters are in Redis, under the documented key format
    keys = rd.client().keys("weir:2:exact:*")
    assert len(keys) >= len(ALGORITHMS), keys
    for w in weirs:
        assert w.metric("weir_redis_breaker_state") == 0
        assert w.metric("weir_redis_calls_total") > 0


def test_one_call_checks_all_and_charges_all(weir_factory, redis_factory):
    rules = """\
domain: both
descriptors:
  - key: a
    rate_limit: {unit: hour, requests_per_unit: 5, algorithm: token_bucket}
  - key: b
    rate_limit: {unit: hour, requests_per_unit: 10, algorithm: sliding_window_log}
"""
    rd = redis_factory()
    w = weir_factory(rules, "--store", rd.url, *PATIENT)
    allowed = sum(w.check("both", {"a": "x"}, {"b": "y"}).status == 200 for _ in range(20))
    assert allowed == 5
    # b was charged only for the 5 admitted: 5 left
    r = w.check("both", {"b": "y"})
    assert r.status == 200
    assert json.loads(r.text())["statuses"][0]["remaining"] == 4


def answered_by_failure_mode(w, timeout_s):
    """Requests while Redis is away: each answered quickly, by its rule's
    failure mode (allow: 200 marked failure_mode; deny: 429)."""
    worst = 0.0
    for i in range(30):
        t0 = time.monotonic()
        r_open = w.check("api", {"open": f"u{i}"})
        r_closed = w.check("api", {"closed": f"u{i}"})
        worst = max(worst, time.monotonic() - t0)
        assert r_open.status == 200, r_open
        assert json.loads(r_open.text())["statuses"][0].get("failure_mode") is True, r_open.text()
        assert r_closed.status == 429, r_closed
    # two requests each: well under the 1 s --decision-timeout, which is
    # what would answer if the store did not give up on its own
    assert worst < timeout_s, worst
    return worst


def recovers(w):
    def ok():
        r = w.check("api", {"closed": "after"})
        return r.status == 200 and "failure_mode" not in r.text()
    w.wait_until(ok, timeout=15, interval=0.1, what="decisions from Redis again")
    w.wait_until(lambda: w.metric("weir_redis_breaker_state") == 0, timeout=5,
                 what="the breaker closed")


FAIL_FLAGS = ("--redis-timeout", "20ms", "--redis-breaker-cooldown", "300ms")


def test_redis_killed_then_restarted(weir_factory, redis_factory):
    rd = redis_factory()
    w = weir_factory(FAIL_RULES, "--store", rd.url, *FAIL_FLAGS)
    assert w.check("api", {"closed": "before"}).status == 200
    rd.kill()
    answered_by_failure_mode(w, 0.5)
    w.wait_until(lambda: w.metric("weir_redis_breaker_opened_total") >= 1, timeout=5,
                 what="the breaker opened")
    assert "degraded" in w.get("/healthz").text()
    rd.restart()
    recovers(w)
    assert w.get("/healthz").text().startswith('{"status":"ok"')
    assert w.count_log(r"event=redis_breaker state=open") >= 1


def test_redis_paused(weir_factory, redis_factory):
    rd = redis_factory()
    w = weir_factory(FAIL_RULES, "--store", rd.url, *FAIL_FLAGS)
    assert w.check("api", {"open": "before"}).status == 200
    rd.pause()
    try:
        answered_by_failure_mode(w, 0.5)
        assert w.metric("weir_redis_timeouts_total") >= 1
    finally:
        rd.resume()
    recovers(w)


def test_script_flush_under_load(weir_factory, redis_factory):
    rd = redis_factory()
    w = weir_factory(FAIL_RULES, "--store", rd.url, *PATIENT)
    failures = []
    stop = threading.Event()

    def load():
        i = 0
        while not stop.is_set():
            r = w.check("api", {"closed": f"f{i % 50}"})
            if r.status != 200 or "failure_mode" in r.text():
                failures.append(r.text())
            i += 1

    threads = [threading.Thread(target=load) for _ in range(4)]
    for t in threads:
        t.start()
    try:
        for _ in range(5):
            time.sleep(0.1)
            # the function library weir loads on Redis 7, and the script
            # cache of older ones
            assert rd.client().execute_command("FUNCTION", "FLUSH")
            assert rd.client().script_flush()
        time.sleep(0.1)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not failures, failures[:3]
    assert w.metric("weir_redis_script_reloads_total") >= 1


def test_client_kill_reconnects(weir_factory, redis_factory):
    rd = redis_factory()
    w = weir_factory(FAIL_RULES, "--store", rd.url, *PATIENT)
    assert w.check("api", {"closed": "x"}).status == 200
    connects = w.metric("weir_redis_connects_total")
    assert rd.client().client_kill_filter(_type="normal", skipme=True) >= 1
    recovers(w)
    w.wait_until(lambda: w.metric("weir_redis_connects_total") > connects, timeout=10,
                 what="a new connection")


def test_password_from_url_and_environment(weir_factory, redis_factory):
    rd = redis_factory(password="s3cret-pw")
    w = weir_factory(FAIL_RULES, "--store", f"redis://:s3cret-pw@127.0.0.1:{rd.port}", *PATIENT)
    assert w.check("api", {"closed": "x"}).status == 200
    assert "s3cret-pw" not in w.log_text()
    assert ":***@" in w.log_text()
    w2 = weir_factory(FAIL_RULES, "--store", rd.url, *PATIENT,
                      env={"WEIR_REDIS_PASSWORD": "s3cret-pw"})
    r = w2.check("api", {"closed": "x"})
    assert r.status == 200 and "failure_mode" not in r.text()


def test_script_where_functions_are_refused(weir_factory, redis_factory):
    # an ACL without FUNCTION (or a Redis before 7): the script is loaded
    # as a script and called by EVALSHA, reloaded after SCRIPT FLUSH
    rd = redis_factory()
    assert rd.client().acl_setuser("nofn", enabled=True, passwords=["+pw"], keys=["*"],
                                   commands=["+@all", "-function"])
    w = weir_factory(FAIL_RULES, "--store", f"redis://nofn:pw@127.0.0.1:{rd.port}", *PATIENT)
    assert w.wait_for_log(r"event=redis_connected calls=EVALSHA")
    assert w.check("api", {"closed": "x"}).status == 200
    assert rd.client().script_flush()
    r = w.check("api", {"closed": "x"})
    assert r.status == 200 and "failure_mode" not in r.text()
    assert json.loads(r.text())["statuses"][0]["remaining"] == 998
    assert w.metric("weir_redis_script_reloads_total") == 1


def test_acl_user(weir_factory, redis_factory):
    rd = redis_factory()
    assert rd.client().acl_setuser("weir", enabled=True, passwords=["+acl-pw"],
                                   keys=["weir:*"], commands=["+@all"])
    w = weir_factory(FAIL_RULES, "--store", f"redis://weir:acl-pw@127.0.0.1:{rd.port}", *PATIENT)
    r = w.check("api", {"closed": "x"})
    assert r.status == 200 and "failure_mode" not in r.text()
    assert rd.client().keys("weir:*")


def run_weir(*args, env=None):
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("WEIR_")}
    full_env.update(env or {})
    return subprocess.run([weir_bin(), "serve", "--http", "127.0.0.1:0", "--grpc", "",
                           "--resp", "", "--admin", "", "--rules", "/dev/null", *args], capture_output=True, text=True,
                          timeout=30, env=full_env)


def test_wrong_password_is_a_clear_error(redis_factory):
    rd = redis_factory(password="right")
    r = run_weir("--store", f"redis://:wrong@127.0.0.1:{rd.port}")
    assert r.returncode != 0
    assert "Redis refused the credentials" in r.stderr, r.stderr
    assert "wrong" not in r.stderr.replace("WRONGPASS", "")


def test_rediss_is_refused():
    r = run_weir("--store", "rediss://127.0.0.1:6379")
    assert r.returncode == 2
    assert "TLS" in r.stderr and "not supported" in r.stderr, r.stderr


def test_redis_down_at_start_still_serves(weir_factory, redis_factory):
    rd = redis_factory()
    port = rd.port
    rd.kill()
    w = weir_factory(FAIL_RULES, "--store", f"redis://127.0.0.1:{port}", *FAIL_FLAGS)
    assert w.count_log(r"event=store_checked.*cannot reach Redis") == 1
    answered_by_failure_mode(w, 0.5)
    rd.restart()
    recovers(w)


def test_evicted_key_is_a_fresh_key(weir_factory, redis_factory):
    # maxmemory with an eviction policy: a key Redis evicts starts again
    # fresh (docs/OPERATIONS.md, "Redis memory and eviction")
    rd = redis_factory("--maxmemory-policy", "allkeys-lru")
    w = weir_factory(FAIL_RULES, "--store", rd.url, *PATIENT)
    for _ in range(3):
        assert w.check("api", {"closed": "evicted"}).status == 200
    c = rd.client()
    (key,) = c.keys("weir:2:api:*")
    # Redis's LRU clock counts whole seconds: a key touched in the same
    # second as the junk is no older than it, and LRU eviction among equals
    # may keep it a long while. A second later it is the oldest key.
    time.sleep(1.1)
    used = int(c.info("memory")["used_memory"])
    c.config_set("maxmemory", str(used + 2 * 1024 * 1024))
    junk = b"x" * 10000
    for i in range(4000):
        c.set(f"junk:{i}", junk)
        if not c.exists(key):
            break
    assert not c.exists(key), "Redis kept weir's key under memory pressure"
    r = w.check("api", {"closed": "evicted"})
    assert r.status == 200
    assert json.loads(r.text())["statuses"][0]["remaining"] == 999  # counted from fresh


def test_full_redis_without_eviction_fails_over(weir_factory, redis_factory):
    # maxmemory-policy noeviction: a full Redis refuses writes; decisions
    # then follow their failure mode
    rd = redis_factory("--maxmemory-policy", "noeviction")
    w = weir_factory(FAIL_RULES, "--store", rd.url, *PATIENT)
    assert w.check("api", {"closed": "a"}).status == 200
    c = rd.client()
    c.config_set("maxmemory", str(int(c.info("memory")["used_memory"]) + 64 * 1024))
    junk = b"x" * 10000
    try:
        for i in range(100):
            c.set(f"junk:{i}", junk)
    except Exception as e:  # the OOM error that ends the filling
        assert "OOM" in str(e)
    r = w.check("api", {"closed": "b"})
    assert r.status == 429 and json.loads(r.text())["statuses"][0]["failure_mode"] is True
    # the log line is read by the harness's own thread: wait for it
    w.wait_for_log(r"event=redis_error.*OOM", timeout=5)


def test_local_failure_mode_and_its_marks(weir_factory, redis_factory, pb):
    # Redis gone: failure_mode local decides on the instance's memory at
    # 1/--instances of the limit; the decisions are marked in the JSON and
    # in gRPC's dynamic metadata, and counted
    rules = """\
domain: api
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 10, failure_mode: local}
  - key: ip
    rate_limit: {unit: hour, requests_per_unit: 10}
"""
    rd = redis_factory()
    port = rd.port
    rd.kill()
    w = weir_factory(rules, "--store", f"redis://127.0.0.1:{port}", "--instances", "2",
                     *FAIL_FLAGS, *GRPC_ON)
    codes = []
    for _ in range(7):
        r = w.check("api", {"user": "u"})
        codes.append(r.status)
        st = json.loads(r.text())["statuses"][0]
        assert st["failure_mode"] is True and st["local"] is True, st
    assert codes == [200] * 5 + [429] * 2  # 10 / 2 instances
    c = Client(pb, w.grpc_port)
    try:
        r = c.check("api", {"user": "v"})
        assert r.overall_code == 1
        assert r.dynamic_metadata.fields["weir.failure_mode"].string_value == "local"
        r = c.check("api", {"ip": "1.2.3.4"})
        assert r.overall_code == 1
        assert r.dynamic_metadata.fields["weir.failure_mode"].string_value == "allow"
    finally:
        c.close()
    assert w.metric("weir_failure_mode_total", domain="api", rule="user", mode="local") == 8
    assert w.metric("weir_failopen_total", domain="api", rule="ip") == 1
    assert w.count_log(r"event=failure_mode_decision .*mode=local") >= 1


def test_over_limit_cache_and_the_rules_that_opt_out(weir_factory, redis_factory):
    rules = """\
domain: api
descriptors:
  - key: cached
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: asked
    rate_limit: {unit: hour, requests_per_unit: 2, over_limit_cache: false}
"""
    rd = redis_factory()
    # one worker: the cache is each worker's own
    w = weir_factory(rules, "--store", rd.url, *PATIENT, threads=1)
    for key in ("cached", "asked"):
        assert [w.check("api", {key: "k"}).status for _ in range(5)] == [200, 200, 429, 429, 429]
    # the first denial of "cached" went to Redis, the two after did not;
    # every "asked" one did
    assert w.metric("weir_redis_cached_total") == 2
    assert w.metric("weir_redis_batches_total") == 2 + 1 + 5
