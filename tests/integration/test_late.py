"""
test_late.py - decisions that complete after the request was read, as a
networked store's do: the daemon on the deferred test store
(--store memory+deferred, in builds made with -DWEIR_TEST_STORES=ON),
which completes every decision from the loop later, in the order asked.
Pipelined HTTP answers keep their order, deadlines answer for a decision
that is late, a connection that goes away with decisions in flight costs
nothing, and draining waits for them.
"""

import json
import os
import signal
import socket
import subprocess
import threading
import time

import grpc
import pytest

import rawhttp
from conftest import weir_bin
from test_grpc import GRPC_ON, Client, Pb

RULES = """\
domain: api
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 1000, algorithm: token_bucket}
"""

LIMIT = 1000


def deferred(spec=""):
    return ("--store", "memory+deferred" + (":" + spec if spec else ""))


@pytest.fixture(scope="module", autouse=True)
def needs_test_stores():
    """The deferred store exists in test builds only; ctest requires it."""
    r = subprocess.run([weir_bin(), "serve", "--store", "memory+deferred", "--rules", "/nonexistent",
                        "--http", "", "--grpc", "", "--resp", "", "--admin", ""],
                       capture_output=True, text=True, timeout=30)
    if "not a store of this build" in r.stderr:
        if os.environ.get("WEIR_REQUIRE_TEST_STORES"):
            pytest.fail("this weir was built without -DWEIR_TEST_STORES=ON", pytrace=False)
        pytest.skip("weir built without -DWEIR_TEST_STORES=ON")


def check_body(user, hits):
    return json.dumps({"domain": "api", "hits": hits,
                       "descriptors": [{"entries": [{"key": "user", "value": user}]}]})


def peek(weir, user):
    """What @user has left, charging nothing (hits 0)."""
    r = weir.check("api", {"entries": [{"key": "user", "value": user}], "hits": 0})
    assert r.status == 200, r
    return json.loads(r.body)["statuses"][0]["remaining"]


def post(path, body):
    return rawhttp.build_request("POST", path, body, None)


def get(target):
    return rawhttp.build_request("GET", target, None, None)


@pytest.mark.parametrize("order", ["reverse", "interleave"])
def test_pipelined_answers_keep_request_order(weir_factory, order):
    # 100 requests in one write, their decisions completed reversed (or
    # interleaved), with answers that need no decision in between: each
    # answer must come back in its request's place
    weir = weir_factory(RULES, *deferred("order=" + order), "--max-pipelined", "128")
    n = 100
    wire = b""
    for i in range(n):
        wire += get("/healthz") if i % 10 == 9 else post("/v1/check", check_body(f"u{i}", i + 1))
    with weir.conn(timeout=10) as c:
        c.send(wire)
        for i in range(n):
            r = c.read_response()
            assert r.status == 200, (i, r)
            if i % 10 == 9:
                assert r.body == b'{"status":"ok"}', i
            else:
                assert json.loads(r.body)["statuses"][0]["remaining"] == LIMIT - (i + 1), i
        assert c.is_open(0.1)


def test_backpressure_past_max_pipelined(weir_factory):
    # at most 4 answers wait per connection: reading pauses and resumes
    # until all 40 are answered, in order
    weir = weir_factory(RULES, *deferred("delay_ms=20,order=reverse"), "--max-pipelined", "4")
    wire = b"".join(post("/v1/check", check_body(f"b{i}", i + 1)) for i in range(40))
    with weir.conn(timeout=10) as c:
        c.send(wire)
        for i in range(40):
            r = c.read_response()
            assert json.loads(r.body)["statuses"][0]["remaining"] == LIMIT - (i + 1), i


def test_batch_answers_every_item_in_order(weir_factory):
    weir = weir_factory(RULES, *deferred("order=reverse"))
    reqs = [{"domain": "api", "hits": i + 1,
             "descriptors": [{"entries": [{"key": "user", "value": f"k{i}"}]}]} for i in range(8)]
    reqs.insert(3, {"domain": "", "descriptors": []})
    r = weir.post("/v1/check/batch", json.dumps({"requests": reqs}))
    assert r.status == 200, r
    items = json.loads(r.body)["decisions"]
    assert len(items) == 9
    assert items[3]["error"]["status"] == 400
    rest = items[:3] + items[4:]
    assert [d["statuses"][0]["remaining"] for d in rest] == [LIMIT - (i + 1) for i in range(8)]


def test_http_decision_timeout_answers_504(weir_factory):
    weir = weir_factory(RULES, *deferred("delay_ms=3000"), "--decision-timeout", "200ms")
    t0 = time.monotonic()
    r = weir.post("/v1/check", check_body("slow", 1))
    took = time.monotonic() - t0
    assert r.status == 504, r
    assert json.loads(r.body)["detail"] == "no decision within --decision-timeout"
    assert took < 2.5  # well before the store's 3 s
    # the connection still serves: a later request is answered too
    assert weir.get("/healthz").status == 200


