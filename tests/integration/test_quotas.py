"""Tenants and their quotas through the admin API on SQLite (--quota-db):
records put, read, listed, deleted, audited, refused when bad; a change
in force on the decisions at once here and within seconds on another
instance on the same file; no acknowledged write lost to kill -9; usage
read without consuming."""
import json
import os
import signal
import subprocess
import time
import urllib.parse

import pytest

import rawhttp
from conftest import weir_bin
from test_admin import OTHER, TOKEN, Admin, token_file

RULES = """\
domain: api
tenants:
  key: api_key
  default_tier: free
  tiers:
    free:
      rate_limit: {unit: minute, requests_per_unit: 3}
    pro:
      rate_limit: {unit: minute, requests_per_unit: 10}
      descriptors:
        - key: endpoint
          value: /orders
          rate_limit: {unit: minute, requests_per_unit: 2}
descriptors:
  - key: api_key
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: global
    rate_limit: {unit: second, requests_per_unit: 100000}
"""

PRO = {"tier": "pro", "overrides": [
    {"descriptor": "endpoint:/orders", "requests_per_unit": 6, "unit": "minute"}]}


def start(factory, tmp_path, db=None, *flags):
    db = db or f"sqlite://{tmp_path}/quotas.db"
    return factory(RULES, "--admin", "127.0.0.1:0", "--admin-token-file", token_file(tmp_path),
                   "--quota-db", db, *flags)


def q(key):
    return "/admin/v1/quotas/" + urllib.parse.quote(key, safe="")


def admitted(weir, n, **entries):
    ok = 0
    for _ in range(n):
        r = weir.check("api", entries)
        assert r.status in (200, 429), r
        ok += r.status == 200
    return ok


def wait_admitted(weir, want, timeout=10.0, **entries):
    """Seconds until 20 requests of @entries admit @want (a tier's
    counter is its own: the tries before a change take nothing from the
    tier after it)."""
    t0 = time.monotonic()
    while True:
        got = admitted(weir, 20, **entries)
        if got == want:
            return time.monotonic() - t0
        assert time.monotonic() - t0 < timeout, f"still {got} admitted, not {want}"
        time.sleep(0.05)


@pytest.fixture
def weir(weir_factory, tmp_path):
    return start(weir_factory, tmp_path)


def test_put_get_delete_and_the_audit(weir):
    a = Admin(weir)
    r = a.request("PUT", q("abc123"), PRO)
    assert r.status == 201, r
    assert r.header("ETag") == '"1"'
    rec = r.json()
    assert rec["api_key"] == "abc123" and rec["tier"] == "pro" and rec["version"] == 1
    assert rec["quotas"]["overrides"] == PRO["overrides"]
    # the tier's own limits, from the rules in force
    assert rec["quotas"]["default"] == [{"descriptor": "default", "requests_per_unit": 10,
                                         "unit": "minute", "algorithm": "fixed_window"}]
    assert rec["effective_at"] is None and rec["expires_at"] is None
    r = a.get(q("abc123"))
    assert r.status == 200 and r.json()["tier"] == "pro" and r.header("ETag") == '"1"'
    # a repeated PUT changes nothing
    r = a.request("PUT", q("abc123"), PRO)
    assert r.status == 200 and r.header("ETag") == '"1"'
    # a change by someone else
    r = Admin(weir, OTHER).request("PUT", q("abc123"), {"tier": "free"})
    assert r.status == 200 and r.header("ETag") == '"2"'
    r = a.request("DELETE", q("abc123"))
    assert r.status == 204, r
    assert a.get(q("abc123")).status == 404
    assert a.request("DELETE", q("abc123")).status == 404
    r = a.get("/admin/v1/audit?key=abc123")
    assert r.status == 200, r
    entries = r.json()["entries"]
    assert [(e["action"], e["actor"]) for e in entries] == [
        ("delete", "ops-alice"), ("update", "deploy-bot"), ("create", "ops-alice")]
    assert entries[2]["before"] is None and entries[2]["after"]["tier"] == "pro"
    assert entries[1]["before"]["tier"] == "pro" and entries[1]["after"]["tier"] == "free"
    assert entries[0]["before"]["tier"] == "free" and entries[0]["after"] is None


