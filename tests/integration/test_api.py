"""
test_api.py - weir's HTTP API against the real daemon: statuses, rate
limit headers, decision bodies, the GET form, upstream's /json, batch,
/v1/rules, /metrics and the health endpoints.

Limits are per hour (token buckets mostly, whose numbers do not depend on
the wall clock), so no timing can make a test flaky.
"""

import json
import math
import re
import threading
import time
import uuid

import pytest
from conftest import clock_at

RULES = """\
domain: test
descriptors:
  # 2 per hour, token bucket: one token back every 1800 s
  - key: tb
    rate_limit: {unit: hour, requests_per_unit: 2, algorithm: token_bucket}
  # 3 per hour, fixed window aligned to the hour (the default algorithm)
  - key: fw
    rate_limit: {unit: hour, requests_per_unit: 3}
  - key: named
    rate_limit: {unit: hour, requests_per_unit: 2, algorithm: token_bucket, name: named_limit}
  # two limits on one descriptor: 5 per hour AND 2 per day
  - key: multi
    rate_limits:
      - {unit: hour, requests_per_unit: 5, algorithm: token_bucket, name: multi_hour}
      - {unit: day, requests_per_unit: 2, algorithm: token_bucket, name: multi_day}
  - key: client
    rate_limit: {unit: hour, requests_per_unit: 4, algorithm: token_bucket}
  - key: endpoint
    rate_limit: {unit: hour, requests_per_unit: 1, algorithm: token_bucket}
  - key: api_key
    rate_limit: {unit: hour, requests_per_unit: 2, algorithm: token_bucket, name: per_key}
  - key: path
    value: /login
    descriptors:
      - key: remote_address
        rate_limit: {unit: hour, requests_per_unit: 5, algorithm: token_bucket}
  - key: free
    rate_limit: {unlimited: true}
  # a ban: never admitted
  - key: ban
    rate_limit: {unit: hour, requests_per_unit: 0}
  - key: crowd
    rate_limit: {unit: hour, requests_per_unit: 100, algorithm: gcra, burst: 100}
  # counted and reported, never enforced
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1, algorithm: token_bucket}
"""

RATE_HEADERS = ("ratelimit-policy", "ratelimit", "x-ratelimit-limit", "x-ratelimit-remaining",
                "x-ratelimit-reset", "retry-after")


@pytest.fixture
def weir(weir_factory):
    return weir_factory(RULES)


def tb_limit(path="tb", rpu=2, name=None):
    return {"name": name, "domain": "test", "path": path, "requests_per_unit": rpu,
            "unit": "hour", "window_ms": 3600000, "algorithm": "token_bucket"}


def pop_ms(obj, key, lo, hi):
    """Removes obj[key] after checking lo <= value <= hi (milliseconds that
    depend on how long the test took)."""
    v = obj.pop(key)
    assert isinstance(v, int) and lo <= v <= hi, f"{key}={v} not in [{lo}, {hi}]"
    return v


def rate_header_names(r):
    return [n for n in r.header_names() if n in RATE_HEADERS]


# ------------------------------------------------------------ decisions


def test_token_bucket_allows_then_429_with_exact_headers(weir):
    t0 = time.time()
    r1 = weir.check("test", {"tb": "alice"})
    assert r1.status == 200
    assert r1.reason == "OK"
    assert r1.header("Content-Type") == "application/json"
    assert r1.header("RateLimit-Policy") == '"test.tb";q=2;w=3600'
    assert r1.header("RateLimit") == '"test.tb";r=1;t=1800'
    assert r1.header("X-RateLimit-Limit") == "2"
    assert r1.header("X-RateLimit-Remaining") == "1"
    assert t0 + 1800 - 1 <= int(r1.header("X-RateLimit-Reset")) <= time.time() + 1800 + 1
    assert r1.header("Retry-After") is None
    assert rate_header_names(r1) == ["ratelimit-policy", "ratelimit", "x-ratelimit-limit",
                                     "x-ratelimit-remaining", "x-ratelimit-reset"]
    assert r1.json() == {"allowed": True, "code": "OK", "statuses": [
        {"code": "OK", "limit": tb_limit(), "remaining": 1, "reset_after_ms": 1800000,
         "retry_after_ms": 0}]}

    r2 = weir.check("test", {"tb": "alice"})
    assert r2.status == 200
    assert r2.header("RateLimit") == '"test.tb";r=0;t=3600'
    assert r2.header("X-RateLimit-Remaining") == "0"
    assert r2.header("Retry-After") is None
    body = r2.json()
    pop_ms(body["statuses"][0], "reset_after_ms", 3590000, 3600000)
    assert body == {"allowed": True, "code": "OK", "statuses": [
        {"code": "OK", "limit": tb_limit(), "remaining": 0, "retry_after_ms": 0}]}

    r3 = weir.check("test", {"tb": "alice"})
    assert r3.status == 429
    assert r3.reason == "Too Many Requests"
    assert r3.header("Content-Type") == "application/json"
    assert r3.header("RateLimit-Policy") == '"test.tb";q=2;w=3600'
    assert r3.header("RateLimit") == '"test.tb";r=0;t=3600'
    assert r3.header("X-RateLimit-Limit") == "2"
    assert r3.header("X-RateLimit-Remaining") == "0"
    assert r3.header("Retry-After") == "1800"
    assert rate_header_names(r3)[-1] == "retry-after"
    body = r3.json()
    st = body["statuses"][0]
    pop_ms(st, "reset_after_ms", 3590000, 3600000)
    retry = pop_ms(st, "retry_after_ms", 1790000, 1800000)
    assert int(r3.header("Retry-After")) == math.ceil(retry / 1000)
    assert body == {"allowed": False, "code": "OVER_LIMIT", "statuses": [
        {"code": "OVER_LIMIT", "limit": tb_limit(), "remaining": 0}]}

    # a denial consumes nothing, and another value has its own counter
    assert weir.check("test", {"tb": "alice"}).status == 429
    r = weir.check("test", {"tb": "bob"})
    assert r.status == 200
    assert r.header("RateLimit") == '"test.tb";r=1;t=1800'


