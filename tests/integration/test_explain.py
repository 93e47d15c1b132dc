"""A decision explained: POST /v1/check?explain=1, `weir explain` offline,
one debug log line per decision (rate-limited), unknown domains logged once
per domain a minute."""
import json
import os
import re
import subprocess
import time

import pytest

from conftest import weir_bin

RULES = """\
domain: api
descriptors:
  - key: remote_address
    rate_limit: {name: per_ip, unit: hour, requests_per_unit: 3}
    descriptors:
      - key: path
        value: /login
        rate_limit: {unit: hour, requests_per_unit: 1}
  - key: user
    value: "vip*"
    descriptors:
      - key: plan
        rate_limit: {unit: second, requests_per_unit: 5}
  - key: free
"""


def entries(**kv):
    return {"entries": [{"key": k, "value": v} for k, v in kv.items()]}


LOGIN = {"entries": [{"key": "remote_address", "value": "10.0.0.1"},
                     {"key": "path", "value": "/login"}]}


@pytest.fixture
def weir(weir_factory):
    return weir_factory(RULES)


def test_check_explain_walk_and_verdicts(weir):
    body = {"domain": "api", "descriptors": [LOGIN]}
    r = weir.post("/v1/check?explain=1", body)
    assert r.status == 200, r
    ex = r.json()["explain"]
    assert len(ex) == 1
    walk = ex[0]["walk"]
    assert [(w["key"], w["value"], w["matched"]) for w in walk] == [
        ("remote_address", "10.0.0.1", "default"), ("path", "/login", "exact")]
    assert walk[0]["rule"] == {"key": "remote_address", "value": None,
                               "file": weir.rules_path, "line": 3, "column": 5}
    assert walk[1]["rule"]["value"] == "/login" and walk[1]["rule"]["line"] == 6
    assert ex[0]["miss"] == "none" and "reason" not in ex[0]
    [lim] = ex[0]["limits"]
    assert lim["verdict"] == "admitted" and lim["remaining"] == 0
    assert lim["requests_per_unit"] == 1 and lim["unit"] == "hour"
    assert lim["path"] == "remote_address.path_/login" and lim["line"] == 8

    # the second is denied, and the explanation says by which limit
    r = weir.post("/v1/check?explain=true", body)
    assert r.status == 429, r
    assert r.json()["explain"][0]["limits"][0]["verdict"] == "denied"
    # without explain the answer has none
    r = weir.post("/v1/check", body)
    assert "explain" not in r.json()
    r = weir.post("/v1/check?explain=0", body)
    assert "explain" not in r.json()


def test_check_explain_misses(weir):
    body = {"domain": "api", "descriptors": [
        entries(user="vip1"), entries(user="bob"), entries(nope="x"), entries(free="1"),
        entries(free="1", more="2"), entries(remote_address="9.9.9.9")]}
    r = weir.post("/v1/check?explain=1", body)
    assert r.status == 200, r
    ex = r.json()["explain"]
    assert [e["miss"] for e in ex] == ["too_shallow", "no_value", "unknown_key", "no_limit",
                                       "too_deep", "none"]
    assert ex[0]["walk"][0]["matched"] == "pattern"
    assert ex[0]["walk"][0]["rule"]["value"] == "vip*"
    assert "none has value 'bob'" in ex[1]["reason"]
    assert ex[2]["reason"] == "no rule at level 1 has key 'nope'"
    assert ex[4]["reason"] == "the descriptor has 2 entries but the rules stop at level 1"
    assert ex[5]["limits"][0]["name"] == "per_ip"
    assert all(e["limits"] == [] for e in ex[:5])


def test_check_explain_override_and_bad_query(weir):
    desc = entries(other="x")
    desc["limit"] = {"requests_per_unit": 2, "unit": "minute"}
    r = weir.post("/v1/check?explain=1", {"domain": "api", "descriptors": [desc]})
    assert r.status == 200, r
    [e] = r.json()["explain"]
    assert e["miss"] == "unknown_key" and e["override"] is True
    assert e["limits"][0]["path"] == "override"
    assert e["limits"][0]["requests_per_unit"] == 2 and e["limits"][0]["unit"] == "minute"

    r = weir.post("/v1/check?explain=yes", {"domain": "api", "descriptors": [LOGIN]})
    assert r.status == 400
    assert "explain=1" in r.json()["detail"]
    # a refused query decides nothing
    r = weir.post("/v1/check?explain=1", {"domain": "api", "descriptors": [LOGIN]})
    assert r.json()["explain"][0]["limits"][0]["verdict"] == "admitted"


