"""
test_grpc.py - Envoy's rate limit service over gRPC against the real
daemon, with Debian's grpcio as the client: every request rule of
ENVOY_COMPAT.md (errors, unknown domain, hits, overrides, statuses,
replaces, shadow mode, the fixed window's edge), the optional response
headers and raw body, many concurrent calls on one channel, deadlines, the
health service (and draining), malformed input, unknown methods, metrics
and the listener switched off.

The message classes come from the project's own proto/ files: protoc
writes a descriptor set at module start and google.protobuf builds the
classes from it (no generated code, no pip). Limits are per hour, token
buckets where the numbers must not depend on the wall clock.
"""

import json
import re
import shutil
import signal
import subprocess
import threading
import time

import grpc
import pytest
from conftest import clock_at
from protoclasses import message_classes

SRL = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"
HEALTH = "/grpc.health.v1.Health/Check"

OK, OVER_LIMIT = 1, 2                                     # RateLimitResponse.Code
UNKNOWN, SECOND, MINUTE, HOUR, DAY = 0, 1, 2, 3, 4         # units
SERVING, NOT_SERVING = 1, 2                               # HealthCheckResponse
UNLIMITED_REMAINING = 4294967295

RULES = """\
domain: test
descriptors:
  # 3 per hour, fixed window (the default algorithm): upstream's counting
  - key: fw
    rate_limit: {unit: hour, requests_per_unit: 3}
  - key: tb
    rate_limit: {unit: hour, requests_per_unit: 5, algorithm: token_bucket, name: tb_limit}
  - key: free
    rate_limit: {unlimited: true}
  - key: ban
    rate_limit: {unit: hour, requests_per_unit: 0}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 0}
  - key: crowd
    rate_limit: {unit: hour, requests_per_unit: 150, algorithm: token_bucket}
  - key: old
    rate_limit: {unit: hour, requests_per_unit: 1, algorithm: token_bucket, name: old_limit}
  - key: new
    rate_limit:
      unit: hour
      requests_per_unit: 10
      algorithm: token_bucket
      name: new_limit
      replaces: [{name: old_limit}]
  - key: path
    value: /login
    descriptors:
      - key: user
        rate_limit: {unit: hour, requests_per_unit: 2, algorithm: token_bucket}
"""

GRPC_ON = ("--grpc", "127.0.0.1:0")


class Pb:
    """The message classes, built from a descriptor set of proto/."""

    def __init__(self, directory):
        self.Request, self.Response, self.HealthRequest, self.HealthResponse = message_classes(
            directory, ["envoy/service/ratelimit/v3/rls.proto", "grpc/health/v1/health.proto"],
            ["envoy.service.ratelimit.v3.RateLimitRequest",
             "envoy.service.ratelimit.v3.RateLimitResponse",
             "grpc.health.v1.HealthCheckRequest", "grpc.health.v1.HealthCheckResponse"])


@pytest.fixture(scope="module")
def pb(tmp_path_factory):
    return Pb(tmp_path_factory.mktemp("proto"))