def test_fixed_window_resets_on_the_hour(weir_factory):
    # the daemon's clock starts 10 minutes into the hour: the window ends
    # at the next hour, 3000 s later
    env, hour = clock_at(600)
    weir = weir_factory(RULES, env=env)
    for remaining in (2, 1, 0):
        r = weir.check("test", {"fw": "carol"})
        assert r.status == 200, r
        assert r.header("X-RateLimit-Remaining") == str(remaining)
    r = weir.check("test", {"fw": "carol"})
    assert r.status == 429
    next_hour = hour + 3600
    assert r.header("X-RateLimit-Reset") == str(next_hour)
    assert r.header("X-RateLimit-Limit") == "3"
    assert r.header("RateLimit-Policy") == '"test.fw";q=3;w=3600'
    m = re.fullmatch(r'"test\.fw";r=0;t=(\d+)', r.header("RateLimit"))
    assert m, r.header("RateLimit")
    t = int(m.group(1))
    assert 3000 - 5 <= t <= 3000  # seconds since the daemon started, rounded up
    retry_after = int(r.header("Retry-After"))
    assert retry_after >= 1
    assert abs(retry_after - t) <= 1
    st = r.json()["statuses"][0]
    assert st["limit"]["algorithm"] == "fixed_window"
    assert st["remaining"] == 0
    assert math.ceil(st["retry_after_ms"] / 1000) == retry_after


def test_decision_fields_unlimited_unmatched_and_override(weir):
    # a descriptor that matches no rule, and an unlimited one: OK, no limit,
    # and no rate limit header at all
    r = weir.check("test", {"nomatch": "x"}, {"free": "x"})
    assert r.status == 200
    assert r.json() == {"allowed": True, "code": "OK",
                        "statuses": [{"code": "OK"}, {"code": "OK", "unlimited": True}]}
    assert rate_header_names(r) == []

    # Envoy's per-descriptor limit override: its own numbers and counter
    r = weir.check("test", {"entries": [{"key": "tb", "value": "ov"}],
                            "limit": {"requests_per_unit": 7, "unit": "minute"}})
    assert r.status == 200
    body = r.json()
    st = body["statuses"][0]
    assert st["limit"] == {"name": None, "domain": "test", "path": "tb", "requests_per_unit": 7,
                           "unit": "minute", "window_ms": 60000, "algorithm": "token_bucket"}
    assert st["remaining"] == 6
    assert r.header("RateLimit-Policy") == '"test.tb";q=7;w=60'
    # the configured limit's counter is untouched by the override
    assert weir.check("test", {"tb": "ov"}).header("RateLimit") == '"test.tb";r=1;t=1800'


def test_limit_overrides_refused(weir_factory):
    weir = weir_factory(RULES, "--allow-request-overrides", "false")
    r = weir.check("test", {"entries": [{"key": "tb", "value": "ov"}],
                            "limit": {"requests_per_unit": 7000, "unit": "minute"}})
    assert r.status == 403, r
    assert r.json()["detail"] == ("descriptors[0].limit: this service does not take limits "
                                  "from requests")
    assert weir.check("test", {"tb": "ov"}).status == 200
    assert weir.metric("weir_requests_refused_total", protocol="http",
                       reason="override_refused") == 1
    assert weir.count_log(r"event=request_overrides_allowed") == 0


XFF_RULES = """\
domain: api
descriptors:
  - key: remote_address
    rate_limit: {unit: hour, requests_per_unit: 2, algorithm: token_bucket}
"""


def test_client_address_through_trusted_proxies(weir_factory):
    """--check-header X-Forwarded-For=remote_address takes the client's
    address from the right, past --trusted-proxies: what a client writes on
    the left cannot buy it a fresh quota; IPv6 counts per /64."""
    weir = weir_factory(XFF_RULES, "--check-header", "X-Forwarded-For=remote_address",
                        "--trusted-proxies", "127.0.0.0/8,10.0.0.0/8")

    def get(xff):
        return weir.get("/v1/check?domain=api", headers={"X-Forwarded-For": xff})

    assert get("203.0.113.9, 10.0.0.1").status == 200
    assert get("1.1.1.1, 203.0.113.9, 10.0.0.2").status == 200
    r = get("2.2.2.2, 203.0.113.9")  # a third from the same client, whatever it wrote
    assert r.status == 429
    assert r.json()["rule"]["path"] == "remote_address"
    # another client behind the same proxies has its own quota
    assert get("198.51.100.4, 10.0.0.1").status == 200
    # two addresses of one IPv6 /64 share one
    assert get("2001:db8:1:2::5").status == 200
    assert get("2001:db8:1:2::6").status == 200
    assert get("2001:db8:1:2:ffff::1").status == 429
    assert get("2001:db8:1:3::1").status == 200


