"""Tenants and their quotas on a real PostgreSQL (--quota-db postgresql://):
the admin API end to end; a change made through one instance in force on
another within the notification's round trip (timed, and the figures
written to $WEIR_PROPAGATION_REPORT when set); decisions that go on with
the last table while the server is stopped, and the admin routes that
say so; connections the server ends, made again and listening again; a
server down when weir starts; a change made by another writer in SQL,
with and without NOTIFY.

One server for the module (postgres.py), a database of its own for each
test."""
import os
import re
import statistics
import time

import pytest

from postgres import Postgres
from test_admin import OTHER, Admin, token_file
from test_quotas import PRO, RULES, q

# the per-minute limit of each tier of RULES
FREE, PRO_LIMIT = 3, 10


@pytest.fixture(scope="module")
def pg():
    server = Postgres()
    try:
        yield server.start()
    finally:
        server.close()


@pytest.fixture
def db(pg, request):
    """The URL of a fresh database on the module's server (running again
    afterwards, whatever the test did to it)."""
    if not pg.running():
        pg.start(port=pg.port)
    name = "t_" + re.sub(r"\W+", "_", request.node.name)[:50].lower()
    pg.psql(f'CREATE DATABASE "{name}"', database="postgres")
    yield f"postgresql://weir@127.0.0.1:{pg.port}/{name}"
    if not pg.running():
        pg.start(port=pg.port)


def psql(pg, url, sql):
    return pg.psql(sql, database=url.rsplit("/", 1)[1])


def start(factory, tmp_path, url, *flags):
    # info: a log of events, not of every decision
    return factory(RULES, "--admin", "127.0.0.1:0", "--admin-token-file", token_file(tmp_path),
                   "--quota-db", url, "--log-level", "info", *flags)


def minute_limit(weir, key):
    """The per-minute limit in force for @key's scope "default" on @weir,
    as its admin listener's usage route says (None when it cannot)."""
    r = Admin(weir).get("/admin/v1/usage/" + q(key).rsplit("/", 1)[1])
    if r.status != 200:
        return None
    for u in r.json()["usage"].get("default", []):
        if u.get("unit") == "minute":
            return u["limit"]
    return None


def wait_limit(weir, key, want, timeout=10.0, interval=0.01):
    """Seconds until @key's per-minute limit on @weir is @want."""
    t0 = time.monotonic()
    while minute_limit(weir, key) != want:
        assert time.monotonic() - t0 < timeout, \
            f"{key}: the limit is {minute_limit(weir, key)}, not {want}, after {timeout} s"
        time.sleep(interval)
    return time.monotonic() - t0


def override(n, tier="free"):
    return {"tier": tier, "overrides": [
        {"descriptor": "default", "requests_per_unit": n, "unit": "minute"}]}


def quotas_health(weir):
    r = weir.get("/healthz")
    assert r.status == 200, r
    return r.json()["quotas"]


# ------------------------------------------------------------ the admin API


def test_admin_api_end_to_end(db, pg, weir_factory, tmp_path):
    w = start(weir_factory, tmp_path, db)
    a = Admin(w)
    r = a.request("PUT", q("abc123"), PRO)
    assert r.status == 201 and r.header("ETag") == '"1"', r
    rec = r.json()
    assert (rec["api_key"], rec["tier"], rec["version"]) == ("abc123", "pro", 1)
    assert rec["quotas"]["overrides"] == PRO["overrides"]
    r = a.get(q("abc123"))
    assert r.status == 200 and r.header("ETag") == '"1"' and r.json()["tier"] == "pro"
    # unchanged: no new version, no audit entry
    r = a.request("PUT", q("abc123"), PRO)
    assert r.status == 200 and r.header("ETag") == '"1"', r
    r = Admin(w, OTHER).request("PUT", q("abc123"), {"tier": "free"}, headers={"If-Match": '"1"'})
    assert r.status == 200 and r.header("ETag") == '"2"', r
    # the first operator still holds version 1
    r = a.request("PUT", q("abc123"), PRO, headers={"If-Match": '"1"'})
    assert r.status == 412, r
    assert a.request("PUT", q("abc123"), PRO, headers={"If-None-Match": "*"}).status == 412
    assert a.request("DELETE", q("abc123"), headers={"If-Match": '"1"'}).status == 412
    assert a.get(q("abc123")).json()["tier"] == "free"
    assert a.request("DELETE", q("abc123"), headers={"If-Match": '"2"'}).status == 204
    assert a.get(q("abc123")).status == 404
    assert a.request("DELETE", q("abc123")).status == 404
    entries = a.get("/admin/v1/audit?key=abc123").json()["entries"]
    assert [(e["action"], e["actor"]) for e in entries] == [
        ("delete", "ops-alice"), ("update", "deploy-bot"), ("create", "ops-alice")]
    assert entries[2]["before"] is None and entries[2]["after"]["tier"] == "pro"
    assert entries[1]["before"]["tier"] == "pro" and entries[1]["after"]["tier"] == "free"
    assert entries[0]["before"]["tier"] == "free" and entries[0]["after"] is None
    # written in PostgreSQL, not somewhere else
    assert psql(pg, db, "SELECT string_agg(action || ':' || actor, ',' ORDER BY id) FROM audit_log"
                " WHERE api_key = 'abc123'") == "create:ops-alice,update:deploy-bot,delete:ops-alice"


