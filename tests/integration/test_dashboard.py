"""The dashboard on the admin listener: its files (web/, built into the
binary) served without a token under a Content-Security-Policy that lets
them load nothing from elsewhere, and GET /admin/v1/stats, its data, with
a token only: every field there, and the counts moving by exactly what
the test sent."""
import re
import signal

import pytest

from test_admin import OTHER, TOKEN, Admin, token_file

RULES = """\
domain: api
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: path
    rate_limit: {unit: minute, requests_per_unit: 1000}
"""

FILES = {
    "/dashboard": "text/html; charset=utf-8",
    "/dashboard/": "text/html; charset=utf-8",
    "/dashboard/dashboard.js": "text/javascript; charset=utf-8",
    "/dashboard/dashboard.css": "text/css; charset=utf-8",
    "/dashboard/favicon.svg": "image/svg+xml",
}


@pytest.fixture
def weir(weir_factory, tmp_path):
    return weir_factory(RULES, "--admin", "127.0.0.1:0", "--admin-token-file",
                        token_file(tmp_path))


def stats(weir, token=TOKEN):
    r = Admin(weir, token).get("/admin/v1/stats")
    assert r.status == 200, r
    assert r.header("Content-Type") == "application/json"
    assert r.header("Cache-Control") == "no-store"
    return r.json()


def row(s, domain, rule):
    found = [r for r in s["decisions"]["rows"] if (r["domain"], r["rule"]) == (domain, rule)]
    return found[0] if found else {"allowed": 0, "denied": 0, "shadow_would_deny": 0,
                                   "failure_mode": 0}


def test_files_are_served_without_a_token(weir):
    anon = Admin(weir, None)
    for path, ctype in FILES.items():
        r = anon.get(path)
        assert r.status == 200, (path, r)
        assert r.header("Content-Type") == ctype, path
        csp = r.header("Content-Security-Policy")
        assert csp and "default-src 'none'" in csp and "script-src 'self'" in csp, csp
        assert "frame-ancestors 'none'" in csp, csp
        assert r.header("Cache-Control") == "no-cache"
        assert r.header("X-Content-Type-Options") == "nosniff"
        assert re.fullmatch(r'"[0-9a-f]{20}"', r.header("ETag")), r.header("ETag")
        assert int(r.header("Content-Length")) == len(r.body) > 100
        # HEAD: the same fields, no body
        h = anon.request("HEAD", path)
        assert h.status == 200 and h.body == b""
        assert h.header("Content-Length") == r.header("Content-Length")
        # asked again with its ETag: 304, no body
        again = anon.get(path, headers={"If-None-Match": r.header("ETag")})
        assert again.status == 304 and again.body == b"", again
        assert again.header("ETag") == r.header("ETag")
        weak = anon.get(path, headers={"If-None-Match": '"x", W/' + r.header("ETag")})
        assert weak.status == 304
        assert anon.get(path, headers={"If-None-Match": '"other"'}).status == 200
    assert anon.get("/dashboard").body == anon.get("/dashboard/").body


def test_the_page_loads_only_its_own_files(weir):
    anon = Admin(weir, None)
    html = anon.get("/dashboard").text()
    # scripts from a file only (the policy refuses inline ones), no inline
    # handlers or styles, nothing from another origin
    scripts = re.findall(r"<script([^>]*)>(.*?)</script>", html, re.S)
    assert scripts and all('src="/dashboard/' in attrs and body.strip() == ""
                           for attrs, body in scripts), scripts
    assert not re.search(r"\son[a-z]+=", html) and " style=" not in html
    for path in FILES:
        text = anon.get(path).text()
        # the one absolute URL allowed: the SVG namespace, a name, not a fetch
        urls = set(re.findall(r"https?://[^\s'\"<>)]+", text)) - {"http://www.w3.org/2000/svg"}
        assert not urls, (path, urls)
    for ref in re.findall(r'(?:src|href)="([^"]+)"', html):
        if ref.startswith("#"):
            continue
        assert ref.startswith("/dashboard/"), ref
        assert anon.get(ref).status == 200, ref
    # the token field is labelled and a password field; the form sends nothing anywhere
    assert re.search(r'<label for="token">', html)
    assert re.search(r'<input id="token"[^>]*type="password"', html)