def test_if_match_keeps_two_operators_apart(weir):
    a = Admin(weir)
    assert a.request("PUT", q("k"), PRO, headers={"If-None-Match": "*"}).status == 201
    r = a.request("PUT", q("k"), PRO, headers={"If-None-Match": "*"})
    assert r.status == 412, r
    r = a.request("PUT", q("k"), {"tier": "free"}, headers={"If-Match": '"1"'})
    assert r.status == 200 and r.header("ETag") == '"2"'
    # the second operator still holds version 1
    r = a.request("PUT", q("k"), {"tier": "pro"}, headers={"If-Match": '"1"'})
    assert r.status == 412, r
    assert a.get(q("k")).json()["tier"] == "free"
    assert a.request("DELETE", q("k"), headers={"If-Match": '"1"'}).status == 412
    assert a.request("DELETE", q("k"), headers={"If-Match": '"2"'}).status == 204
    assert a.request("PUT", q("k"), PRO, headers={"If-Match": "1"}).status == 412
    # If-Match: * asks for a record to exist
    assert a.request("PUT", q("k"), PRO, headers={"If-Match": "*"}).status == 412
    assert a.get(q("k")).status == 404
    assert a.request("PUT", q("k"), PRO).status == 201
    assert a.request("PUT", q("k"), {"tier": "free"}, headers={"If-Match": "*"}).status == 200


def test_a_change_is_in_force_at_once(weir):
    a = Admin(weir)
    # no record: the default tier's 3 a minute
    assert admitted(weir, 10, api_key="t1") == 3
    assert a.request("PUT", q("t2"), PRO).status == 201
    t = wait_admitted(weir, 10, api_key="t2")
    assert t < 5.0  # read again at once; slack for a loaded machine
    assert admitted(weir, 10, api_key="t2", endpoint="/orders") == 6
    # deleted: back on the default tier
    assert a.request("DELETE", q("t2")).status == 204
    deadline = time.monotonic() + 5
    while a.get("/admin/v1/usage/t2").json()["usage"]["default"][0]["limit"] != 3:
        assert time.monotonic() < deadline, "the deletion is not in force"
        time.sleep(0.02)


def test_list_pages_by_tier(weir):
    a = Admin(weir)
    keys = ["a", "b \"quoted\"", "c/slash", "d-\u00e9t\u00e9", "e", "f"]
    for i, k in enumerate(keys):
        assert a.request("PUT", q(k), {"tier": "pro" if i % 2 == 0 else "free"}).status == 201
    seen, cursor = [], None
    for _ in range(10):
        target = "/admin/v1/quotas?limit=2" + (f"&cursor={cursor}" if cursor else "")
        r = a.get(target)
        assert r.status == 200, r
        page = r.json()
        assert len(page["quotas"]) <= 2
        seen += [x["api_key"] for x in page["quotas"]]
        cursor = page["next"]
        if not cursor:
            break
    assert seen == sorted(keys, key=lambda k: k.encode())
    r = a.get("/admin/v1/quotas?tier=pro")
    assert [x["api_key"] for x in r.json()["quotas"]] == [keys[0], keys[2], keys[4]]
    assert a.get("/admin/v1/quotas?cursor=@@@").status == 400
    assert a.get("/admin/v1/quotas?limit=0").status == 400
    assert a.get("/admin/v1/quotas?limit=1001").status == 400
    assert a.get("/admin/v1/quotas?color=red").status == 400