def test_client_address_from_an_untrusted_peer(weir_factory):
    """When the connection does not come from a trusted proxy, its header is
    ignored: the connection's own address is the client."""
    weir = weir_factory(XFF_RULES, "--check-header", "X-Forwarded-For=remote_address",
                        "--trusted-proxies", "", "--address-prefix", "24,64")
    for xff in ("203.0.113.1", "203.0.113.2"):
        assert weir.get("/v1/check?domain=api", headers={"X-Forwarded-For": xff}).status == 200
    r = weir.get("/v1/check?domain=api", headers={"X-Forwarded-For": "203.0.113.3"})
    assert r.status == 429  # all three were 127.0.0.0/24
    r = weir.post("/v1/check?explain=1", {"domain": "api", "descriptors": [
        {"entries": [{"key": "remote_address", "value": "127.0.0.0/24"}], "hits": 0}]})
    assert r.json()["statuses"][0]["remaining"] == 0


def test_ban_is_never_admitted(weir):
    r = weir.check("test", {"ban": "x"})
    assert r.status == 429
    body = r.json()
    assert body == {"allowed": False, "code": "OVER_LIMIT", "statuses": [{
        "code": "OVER_LIMIT",
        "limit": {"name": None, "domain": "test", "path": "ban", "requests_per_unit": 0,
                  "unit": "hour", "window_ms": 3600000, "algorithm": "fixed_window"},
        "remaining": 0, "reset_after_ms": 0, "retry_after_ms": -1}]}
    # retrying never helps: no Retry-After
    assert r.header("Retry-After") is None
    assert r.header("X-RateLimit-Limit") == "0"
    g = weir.get("/v1/check?domain=test&ban=x")
    assert g.status == 429
    assert g.json()["retry_after"] is None
    assert g.header("Retry-After") is None


def test_several_limits_on_one_descriptor(weir):
    policy = '"multi_hour";q=5;w=3600, "multi_day";q=2;w=86400'
    r = weir.check("test", {"multi": "m"})
    assert r.status == 200
    # every limit that applied is listed; the most restrictive one (least
    # remaining) is reported
    assert r.header("RateLimit-Policy") == policy
    assert r.header("RateLimit") == '"multi_day";r=1;t=43200'
    assert r.header("X-RateLimit-Limit") == "2"
    assert r.header("X-RateLimit-Remaining") == "1"
    st = r.json()["statuses"][0]
    assert st["limit"]["name"] == "multi_day"
    assert st["remaining"] == 1

    r = weir.check("test", {"multi": "m"})
    assert r.status == 200
    assert r.header("X-RateLimit-Remaining") == "0"

    r = weir.check("test", {"multi": "m"})
    assert r.status == 429
    assert r.header("RateLimit-Policy") == policy
    assert r.header("RateLimit") == '"multi_day";r=0;t=86400'
    assert r.header("Retry-After") == "43200"
    st = r.json()["statuses"][0]
    assert st["code"] == "OVER_LIMIT"
    assert st["limit"]["name"] == "multi_day"

    # a peek (hits 0) asks "would one more be admitted?": no, by the day
    r = weir.check("test", {"entries": [{"key": "multi", "value": "m"}], "hits": 0})
    assert r.status == 429
    assert r.json()["statuses"][0]["limit"]["name"] == "multi_day"

    # each limit has its own decision series
    text = weir.metrics_text()
    for rule, result, n in (("multi_day", "allowed", 2), ("multi_day", "denied", 2),
                            ("multi_hour", "denied", 0)):
        line = f'weir_decisions_total{{domain="test",rule="{rule}",result="{result}"}} {n}'
        assert line in text.splitlines(), (line, text)


def test_metrics_series_unique_with_several_limits(weir):
    # two limits on one descriptor path: upstream's series are labelled by
    # domain and path only, and count each descriptor once, by the limit it
    # reported (multi_day: 2 per day), never once per limit
    for _ in range(3):
        weir.check("test", {"multi": "m"})
    m = weir.metrics()  # parse_metrics() fails on a duplicate series

    def up(name):
        return m[("ratelimit_service_rate_limit_" + name, (("domain", "test"),
                                                           ("key1", "multi")))]

    assert up("total_hits") == 3
    assert up("over_limit") == 1
    assert up("within_limit") == 2
    assert up("near_limit") == 1  # the 2nd hit: past 80 % of 2


def test_denial_by_one_rule_leaves_the_other_budget_untouched(weir):
    r = weir.check("test", {"client": "c1"}, {"endpoint": "e1"})
    assert r.status == 200
    assert [s["remaining"] for s in r.json()["statuses"]] == [3, 0]
    # the endpoint rule (1 per hour) denies: the client rule admits but is
    # not charged
    r = weir.check("test", {"client": "c1"}, {"endpoint": "e1"})
    assert r.status == 429
    sts = r.json()["statuses"]
    assert [s["code"] for s in sts] == ["OK", "OVER_LIMIT"]
    assert r.header("RateLimit") == '"test.endpoint";r=0;t=3600'
    assert r.header("Retry-After") == "3600"
    # a peek (hits 0) shows the client budget still at 3
    r = weir.check("test", {"entries": [{"key": "client", "value": "c1"}], "hits": 0})
    assert r.status == 200
    assert r.json()["statuses"][0]["remaining"] == 3
    r = weir.check("test", {"client": "c1"})
    assert r.json()["statuses"][0]["remaining"] == 2