class Client:
    """One channel (one HTTP/2 connection) to a weir."""

    def __init__(self, pb, port, own_connection=False):
        self.pb = pb
        # grpc-core shares connections between channels to one address,
        # unless a channel asks for its own
        options = [("grpc.use_local_subchannel_pool", 1)] if own_connection else []
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=options)
        self.srl = self.channel.unary_unary(SRL, request_serializer=pb.Request.SerializeToString,
                                            response_deserializer=pb.Response.FromString)
        self.health_call = self.channel.unary_unary(
            HEALTH, request_serializer=pb.HealthRequest.SerializeToString,
            response_deserializer=pb.HealthResponse.FromString)

    def request(self, domain, *descriptors, hits_addend=None):
        """@descriptors: dicts of entries, or (entries, options) pairs with
        options hits (descriptor hits_addend) and limit (rpu, unit)."""
        r = self.pb.Request(domain=domain)
        if hits_addend is not None:
            r.hits_addend = hits_addend
        for d in descriptors:
            entries, opts = (d if isinstance(d, tuple) else (d, {}))
            pd = r.descriptors.add()
            for k, v in entries.items():
                e = pd.entries.add()
                e.key, e.value = k, v
            if "hits" in opts:
                pd.hits_addend.SetInParent()
                pd.hits_addend.value = opts["hits"]
            if "limit" in opts:
                pd.limit.requests_per_unit, pd.limit.unit = opts["limit"]
        return r

    def check(self, domain, *descriptors, timeout=5, **kw):
        return self.srl(self.request(domain, *descriptors, **kw), timeout=timeout)

    def error(self, domain, *descriptors, **kw):
        """The grpc.RpcError of a call that must fail."""
        with pytest.raises(grpc.RpcError) as e:
            self.check(domain, *descriptors, **kw)
        return e.value

    def raw(self, path, payload, timeout=5):
        call = self.channel.unary_unary(path)  # bytes in, bytes out
        return call(payload, timeout=timeout)

    def health(self, service=""):
        return self.health_call(self.pb.HealthRequest(service=service), timeout=5).status

    def close(self):
        self.channel.close()


@pytest.fixture
def start(weir_factory, pb):
    """start(*flags) -> (weir, client) with the gRPC listener on."""
    clients = []

    def go(*flags, rules=RULES, env=None):
        w = weir_factory(rules, *GRPC_ON, *flags, env=env)
        assert w.grpc_port
        c = Client(pb, w.grpc_port)
        clients.append(c)
        return w, c

    yield go
    for c in clients:
        c.close()


def status_fields(st):
    """A DescriptorStatus as a dict of what is set."""
    out = {"code": st.code}
    if st.HasField("current_limit"):
        out["limit"] = (st.current_limit.requests_per_unit, st.current_limit.unit,
                        st.current_limit.name)
    out["remaining"] = st.limit_remaining
    return out


# ------------------------------------------------------------ request rules


def test_fixed_window_count_equal_to_limit_is_ok(weir_factory, pb):
    env, _ = clock_at(600)  # no hour boundary for the next 50 minutes
    w = weir_factory(RULES, *GRPC_ON, env=env)
    c = Client(pb, w.grpc_port)
    seen = []
    for _ in range(4):
        r = c.check("test", {"fw": "a"})
        assert len(r.statuses) == 1
        st = r.statuses[0]
        seen.append((r.overall_code, st.code, st.limit_remaining))
        assert st.current_limit.requests_per_unit == 3
        assert st.current_limit.unit == HOUR
        assert st.current_limit.name == ""
        assert 0 < st.duration_until_reset.seconds + st.duration_until_reset.nanos / 1e9 <= 3600
    # upstream answers count == limit as OK with 0 left, then OVER_LIMIT
    assert seen == [(OK, OK, 2), (OK, OK, 1), (OK, OK, 0), (OVER_LIMIT, OVER_LIMIT, 0)]
    c.close()


def test_token_bucket_status_fields(start):
    w, c = start()
    r = c.check("test", {"tb": "a"})
    st = r.statuses[0]
    assert status_fields(st) == {"code": OK, "limit": (5, HOUR, "tb_limit"), "remaining": 4}
    # a token back every 720 s
    assert st.duration_until_reset.seconds in (719, 720)


def test_empty_domain_and_descriptors_are_invalid(start):
    w, c = start()
    e = c.error("", {"tb": "a"})
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert e.details() == "rate limit domain must not be empty"
    e = c.error("test")
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert e.details() == "rate limit descriptor list must not be empty"
    # the connection is still good
    assert c.check("test", {"tb": "a"}).overall_code == OK


def test_unknown_domain_is_all_ok(start):
    w, c = start()
    r = c.check("nope", {"tb": "a"}, {"fw": "b"}, {"x": "y"})
    assert r.overall_code == OK
    assert len(r.statuses) == 3
    for st in r.statuses:
        assert st.code == OK
        assert not st.HasField("current_limit")
        assert st.limit_remaining == 0