@pytest.mark.parametrize("body,status,field", [
    ("{", 400, ""),
    ("[]", 400, ""),
    ('{"tier": "gold"}', 422, "tier"),
    ('{"tier": "pro", "colour": 1}', 400, "colour"),
    ('{"tier": "pro", "overrides": [{"descriptor": "default", "requests_per_unit": 1, '
     '"unit": "fortnight"}]}', 422, "overrides[0].unit"),
    ('{"tier": "pro", "overrides": [{"descriptor": "default", "requests_per_unit": -1, '
     '"unit": "minute"}]}', 422, "overrides[0].requests_per_unit"),
    ('{"tier": "pro", "overrides": [{"descriptor": "default", '
     '"requests_per_unit": 99999999999999999999, "unit": "minute"}]}', 422,
     "overrides[0].requests_per_unit"),
    ('{"tier": "pro", "overrides": [{"descriptor": "default", "requests_per_unit": 1e400, '
     '"unit": "minute"}]}', 422, "overrides[0].requests_per_unit"),
    ('{"tier": "pro", "overrides": [{"descriptor": "default", "requests_per_unit": 5, '
     '"calendar": "month", "time_zone": "Mars/Olympus_Mons"}]}', 422, "overrides[0].time_zone"),
    ('{"tier": "pro", "effective_at": "2026-03-01T00:00:00Z", '
     '"expires_at": "2026-02-01T00:00:00Z"}', 422, "expires_at"),
    ('{"tier": "pro", "effective_at": "2026-02-30T00:00:00Z"}', 422, "effective_at"),
    ('{"tier": "pro\\u0000"}', 422, "tier"),
])
def test_bad_bodies_name_the_field(weir, body, status, field):
    r = Admin(weir).request("PUT", q("k"), body)
    assert r.status == status, (r, r.body)
    assert r.header("Content-Type") == "application/problem+json"
    if field:
        assert r.json().get("field") == field, r.json()
    assert Admin(weir).get(q("k")).status == 404  # nothing written


def test_hostile_keys_and_big_bodies(weir):
    a = Admin(weir)
    for key in ["it's \"quoted\"", "\u96ea\u3060\u308b\u307e", "'; DROP TABLE tenants; --",
                "back\\slash", "+plus and space"]:
        r = a.request("PUT", q(key), PRO)
        assert r.status == 201, (key, r)
        r = a.get(q(key))
        assert r.status == 200 and r.json()["api_key"] == key
    assert a.get("/admin/v1/quotas/nul%00byte").status == 400
    assert a.get("/admin/v1/quotas/bad%zzescape").status == 400
    assert a.get(q("x" * 257)).status in (400, 414)
    assert a.get("/admin/v1/quotas/").status == 404
    big = '{"tier": "pro", "overrides": [' + " " * (1 << 20) + "]}"
    r = a.request("PUT", q("big"), big)
    assert r.status == 413, r
    assert len(a.get("/admin/v1/quotas?limit=1000").json()["quotas"]) == 5


def test_usage_reads_without_consuming(weir):
    a = Admin(weir)
    assert a.request("PUT", q("u1"), PRO).status == 201
    deadline = time.monotonic() + 5
    while a.get("/admin/v1/usage/u1").json()["usage"]["default"][0]["limit"] != 10:
        assert time.monotonic() < deadline, "the record is not in force"
        time.sleep(0.02)
    assert admitted(weir, 4, api_key="u1") == 4
    assert admitted(weir, 1, api_key="u1", endpoint="/orders") == 1
    for _ in range(3):  # reading it thrice changes nothing
        r = a.get("/admin/v1/usage/u1")
        assert r.status == 200, r
        u = r.json()
        assert u["api_key"] == "u1" and u["domain"] == "api"
        [d] = u["usage"]["default"]
        assert (d["limit"], d["used"], d["remaining"], d["unit"]) == (10, 4, 6, "minute")
        assert "resets_at" in d
        [o] = u["usage"]["endpoint:/orders"]
        assert (o["limit"], o["used"]) == (6, 1)
    assert a.get("/admin/v1/usage/u1?domain=nope").status == 404