def test_shadow_mode_never_denies(weir):
    shadow = tb_limit("shadow", 1)
    r = weir.check("test", {"shadow": "s"})
    assert r.status == 200
    assert r.json() == {"allowed": True, "code": "OK", "statuses": [
        {"code": "OK", "limit": shadow, "remaining": 0, "reset_after_ms": 3600000,
         "retry_after_ms": 0, "shadow": True, "would_deny": False}]}
    for _ in range(2):
        r = weir.check("test", {"shadow": "s"}, {"tb": "s"})
        assert r.status == 200
        assert r.header("Retry-After") is None
        body = r.json()
        assert body["allowed"] is True
        st = body["statuses"][0]
        assert (st["code"], st["shadow"], st["would_deny"]) == ("OK", True, True)
        assert st["retry_after_ms"] > 0
    # the enforcing rule beside it was charged as usual
    assert body["statuses"][1]["remaining"] == 0
    r = weir.post("/json", {"domain": "test", "descriptors": [
        {"entries": [{"key": "shadow", "value": "s"}]}]})
    assert r.status == 200
    assert r.json()["overallCode"] == "OK"
    assert weir.get("/v1/check?domain=test&shadow=s").status == 200
    text = weir.metrics_text().splitlines()
    for result, n in (("allowed", 1), ("denied", 0), ("shadow_would_deny", 4)):
        assert f'weir_decisions_total{{domain="test",rule="shadow",result="{result}"}} {n}' \
            in text
    assert 'ratelimit_service_rate_limit_shadow_mode{domain="test",key1="shadow"} 4' in text


def test_hits(weir):
    # descriptor hits 0: check without consuming, any number of times
    for _ in range(3):
        r = weir.check("test", {"entries": [{"key": "client", "value": "h"}], "hits": 0})
        assert r.status == 200
        assert r.json()["statuses"][0]["remaining"] == 4
        assert r.header("X-RateLimit-Remaining") == "4"
    # request-wide hits 0 means 1
    r = weir.check("test", {"client": "h"}, hits=0)
    assert r.json()["statuses"][0]["remaining"] == 3
    # request-wide hits 2
    r = weir.check("test", {"client": "h"}, hits=2)
    assert r.json()["statuses"][0]["remaining"] == 1
    # a descriptor's own hits win over the request's
    r = weir.check("test", {"entries": [{"key": "client", "value": "h"}], "hits": 1}, hits=3)
    assert r.status == 200
    assert r.json()["statuses"][0]["remaining"] == 0
    # a peek at an exhausted limit answers "would one more be admitted?"
    r = weir.check("test", {"entries": [{"key": "client", "value": "h"}], "hits": 0})
    assert r.status == 429
    assert r.json()["statuses"][0]["code"] == "OVER_LIMIT"
    # more hits than are left: denied, nothing consumed
    r = weir.check("test", {"entries": [{"key": "client", "value": "h2"}], "hits": 5})
    assert r.status == 429
    r = weir.check("test", {"entries": [{"key": "client", "value": "h2"}], "hits": 0})
    assert r.json()["statuses"][0]["remaining"] == 4


def test_unknown_domain_is_404(weir):
    r = weir.check("nope", {"tb": "x"})
    assert r.status == 404
    assert r.header("Content-Type") == "application/problem+json"
    assert r.json() == {"type": "about:blank", "title": "Not Found", "status": 404,
                        "detail": "unknown domain 'nope'"}
    r = weir.get("/v1/check?domain=nope&tb=x")
    assert r.status == 404
    assert r.json()["detail"] == "unknown domain 'nope'"


def test_concurrent_clients_get_exactly_the_limit(weir):
    # 6 clients x 40 requests over both worker threads: exactly 100 admitted
    body = {"domain": "test", "descriptors": [{"entries": [{"key": "crowd", "value": "c"}]}]}
    results, errors = [], []

    def client():
        try:
            with weir.conn() as c:
                for _ in range(40):
                    r = c.request("POST", "/v1/check", body)
                    results.append((r.status, r.json()["statuses"][0]["remaining"]))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=client) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []
    statuses = [s for s, _ in results]
    assert (statuses.count(200), statuses.count(429)) == (100, 140)
    # every admitted request saw a different remaining count: 99 .. 0
    assert sorted(rem for s, rem in results if s == 200) == list(range(100))


# ------------------------------------------------------------ header families


def deny_tb(weir):
    ok = [weir.check("test", {"tb": "h"}) for _ in range(2)]
    assert [r.status for r in ok] == [200, 200]
    denied = weir.check("test", {"tb": "h"})
    assert denied.status == 429
    return ok[0], denied


def test_headers_none(weir_factory):
    weir = weir_factory(RULES, "--headers", "none")
    ok, denied = deny_tb(weir)
    assert rate_header_names(ok) == []
    assert rate_header_names(denied) == []
    assert denied.json()["statuses"][0]["code"] == "OVER_LIMIT"
    g = weir.get("/v1/check?domain=test&tb=h")
    assert g.status == 429
    assert rate_header_names(g) == []


