"""
test_settle.py - costs known only afterwards over HTTP: a request decided
with an estimated cost (hits), then POST /v1/settle?cost=N with the same
body brings each limit to the true cost: refunded far below the estimate,
charged far above it (as far as the limit holds). Runs on the suite's
stores; test_redis_settle.py does the same on Redis.
"""
import pytest

RULES = """\
domain: llm
descriptors:
  - key: tenant
    rate_limits:
      - {unit: minute, requests_per_unit: 100000, name: tokens_per_minute}
      # a bucket of a million that refills less than a token in the test's time
      - {unit: day, requests_per_unit: 1000, burst: 1000000, algorithm: token_bucket,
         name: tokens_bucket}
"""


def body(tenant):
    return {"domain": "llm", "descriptors": [{"entries": [{"key": "tenant", "value": tenant}]}]}


def remaining(w, tenant):
    """What each limit has left, by name, read with a look."""
    look = body(tenant)
    look["descriptors"][0]["hits"] = 0  # a descriptor's 0 looks; a request's 0 means 1
    r = w.post("/v1/check?explain=1", look)
    limits = r.json()["explain"][0]["limits"]
    return {o["name"]: o["remaining"] for o in limits}


def check(w, tenant, hits):
    return w.post("/v1/check", dict(body(tenant), hits=hits))


def settle(w, tenant, hits, cost):
    return w.post(f"/v1/settle?cost={cost}", dict(body(tenant), hits=hits))


def run_settlements(w):
    # an estimate of 5,000 tokens, a true cost of 120: 4,880 back
    assert check(w, "a", 5000).status == 200
    assert remaining(w, "a") == {"tokens_per_minute": 95000, "tokens_bucket": 995000}
    r = settle(w, "a", 5000, 120)
    assert r.status == 200 and r.json()["statuses"][0]["code"] == "OK", r
    assert remaining(w, "a") == {"tokens_per_minute": 99880, "tokens_bucket": 999880}
    # an estimate of 100, a true cost of 60,000: the overrun charged
    assert check(w, "a", 100).status == 200
    settle(w, "a", 100, 60000)
    assert remaining(w, "a") == {"tokens_per_minute": 39880, "tokens_bucket": 939880}
    # an overrun past the minute's limit fills it: the next request waits
    assert check(w, "a", 1000).status == 200
    settle(w, "a", 1000, 500000)
    left = remaining(w, "a")
    assert left["tokens_per_minute"] == 0 and left["tokens_bucket"] == 439880, left
    assert check(w, "a", 1).status == 429
    # another tenant is untouched
    assert remaining(w, "b") == {"tokens_per_minute": 100000, "tokens_bucket": 1000000}


def test_refund_and_overrun(weir_factory):
    run_settlements(weir_factory(RULES))


def test_settlements_are_not_decisions(weir_factory):
    w = weir_factory(RULES)
    settle(w, "c", 10, 1)
    assert w.metric("weir_decisions_total", domain="llm", rule="tokens_per_minute",
                    result="allowed") in (None, 0.0)


@pytest.mark.parametrize("query", ["", "?cost=", "?cost=-1", "?cost=1x", "?cost=1&x=2",
                                   "?x=1", "?cost=" + "9" * 20, "?cost=1000000000000000001"])
def test_bad_queries(weir_factory, query):
    w = weir_factory(RULES)
    r = w.post("/v1/settle" + query, body("a"))
    assert r.status == 400 and "?cost=N" in r.json()["detail"], (query, r)


def test_bad_bodies(weir_factory):
    w = weir_factory(RULES)
    assert w.post("/v1/settle?cost=1", b"{").status == 400
    assert w.post("/v1/settle?cost=1", {"domain": "nope", "descriptors": [
        {"entries": [{"key": "a", "value": "b"}]}]}).status == 404
    assert w.get("/v1/settle?cost=1").status == 405


def test_over_resp(weir_factory):
    import redis
    w = weir_factory(RULES, "--resp", "127.0.0.1:0")
    r = redis.Redis(port=w.resp_port)
    got = r.execute_command("WEIR.CHECK", "llm", "tenant", "r", "HITS", 5000)
    assert got[0][0] == b"OK" and got[0][2] == 95000, got
    got = r.execute_command("WEIR.SETTLE", 120, "llm", "tenant", "r", "HITS", 5000)
    assert got[0][0] == b"OK" and got[0][2] == 99880, got
    assert remaining(w, "r") == {"tokens_per_minute": 99880, "tokens_bucket": 999880}
    got = r.execute_command("WEIR.SETTLE", 300000, "llm", "tenant", "r", "HITS", 1)
    assert got[0][2] == 0, got
    for bad in ([-1], ["x"], [10 ** 19]):
        with pytest.raises(redis.exceptions.ResponseError) as e:
            r.execute_command("WEIR.SETTLE", *bad, "llm", "tenant", "r")
        assert "the cost must be a whole number" in str(e.value)
    with pytest.raises(redis.exceptions.ResponseError):
        r.execute_command("WEIR.SETTLE", 1, "llm")


def test_over_grpc(weir_factory, tmp_path):
    import grpc
    from protoclasses import message_classes
    Settle, Request, Response = message_classes(
        tmp_path, ["weir/leases/v1/leases.proto"],
        ["weir.leases.v1.SettleRequest", "envoy.service.ratelimit.v3.RateLimitRequest",
         "envoy.service.ratelimit.v3.RateLimitResponse"])
    w = weir_factory(RULES, "--grpc", "127.0.0.1:0")
    ch = grpc.insecure_channel(f"127.0.0.1:{w.grpc_port}")
    call = ch.unary_unary("/weir.leases.v1.Costs/Settle",
                          request_serializer=Settle.SerializeToString,
                          response_deserializer=Response.FromString)
    try:
        assert check(w, "g", 5000).status == 200
        req = Request(domain="llm", hits_addend=5000)
        e = req.descriptors.add().entries.add()
        e.key, e.value = "tenant", "g"
        r = call(Settle(request=req, cost=120), timeout=5)
        assert r.overall_code == 1 and r.statuses[0].limit_remaining == 99880, r
        assert remaining(w, "g") == {"tokens_per_minute": 99880, "tokens_bucket": 999880}
        for bad in [Settle(request=req, cost=10 ** 18 + 1), Settle(cost=1)]:
            with pytest.raises(grpc.RpcError) as err:
                call(bad, timeout=5)
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, bad
    finally:
        ch.close()
