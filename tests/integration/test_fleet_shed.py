"""
test_fleet_shed.py - a limit keeping shares of itself for more important
priorities (a rule's `shed:`): under an overload of three times a
window's capacity, critical requests are all admitted while sheddable
ones take the shedding, answered 503 with Retry-After (never 429) and
counted in weir_shed_total{cause="share"}, not among the decisions; the
same answer over gRPC (UNAVAILABLE, ShouldRateLimit and Leases/Acquire)
and RESP (-BUSY); a concurrency limit whose sheddable acquires stop at
their share while critical ones still get leases; and all of it again on
a Redis store (the share travels in its script).
"""
import math

import grpc
import pytest
import redis

import rawhttp
from redis_server import redis_factory  # noqa: F401  (a fixture)
from test_grpc import Client, Pb
from test_leases import Leases

CAPACITY, SHEDDABLE_SHARE = 300, 40  # percent
RULES = f"""\
domain: api
descriptors:
  - key: user
    rate_limit:
      unit: hour
      requests_per_unit: {CAPACITY}
      name: api
      shed: {{sheddable: {SHEDDABLE_SHARE}%}}
  - key: small
    rate_limit: {{unit: hour, requests_per_unit: 10, shed: {{sheddable: 50%, test: 100%}}}}
  - key: conn
    rate_limit:
      unit: minute
      requests_per_unit: 10
      algorithm: concurrency
      shed: {{sheddable: 50%}}
"""
ON = ("--grpc", "127.0.0.1:0", "--resp", "127.0.0.1:0")


@pytest.fixture(scope="module")
def pb(tmp_path_factory):
    return Pb(tmp_path_factory.mktemp("proto"))


def model(order, capacity, share_pct):
    """What the rule promises, request by request: a sheddable one is
    admitted only if ceil(share x capacity) stay free after it, a critical
    one while anything is left; one denied while the limit itself still
    had room is shed (503), one denied by a full limit is over it (429)."""
    reserve = math.ceil(capacity * share_pct / 100)
    used, out = 0, []
    for prio in order:
        if used + 1 + (reserve if prio == "sheddable" else 0) <= capacity:
            used += 1
            out.append(200)
        else:
            out.append(503 if used < capacity else 429)
    return out


def shed_metric(w, prio, proto="http", cause="share"):
    return w.metric("weir_shed_total", protocol=proto, cause=cause, priority=prio)


def test_critical_keeps_its_share_under_overload(weir_factory):
    w = weir_factory(RULES)
    # three times the window's capacity, one critical request in six
    order = ["critical" if i % 6 == 0 else "sheddable" for i in range(3 * CAPACITY)]
    assert order.count("critical") == 150 and order.count("sheddable") == 750
    got = {"critical": [], "sheddable": []}
    with rawhttp.Conn(w.port) as conn:
        for prio in order:
            r = conn.request("GET", "/v1/check?domain=api&user=alice",
                             headers={"Weir-Priority": prio})
            got[prio].append((r.status, r.header("Retry-After"), r.body))
    want = model(order, CAPACITY, SHEDDABLE_SHARE)
    assert [s for s, _, _ in got["critical"]] == [x for p, x in zip(order, want)
                                                  if p == "critical"]
    assert [s for s, _, _ in got["sheddable"]] == [x for p, x in zip(order, want)
                                                   if p == "sheddable"]
    # the target: critical keeps 99% success, sheddable takes the shedding
    crit = [s for s, _, _ in got["critical"]]
    assert crit.count(200) >= 0.99 * len(crit)
    admitted = sum(1 for s, _, _ in got["sheddable"] if s == 200)
    assert 0 < admitted <= CAPACITY * (100 - SHEDDABLE_SHARE) // 100
    rejected = [x for x in got["sheddable"] if x[0] == 503]
    assert len(rejected) >= 0.75 * len(got["sheddable"])
    # shed as weir sheds its own load: 503, ask again when the window has room
    for status, retry, body in rejected:
        assert int(retry) >= 1 and b"overloaded: sheddable requests are shed" in body
    assert shed_metric(w, "sheddable") == len(rejected)
    assert shed_metric(w, "critical") == 0
    assert shed_metric(w, "sheddable", cause="overload") == 0
    # the decisions counted are the ones made: the shed ones are not denials
    assert w.metric("weir_decisions_total", domain="api", rule="api",
                    result="denied") == want.count(429)
    assert w.metric("weir_decisions_total", domain="api", rule="api",
                    result="allowed") == want.count(200)


def test_a_descriptor_names_the_priority_and_batches_shed_items(weir_factory):
    w = weir_factory(RULES)
    prio = {"entries": [{"key": "priority", "value": "sheddable"}]}
    statuses = [w.check("api", {"small": "a"}, prio).status for _ in range(7)]
    assert statuses == [200] * 5 + [503] * 2, statuses
    # a test request may take nothing of it (100%), a normal one all of it
    r = w.get("/v1/check?domain=api&small=a", headers={"Weir-Priority": "test"})
    assert r.status == 503 and r.header("Retry-After")
    assert [w.get("/v1/check?domain=api&small=a").status for _ in range(6)] == [200] * 5 + [429]
    # a batch: the shed item says 503, the others are decided
    r = w.post("/v1/check/batch", {"requests": [
        {"domain": "api", "descriptors": [{"entries": [{"key": "small", "value": "b"}]}, prio]}
        for _ in range(6)]})
    assert r.status == 200, r
    items = r.json()["decisions"]
    assert [("error" in d and d["error"]["status"]) or 200 for d in items] == [200] * 5 + [503]
    assert shed_metric(w, "sheddable") == 3 and shed_metric(w, "test") == 1
    # a descriptor over its limit itself makes the request's answer 429;
    # the one shed by its share says so
    crit = {"Weir-Priority": "critical"}
    assert [w.get("/v1/check?domain=api&small=x", headers=crit).status
            for _ in range(10)] == [200] * 10
    r = w.check("api", {"small": "x"}, {"small": "b"}, prio)  # b: 5 of 10 taken
    assert r.status == 429, r
    st = r.json()["statuses"]
    assert "shed" not in st[0] and st[1]["shed"] is True and st[1]["code"] == "OVER_LIMIT"
    assert shed_metric(w, "sheddable") == 3
    # the shares by priority rank in the rules' text
    assert " shed=3:50.00%,4:100.00%" in w.rules_text()


