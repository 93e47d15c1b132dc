"""
test_grpc_node.py - weir's gRPC service against a second, independent
client: grpc-js (Node.js) loading the project's proto/ files with
proto-loader (tests/integration/node/client.js). The client's packages are
pinned in tests/integration/node/package-lock.json and installed with
`npm ci` the first time (node_modules/ is not committed). Skipped when
node or npm is missing.
"""

import json
import os
import shutil
import subprocess

import pytest

NODE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "node")

RULES = """\
domain: node
descriptors:
  - key: key
    value: seq
    rate_limit: {unit: hour, requests_per_unit: 2, algorithm: token_bucket, name: seq_limit}
  - key: key
    value: st
    rate_limit: {unit: hour, requests_per_unit: 10, algorithm: token_bucket}
  - key: key
    value: hits
    rate_limit: {unit: hour, requests_per_unit: 10, algorithm: token_bucket}
  - key: key
    value: ov
    rate_limit: {unit: hour, requests_per_unit: 10, algorithm: token_bucket}
  - key: key
    value: crowd
    rate_limit: {unit: hour, requests_per_unit: 100, algorithm: token_bucket}
  - key: free
    rate_limit: {unlimited: true}
"""


@pytest.fixture(scope="module")
def node_client():
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        pytest.skip("node and npm are needed for the grpc-js client")
    if not os.path.isdir(os.path.join(NODE_DIR, "node_modules")):
        # the project's own lock file: the same packages every time
        subprocess.run([npm, "ci", "--silent", "--no-audit", "--no-fund"], cwd=NODE_DIR,
                       check=True, timeout=300)
    return node


def run_client(node, port):
    p = subprocess.run([node, os.path.join(NODE_DIR, "client.js"), str(port)], cwd=NODE_DIR,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def seconds(d):
    return int(d["seconds"]) + d["nanos"] / 1e9


def test_grpc_js_client(weir_factory, node_client):
    w = weir_factory(RULES, "--grpc", "127.0.0.1:0")
    out = run_client(node_client, w.grpc_port)

    seq = [r["response"] for r in out["sequence"]]
    assert [r["overall_code"] for r in seq] == ["OK", "OK", "OVER_LIMIT"]
    assert [r["statuses"][0]["limit_remaining"] for r in seq] == [1, 0, 0]
    for r in seq:
        st = r["statuses"][0]
        assert st["current_limit"] == {"requests_per_unit": 2, "unit": "HOUR",
                                       "name": "seq_limit"}
        assert 0 < seconds(st["duration_until_reset"]) <= 3600
    assert seconds(seq[0]["statuses"][0]["duration_until_reset"]) == pytest.approx(1800, abs=2)

    st = out["statuses"]["response"]["statuses"]
    assert [s["code"] for s in st] == ["OK", "OK", "OK"]
    assert st[0]["current_limit"]["requests_per_unit"] == 10
    assert st[0]["limit_remaining"] == 9
    assert st[1]["current_limit"] is None and st[1]["limit_remaining"] == 0
    assert st[2]["current_limit"] is None and st[2]["limit_remaining"] == 4294967295

    assert out["hits"]["response"]["statuses"][0]["limit_remaining"] == 7
    assert out["peek"]["response"]["statuses"][0]["limit_remaining"] == 7

    ov = out["override"]["response"]["statuses"][0]
    assert ov["current_limit"]["requests_per_unit"] == 9
    assert ov["current_limit"]["unit"] == "MINUTE"
    assert ov["limit_remaining"] == 8

    assert out["empty_domain"]["error"] == {"code": 3,
                                            "details": "rate limit domain must not be empty"}
    assert out["no_descriptors"]["error"] == {
        "code": 3, "details": "rate limit descriptor list must not be empty"}
    unk = out["unknown_domain"]["response"]
    assert unk["overall_code"] == "OK"
    assert unk["statuses"][0]["code"] == "OK"
    assert unk["statuses"][0]["current_limit"] is None

    assert out["concurrent"] == {"ok": 100, "over": 20, "errors": 0}
    # grpc-js shares one connection between its clients of one address:
    # every call above, the 120 at once included, went over it
    assert w.metric("weir_connections_accepted_total", protocol="grpc") == 1

    assert out["health"]["empty"]["response"]["status"] == "SERVING"
    assert out["health"]["ratelimit"]["response"]["status"] == "SERVING"
    assert out["health"]["other"]["error"]["code"] == 5  # NOT_FOUND