def test_headers_legacy_only(weir_factory):
    weir = weir_factory(RULES, "--headers", "legacy")
    ok, denied = deny_tb(weir)
    assert rate_header_names(ok) == ["x-ratelimit-limit", "x-ratelimit-remaining",
                                     "x-ratelimit-reset"]
    assert ok.header("X-RateLimit-Remaining") == "1"
    assert rate_header_names(denied) == ["x-ratelimit-limit", "x-ratelimit-remaining",
                                         "x-ratelimit-reset"]


def test_headers_ietf_and_retry_after(weir_factory):
    weir = weir_factory(RULES, "--headers", "ietf,retry-after")
    ok, denied = deny_tb(weir)
    assert rate_header_names(ok) == ["ratelimit-policy", "ratelimit"]
    assert rate_header_names(denied) == ["ratelimit-policy", "ratelimit", "retry-after"]
    assert denied.header("Retry-After") == "1800"


def test_retry_jitter_stays_within_bounds(weir_factory):
    weir = weir_factory(RULES, "--retry-jitter", "5")
    deny_tb(weir)
    seen = set()
    for _ in range(30):
        r = weir.check("test", {"tb": "h"})
        assert r.status == 429
        base = math.ceil(r.json()["statuses"][0]["retry_after_ms"] / 1000)
        ra = int(r.header("Retry-After"))
        assert base <= ra <= base + 5, (base, ra)
        seen.add(ra - base)
        # the body keeps the exact time; jitter is only in the header
        assert base in (1799, 1800)
    assert len(seen) > 1, f"no jitter in 30 denials: {seen}"
    # an allowed answer never carries Retry-After
    assert weir.check("test", {"tb": "other"}).header("Retry-After") is None


# ------------------------------------------------------------ batch


def test_batch(weir):
    body = {"requests": [
        {"domain": "test", "descriptors": [{"entries": [{"key": "named", "value": "b"}]}]},
        {"domain": "test", "descriptors": [{"entries": [{"key": "named", "value": "b"}]}]},
        {"domain": "test", "descriptors": [{"entries": [{"key": "named", "value": "b"}]}]},
        {"domain": "nope", "descriptors": [{"entries": [{"key": "x", "value": "y"}]}]},
        {"domain": "", "descriptors": [{"entries": [{"key": "x", "value": "y"}]}]},
        {"domain": "test", "descriptors": [{"entries": [{"key": "free", "value": "y"}]}]},
    ]}
    r = weir.post("/v1/check/batch", body)
    assert r.status == 200
    assert r.header("Content-Type") == "application/json"
    # a batch carries no rate limit headers: they describe one decision
    assert rate_header_names(r) == []
    d = r.json()["decisions"]
    assert len(d) == 6
    named = tb_limit("named", 2, "named_limit")
    for i in range(3):
        for key in ("reset_after_ms", "retry_after_ms"):
            d[i]["statuses"][0].pop(key)
    assert d[0] == {"allowed": True, "code": "OK",
                    "statuses": [{"code": "OK", "limit": named, "remaining": 1}]}
    assert d[1] == {"allowed": True, "code": "OK",
                    "statuses": [{"code": "OK", "limit": named, "remaining": 0}]}
    assert d[2] == {"allowed": False, "code": "OVER_LIMIT",
                    "statuses": [{"code": "OVER_LIMIT", "limit": named, "remaining": 0}]}
    assert d[3] == {"error": {"status": 404, "detail": "unknown domain 'nope'"}}
    assert d[4] == {"error": {"status": 400, "detail": "rate limit domain must not be empty"}}
    assert d[5] == {"allowed": True, "code": "OK", "statuses": [{"code": "OK", "unlimited": True}]}
    # the batch charged the same counters as single checks
    assert weir.check("test", {"named": "b"}).status == 429


def test_batch_caps_and_errors(weir_factory):
    weir = weir_factory(RULES, "--max-batch", "2")
    one = {"domain": "test", "descriptors": [{"entries": [{"key": "tb", "value": "q"}]}]}
    r = weir.post("/v1/check/batch", {"requests": [one, one, one]})
    assert r.status == 413
    assert r.json() == {"type": "about:blank", "title": "Content Too Large", "status": 413,
                        "detail": "too many requests (3 > 2)"}
    r = weir.post("/v1/check/batch", {"requests": [one, {"domain": 1}]})
    assert r.status == 400
    assert r.json()["detail"] == "requests[1].domain: must be a string"
    # a refused batch charged nothing
    r = weir.check("test", {"tb": "q"})
    assert r.header("RateLimit") == '"test.tb";r=1;t=1800'
    r = weir.post("/v1/check/batch", {"requests": []})
    assert r.status == 200
    assert r.json() == {"decisions": []}


# ------------------------------------------------------------ GET /v1/check