def test_grpc_and_resp_answer_overloaded(weir_factory, pb, tmp_path):
    w = weir_factory(RULES, *ON)
    c = Client(pb, w.grpc_port)
    try:
        prio = {"priority": "sheddable"}
        codes = [c.check("api", {"small": "g"}, prio).overall_code for _ in range(5)]
        assert codes == [1] * 5  # OK
        e = c.error("api", {"small": "g"}, prio)
        assert e.code() == grpc.StatusCode.UNAVAILABLE
        assert "overloaded: sheddable requests are shed" in e.details()
        # critical is decided: the rest of the limit, then OVER_LIMIT (a decision)
        crit = {"priority": "critical"}
        assert [c.check("api", {"small": "g"}, crit).overall_code for _ in range(6)] == \
            [1] * 5 + [2]
    finally:
        c.close()
    rc = redis.Redis(port=w.resp_port)
    for _ in range(5):
        rc.execute_command("WEIR.CHECK", "api", "small", "r", "DESCRIPTOR", "priority",
                           "sheddable")
    with pytest.raises(redis.exceptions.ResponseError) as e:
        rc.execute_command("WEIR.CHECK", "api", "small", "r", "DESCRIPTOR", "priority",
                           "sheddable")
    assert str(e.value).startswith("BUSY weir is overloaded: sheddable requests are shed")
    assert shed_metric(w, "sheddable", "grpc") == 1
    assert shed_metric(w, "sheddable", "resp") == 1


def acquire(w, prio, conn="c"):
    r = w.get(f"/v1/acquire?domain=api&conn={conn}", headers={"Weir-Priority": prio})
    return r.status, r.header("Weir-Lease"), r.header("Retry-After")


def test_concurrency_keeps_slots_for_critical(weir_factory, tmp_path):
    w = weir_factory(RULES, *ON)
    got = [acquire(w, "sheddable") for _ in range(7)]
    assert [s for s, _, _ in got] == [200] * 5 + [503] * 2, got
    assert all(t for _, t, _ in got[:5]) and not any(t for _, t, _ in got[5:])
    assert all(int(r) >= 1 for _, _, r in got[5:])
    crit = [acquire(w, "critical") for _ in range(6)]
    assert [s for s, _, _ in crit] == [200] * 5 + [429]
    # a shed acquire held nothing: giving back one sheddable lease lets
    # exactly one critical in, and sheddable is now denied by the limit
    assert w.post("/v1/release", {"lease": got[0][1]}).json()["released"] == 1
    assert acquire(w, "critical")[0] == 200
    assert acquire(w, "sheddable")[0] == 429
    # WEIR.ACQUIRE and Leases/Acquire shed as HTTP does
    rc = redis.Redis(port=w.resp_port)
    for _ in range(5):
        assert rc.execute_command("WEIR.ACQUIRE", "api", "conn", "r", "DESCRIPTOR", "priority",
                                  "sheddable")[0] is not None
    with pytest.raises(redis.exceptions.ResponseError) as e:
        rc.execute_command("WEIR.ACQUIRE", "api", "conn", "r", "DESCRIPTOR", "priority",
                           "sheddable")
    assert str(e.value).startswith("BUSY ")
    g = Leases(tmp_path, w.grpc_port)
    req = g.Request(domain="api")
    for k, v in (("conn", "g"), ("priority", "sheddable")):
        e = req.descriptors.add().entries.add()
        e.key, e.value = k, v
    try:
        for _ in range(5):
            assert g.acquire_call(req, timeout=5).lease
        with pytest.raises(grpc.RpcError) as e:
            g.acquire_call(req, timeout=5)
        assert e.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        g.channel.close()
    assert shed_metric(w, "sheddable") == 2
    assert shed_metric(w, "sheddable", "resp") == 1
    assert shed_metric(w, "sheddable", "grpc") == 1


def test_on_a_redis_store(weir_factory, redis_factory):
    rd = redis_factory()
    weirs = [weir_factory(RULES, "--store", rd.url, "--redis-timeout", "1s") for _ in range(2)]
    # two instances share the window and its share
    order = ["critical" if i % 6 == 0 else "sheddable" for i in range(3 * CAPACITY)]
    statuses = {"critical": [], "sheddable": []}
    for i, prio in enumerate(order):
        r = weirs[i % 2].get("/v1/check?domain=api&user=bob", headers={"Weir-Priority": prio})
        statuses[prio].append(r.status)
    want = model(order, CAPACITY, SHEDDABLE_SHARE)
    for prio in ("critical", "sheddable"):
        assert statuses[prio] == [x for p, x in zip(order, want) if p == prio], prio
    assert sum(shed_metric(w, "sheddable") for w in weirs) == want.count(503)
    # leases in Redis: sheddable stops at its share, critical goes on
    got = [acquire(weirs[i % 2], "sheddable", "r")[0] for i in range(7)]
    assert got == [200] * 5 + [503] * 2, got
    assert [acquire(weirs[i % 2], "critical", "r")[0] for i in range(6)] == [200] * 5 + [429]