def test_another_instance_follows_within_seconds(weir_factory, tmp_path):
    a = start(weir_factory, tmp_path)
    b = start(weir_factory, tmp_path)
    times = []
    for i in range(5):
        key = f"p{i}"
        t0 = time.monotonic()
        assert Admin(a).request("PUT", q(key), PRO).status == 201
        deadline = t0 + 10
        while Admin(b).get("/admin/v1/usage/" + key).json()["usage"]["default"][0]["limit"] != 10:
            assert time.monotonic() < deadline, "not in force on the other instance in 10 s"
            time.sleep(0.02)
        times.append(time.monotonic() - t0)
    assert max(times) < 10
    print("propagation seconds:", ", ".join(f"{t:.2f}" for t in times))


def test_kill_9_loses_no_acknowledged_write(weir_factory, tmp_path):
    w = start(weir_factory, tmp_path)
    port = w.admin_port
    acked = []
    conn = rawhttp.Conn(port)
    for i in range(200):
        conn.send(rawhttp.build_request("PUT", q(f"k{i}"), {"tier": "pro"},
                                        {"Authorization": f"Bearer {TOKEN}"}))
        if i == 120:  # killed with this one in flight
            os.kill(w.proc.pid, signal.SIGKILL)
            break
        r = conn.read_response()
        assert r.status == 201, r
        acked.append(f"k{i}")
    w.proc.wait()
    w._finished = True  # killed on purpose: no exit status to check
    assert len(acked) >= 100
    again = start(weir_factory, tmp_path)
    keys = set()
    cursor = None
    while True:
        r = Admin(again).get("/admin/v1/quotas?limit=1000" + (f"&cursor={cursor}" if cursor else ""))
        page = r.json()
        keys |= {x["api_key"] for x in page["quotas"]}
        cursor = page["next"]
        if not cursor:
            break
    assert set(acked) <= keys


def test_without_a_database_the_routes_say_so(weir_factory, tmp_path):
    w = weir_factory(RULES, "--admin", "127.0.0.1:0", "--admin-token-file", token_file(tmp_path))
    r = Admin(w).get(q("k"))
    assert r.status == 503 and "--quota-db" in r.json()["detail"]


def test_health_and_metrics_tell_the_tables_age(weir):
    assert Admin(weir).request("PUT", q("h1"), PRO).status == 201
    deadline = time.monotonic() + 5
    while True:
        h = weir.get("/healthz").json()
        if h.get("quotas", {}).get("tenants") == 1:
            break
        assert time.monotonic() < deadline, h
        time.sleep(0.05)
    assert h["quotas"]["db"] == "sqlite" and h["quotas"]["status"] == "ok"
    assert h["quotas"]["age_seconds"] < 35
    assert weir.metric("weir_quota_db_up") == 1 and weir.metric("weir_quota_tenants") == 1
    assert 0 <= weir.metric("weir_quota_snapshot_age_seconds") < 35
    assert weir.metric("weir_quota_loads_total") >= 1


def test_explain_names_the_tier_limits(weir):
    assert Admin(weir).request("PUT", q("x1"), PRO).status == 201
    deadline = time.monotonic() + 5
    while Admin(weir).get("/admin/v1/usage/x1").json()["usage"]["default"][0]["limit"] != 10:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    body = {"domain": "api", "descriptors": [{"entries": [{"key": "api_key", "value": "x1"}]}]}
    r = weir.post("/v1/check?explain=1", body)
    assert r.status == 200, r
    limits = r.json()["explain"][0]["limits"]
    # the file's limit gave way to the tier's, which decided (with its place)
    assert [(x["requests_per_unit"], x["verdict"]) for x in limits] == [
        (5, "replaced"), (10, "admitted")]
    assert limits[1]["line"] == 9 and limits[1]["file"] == weir.rules_path  # pro's rate_limit