def test_get_form(weir):
    r = weir.get("/v1/check?domain=test&tb=g")
    assert r.status == 200
    assert r.body == b""
    assert r.header("Content-Length") == "0"
    assert r.header("Content-Type") is None
    assert r.header("RateLimit") == '"test.tb";r=1;t=1800'
    assert r.header("X-RateLimit-Remaining") == "1"
    # percent-escapes, '+' and several entries (a nested rule)
    r = weir.get("/v1/check?domain=test&path=%2Flogin&remote_address=10.0.0.1")
    assert r.status == 200
    assert r.header("RateLimit") == '"test.path_/login.remote_address";r=4;t=720'
    # hits as a parameter is request-wide: 0 there means 1 (as upstream)
    r = weir.get("/v1/check?domain=test&tb=g&hits=0")
    assert r.status == 200
    assert r.header("X-RateLimit-Remaining") == "0"
    r = weir.get("/v1/check?domain=test&tb=g")
    assert r.status == 429
    assert r.header("Content-Type") == "application/problem+json"
    assert r.header("Retry-After") == "1800"
    assert r.json() == {"type": "about:blank", "title": "Too Many Requests", "status": 429,
                        "detail": "rate limit exceeded: test.tb allows 2 per hour",
                        "rule": {"name": None, "domain": "test", "path": "tb"},
                        "limit": 2, "window_seconds": 3600, "retry_after": 1800}


NO_ENTRIES = ("no descriptor entries: add them as query parameters "
              "(/v1/check?domain=test&remote_address=192.0.2.1), or start weir serve with "
              "--check-header HEADER=KEY")


@pytest.mark.parametrize("query,status,detail", [
    ("tb=x", 400, "missing query parameter 'domain'"),
    ("domain=test&tb", 400, "query parameter 'tb' has no value"),
    ("domain=test&tb=%zz", 400, "bad percent-escape in query"),
    ("domain=test&domain=test&tb=x", 400, "duplicate query parameter 'domain'"),
    ("domain=test&tb=x&hits=-1", 400,
     "query parameter 'hits': must be an integer from 0 to 9007199254740992"),
    ("domain=test", 400, NO_ENTRIES),
    ("domain=&tb=x", 400, "rate limit domain must not be empty"),
])
def test_get_form_errors(weir, query, status, detail):
    r = weir.get("/v1/check?" + query)
    assert r.status == status
    assert r.header("Content-Type") == "application/problem+json"
    assert r.json() == {"type": "about:blank", "title": "Bad Request", "status": status,
                        "detail": detail}


def test_get_form_with_check_header(weir_factory):
    weir = weir_factory(RULES, "--check-header", "X-Api-Key=api_key",
                        "--check-header", "X-Client-Ip=remote_address")
    r = weir.get("/v1/check?domain=test", headers={"X-Api-Key": "k1"})
    assert r.status == 200
    assert r.header("RateLimit") == '"per_key";r=1;t=1800'
    # header names are case-insensitive; the same key is counted on
    r = weir.get("/v1/check?domain=test", headers={"x-api-key": "k1"})
    assert r.header("RateLimit") == '"per_key";r=0;t=3600'
    r = weir.get("/v1/check?domain=test", headers={"X-API-KEY": "k1"})
    assert r.status == 429
    assert r.json()["rule"] == {"name": "per_key", "domain": "test", "path": "api_key"}
    # the query's pairs come first, then the configured headers
    r = weir.get("/v1/check?domain=test&path=/login", headers={"X-Client-Ip": "192.0.2.1"})
    assert r.status == 200
    assert r.header("RateLimit") == '"test.path_/login.remote_address";r=4;t=720'
    # an absent header adds no entry
    r = weir.get("/v1/check?domain=test")
    assert r.status == 400
    assert r.json()["detail"] == NO_ENTRIES


def test_legacy_limit_is_the_burst_when_it_is_larger(weir_factory):
    """X-RateLimit-Remaining is never above X-RateLimit-Limit: a token
    bucket of 5 a second with a burst of 20 says 20."""
    w = weir_factory("domain: b\n"
                     "descriptors:\n"
                     "  - key: k\n"
                     "    rate_limit: {unit: second, requests_per_unit: 5, algorithm: token_bucket,"
                     " burst: 20}\n"
                     "  - key: g\n"
                     "    rate_limit: {unit: second, requests_per_unit: 5, algorithm: gcra}\n")
    r = w.get("/v1/check?domain=b&k=x")
    assert (r.header("X-RateLimit-Limit"), r.header("X-RateLimit-Remaining")) == ("20", "19")
    # GCRA's default burst of 1 is below the rate: the rate is the limit
    r = w.get("/v1/check?domain=b&g=x")
    assert (r.header("X-RateLimit-Limit"), r.header("X-RateLimit-Remaining")) == ("5", "0")


def test_head(weir):
    g = weir.get("/v1/check?domain=test&ban=x")
    h = weir.request("HEAD", "/v1/check?domain=test&ban=x")
    assert h.status == 429
    assert h.body == b""
    assert h.header("Content-Length") == g.header("Content-Length") != "0"
    assert h.header("Content-Type") == "application/problem+json"
    assert h.header("RateLimit-Policy") == '"test.ban";q=0;w=3600'
    h = weir.request("HEAD", "/v1/check?domain=test&tb=head")
    assert h.status == 200
    assert h.header("RateLimit") == '"test.tb";r=1;t=1800'
    # HEAD decides (and charges) like GET
    assert weir.get("/v1/check?domain=test&tb=head").header("X-RateLimit-Remaining") == "0"
    h = weir.request("HEAD", "/healthz")
    assert (h.status, h.body, h.header("Content-Length")) == (200, b"", "15")


# ------------------------------------------------------------ POST /json


def envoy(weir, entries, **extra):
    body = {"domain": extra.pop("domain", "test"),
            "descriptors": [{"entries": [{"key": k, "value": v} for k, v in entries.items()]}]}
    body["descriptors"][0].update(extra)
    return weir.post("/json", body)