def test_hits_addend_at_both_levels(start):
    w, c = start()
    # the request's hits_addend: 3 of 5
    r = c.check("test", {"tb": "h"}, hits_addend=3)
    assert r.statuses[0].limit_remaining == 2
    # 0 at the request level means 1
    r = c.check("test", {"tb": "h"}, hits_addend=0)
    assert r.statuses[0].limit_remaining == 1
    # a descriptor's hits_addend of 0 wins: a peek that consumes nothing
    r = c.check("test", ({"tb": "h"}, {"hits": 0}), hits_addend=4)
    assert (r.overall_code, r.statuses[0].code, r.statuses[0].limit_remaining) == (OK, OK, 1)
    r = c.check("test", ({"tb": "h"}, {"hits": 0}))
    assert r.statuses[0].limit_remaining == 1
    # a descriptor's own hits win over the request's
    r = c.check("test", ({"tb": "h"}, {"hits": 1}), hits_addend=4)
    assert (r.overall_code, r.statuses[0].limit_remaining) == (OK, 0)
    r = c.check("test", ({"tb": "h"}, {"hits": 1}))
    assert r.overall_code == OVER_LIMIT


def test_limit_override(start):
    w, c = start()
    r = c.check("test", ({"tb": "ov"}, {"limit": (7, MINUTE)}))
    st = r.statuses[0]
    assert st.code == OK
    assert (st.current_limit.requests_per_unit, st.current_limit.unit) == (7, MINUTE)
    assert st.limit_remaining == 6
    # the configured limit's counter is untouched
    assert c.check("test", {"tb": "ov"}).statuses[0].limit_remaining == 4
    # unit UNKNOWN: a clear error, never a crash
    e = c.error("test", {"tb": "a"}, ({"tb": "ov"}, {"limit": (7, UNKNOWN)}))
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert e.details() == "descriptors[1].limit.unit must not be UNKNOWN"
    assert c.check("test", {"tb": "ov"}).overall_code == OK


def test_limit_overrides_refused(start):
    """--allow-request-overrides false: a request that brings its own limit
    is PERMISSION_DENIED and counted; the others are decided."""
    w, c = start("--allow-request-overrides", "false")
    e = c.error("test", {"tb": "a"}, ({"tb": "ov"}, {"limit": (1000, MINUTE)}))
    assert e.code() == grpc.StatusCode.PERMISSION_DENIED
    assert e.details() == "descriptors[1].limit: this service does not take limits from requests"
    assert c.check("test", {"tb": "a"}).statuses[0].limit_remaining == 4  # nothing charged before
    assert w.metric("weir_requests_refused_total", protocol="grpc",
                    reason="override_refused") == 1
    # listeners on loopback: no warning about overrides either way
    assert w.count_log(r"event=request_overrides_allowed") == 0


def test_limit_override_without_a_rule(start):
    """As upstream: a descriptor's own limit applies even when no rule
    matches it, as long as the domain exists; upstream's fixed window."""
    w, c = start()
    got = [c.check("test", ({"nomatch": "ov"}, {"limit": (2, MINUTE)})) for _ in range(3)]
    assert [r.overall_code for r in got] == [OK, OK, OVER_LIMIT]
    st = got[0].statuses[0]
    assert (st.current_limit.requests_per_unit, st.current_limit.unit) == (2, MINUTE)
    assert [r.statuses[0].limit_remaining for r in got] == [1, 0, 0]
    # without the override the descriptor is not limited; in an unknown
    # domain, not with it either
    assert c.check("test", {"nomatch": "ov"}).overall_code == OK
    assert c.check("nope", ({"nomatch": "ov"}, {"limit": (1, MINUTE)})).overall_code == OK