def test_other_paths_and_methods(weir):
    anon = Admin(weir, None)
    for path in ["/dashboard/nothing.js", "/dashboard/../admin/v1/stats", "/dashboard//dashboard.js",
                 "/dashboard/dashboard.js/"]:
        r = anon.get(path)
        assert r.status == 404, (path, r)
    # not the dashboard's: the admin API's token check
    assert anon.get("/dashboardx").status == 401
    assert anon.get("/").status == 401
    r = anon.request("POST", "/dashboard", "token=x")
    assert r.status == 405 and r.header("Allow") == "GET, HEAD"
    # and never on the decision listener
    assert weir.get("/dashboard").status == 404


def test_stats_needs_a_token(weir):
    for token in [None, "wrong-token-0123456789", TOKEN[:-1]]:
        r = Admin(weir, token).get("/admin/v1/stats")
        assert r.status == 401, r
        assert r.header("WWW-Authenticate") == 'Bearer realm="weir-admin"'
        assert b"allowed" not in r.body
    assert stats(weir, OTHER)["status"] == "ok"


def test_without_tokens_the_page_loads_and_stats_is_refused(weir_factory):
    w = weir_factory(RULES, "--admin", "127.0.0.1:0")
    assert Admin(w, None).get("/dashboard").status == 200
    r = Admin(w).get("/admin/v1/stats")
    assert r.status == 401 and "--admin-token-file" in r.json()["detail"]


def test_stats_fields(weir):
    s = stats(weir)
    assert s["version"] and s["status"] == "ok" and s["workers"] == 2
    assert isinstance(s["time_ms"], int) and s["time_ms"] > 1.6e12
    assert "/admin/v1/stats" in s["routes"] and "/admin/v1/tiers" in s["routes"]
    assert s["decisions"] == {"totals": {"allowed": 0, "denied": 0, "shadow_would_deny": 0,
                                         "failure_mode": 0}, "rows_total": 0, "rows": []}
    lat = s["latency"]
    assert lat["bounds_seconds"] == [5e-05, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                     0.025, 0.1]
    assert set(lat["protocols"]) == {"http", "grpc", "resp"}
    for p in lat["protocols"].values():
        assert len(p["buckets"]) == 11 and set(p) == {"buckets", "count", "sum_seconds"}
    store = s["store"]
    assert store["type"] == "memory"
    assert set(store) == {"type", "keys", "bytes", "max_bytes", "evictions", "expirations"}
    assert s["rules"]["reloads_ok"] == 1 and s["rules"]["reloads_failed"] == 0
    assert s["rules"]["last_ok_ms"] <= s["time_ms"] and s["rules"]["last_failed_ms"] is None
    assert s["rules"]["last_error"] is None
    assert s["quotas"] == {"configured": False}
    assert set(s["connections"]) == {"http", "grpc", "resp"}
    for c in s["connections"].values():
        assert set(c) == {"open", "accepted", "rejected", "evicted"}


def test_counts_move_by_what_was_sent(weir):
    before = stats(weir)
    for i in range(7):
        r = weir.check("api", {"user": "abuser"})
        assert r.status == (200 if i < 5 else 429), r
    for i in range(3):
        assert weir.check("api", {"user": f"user{i}"}).status == 200
    for i in range(4):
        assert weir.check("api", {"path": "/a"}).status == 200
    after = stats(weir)
    assert after["time_ms"] >= before["time_ms"]
    user = row(after, "api", "user")
    assert (user["allowed"], user["denied"]) == (8, 2), user
    path = row(after, "api", "path")
    assert (path["allowed"], path["denied"]) == (4, 0), path
    assert after["decisions"]["totals"] == {"allowed": 12, "denied": 2, "shadow_would_deny": 0,
                                            "failure_mode": 0}
    assert after["decisions"]["rows_total"] == 2
    http, http0 = after["latency"]["protocols"]["http"], before["latency"]["protocols"]["http"]
    assert http["count"] - http0["count"] == 14
    assert http["buckets"][-1] == http["count"]
    assert all(a <= b for a, b in zip(http["buckets"], http["buckets"][1:]))
    assert http["sum_seconds"] > 0
    assert after["connections"]["http"]["accepted"] - before["connections"]["http"]["accepted"] == 14
    assert after["store"]["keys"] >= 5
    # the admin listener's own requests (the dashboard's) count nowhere
    for _ in range(3):
        stats(weir)
    again = stats(weir)
    assert again["latency"]["protocols"]["http"]["count"] == http["count"]
    assert again["connections"]["http"]["accepted"] == after["connections"]["http"]["accepted"]
    assert again["decisions"] == after["decisions"]