def test_failed_store_follows_failure_mode(weir_factory):
    rules = RULES + """\
  - key: ip
    rate_limit: {unit: hour, requests_per_unit: 5, failure_mode: deny}
"""
    weir = weir_factory(rules, *deferred("fail_every=1"))
    r = weir.check("api", {"user": "f"})
    assert r.status == 200, r
    assert json.loads(r.body)["statuses"][0]["code"] == "OK"
    r = weir.check("api", {"ip": "10.0.0.1"})
    assert r.status == 429, r


def test_closed_connection_with_decisions_in_flight(weir_factory):
    # the client goes away while its 50 decisions are held: they complete
    # into nothing, and the daemon (ASan-checked at teardown) serves on
    weir = weir_factory(RULES, *deferred("delay_ms=300"))
    wire = b"".join(post("/v1/check", check_body(f"c{i}", 1)) for i in range(50))
    for _ in range(5):
        s = socket.create_connection(("127.0.0.1", weir.port))
        s.sendall(wire)
        s.close()
    # every held decision completes, into nothing: the 5 closed connections
    # were each charged one hit for c0 (a peek, hits 0, charges nothing)
    weir.wait_until(lambda: peek(weir, "c0") == LIMIT - 5, timeout=10,
                    what="the held decisions completed")
    r = weir.check("api", {"user": "c0"})
    assert r.status == 200
    assert json.loads(r.body)["statuses"][0]["remaining"] == LIMIT - 6


def test_drain_waits_for_decisions_in_flight(weir_factory):
    weir = weir_factory(RULES, *deferred("delay_ms=500"))
    out = {}

    def ask():
        out["r"] = weir.check("api", {"user": "d"})

    t = threading.Thread(target=ask)
    t.start()
    time.sleep(0.1)  # the request is in, its decision held
    weir.signal(signal.SIGTERM)
    t.join(10)
    assert out["r"].status == 200
    assert weir.wait_exit(10) == 0


# ------------------------------------------------------------ gRPC


@pytest.fixture(scope="module")
def pb(tmp_path_factory):
    return Pb(tmp_path_factory.mktemp("proto"))


def grpc_weir(weir_factory, pb, *flags):
    w = weir_factory(RULES, *GRPC_ON, *flags)
    return w, Client(pb, w.grpc_port, own_connection=True)


def test_grpc_answers_in_completion_order(weir_factory, pb):
    w, c = grpc_weir(weir_factory, pb, *deferred("delay_ms=50,order=reverse"))
    try:
        futures = [c.srl.future(c.request("api", {"user": f"g{i}"}, hits_addend=i + 1), timeout=10)
                   for i in range(30)]
        for i, f in enumerate(futures):
            r = f.result()
            assert r.overall_code == 1
            assert r.statuses[0].limit_remaining == LIMIT - (i + 1)
    finally:
        c.close()


def test_grpc_deadline_passes_before_the_decision(weir_factory, pb):
    # grpc-timeout 300 ms, a store that takes 3 s and no --decision-timeout:
    # the daemon answers at the call's own deadline, long before the store
    w, c = grpc_weir(weir_factory, pb, *deferred("delay_ms=3000"), "--decision-timeout", "0")
    try:
        t0 = time.monotonic()
        e = c.error("api", {"user": "late"}, timeout=0.3)
        assert e.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert time.monotonic() - t0 < 2.5
        # the client's own timer fires at 0.3 s too; the daemon's answer is
        # the one counted when the call ends (the decision is still held)
        w.wait_until(lambda: w.metric("weir_request_duration_seconds_count", protocol="grpc"),
                     timeout=2, what="the daemon's DEADLINE_EXCEEDED")
        assert time.monotonic() - t0 < 2.5
        assert c.health() == 1  # the connection serves on
    finally:
        c.close()


def test_grpc_decision_timeout(weir_factory, pb):
    w, c = grpc_weir(weir_factory, pb, *deferred("delay_ms=3000"), "--decision-timeout", "200ms")
    try:
        t0 = time.monotonic()
        e = c.error("api", {"user": "t"}, timeout=10)
        assert e.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert e.details() == "no decision before the deadline"
        assert time.monotonic() - t0 < 2.5
    finally:
        c.close()


def test_grpc_connection_closed_with_calls_in_flight(weir_factory, pb):
    w, c = grpc_weir(weir_factory, pb, *deferred("delay_ms=300"))
    futures = [c.srl.future(c.request("api", {"user": "x"}), timeout=10) for i in range(20)]
    time.sleep(0.1)
    c.close()  # the HTTP/2 connection goes with 20 calls held
    for f in futures:
        with pytest.raises(grpc.RpcError):
            f.result()
    # the 20 held decisions complete into nothing, each charged
    w.wait_until(lambda: peek(w, "x") == LIMIT - 20, timeout=10,
                 what="the held decisions completed")
    c2 = Client(pb, w.grpc_port, own_connection=True)
    try:
        r = c2.check("api", {"user": "x"})
        assert r.statuses[0].limit_remaining == LIMIT - 21
    finally:
        c2.close()