def test_statuses_in_request_order(start):
    w, c = start()
    r = c.check("test", {"x": "nomatch"}, {"tb": "o"}, {"free": "o"}, {"ban": "o"},
                {"path": "/login", "user": "u"}, {"path": "/login"})
    assert r.overall_code == OVER_LIMIT
    got = [status_fields(st) for st in r.statuses]
    assert got == [
        {"code": OK, "remaining": 0},                                  # unmatched
        {"code": OK, "limit": (5, HOUR, "tb_limit"), "remaining": 5},
        {"code": OK, "remaining": UNLIMITED_REMAINING},                # unlimited
        {"code": OVER_LIMIT, "limit": (0, HOUR, ""), "remaining": 0},  # a ban
        {"code": OK, "limit": (2, HOUR, ""), "remaining": 2},          # nested
        {"code": OK, "remaining": 0},                                  # depth differs
    ]
    # the denial charged nothing (weir checks every limit, then charges
    # all or none): the other budgets are whole
    r = c.check("test", {"tb": "o"}, {"path": "/login", "user": "u"})
    assert [st.limit_remaining for st in r.statuses] == [4, 1]


def test_replaced_limit_is_dropped(start):
    w, c = start()
    r = c.check("test", {"old": "r"}, {"new": "r"})
    assert r.overall_code == OK
    assert status_fields(r.statuses[0]) == {"code": OK, "remaining": 0}
    assert status_fields(r.statuses[1]) == {"code": OK, "limit": (10, HOUR, "new_limit"),
                                            "remaining": 9}
    # alone, the old limit counts: 1 per hour, and it was not charged above
    assert c.check("test", {"old": "r"}).overall_code == OK
    assert c.check("test", {"old": "r"}).overall_code == OVER_LIMIT


def test_shadow_mode_never_denies(start):
    w, c = start()
    for _ in range(3):
        r = c.check("test", {"shadow": "s"}, {"tb": "s"})
        assert r.overall_code == OK
        assert r.statuses[0].code == OK
        assert r.statuses[0].current_limit.requests_per_unit == 0


# ------------------------------------------------------------ options


def test_no_headers_or_raw_body_by_default(start):
    w, c = start()
    r = c.check("test", {"ban": "d"})
    assert r.overall_code == OVER_LIMIT
    assert len(r.response_headers_to_add) == 0
    assert r.raw_body == b""


def test_response_headers_and_raw_body(start):
    w, c = start("--grpc-response-headers", "true", "--grpc-raw-body", "true")
    r = c.check("test", {"tb": "hd"})
    headers = {h.key: h.value for h in r.response_headers_to_add}
    assert headers == {"RateLimit-Policy": '"tb_limit";q=5;w=3600',
                       "RateLimit": '"tb_limit";r=4;t=720',
                       "X-RateLimit-Limit": "5", "X-RateLimit-Remaining": "4",
                       "X-RateLimit-Reset": headers["X-RateLimit-Reset"]}
    assert abs(int(headers["X-RateLimit-Reset"]) - (time.time() + 720)) < 5
    assert r.raw_body == b""  # allowed: no body
    r = c.check("test", {"tb": "hd"}, hits_addend=5)
    assert r.overall_code == OVER_LIMIT
    headers = {h.key: h.value for h in r.response_headers_to_add}
    assert headers["Retry-After"] == "720"
    body = json.loads(r.raw_body)
    assert body["status"] == 429
    assert body["retry_after"] == 720


def test_headers_follow_the_headers_flag(start):
    w, c = start("--grpc-response-headers", "true", "--headers", "legacy")
    r = c.check("test", {"tb": "hf"})
    assert [h.key for h in r.response_headers_to_add] == [
        "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"]


def test_upstream_response_headers_from_upstream_env(start):
    # envoyproxy/ratelimit's settings, as a manifest moved over sets them
    w, c = start(env={"LIMIT_RESPONSE_HEADERS_ENABLED": "true",
                      "LIMIT_REMAINING_HEADER": "X-Left"})
    r = c.check("test", {"tb": "up"})
    headers = [(h.key, h.value) for h in r.response_headers_to_add]
    assert headers == [("RateLimit-Limit", "5"), ("X-Left", "4"), ("RateLimit-Reset", "720")]
    # weir's HTTP answer carries the same fields
    resp = w.check("test", {"tb": "up"})
    assert resp.header("ratelimit-limit") == "5" and resp.header("x-left") == "3"
    assert not resp.has("x-ratelimit-limit")