def test_debug_line_per_decision_is_rate_limited(weir_factory):
    weir = weir_factory(RULES, threads=1)
    mark = weir.mark()
    body = {"domain": "api", "descriptors": [LOGIN, entries(user="bob")]}
    sent = 200
    t0 = time.monotonic()
    with weir.conn() as c:
        for _ in range(sent):
            assert c.request("POST", "/v1/check", body).status in (200, 429)
    elapsed = time.monotonic() - t0
    line = weir.wait_for_log(r"event=decision ", since=mark)
    assert 'explain="[0] remote_address=10.0.0.1:default path=/login:exact ' \
           'limits remote_address.path_/login:' in line
    assert "[1] miss:no_value@0" in line
    # a second later, the next decision logs how many lines were left out
    time.sleep(1.1)
    assert weir.check("api", entries(free="1")).status == 200
    weir.wait_for_log(r"event=decision .*free=1:default", since=mark)
    logged = weir.count_log(r"event=decision ", since=mark)
    left_out = sum(int(m.group(1)) for m in re.finditer(
        r"event=decision_lines_left_out count=(\d+)", "\n".join(weir.log_text().split("\n")[mark:])))
    # every decision is logged or counted as left out
    assert logged + left_out == sent + 1, (logged, left_out)
    # at most 50 a second: the sends span at most int(elapsed) + 2 seconds
    # of the worker's clock
    assert logged <= 50 * (int(elapsed) + 2) + 1, (logged, elapsed)
    if elapsed < 2:
        assert left_out >= sent - 150


def test_unknown_domain_logged_once_per_domain(weir_factory):
    weir = weir_factory(RULES, "--log-level", "info")
    mark = weir.mark()
    for _ in range(5):
        assert weir.check("ghost", entries(a="b")).status == 404
    assert weir.check("spirit", entries(a="b")).status == 404
    weir.wait_for_log(r"event=unknown_domain domain=spirit", since=mark)
    assert weir.count_log(r"event=unknown_domain domain=ghost ", since=mark) == 1
    assert weir.count_log(r"event=unknown_domain", since=mark) == 2
    # info level: no debug line per decision
    assert weir.count_log(r"event=decision ", since=mark) == 0


# ---------------------------------------------------------------- weir explain

def run_explain(tmp_path, *args, stdin=None):
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1")
    return subprocess.run([weir_bin(), "explain", *args], input=stdin, capture_output=True,
                          text=True, cwd=tmp_path, env=env, timeout=60)


def test_weir_explain_offline(tmp_path):
    (tmp_path / "rules.yaml").write_text(RULES)
    req = json.dumps({"domain": "api", "descriptors": [LOGIN, entries(user="bob")]})
    p = run_explain(tmp_path, "rules.yaml", req)
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "domain api: OK\n" in out
    assert "  remote_address=10.0.0.1  matched default: remote_address (rules.yaml:3:5)\n" in out
    assert "  path=/login  matched exact: path=/login (rules.yaml:6:9)\n" in out
    assert "    limit remote_address.path_/login: 1 per hour, fixed_window (rules.yaml:8:21) " \
           "-> admitted, 0 left\n" in out
    assert "  user=bob  no match\n" in out
    assert "but none has value 'bob'" in out

    # decided twice: the second is over the limit (exit 3)
    p = run_explain(tmp_path, "--times", "2", "rules.yaml", req)
    assert p.returncode == 3, p.stderr
    assert "domain api: OVER_LIMIT" in p.stdout and "-> denied, 0 left" in p.stdout

    # JSON, as POST /v1/check?explain=1 answers; the request from stdin
    p = run_explain(tmp_path, "--json", "rules.yaml", "-", stdin=req)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["allowed"] is True
    assert [w["matched"] for w in doc["explain"][0]["walk"]] == ["default", "exact"]
    # or from a file
    (tmp_path / "req.json").write_text(req)
    p = run_explain(tmp_path, "--json", "rules.yaml", "@req.json")
    assert p.returncode == 0
    assert json.loads(p.stdout)["explain"] == doc["explain"]


def test_weir_explain_errors(tmp_path):
    (tmp_path / "rules.yaml").write_text(RULES)
    (tmp_path / "bad.yaml").write_text("domain: x\ndescriptors:\n  - key: k\n    rate_limit: "
                                       "{unit: secs, requests_per_unit: 1}\n")
    req = json.dumps({"domain": "api", "descriptors": [LOGIN]})
    p = run_explain(tmp_path, "bad.yaml", req)
    assert p.returncode == 1
    assert "bad.yaml:4:" in p.stderr and "secs" in p.stderr
    p = run_explain(tmp_path, "rules.yaml", '{"domain":"api"')
    assert p.returncode == 1 and "malformed JSON" in p.stderr
    p = run_explain(tmp_path, "rules.yaml", '{"domain":"api","descriptors":[]}')
    assert p.returncode == 1
    assert "descriptor list must not be empty" in p.stderr
    p = run_explain(tmp_path, "rules.yaml")
    assert p.returncode == 2 and "usage: weir explain" in p.stderr
    p = run_explain(tmp_path, "--times", "0", "rules.yaml", req)
    assert p.returncode == 2 and "--times takes 1" in p.stderr
    p = run_explain(tmp_path, "rules.yaml", "@missing.json")
    assert p.returncode == 1 and "missing.json" in p.stderr