def test_hostile_keys_and_paging_by_tier(db, pg, weir_factory, tmp_path):
    w = start(weir_factory, tmp_path, db)
    a = Admin(w)
    keys = ["it's \"quoted\"", "\u96ea\u3060\u308b\u307e", "'; DROP TABLE tenants; --",
            "Robert'); DELETE FROM audit_log; --", "back\\slash", "+plus and space",
            "$1 ?1 :a", "emoji \U0001f642", "plain", "z/slash"]
    tiers = {}
    for i, k in enumerate(keys):
        tiers[k] = "pro" if i % 3 else "free"
        r = a.request("PUT", q(k), {"tier": tiers[k]})
        assert r.status == 201, (k, r)
        r = a.get(q(k))
        assert r.status == 200 and r.json()["api_key"] == k, (k, r)
    assert psql(pg, db, "SELECT COUNT(*) FROM tenants") == str(len(keys))
    assert psql(pg, db, "SELECT COUNT(*) FROM audit_log") == str(len(keys))
    # pages of 2 of the pro tier, in bytewise order
    want = sorted((k for k in keys if tiers[k] == "pro"), key=lambda k: k.encode())
    seen, cursor, pages = [], None, 0
    while True:
        r = a.get("/admin/v1/quotas?tier=pro&limit=2" + (f"&cursor={cursor}" if cursor else ""))
        assert r.status == 200, r
        page = r.json()
        assert len(page["quotas"]) <= 2 and all(x["tier"] == "pro" for x in page["quotas"])
        seen += [x["api_key"] for x in page["quotas"]]
        pages += 1
        cursor = page["next"]
        if not cursor:
            break
    assert seen == want and pages == (len(want) + 1) // 2
    everything = [x["api_key"] for x in a.get("/admin/v1/quotas?limit=1000").json()["quotas"]]
    assert everything == sorted(keys, key=lambda k: k.encode())
    for k in keys:
        entries = a.get("/admin/v1/audit?key=" + q(k).rsplit("/", 1)[1]).json()["entries"]
        assert [(e["api_key"], e["action"]) for e in entries] == [(k, "create")]
        assert a.request("DELETE", q(k)).status == 204
    assert psql(pg, db, "SELECT COUNT(*) FROM tenants") == "0"


def test_keys_that_are_not_utf8_are_refused_clearly(db, weir_factory, tmp_path):
    """PostgreSQL stores text: a key of bytes that are not UTF-8 cannot be
    one of its keys, and is refused as such (not a server error)."""
    w = start(weir_factory, tmp_path, db)
    a = Admin(w)
    for method, target, body in [("GET", "/admin/v1/quotas/%FF", None),
                                 ("PUT", "/admin/v1/quotas/%FFabc", {"tier": "pro"}),
                                 ("PUT", "/admin/v1/quotas/a%C3", {"tier": "pro"}),
                                 ("DELETE", "/admin/v1/quotas/%ED%A0%80", None),
                                 ("GET", "/admin/v1/audit?key=%FF", None),
                                 ("GET", "/admin/v1/quotas?tier=%FF", None)]:
        r = a.request(method, target, body)
        assert r.status == 400, (method, target, r)
        assert r.header("Content-Type") == "application/problem+json"
        assert "UTF-8" in r.json()["detail"], r.json()
    # nor in a body: JSON is UTF-8
    r = a.request("PUT", q("k"), b'{"tier": "pro", "overrides": [{"descriptor": "endpoint:\xff",'
                  b' "requests_per_unit": 1, "unit": "minute"}]}')
    assert r.status == 400, r
    # the daemon's own page cursor never holds such a key, but one made up may
    assert a.get("/admin/v1/quotas?cursor=_w").status == 400
    # usage: decided on the default tier (no record can exist)
    r = a.get("/admin/v1/usage/%FF")
    assert r.status == 200, r
    assert r.json()["usage"]["default"][0]["limit"] == FREE
    # and the connection is still good for the next
    assert a.request("PUT", q("\u00e9t\u00e9"), PRO).status == 201
    assert a.get("/admin/v1/quotas").json()["quotas"][0]["api_key"] == "\u00e9t\u00e9"