# ------------------------------------------------------------ the transport


def test_many_concurrent_calls_on_one_channel(start):
    w, c = start()
    futures = [c.srl.future(c.request("test", {"crowd": "c"}), timeout=20) for _ in range(200)]
    codes = [f.result().overall_code for f in futures]
    assert codes.count(OK) == 150
    assert codes.count(OVER_LIMIT) == 50
    # all of it on one connection
    assert w.metric("weir_connections", protocol="grpc") == 1
    assert w.metric("weir_connections_accepted_total", protocol="grpc") == 1


def test_concurrent_channels_from_threads(start, pb):
    w, c = start()
    clients = [Client(pb, w.grpc_port, own_connection=True) for _ in range(4)]
    results = []
    lock = threading.Lock()

    def run(cl):
        for _ in range(25):
            code = cl.check("test", {"crowd": "t"}).overall_code
            with lock:
                results.append(code)

    threads = [threading.Thread(target=run, args=(cl,)) for cl in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for cl in clients:
        cl.close()
    assert results.count(OK) == 100


def test_deadline_shorter_than_the_answer(start):
    # A 1 us deadline: the client gives up before the answer can come. The
    # first call is sure to (the connection is not even up yet); later ones
    # may not: grpc-core checks deadlines on a timer, and an answer that
    # arrives before that timer runs completes the call. Either outcome is
    # fine; the server must carry on. (test_raw_http2_requests sends a
    # deadline that has passed and checks weir's own DEADLINE_EXCEEDED.)
    w, c = start()
    codes = []
    for _ in range(20):
        try:
            codes.append(c.check("test", {"crowd": "dl"}, timeout=0.000001).overall_code)
        except grpc.RpcError as e:
            codes.append(e.code())
    assert set(codes) <= {grpc.StatusCode.DEADLINE_EXCEEDED, OK}, codes
    assert grpc.StatusCode.DEADLINE_EXCEEDED in codes, codes
    # the server and the channel are fine
    r = c.check("test", {"crowd": "dl"})
    assert r.overall_code == OK
    # (a call the client gave up on may still have been decided)
    assert r.statuses[0].limit_remaining >= 150 - len(codes) - 1


def test_malformed_and_oversized_messages(start):
    w, c = start()
    with pytest.raises(grpc.RpcError) as e:
        c.raw(SRL, b"\x0a\xff\xff\xff")  # a length past the end
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert e.value.details().startswith("cannot parse RateLimitRequest")
    with pytest.raises(grpc.RpcError) as e:
        c.raw(HEALTH, b"\xff")
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    # over --grpc-max-message-bytes (64 KiB)
    e = c.error("x" * 70000, {"tb": "a"})
    assert e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert c.check("test", {"tb": "m"}).overall_code == OK


def nghttp(port, path, headers, body_path=None):
    """One request with nghttp2's own client; its response header fields as
    {name: value} (trailers included)."""
    argv = ["nghttp", "-v", f"http://127.0.0.1:{port}{path}"]
    for h in headers:
        argv += ["-H", h]
    if body_path:
        argv += ["-d", body_path]
    p = subprocess.run(argv, capture_output=True, timeout=10)
    fields = {}
    for m in re.finditer(rb"recv \(stream_id=\d+\) ([^:\s][^:]*|:[a-z]+): (.*)", p.stdout):
        fields[m.group(1).decode()] = m.group(2).decode()
    return fields


@pytest.mark.skipif(not shutil.which("nghttp"), reason="nghttp (nghttp2-client) is needed")
def test_raw_http2_requests(start, pb, tmp_path):
    # what grpcio never sends: set deadlines, a bad grpc-timeout, other
    # content types and methods
    w, c = start()
    msg = c.request("test", {"tb": "raw"}).SerializeToString()
    body = tmp_path / "body.bin"
    body.write_bytes(b"\0" + len(msg).to_bytes(4, "big") + msg)
    ct = "content-type: application/grpc"
    f = nghttp(w.grpc_port, SRL, [ct, "te: trailers"], body)
    assert (f[":status"], f["content-type"], f["grpc-status"]) == ("200", "application/grpc", "0")
    f = nghttp(w.grpc_port, SRL, [ct, "grpc-timeout: 0m"], body)
    assert (f["grpc-status"], f["grpc-message"]) == ("4", "deadline exceeded")
    f = nghttp(w.grpc_port, SRL, [ct, "grpc-timeout: 5X"], body)
    assert (f["grpc-status"], f["grpc-message"]) == ("13", "malformed grpc-timeout")
    f = nghttp(w.grpc_port, SRL, ["content-type: application/json"], body)
    assert f[":status"] == "415" and "grpc-status" not in f
    f = nghttp(w.grpc_port, SRL, [ct])  # a GET
    assert (f[":status"], f["allow"]) == ("405", "POST")
    # only the first call consumed anything
    assert c.check("test", {"tb": "raw"}).statuses[0].limit_remaining == 3


def test_unknown_method(start):
    w, c = start()
    for path in ("/envoy.service.ratelimit.v3.RateLimitService/Nope", "/nope.Service/Call",
                 "/grpc.health.v1.Health/Watch"):
        with pytest.raises(grpc.RpcError) as e:
            c.raw(path, b"")
        assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED
        assert e.value.details() == "unknown method " + path


def test_metrics_count_grpc(start):
    w, c = start()
    for _ in range(3):
        c.check("test", {"tb": "mt"})
    c.health()
    m = w.metrics()
    assert m[("weir_request_duration_seconds_count", (("protocol", "grpc"),))] == 4
    assert m[("weir_connections", (("protocol", "grpc"),))] == 1
    assert m[("weir_decisions_total", (("domain", "test"), ("result", "allowed"),
                                       ("rule", "tb_limit")))] == 3


def test_max_streams_flag_is_advertised(start):
    # a client holds to the server's MAX_CONCURRENT_STREAMS: with 2, 40
    # calls at once still all complete
    w, c = start("--grpc-max-streams", "2")
    futures = [c.srl.future(c.request("test", {"crowd": "s"}), timeout=20) for _ in range(40)]
    assert [f.result().overall_code for f in futures] == [OK] * 40


# ------------------------------------------------------------ health, lifecycle


def test_health(start):
    w, c = start()
    assert c.health("") == SERVING
    assert c.health("ratelimit") == SERVING
    with pytest.raises(grpc.RpcError) as e:
        c.health("other")
    assert e.value.code() == grpc.StatusCode.NOT_FOUND


def test_health_not_serving_while_draining(start):
    w, c = start("--drain-delay", "2s")
    assert c.health() == SERVING
    w.signal(signal.SIGTERM)
    w.wait_for_log(r"event=draining")
    assert c.health() == NOT_SERVING
    assert c.health("ratelimit") == NOT_SERVING
    # still deciding while draining
    assert c.check("test", {"tb": "dr"}).overall_code == OK


def test_goaway_lets_the_daemon_exit_promptly(start):
    # an idle channel must not hold the shutdown for --shutdown-timeout: the
    # GOAWAY ends the connection as soon as nothing is in flight
    w, c = start("--shutdown-timeout", "20s")
    assert c.check("test", {"tb": "g"}).overall_code == OK
    t0 = time.monotonic()
    w.signal(signal.SIGTERM)
    assert w.wait_exit(10) == 0
    assert time.monotonic() - t0 < 8  # far under the 20 s a held shutdown takes
    assert "event=shutdown_timeout" not in w.log_text()


def test_grpc_listener_off(weir_factory):
    w = weir_factory(RULES)  # the harness passes --grpc ''
    line = w.wait_for_log(r"event=listening")
    assert "grpc=off" in line
    assert w.grpc_port is None
