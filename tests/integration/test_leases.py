"""
test_leases.py - concurrency leases over HTTP, and across protocols.

GET and POST /v1/acquire decide as /v1/check does and hand out the token
of the leases the decision took (the Weir-Lease header; POST's "lease");
POST /v1/release gives them back. Exact counts under concurrency, leases
that time out, a token taken on one protocol given back on another, and
what the routes refuse. Runs on every store the suite names (the memory
store, the deferred one); test_redis_leases.py shares leases through
Redis between instances.
"""
import threading
import time

import grpc
import pytest
import redis
from protoclasses import message_classes

RULES = """\
domain: api
descriptors:
  - key: conn
    rate_limit: {unit: minute, requests_per_unit: 5, algorithm: concurrency, name: inflight}
  - key: quick
    rate_limit: {unit: second, requests_per_unit: 2, algorithm: concurrency}
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 1000}
"""

RESP_ON = ("--resp", "127.0.0.1:0")
GRPC_ON = ("--grpc", "127.0.0.1:0")
ACQUIRE = "/weir.leases.v1.Leases/Acquire"
RELEASE = "/weir.leases.v1.Leases/Release"
OK, OVER_LIMIT = 1, 2  # RateLimitResponse.Code


def acquire(w, **entries):
    """POST /v1/acquire of one descriptor: (status, token or None)."""
    r = w.check("api", entries, path="/v1/acquire")
    body = r.json()
    if r.status == 200:
        assert body["lease"] == r.header("Weir-Lease"), r
        return r.status, body["lease"]
    assert r.status == 429 and "lease" not in body and r.header("Weir-Lease") is None, r
    return r.status, None


def release(w, token, header=False):
    r = (w.post("/v1/release", b"", headers={"Weir-Lease": token}) if header
         else w.post("/v1/release", {"lease": token}))
    assert r.status == 200, r
    return r.json()


@pytest.fixture
def weir(weir_factory):
    return weir_factory(RULES, *RESP_ON, *GRPC_ON)


class Leases:
    """weir.leases.v1.Leases over one channel, with classes from proto/."""

    def __init__(self, directory, port):
        (self.Request, self.AcquireResponse, self.ReleaseRequest,
         self.ReleaseResponse) = message_classes(
            directory, ["weir/leases/v1/leases.proto"],
            ["envoy.service.ratelimit.v3.RateLimitRequest", "weir.leases.v1.AcquireResponse",
             "weir.leases.v1.ReleaseRequest", "weir.leases.v1.ReleaseResponse"])
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        self.acquire_call = self.channel.unary_unary(
            ACQUIRE, request_serializer=self.Request.SerializeToString,
            response_deserializer=self.AcquireResponse.FromString)
        self.release_call = self.channel.unary_unary(
            RELEASE, request_serializer=self.ReleaseRequest.SerializeToString,
            response_deserializer=self.ReleaseResponse.FromString)

    def acquire(self, **entries):
        r = self.Request(domain="api")
        d = r.descriptors.add()
        for k, v in entries.items():
            e = d.entries.add()
            e.key, e.value = k, v
        return self.acquire_call(r, timeout=5)

    def release(self, token):
        return self.release_call(self.ReleaseRequest(lease=token), timeout=5)


def test_acquire_and_release(weir):
    tokens = [acquire(weir, conn="c1") for _ in range(5)]
    assert all(s == 200 and t.count(";") == 1 for s, t in tokens)
    assert acquire(weir, conn="c1") == (429, None)
    # another key has its own leases
    assert acquire(weir, conn="c2")[0] == 200
    assert release(weir, tokens[0][1]) == {"leases": 1, "released": 1, "failed": 0}
    # given back once only
    assert release(weir, tokens[0][1], header=True) == {"leases": 1, "released": 0, "failed": 0}
    status, again = acquire(weir, conn="c1")
    assert status == 200
    assert acquire(weir, conn="c1")[0] == 429
    for _, t in tokens[1:] + [(200, again)]:
        assert release(weir, t, header=True)["released"] == 1
    assert [acquire(weir, conn="c1")[0] for _ in range(6)] == [200] * 5 + [429]