def test_reloads_and_their_last_error(weir):
    weir.write_rules("domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: fortnight}\n")
    mark = weir.mark()
    weir.signal(signal.SIGHUP)
    weir.wait_for_log(r"event=rules_reload_failed", since=mark)
    s = stats(weir)
    r = s["rules"]
    assert r["reloads_ok"] == 1 and r["reloads_failed"] == 1
    assert r["last_failed_ms"] is not None and r["last_failed_ms"] <= s["time_ms"]
    assert "rules.yaml:4:" in r["last_error"], r["last_error"]
    weir.write_rules(RULES)
    mark = weir.mark()
    weir.signal(signal.SIGHUP)
    weir.wait_for_log(r"event=rules_loaded", since=mark)
    r2 = stats(weir)["rules"]
    assert r2["reloads_ok"] >= 2 and r2["last_ok_ms"] >= r["last_failed_ms"]
    # the last failure stays told
    assert r2["last_error"] == r["last_error"]


def test_quotas_when_configured(weir_factory, tmp_path):
    w = weir_factory(RULES, "--admin", "127.0.0.1:0", "--admin-token-file", token_file(tmp_path),
                     "--quota-db", f"sqlite://{tmp_path}/quotas.db")
    q = w.wait_until(lambda: (stats(w)["quotas"].get("loads") or 0) >= 1 and stats(w)["quotas"],
                     timeout=10, what="the tenant table read")
    assert q["configured"] is True and q["db"] == "sqlite" and q["up"] is True
    assert q["tenants"] == 0 and q["errors"] == 0 and q["age_seconds"] >= 0


def test_start_up_banner_names_the_dashboard(tmp_path):
    import subprocess
    import time

    from conftest import weir_bin
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    p = subprocess.Popen([weir_bin(), "serve", "--http", "127.0.0.1:0", "--grpc", "", "--resp", "",
                          "--admin", "127.0.0.1:0", "--admin-token-file", token_file(tmp_path),
                          "--rules", str(rules)], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
    try:
        deadline = time.monotonic() + 10
        lines = []
        while time.monotonic() < deadline:
            line = p.stdout.readline()
            lines.append(line)
            if "dashboard:" in line or not line:
                break
        assert re.search(r"dashboard: http://127\.0\.0\.1:\d+/dashboard", "".join(lines)), lines
    finally:
        p.send_signal(signal.SIGTERM)
        assert p.wait(10) == 0


def test_decisions_by_tier(weir_factory, tmp_path):
    """Each descriptor carrying a tenant's key counts once under the
    tenant's tier (its record's, else the default one), in the snapshot
    and in /metrics; other descriptors not at all."""
    import sqlite3

    from test_admin import RULES as TIER_RULES  # domain api: free (3/min) and pro tiers
    db = tmp_path / "quotas.db"
    w = weir_factory(TIER_RULES + "  - key: other\n    rate_limit: {unit: minute, requests_per_unit: 50}\n", "--admin", "127.0.0.1:0", "--admin-token-file",
                     token_file(tmp_path), "--quota-db", f"sqlite://{db}")
    admin = Admin(w)
    r = admin.request("PUT", "/admin/v1/quotas/acme", '{"tier":"pro"}')
    assert r.status in (200, 201), r
    for _ in range(5):  # free: 3 allowed, 2 denied
        w.get("/v1/check?domain=api&api_key=nobody")
    for _ in range(4):  # pro, two limits: 4 descriptors allowed, counted once each
        assert w.get("/v1/check?domain=api&api_key=acme").status == 200
    for _ in range(3):
        w.get("/v1/check?domain=api&other=x")
    tiers = {t["tier"]: t for t in stats(w)["tiers"] if t["domain"] == "api"}
    assert set(tiers) == {"free", "pro"}, tiers
    assert (tiers["free"]["allowed"], tiers["free"]["denied"]) == (3, 2), tiers
    assert (tiers["pro"]["allowed"], tiers["pro"]["denied"]) == (4, 0), tiers
    metrics = w.get("/metrics").text()
    assert 'weir_tier_decisions_total{domain="api",tier="free",result="denied"} 2' in metrics
    assert 'weir_tier_decisions_total{domain="api",tier="pro",result="allowed"} 4' in metrics
    assert sqlite3.connect(db).execute("select count(*) from tenants").fetchone()[0] == 1