# ------------------------------------------------------------ propagation


def test_propagation_between_two_instances(db, weir_factory, tmp_path):
    a = start(weir_factory, tmp_path, db)
    b = start(weir_factory, tmp_path, db)
    times = []
    for i in range(20):
        # five keys, four changes each: an override (a limit of its own)
        # then a tier alone, the tier alternating, so that every change
        # gives its key a limit it does not have
        key, n = f"tenant-{i % 5}", i // 5
        tier = "pro" if (i + n) % 2 else "free"
        if n % 2 == 0:
            body, want = override(100 + i, tier), 100 + i
        else:
            body, want = {"tier": tier}, PRO_LIMIT if tier == "pro" else FREE
        r = Admin(a).request("PUT", q(key), body)
        assert r.status in (200, 201), r
        t = wait_limit(b, key, want, timeout=10.0)
        times.append(t)
        # and here, where the change was made (read again after the commit)
        wait_limit(a, key, want, timeout=2.0)
    times.sort()
    p90 = times[int(0.9 * (len(times) - 1) + 0.5)]
    line = (f"propagation through PostgreSQL NOTIFY, {len(times)} changes: "
            f"min {times[0] * 1000:.0f} ms, median {statistics.median(times) * 1000:.0f} ms, "
            f"p90 {p90 * 1000:.0f} ms, max {times[-1] * 1000:.0f} ms")
    print(line)
    report = os.environ.get("WEIR_PROPAGATION_REPORT")
    if report:
        with open(report, "a") as f:
            f.write(line + "\n")
    assert max(times) < 10


# ------------------------------------------------------------ failures


def decide(weir, key, want_limit, seconds):
    """Decisions for @key for @seconds: each answers 200 or 429 within
    100 ms under the per-minute limit @want_limit. Returns how many."""
    n = 0
    deadline = time.monotonic() + seconds
    conn = weir.conn()
    while time.monotonic() < deadline:
        t0 = time.monotonic()
        r = conn.request("POST", "/v1/check",
                         {"domain": "api", "descriptors": [{"entries": [
                             {"key": "api_key", "value": key}]}]})
        took = time.monotonic() - t0
        assert r.status in (200, 429), r
        assert took < 0.1, f"a decision took {took * 1000:.0f} ms"
        assert r.header("X-RateLimit-Limit") == str(want_limit), r
        assert r.json()["statuses"][0]["limit"]["requests_per_unit"] == want_limit
        n += 1
        time.sleep(0.005)
    conn.close()
    return n


def test_database_stopped_under_load(db, pg, weir_factory, tmp_path):
    a = start(weir_factory, tmp_path, db)
    b = start(weir_factory, tmp_path, db)
    assert Admin(a).request("PUT", q("held"), override(40)).status == 201
    wait_limit(a, "held", 40)
    wait_limit(b, "held", 40)
    assert quotas_health(a)["status"] == "ok" and a.metric("weir_quota_db_up") == 1
    mark_a, mark_b = a.mark(), b.mark()
    pg.stop()
    t0 = time.monotonic()
    n = decide(a, "held", 40, 3.0)
    assert n > 100, n
    # each second the service finds the server gone
    a.wait_until(lambda: quotas_health(a)["status"] == "unavailable", timeout=5,
                 what="quotas unavailable in /healthz")
    h = quotas_health(a)
    assert h["db"] == "postgres" and h["tenants"] == 1, h
    assert a.metric("weir_quota_db_up") == 0
    b.wait_until(lambda: b.metric("weir_quota_db_up") == 0, timeout=5, what="db down on b")
    a.wait_for_log(r"event=quota_db_unavailable", since=mark_a)
    # the admin routes say why
    for method, target, body in [("GET", q("held"), None), ("PUT", q("new"), PRO),
                                 ("DELETE", q("held"), None), ("GET", "/admin/v1/quotas", None),
                                 ("GET", "/admin/v1/audit", None)]:
        t1 = time.monotonic()
        r = Admin(a).request(method, target, body)
        assert r.status == 503, (method, target, r)
        assert "the quota database is unavailable" in r.json()["detail"], r.json()
        assert time.monotonic() - t1 < 3
    # the table in force stays: decisions and usage alike
    assert decide(a, "held", 40, 0.2) > 0
    assert minute_limit(b, "held") == 40
    print(f"decisions with the server stopped: {n} in 3 s")
    assert time.monotonic() - t0 < 20
    # back: a change through A in force on both within seconds
    pg.start(port=pg.port)
    t_back = time.monotonic()
    while True:
        r = Admin(a).request("PUT", q("new"), override(77))
        if r.status == 201:
            break
        assert r.status == 503, r
        assert time.monotonic() - t_back < 10, "the admin routes are not back"
        time.sleep(0.1)
    wait_limit(a, "new", 77, timeout=5)
    wait_limit(b, "new", 77, timeout=10)
    a.wait_for_log(r"event=quota_db_back", since=mark_a, timeout=5)
    b.wait_for_log(r"event=quota_db_back", since=mark_b, timeout=5)
    assert a.count_log(r"event=quota_db_unavailable", since=mark_a) == 1
    # B listens again: the next change comes by notification, well within
    # --quota-refresh (30 s)
    t1 = time.monotonic()
    assert Admin(a).request("PUT", q("new"), override(78)).status == 200
    assert wait_limit(b, "new", 78, timeout=5) < 2, time.monotonic() - t1
    assert quotas_health(b)["status"] == "ok" and b.metric("weir_quota_db_up") == 1