def test_a_decision_without_concurrency_limits_has_an_empty_token(weir):
    status, token = acquire(weir, user="u")
    assert (status, token) == (200, "1")
    assert release(weir, token) == {"leases": 0, "released": 0, "failed": 0}


def test_get_for_auth_request(weir):
    r = weir.get("/v1/acquire?domain=api&conn=g")
    assert r.status == 200 and r.body == b"", r
    token = r.header("Weir-Lease")
    assert token and token.startswith("1;5,60000000,"), token
    for _ in range(4):
        assert weir.get("/v1/acquire?domain=api&conn=g").status == 200
    denied = weir.get("/v1/acquire?domain=api&conn=g")
    assert denied.status == 429 and denied.header("Weir-Lease") is None
    assert denied.json()["status"] == 429
    assert release(weir, token, header=True)["released"] == 1
    assert weir.get("/v1/acquire?domain=api&conn=g").status == 200
    assert weir.request("HEAD", "/v1/acquire?domain=api&conn=g").status == 429


def test_exact_counts_under_concurrency(weir):
    """Many acquires at once: exactly the limit admitted, whatever the
    interleaving; once every token is back, exactly the limit again."""
    results = []
    lock = threading.Lock()

    def worker(n):
        for _ in range(n):
            got = acquire(weir, conn="hot")
            with lock:
                results.append(got)

    threads = [threading.Thread(target=worker, args=(5,)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    admitted = [t for s, t in results if s == 200]
    assert len(results) == 40 and len(admitted) == 5, results
    # given back from threads at once: each exactly once
    counts = []

    def give_back(t):
        r = release(weir, t)
        with lock:
            counts.append(r["released"])

    threads = [threading.Thread(target=give_back, args=(t,)) for t in admitted * 2]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(counts) == [0] * 5 + [1] * 5, counts
    assert [acquire(weir, conn="hot")[0] for _ in range(6)] == [200] * 5 + [429]


def test_held_leases_bound_in_flight_work(weir):
    """Clients that acquire, work and release: never more than the limit
    at work at once, and all of them get through."""
    busy, peak, done = [0], [0], [0]
    lock = threading.Lock()

    def client():
        finished = 0
        deadline = time.monotonic() + 20
        while finished < 6 and time.monotonic() < deadline:
            status, token = acquire(weir, conn="work")
            if status != 200:
                time.sleep(0.005)
                continue
            with lock:
                busy[0] += 1
                peak[0] = max(peak[0], busy[0])
            time.sleep(0.01)
            with lock:
                busy[0] -= 1
            assert release(weir, token)["released"] == 1
            finished += 1
        with lock:
            done[0] += finished

    threads = [threading.Thread(target=client) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert done[0] == 60 and 1 <= peak[0] <= 5, (done, peak)


def test_leases_time_out(weir):
    """A lease not given back frees itself after the rule's window (the
    lease timeout), so a crashed client leaks nothing for longer."""
    tokens = [acquire(weir, quick="q")[1] for _ in range(2)]
    assert all(tokens) and acquire(weir, quick="q")[0] == 429
    time.sleep(1.1)
    assert acquire(weir, quick="q")[0] == 200
    assert [release(weir, t)["released"] for t in tokens] == [0, 0]


def test_across_protocols(weir):
    """A token from HTTP goes back over RESP, and WEIR.ACQUIRE's over HTTP."""
    r = redis.Redis(port=weir.resp_port)
    _, token = acquire(weir, conn="x")
    assert r.execute_command("WEIR.RELEASE", token) == 1
    got = r.execute_command("WEIR.ACQUIRE", "api", "conn", "x")
    resp_token = got[0].decode()
    assert release(weir, resp_token) == {"leases": 1, "released": 1, "failed": 0}
    assert [acquire(weir, conn="x")[0] for _ in range(6)] == [200] * 5 + [429]


BAD_TOKENS = ["", "x", "2", "1;", "1;5", "1;5,60000000", "1;5,60000000,1", "1;5,60000000,1,",
              "1;5,60000000,1,abc", "1;5,60000000,1,zz", "1;0,60000000,1,ab",
              "1;5,0,1,ab", "1;5,60000000,0,ab", "1;99999999999999999999,1,1,ab",
              "1;5,60000000,1,AB", "1;5,60000000,1,ab;", "1;5,-1,1,ab", " 1;5,60000000,1,ab",
              "1;5,60000000,1,ab;" * 70, "1;5,60000000,1," + "ab" * 5000]
HUGE = "1;5,60000000,1," + "ab" * 40000  # past every cap: the body's, a header's, a token's


def test_bad_tokens_and_bodies(weir):
    for tok in BAD_TOKENS:
        r = weir.post("/v1/release", {"lease": tok})
        assert r.status == 400 and "lease token" in r.json()["detail"], (tok[:40], r)
        if tok and tok.isprintable() and tok == tok.strip():  # a header loses its spaces
            r = weir.post("/v1/release", b"", headers={"Weir-Lease": tok})
            assert r.status == 400 and "Weir-Lease" in r.json()["detail"], (tok[:40], r)
    assert weir.post("/v1/release", {"lease": HUGE}).status == 413
    assert weir.post("/v1/release", b"", headers={"Weir-Lease": HUGE}).status == 431
    for body in [b"", b"{", b"[]", b"{}", b'{"lease": 1}', b'{"other": "1"}', b"null"]:
        r = weir.post("/v1/release", body)
        assert r.status == 400, (body, r)
    r = weir.get("/v1/release")
    assert r.status == 405 and r.header("Allow") == "POST"
    assert weir.post("/v1/acquire?x=1", {"domain": "api", "descriptors": []}).status == 400
    # a token of the right shape naming no counter this store holds
    assert release(weir, "1;5,60000000,1,ab") == {"leases": 1, "released": 0, "failed": 0}
    # the service is unharmed: a real token still goes back
    _, token = acquire(weir, conn="after")
    assert release(weir, token)["released"] == 1


def test_over_grpc(weir, tmp_path):
    """Leases/Acquire answers as ShouldRateLimit does, with the token;
    Leases/Release gives it back; tokens cross to HTTP and back."""
    g = Leases(tmp_path, weir.grpc_port)
    try:
        got = [g.acquire(conn="g") for _ in range(6)]
        assert [a.response.overall_code for a in got] == [OK] * 5 + [OVER_LIMIT]
        assert all(a.lease.startswith("1;5,60000000,") for a in got[:5]) and got[5].lease == ""
        assert got[0].response.statuses[0].limit_remaining == 4
        r = g.release(got[0].lease)
        assert (r.leases, r.released, r.failed) == (1, 1, 0)
        r = g.release(got[0].lease)
        assert (r.leases, r.released, r.failed) == (1, 0, 0)
        # a gRPC token goes back over HTTP, an HTTP one over gRPC
        assert release(weir, got[1].lease)["released"] == 1
        _, token = acquire(weir, conn="g")
        assert g.release(token).released == 1
        # no concurrency limit: "1", nothing to give back
        free = g.acquire(user="u")
        assert free.response.overall_code == OK and free.lease == "1"
        assert g.release("1").leases == 0
        # refused tokens
        for bad in ["", "x", "1;5,60000000,1,zz", "1;" + "9" * 30 + ",1,1,ab",
                    "1;5,60000000,1," + "ab" * 5000]:
            with pytest.raises(grpc.RpcError) as e:
                g.release(bad)
            assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, bad
        with pytest.raises(grpc.RpcError) as e:  # past the message cap
            g.release(HUGE)
        assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        # the service goes on: the leases still held are given back
        for a in got[2:5]:
            assert g.release(a.lease).released == 1
        assert [g.acquire(conn="g").response.overall_code for _ in range(6)] == [OK] * 5 + [OVER_LIMIT]
    finally:
        g.channel.close()