def test_envoy_json_bodies(weir):
    r = envoy(weir, {"named": "e"})
    assert r.status == 200
    assert r.header("Content-Type") == "application/json"
    assert r.header("RateLimit") == '"named_limit";r=1;t=1800'
    assert r.body == (b'{"overallCode":"OK","statuses":[{"code":"OK","currentLimit":'
                      b'{"requestsPerUnit":2,"unit":"HOUR","name":"named_limit"},'
                      b'"limitRemaining":1,"durationUntilReset":"1800s"}]}')
    r = envoy(weir, {"tb": "e"})
    assert r.body == (b'{"overallCode":"OK","statuses":[{"code":"OK","currentLimit":'
                      b'{"requestsPerUnit":2,"unit":"HOUR"},"limitRemaining":1,'
                      b'"durationUntilReset":"1800s"}]}')
    r = envoy(weir, {"tb": "e"})
    assert r.status == 200
    body = r.json()
    st = body["statuses"][0]
    # proto3 JSON leaves zero values out: no limitRemaining at 0
    assert "limitRemaining" not in st
    assert re.fullmatch(r"3(5\d\d|600)(\.\d{3}|\.\d{6})?s", st["durationUntilReset"]), st
    r = envoy(weir, {"tb": "e"})
    assert r.status == 429
    assert r.header("Retry-After") == "1800"
    body = r.json()
    assert list(body) == ["overallCode", "statuses"]
    assert body["overallCode"] == "OVER_LIMIT"
    st = body["statuses"][0]
    assert list(st) == ["code", "currentLimit", "durationUntilReset"]
    assert st["code"] == "OVER_LIMIT"
    assert st["currentLimit"] == {"requestsPerUnit": 2, "unit": "HOUR"}
    assert re.fullmatch(r"3(5\d\d|600)(\.\d{3}|\.\d{6})?s", st["durationUntilReset"]), st


def test_envoy_json_special_cases(weir):
    # unknown domain: 200 OK, as upstream
    r = envoy(weir, {"tb": "x"}, domain="nope")
    assert r.status == 200
    assert r.body == b'{"overallCode":"OK","statuses":[{"code":"OK"}]}'
    # unlimited: upstream's limitRemaining, no currentLimit
    r = envoy(weir, {"free": "x"})
    assert r.status == 200
    assert r.body == b'{"overallCode":"OK","statuses":[{"code":"OK","limitRemaining":4294967295}]}'
    # a ban: requestsPerUnit 0 is a zero value, left out
    r = envoy(weir, {"ban": "x"})
    assert r.status == 429
    assert r.body == (b'{"overallCode":"OVER_LIMIT","statuses":[{"code":"OVER_LIMIT",'
                      b'"currentLimit":{"unit":"HOUR"},"durationUntilReset":"0s"}]}')
    # hitsAddend as a string (proto3 JSON int64), and its snake_case spelling
    r = envoy(weir, {"client": "j"}, hitsAddend="3")
    assert r.status == 200
    assert r.json()["statuses"][0]["limitRemaining"] == 1
    r = envoy(weir, {"client": "j"}, hits_addend=2)
    assert r.status == 429
    assert r.json()["statuses"][0]["limitRemaining"] == 1
    # weir's own field names are not upstream's
    r = envoy(weir, {"client": "j"}, hits=1)
    assert r.status == 400
    assert r.json()["detail"] == "descriptors[0]: unknown field 'hits'"


# ------------------------------------------------------------ admin endpoints


def test_rlconfig_as_upstream_writes_it(weir):
    """envoyproxy/ratelimit's /rlconfig form, one line per limit, for the
    tools that read it; /v1/rules is weir's fuller listing."""
    r = weir.get("/rlconfig")
    assert r.status == 200
    assert r.header("Content-Type") == "text/plain; charset=utf-8"
    lines = r.text().splitlines()
    assert lines[:5] == [
        "test.tb: unit=HOUR requests_per_unit=2, shadow_mode: false",
        "test.fw: unit=HOUR requests_per_unit=3, shadow_mode: false",
        "test.named: unit=HOUR requests_per_unit=2, shadow_mode: false",
        "test.multi: unit=HOUR requests_per_unit=5, shadow_mode: false",
        "test.multi: unit=DAY requests_per_unit=2, shadow_mode: false",
    ]
    assert len(lines) == len(weir.get("/v1/rules").text().splitlines())
    assert weir.request("POST", "/rlconfig", b"").status == 405


