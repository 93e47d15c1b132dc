"""
test_adaptive_limits.py - `adaptive:` concurrency limits in a running
daemon: admission follows the controller's limit, the leases given back
feed it (their time in flight; dropped work over HTTP, RESP and gRPC; a
lease past its timeout), a reload keeps what it learnt, and /metrics and
/admin/v1/stats show the limit and its history.

The AIMD controller makes the arithmetic exact: a window closes at every
5th sample (`window: 1us`), halves the limit when one of them was
dropped, else adds 1 when the window used at least half the limit.
"""
import subprocess
import threading
import time

import grpc
import pytest
import redis
from conftest import weir_bin
from protoclasses import message_classes
from test_admin import Admin, token_file

RULES = """\
domain: svc
descriptors:
  - key: backend
    value: reports
    rate_limit:
      unit: minute
      requests_per_unit: 50
      algorithm: concurrency
      name: reports
      adaptive: {{controller: aimd, initial: {initial}, min: 2, window: 1us, window_samples: 5,
                 backoff: 0.5}}
  - key: backend
    value: quick
    rate_limit:
      unit: second
      requests_per_unit: 50
      algorithm: concurrency
      adaptive: {{controller: aimd, initial: 4, min: 2, window: 1us, window_samples: 1,
                 backoff: 0.5}}
{extra}"""

def rules(initial=10, extra=""):
    return RULES.format(initial=initial, extra=extra)


@pytest.fixture
def weir(weir_factory, tmp_path):
    return weir_factory(rules(), "--resp", "127.0.0.1:0", "--grpc", "127.0.0.1:0",
                        "--admin", "127.0.0.1:0", "--admin-token-file", token_file(tmp_path))


def acquire(w, value="reports"):
    """POST /v1/acquire: (status, token, the limit reported)."""
    r = w.check("svc", {"backend": value}, path="/v1/acquire")
    body = r.json()
    limit = body["statuses"][0]["limit"]["requests_per_unit"]
    assert r.header("X-RateLimit-Limit") == str(limit), r
    assert f";q={limit};" in r.header("RateLimit-Policy"), r
    return r.status, body.get("lease"), limit


def release(w, token, dropped=False):
    target = "/v1/release?dropped=true" if dropped else "/v1/release"
    r = w.post(target, {"lease": token})
    assert r.status == 200, r
    return r.json()["released"]


def limit_metric(w, rule="reports"):
    return w.metric("weir_adaptive_limit", domain="svc", rule=rule)


def admitted(w, n, value="reports"):
    """Acquires up to n: the tokens of those admitted."""
    out = []
    for _ in range(n):
        status, token, _ = acquire(w, value)
        if status != 200:
            break
        out.append(token)
    return out


def test_admission_follows_the_controller(weir):
    assert limit_metric(weir) == 10
    assert weir.metric("weir_adaptive_max_limit", domain="svc", rule="reports") == 50
    held = admitted(weir, 12)
    assert len(held) == 10
    status, token, limit = acquire(weir)
    assert (status, token, limit) == (429, None, 10)
    # five dropped: the window halves the limit, with five still held
    assert sum(release(weir, t, dropped=True) for t in held[:5]) == 5
    assert limit_metric(weir) == 5
    assert acquire(weir)[0] == 429
    # five good ones, 6 to 10 in flight each (at least half of 5): +1
    assert sum(release(weir, t) for t in held[5:]) == 5
    assert limit_metric(weir) == 6
    again = admitted(weir, 8)
    assert len(again) == 6
    assert weir.metric("weir_adaptive_samples_total", domain="svc", rule="reports") == 10
    assert weir.metric("weir_adaptive_dropped_total", domain="svc", rule="reports") == 5
    rtt = weir.metric("weir_adaptive_rtt_seconds", domain="svc", rule="reports")
    assert 0 < rtt < 5
    # a second release of a token is not a second sample
    assert release(weir, again[0]) == 1
    assert release(weir, again[0]) == 0
    assert weir.metric("weir_adaptive_samples_total", domain="svc", rule="reports") == 11