def test_connections_dropped_by_the_server(db, pg, weir_factory, tmp_path):
    """Every connection of weir's ended by the server (pg_terminate_backend,
    as a failover or an administrator does): each comes back at once, and
    the listener's socket, which may well have the dropped one's number,
    is watched again: changes still arrive by notification."""
    a = start(weir_factory, tmp_path, db)
    b = start(weir_factory, tmp_path, db)
    assert Admin(a).request("PUT", q("k"), override(11)).status == 201
    wait_limit(b, "k", 11)
    time.sleep(1.1)  # a reconnection is tried at most once a second
    ended = psql(pg, db, "SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity"
                 " WHERE application_name = 'weir'")
    assert int(ended) >= 4, ended  # each instance's service and admin handles
    times = []
    for i in range(6):
        r = Admin(a).request("PUT", q("k"), override(20 + i))
        assert r.status == 200, r  # the admin handle came back under it
        times.append(wait_limit(b, "k", 20 + i, timeout=5))
    # by notification, not by the service's tick (each second)
    assert max(times) < 0.5, times
    assert quotas_health(b)["status"] == "ok"


def test_database_down_at_start(db, pg, weir_factory, tmp_path):
    first = start(weir_factory, tmp_path, db)
    assert Admin(first).request("PUT", q("stored"), override(25)).status == 201
    first.finish()
    pg.stop()
    w = start(weir_factory, tmp_path, db)
    w.wait_for_log(r"event=quota_db_unavailable", timeout=5)
    # decisions on the tiers alone
    assert minute_limit(w, "stored") == FREE
    r = w.check("api", {"api_key": "stored"})
    assert r.status == 200 and r.header("X-RateLimit-Limit") == str(FREE), r
    h = quotas_health(w)
    assert (h["db"], h["status"], h["tenants"]) == ("postgres", "unavailable", 0), h
    assert w.metric("weir_quota_db_up") == 0
    assert Admin(w).get(q("stored")).status == 503
    time.sleep(2.5)  # retried every second, logged once
    assert w.count_log(r"event=quota_db_unavailable") == 1
    pg.start(port=pg.port)
    t = wait_limit(w, "stored", 25, timeout=10)
    print(f"the stored records in force {t:.2f} s after the server started")
    assert w.check("api", {"api_key": "stored"}).header("X-RateLimit-Limit") == "25"
    h = quotas_health(w)
    assert h["status"] == "ok" and h["tenants"] == 1, h
    assert Admin(w).get(q("stored")).status == 200


# ------------------------------------------------------------ other writers


def test_a_change_in_sql_with_notify(db, pg, weir_factory, tmp_path):
    w = start(weir_factory, tmp_path, db)
    assert Admin(w).request("PUT", q("k"), {"tier": "free"}).status == 201
    wait_limit(w, "k", FREE)
    t0 = time.monotonic()
    psql(pg, db, "UPDATE tenants SET tier = 'pro', version = version + 1 WHERE api_key = 'k';"
         " NOTIFY weir_quotas, 'k'")
    wait_limit(w, "k", PRO_LIMIT, timeout=5)
    assert time.monotonic() - t0 < 2


def test_a_change_in_sql_without_notify_by_the_refresh(db, pg, weir_factory, tmp_path):
    w = start(weir_factory, tmp_path, db, "--quota-refresh", "1s")
    assert Admin(w).request("PUT", q("k"), {"tier": "free"}).status == 201
    wait_limit(w, "k", FREE)
    t0 = time.monotonic()
    psql(pg, db, "UPDATE tenants SET tier = 'pro', version = version + 1 WHERE api_key = 'k'")
    wait_limit(w, "k", PRO_LIMIT, timeout=5)
    t = time.monotonic() - t0
    assert t < 3, t
