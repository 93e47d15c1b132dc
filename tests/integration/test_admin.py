"""The admin API's listener (--admin): never the decision routes, every
request with a bearer token of --admin-token-file, the tiers of the rules
in force, and the refusals at start."""
import subprocess

import pytest

import rawhttp
from conftest import weir_bin

RULES = """\
domain: api
tenants:
  key: api_key
  default_tier: free
  tiers:
    free:
      rate_limit: {unit: minute, requests_per_unit: 3}
    pro:
      rate_limits:
        - {unit: minute, requests_per_unit: 10}
        - {unit: hour, requests_per_unit: 100}
      descriptors:
        - key: endpoint
          value: /orders
          rate_limit: {unit: minute, requests_per_unit: 2}
descriptors:
  - key: api_key
    rate_limit: {unit: minute, requests_per_unit: 5}
"""

TOKEN = "t0ken-for-ops-alice-0123456789"
OTHER = "t0ken-for-deploy-bot-987654321"


class Admin:
    """Requests to a daemon's admin listener with a bearer token."""

    def __init__(self, weir, token=TOKEN):
        assert weir.admin_port, "the daemon has no admin listener"
        self.port = weir.admin_port
        self.token = token

    def request(self, method, target, body=None, headers=None):
        h = dict(headers or {})
        if self.token is not None:
            h.setdefault("Authorization", f"Bearer {self.token}")
        return rawhttp.request(self.port, method, target, body, h)

    def get(self, target, **kw):
        return self.request("GET", target, **kw)


def token_file(tmp_path):
    p = tmp_path / "tokens"
    p.write_text(f"# who may change quotas\nops-alice {TOKEN}\ndeploy-bot {OTHER}\n")
    return str(p)


@pytest.fixture
def weir(weir_factory, tmp_path):
    return weir_factory(RULES, "--admin", "127.0.0.1:0", "--admin-token-file", token_file(tmp_path))


def test_tiers_of_the_rules_in_force(weir):
    r = Admin(weir).get("/admin/v1/tiers")
    assert r.status == 200, r
    [dom] = r.json()["domains"]
    assert dom["domain"] == "api" and dom["tenant_key"] == "api_key"
    assert dom["default_tier"] == "free"
    tiers = {t["name"]: t["limits"] for t in dom["tiers"]}
    assert tiers["free"] == [{"descriptor": "default", "requests_per_unit": 3, "unit": "minute",
                              "algorithm": "fixed_window"}]
    assert [(x["descriptor"], x["requests_per_unit"], x["unit"]) for x in tiers["pro"]] == [
        ("default", 10, "minute"), ("default", 100, "hour"), ("endpoint:/orders", 2, "minute")]
    assert Admin(weir, OTHER).get("/admin/v1/tiers").status == 200


def test_every_request_needs_a_token(weir):
    for token, detail in [(None, "Authorization: Bearer token is required"),
                          ("wrong-token-0123456789", "not one of"),
                          (TOKEN[:-1], "not one of"), (TOKEN + "x", "not one of")]:
        r = Admin(weir, token).get("/admin/v1/tiers")
        assert r.status == 401, r
        assert r.header("WWW-Authenticate") == 'Bearer realm="weir-admin"'
        assert detail in r.json()["detail"]
    r = Admin(weir, None).get("/admin/v1/tiers", headers={"Authorization": f"Basic {TOKEN}"})
    assert r.status == 401


def test_routes_are_apart(weir):
    # the decision routes are not on the admin listener, nor the admin
    # routes on the decision listener
    r = Admin(weir).request("POST", "/v1/check", {"domain": "api", "descriptors": []})
    assert r.status == 404, r
    assert weir.get("/admin/v1/tiers").status == 404
    assert Admin(weir).request("POST", "/admin/v1/tiers", "{}").status == 405
    assert Admin(weir).get("/admin/v1/nothing").status == 404


def test_without_tokens_every_request_is_refused(weir_factory):
    w = weir_factory(RULES, "--admin", "127.0.0.1:0")
    r = Admin(w).get("/admin/v1/tiers")
    assert r.status == 401 and "--admin-token-file" in r.json()["detail"]


def run_serve(tmp_path, *flags):
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    return subprocess.run([weir_bin(), "serve", "--http", "127.0.0.1:0", "--grpc", "", "--resp", "",
                           "--rules", str(rules), *flags], capture_output=True, text=True,
                          timeout=20)


def test_no_token_no_listener_beyond_loopback(tmp_path):
    p = run_serve(tmp_path, "--admin", "0.0.0.0:0")
    assert p.returncode == 1
    assert "not a loopback address" in p.stderr and "--admin-token-file" in p.stderr


@pytest.mark.parametrize("text,why", [
    ("", "no token in the file"),
    ("alice short\n", "line 1: a token is 16 to 256"),
    (f"alice {TOKEN}\nalice {OTHER}\n", "line 2: a name or a token given twice"),
])
def test_bad_token_files_stop_the_start(tmp_path, text, why):
    p = tmp_path / "tokens"
    p.write_text(text)
    r = run_serve(tmp_path, "--admin", "127.0.0.1:0", "--admin-token-file", str(p))
    assert r.returncode == 1 and why in r.stderr, r.stderr
    r = run_serve(tmp_path, "--admin", "127.0.0.1:0", "--admin-token-file", str(tmp_path / "missing"))
    assert r.returncode == 1 and "cannot read" in r.stderr