def test_dropped_over_resp_and_grpc(weir, tmp_path):
    r = redis.Redis(port=weir.resp_port)
    got = r.execute_command("WEIR.ACQUIRE", "svc", "backend", "quick")
    token = got[0].decode()
    assert ";" in token and limit_metric(weir, "backend_quick") == 4
    # one sample a window: a dropped one halves the limit
    assert r.execute_command("WEIR.RELEASE", token, "DROPPED") == 1
    assert limit_metric(weir, "backend_quick") == 2
    with pytest.raises(redis.ResponseError):
        r.execute_command("WEIR.RELEASE", token, "LATER")
    (Request, AcquireResponse, ReleaseRequest, ReleaseResponse) = message_classes(
        tmp_path, ["weir/leases/v1/leases.proto"],
        ["envoy.service.ratelimit.v3.RateLimitRequest", "weir.leases.v1.AcquireResponse",
         "weir.leases.v1.ReleaseRequest", "weir.leases.v1.ReleaseResponse"])
    with grpc.insecure_channel(f"127.0.0.1:{weir.grpc_port}") as ch:
        acq = ch.unary_unary("/weir.leases.v1.Leases/Acquire",
                             request_serializer=Request.SerializeToString,
                             response_deserializer=AcquireResponse.FromString)
        rel = ch.unary_unary("/weir.leases.v1.Leases/Release",
                             request_serializer=ReleaseRequest.SerializeToString,
                             response_deserializer=ReleaseResponse.FromString)
        req = Request(domain="svc")
        e = req.descriptors.add().entries.add()
        e.key, e.value = "backend", "quick"
        tokens = [acq(req, timeout=5).lease for _ in range(2)]
        assert all(";" in t for t in tokens)
        assert acq(req, timeout=5).response.overall_code == 2  # at the limit, 2
        # a good sample with 1 in flight is under half of 2? no: 1 >= 1: +1
        assert rel(ReleaseRequest(lease=tokens[0]), timeout=5).released == 1
        assert limit_metric(weir, "backend_quick") == 3
        assert rel(ReleaseRequest(lease=tokens[1], dropped=True), timeout=5).released == 1
        assert limit_metric(weir, "backend_quick") == 2  # max(3 x 0.5, min 2)


def test_dropped_in_the_body_and_what_is_refused(weir):
    _, token, _ = acquire(weir, "quick")
    for target, body, why in [
            ("/v1/release?dropped=yes", {"lease": token}, "one query parameter"),
            ("/v1/release?x=1", {"lease": token}, "one query parameter"),
            ("/v1/release", {"lease": token, "dropped": "yes"}, "must be true or false")]:
        r = weir.post(target, body)
        assert r.status == 400 and why in r.text(), r
    assert limit_metric(weir, "backend_quick") == 4  # nothing learnt from those
    r = weir.post("/v1/release", {"dropped": True, "lease": token})
    assert r.status == 200 and r.json()["released"] == 1, r
    assert limit_metric(weir, "backend_quick") == 2


def test_a_lease_past_its_timeout_is_a_drop(weir):
    held = admitted(weir, 4, "quick")
    assert len(held) == 4
    time.sleep(1.2)  # the lease timeout is the rule's second
    assert release(weir, held[0]) == 0  # timed out: not held, but learnt from
    assert limit_metric(weir, "backend_quick") == 2
    assert weir.metric("weir_adaptive_dropped_total", domain="svc", rule="backend_quick") == 1


def test_a_reload_keeps_what_was_learnt(weir):
    held = admitted(weir, 10)
    for t in held[:5]:
        release(weir, t, dropped=True)
    assert limit_metric(weir) == 5
    # another descriptor added: the adaptive limit keeps its controller
    weir.write_rules(rules(extra="  - key: other\n    rate_limit: {unit: second, "
                                 "requests_per_unit: 5}\n"))
    weir.wait_until(lambda: "other" in weir.rules_text(), what="the reload")
    assert limit_metric(weir) == 5
    assert acquire(weir)[0] == 429  # still five in flight
    # its options changed: a new controller, at its new initial limit
    weir.write_rules(rules(initial=8))
    weir.wait_until(lambda: limit_metric(weir) == 8, what="the new controller")
    for t in held[5:]:
        release(weir, t)