def test_rules_listing(weir):
    r = weir.get("/v1/rules")
    assert r.status == 200
    assert r.header("Content-Type") == "text/plain; charset=utf-8"
    assert r.text().splitlines() == [
        "test.tb: requests_per_unit=2 unit=hour window_us=3600000000 algorithm=token_bucket"
        " burst=2 shadow_mode=false",
        "test.fw: requests_per_unit=3 unit=hour window_us=3600000000 algorithm=fixed_window"
        " burst=3 shadow_mode=false",
        "test.named: requests_per_unit=2 unit=hour window_us=3600000000 algorithm=token_bucket"
        " burst=2 name=named_limit shadow_mode=false",
        "test.multi: requests_per_unit=5 unit=hour window_us=3600000000 algorithm=token_bucket"
        " burst=5 name=multi_hour shadow_mode=false",
        "test.multi: requests_per_unit=2 unit=day window_us=86400000000 algorithm=token_bucket"
        " burst=2 name=multi_day shadow_mode=false",
        "test.client: requests_per_unit=4 unit=hour window_us=3600000000 algorithm=token_bucket"
        " burst=4 shadow_mode=false",
        "test.endpoint: requests_per_unit=1 unit=hour window_us=3600000000"
        " algorithm=token_bucket burst=1 shadow_mode=false",
        "test.api_key: requests_per_unit=2 unit=hour window_us=3600000000"
        " algorithm=token_bucket burst=2 name=per_key shadow_mode=false",
        "test.path_/login.remote_address: requests_per_unit=5 unit=hour window_us=3600000000"
        " algorithm=token_bucket burst=5 shadow_mode=false",
        "test.free: unlimited shadow_mode=false",
        "test.ban: requests_per_unit=0 unit=hour window_us=3600000000 algorithm=fixed_window"
        " burst=0 shadow_mode=false",
        "test.crowd: requests_per_unit=100 unit=hour window_us=3600000000 algorithm=gcra"
        " burst=100 shadow_mode=false",
        "test.shadow: requests_per_unit=1 unit=hour window_us=3600000000 algorithm=token_bucket"
        " burst=1 shadow_mode=true",
    ]


def series(m, name, **labels):
    return m.get((name, tuple(sorted(labels.items()))))


def test_metrics(weir):
    secret = "secret-" + uuid.uuid4().hex
    for _ in range(3):
        weir.check("test", {"tb": secret})  # 2 allowed, 1 denied
    weir.check("test", {"named": secret})
    weir.get(f"/v1/check?domain=test&path=/login&remote_address={secret}")
    weir.check("test", {"entries": [{"key": "client", "value": secret}], "hits": 3})
    weir.check("nope", {"tb": secret})  # unknown domain: no rule, no series
    weir.post("/json", {"domain": secret, "descriptors": [
        {"entries": [{"key": secret, "value": secret}]}]})
    weir.get("/" + secret)

    r = weir.get("/metrics")
    assert r.status == 200
    assert r.header("Content-Type") == "text/plain; version=0.0.4; charset=utf-8"
    text = r.text()
    assert secret not in text, "a label value was taken from a request"
    m = weir.metrics()

    def dec(rule, result):
        return series(m, "weir_decisions_total", domain="test", rule=rule, result=result)

    assert dec("tb", "allowed") == 2
    assert dec("tb", "denied") == 1
    assert dec("tb", "shadow_would_deny") == 0
    assert dec("tb", "failure_mode") == 0
    # a named limit is labelled by its name, an unnamed one by its path
    assert dec("named_limit", "allowed") == 1
    assert dec("path_/login.remote_address", "allowed") == 1
    assert dec("client", "allowed") == 1
    assert {k[1] for k in m if k[0] == "weir_decisions_total"} == {
        (("domain", "test"), ("result", res), ("rule", rule))
        for rule in ("tb", "named_limit", "path_/login.remote_address", "client")
        for res in ("allowed", "denied", "shadow_would_deny", "failure_mode")}

    def up(name, key1, **kw):
        return series(m, "ratelimit_service_rate_limit_" + name, domain="test", key1=key1, **kw)

    assert up("total_hits", "tb") == 3
    assert up("over_limit", "tb") == 1
    assert up("within_limit", "tb") == 2
    assert up("near_limit", "tb") == 1
    assert up("total_hits", "client") == 3  # hits are counted, not requests
    assert up("total_hits", "path_/login", key2="remote_address") == 1

    assert series(m, "weir_rules_reloads_total", result="ok") == 1
    assert series(m, "weir_rules_reloads_total", result="failed") == 0
    assert series(m, "ratelimit_service_config_load_success") == 1
    # one counter each: tb, named, the nested rule and client
    assert series(m, "weir_store_keys") == 4
    assert series(m, "weir_http_requests_total", route="/v1/check", code="200") == 5
    assert series(m, "weir_http_requests_total", route="/v1/check", code="429") == 1
    assert series(m, "weir_http_requests_total", route="/v1/check", code="404") == 1
    assert series(m, "weir_http_requests_total", route="/json", code="200") == 1
    assert series(m, "weir_http_requests_total", route="other", code="404") == 1
    assert series(m, "weir_connections_rejected_total", protocol="http") == 0
    # every series name is documented with HELP and TYPE
    names = {k[0] for k in m}
    for name in names:
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        assert f"# TYPE {base} " in text, name


def test_health(weir):
    r = weir.get("/healthz")
    assert (r.status, r.header("Content-Type"), r.body) == (200, "application/json",
                                                            b'{"status":"ok"}')
    r = weir.get("/healthcheck")
    assert (r.status, r.header("Content-Type"), r.body) == (200, "text/plain", b"OK")
    r = weir.request("HEAD", "/healthcheck")
    assert (r.status, r.body, r.header("Content-Length")) == (200, b"", "2")
    # the Date header is an IMF-fixdate
    assert re.fullmatch(r"(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug"
                        r"|Sep|Oct|Nov|Dec) \d{4} \d\d:\d\d:\d\d GMT", r.header("Date"))
    assert json.loads(weir.get("/healthz").body) == {"status": "ok"}