def test_stats_show_the_limit_and_its_history(weir):
    held = admitted(weir, 10)
    for t in held[:5]:
        release(weir, t, dropped=True)
    r = Admin(weir).get("/admin/v1/stats")
    assert r.status == 200, r
    got = {a["rule"]: a for a in r.json()["adaptive"]}
    assert set(got) == {"reports", "backend_quick"}
    a = got["reports"]
    assert (a["domain"], a["controller"], a["limit"], a["min"], a["max"]) == (
        "svc", "aimd", 5, 2, 50)
    assert (a["samples"], a["dropped"], a["windows"]) == (5, 5, 1)
    assert [h[1] for h in a["history"]] == [5]
    assert a["history"][0][0] > 0


def test_bad_adaptive_rules_are_refused(tmp_path):
    path = tmp_path / "rules.yaml"

    def check(text):
        path.write_text(text)
        p = subprocess.run([weir_bin(), "config", "check", str(path)], capture_output=True,
                           text=True, timeout=30)
        return p.returncode, p.stdout + p.stderr

    assert check(rules())[0] == 0
    bad = rules().replace("algorithm: concurrency\n      name: reports",
                          "algorithm: token_bucket\n      name: reports")
    rc, out = check(bad)
    assert rc == 1 and "'adaptive' only applies to concurrency, not token_bucket" in out, out
    rc, out = check(rules(initial=60))
    assert rc == 1 and "adaptive initial 60 must be from min 2 to requests_per_unit 50" in out, out
    rc, out = check(rules().replace("controller: aimd, initial", "controller: pid, initial", 1))
    assert rc == 1 and "unknown adaptive controller 'pid'" in out, out


SIM_RULES = """\
domain: svc
descriptors:
  - key: backend
    value: sim
    rate_limit:
      unit: minute
      requests_per_unit: 40
      algorithm: concurrency
      name: sim
      adaptive: {controller: gradient, initial: 40, min: 2, window: 100ms, window_samples: 10,
                 probe_interval: 2s, probe_samples: 10, smoothing: 0.5}
"""


def test_the_limit_comes_down_to_a_backends_knee(weir_factory):
    """A simulated backend of KNEE servers: a request takes SERVICE while
    at most KNEE are in it, longer in proportion past that (a queue).
    Clients in a closed loop far more than it serves hold the leases; the
    gradient controller, fed each lease's time, brings the limit from 40
    down to about the knee (1.25 x KNEE plus its square root, 13, in
    theory), and the requests' time stays near the service time."""
    KNEE, SERVICE, CLIENTS, RUN = 8, 0.05, 24, 8.0
    w = weir_factory(SIM_RULES)
    lock = threading.Lock()
    inside = [0]
    took = []  # (time, seconds in the backend)
    stop = time.monotonic() + RUN

    def client():
        while time.monotonic() < stop:
            r = w.check("svc", {"backend": "sim"}, path="/v1/acquire")
            if r.status != 200:
                time.sleep(0.005)
                continue
            with lock:
                inside[0] += 1
                n = inside[0]
            t = SERVICE * max(1.0, n / KNEE)
            time.sleep(t)
            with lock:
                inside[0] -= 1
                took.append((time.monotonic(), t))
            assert w.post("/v1/release", {"lease": r.json()["lease"]}).status == 200

    threads = [threading.Thread(target=client) for _ in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    limit = limit_metric(w, "sim")
    late = [t for at, t in took if at > stop - RUN / 2]
    mean = sum(late) / len(late)
    print(f"\nlimit {limit}, {len(took)} requests, mean time in the backend over the "
          f"last half {mean * 1000:.0f} ms (service {SERVICE * 1000:.0f} ms)")
    assert 4 <= limit <= 3 * KNEE, limit
    # without the limit, 24 in a backend of 8 would take 3 x the service
    assert mean < 2.2 * SERVICE, mean
