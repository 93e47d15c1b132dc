"""
test_bad_input.py - what the daemon answers to malformed, oversized,
slow and unusual HTTP/1.1 input, over raw sockets: the exact status, a
problem+json body, whether the connection stays open, and that the server
still answers a fresh request afterwards.
"""

import json
import socket
import time

import pytest

import rawhttp

RULES = """\
domain: test
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 2, algorithm: token_bucket}
"""

# small caps, so that the oversized cases stay small
FLAGS = ("--max-header-bytes", "2KiB", "--max-body-bytes", "4KiB", "--max-descriptors", "4")

TITLES = {400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
          408: "Request Timeout", 413: "Content Too Large", 414: "URI Too Long",
          431: "Request Header Fields Too Large", 501: "Not Implemented",
          505: "HTTP Version Not Supported"}


def desc(value="alice", key="user"):
    return {"entries": [{"key": key, "value": value}]}


def post(path, body, headers=None):
    if not isinstance(body, (bytes, str)):
        body = json.dumps(body)
    return rawhttp.build_request("POST", path, body, headers)


def get(target, headers=None, version="HTTP/1.1"):
    return rawhttp.build_request("GET", target, None, headers, version)


def chunked(path, body, sizes=None):
    head = (f"POST {path} HTTP/1.1\r\nHost: weir.test\r\n"
            "Transfer-Encoding: chunked\r\n\r\n").encode()
    out, i = b"", 0
    for n in sizes or [len(body)]:
        part = body[i:i + n]
        i += n
        out += b"%x\r\n" % len(part) + part + b"\r\n"
    return head + out + b"0\r\n\r\n"


MALFORMED_JSON = "malformed JSON at line 1, column 11: '[' or '{' expected near end of file"

# (id, request bytes, status, detail, connection closed after the answer)
CASES = [
    # --- JSON bodies: the connection stays usable
    ("malformed-json", post("/v1/check", '{"domain":'), 400,
     "malformed JSON at line 1, column 10: unexpected token near end of file", False),
    ("json-not-object", post("/v1/check", "[]"), 400, "body must be an object", False),
    ("json-trailing-garbage", post("/v1/check", '{"domain":"test"} x'), 400,
     "malformed JSON at line 1, column 19: end of file expected near 'x'", False),
    ("domain-not-string", post("/v1/check", {"domain": 5, "descriptors": [desc()]}), 400,
     "domain: must be a string", False),
    ("value-not-string", post("/v1/check", {"domain": "test", "descriptors": [
        {"entries": [{"key": "user", "value": 5}]}]}), 400,
     "descriptors[0].entries[0].value: must be a string", False),
    ("hits-not-integer", post("/v1/check", {"domain": "test", "descriptors": [
        dict(desc(), hits="1")]}), 400,
     "descriptors[0].hits: must be an integer from 0 to 9007199254740992", False),
    ("hits-negative", post("/v1/check", {"domain": "test", "descriptors": [desc()],
                                         "hits": -1}), 400,
     "hits: must be an integer from 0 to 9007199254740992", False),
    ("descriptors-not-array", post("/v1/check", {"domain": "test", "descriptors": {}}), 400,
     "descriptors: must be an array", False),
    ("unknown-field", post("/v1/check", {"domain": "test", "descriptors": [desc()],
                                         "bogus": 1}), 400, "unknown field 'bogus'", False),
    ("entry-without-value", post("/v1/check", {"domain": "test", "descriptors": [
        {"entries": [{"key": "user"}]}]}), 400,
     "descriptors[0].entries[0]: missing field 'value'", False),
    ("unknown-unit", post("/v1/check", {"domain": "test", "descriptors": [
        dict(desc(), limit={"requests_per_unit": 1, "unit": "fortnight"})]}), 400,
     "descriptors[0].limit.unit: unknown unit 'fortnight'", False),
    ("missing-domain", post("/v1/check", {"descriptors": [desc()]}), 400,
     "rate limit domain must not be empty", False),
    ("empty-domain", post("/v1/check", {"domain": "", "descriptors": [desc()]}), 400,
     "rate limit domain must not be empty", False),
    ("empty-descriptors", post("/v1/check", {"domain": "test", "descriptors": []}), 400,
     "rate limit descriptor list must not be empty", False),
    ("no-descriptors", post("/v1/check", {"domain": "test"}), 400,
     "rate limit descriptor list must not be empty", False),
    ("descriptor-without-entries", post("/v1/check", {"domain": "test", "descriptors": [
        desc(), {"entries": []}]}), 400, "descriptors[1] has no entries", False),
    ("empty-body", post("/v1/check", ""), 400,
     "malformed JSON at line 1, column 0: '[' or '{' expected near end of file", False),
    ("unknown-domain", post("/v1/check", {"domain": "nope", "descriptors": [desc()]}), 404,
     "unknown domain 'nope'", False),
    ("too-many-descriptors", post("/v1/check", {"domain": "test",
                                                "descriptors": [desc()] * 5}), 413,
     "too many descriptors (5 > 4)", False),
    ("too-many-entries", post("/v1/check", {"domain": "test", "descriptors": [
        {"entries": [{"key": f"k{i}", "value": "v"} for i in range(65)]}]}), 413,
     "descriptors[0]: too many entries (65 > 64)", False),
    ("too-many-query-entries",
     get("/v1/check?domain=test&" + "&".join(f"k{i}=v" for i in range(70))), 413,
     "too many entries (70 > 64)", False),
    ("envoy-malformed-json", post("/json", "{"), 400,
     "malformed JSON at line 1, column 1: string or '}' expected near end of file", False),
    ("envoy-unknown-unit", post("/json", {"domain": "test", "descriptors": [
        dict(desc(), limit={"requestsPerUnit": 1, "unit": "UNKNOWN"})]}), 400,
     "descriptors[0].limit.unit must not be UNKNOWN", False),
    ("envoy-too-many-descriptors", post("/json", {"domain": "test",
                                                  "descriptors": [desc()] * 5}), 413,
     "too many descriptors (5 > 4)", False),
    ("batch-not-array", post("/v1/check/batch", {"requests": 1}), 400,
     "requests: must be an array", False),
    # --- routing: the connection stays usable
    ("unknown-path", get("/nope"), 404, "no such path: /nope", False),
    ("unknown-path-query", get("/v1/checks?domain=test"), 404, "no such path: /v1/checks",
     False),
    ("delete-check", rawhttp.build_request("DELETE", "/v1/check"), 405,
     "method DELETE is not allowed on /v1/check (allowed: GET, HEAD, POST)", False),
    ("put-healthz", rawhttp.build_request("PUT", "/healthz", "{}"), 405,
     "method PUT is not allowed on /healthz (allowed: GET, HEAD)", False),
    ("get-json", get("/json"), 405,
     "method GET is not allowed on /json (allowed: POST)", False),
    ("get-batch", get("/v1/check/batch"), 405,
     "method GET is not allowed on /v1/check/batch (allowed: POST)", False),
    ("post-metrics", post("/metrics", "x"), 405,
     "method POST is not allowed on /metrics (allowed: GET, HEAD)", False),
    # --- the codec: an error ends the connection
    ("oversized-header", get("/healthz", {"X-Big": "a" * 3000}), 431,
     "header section too large", True),
    ("too-many-headers", get("/healthz", [(f"X-H{i}", "v") for i in range(70)]), 431,
     "too many header fields", True),
    ("long-target", get("/healthz?" + "a" * 3000), 414, "request target too long", True),
    ("oversized-body", post("/v1/check", "x" * 5000), 413, "request body too large", True),
    ("oversized-chunked-body", chunked("/v1/check", b"x" * 5000, [2500, 2500]), 413,
     "request body too large", True),
    ("huge-content-length-expect",
     b"POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n"
     b"Expect: 100-continue\r\n\r\n", 413, "request body too large", True),
    ("content-length-and-chunked",
     b"POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
     b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400,
     "both Content-Length and Transfer-Encoding", True),
    ("duplicate-content-length",
     b"POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}",
     400, "duplicate Content-Length", True),
    ("bad-content-length", b"POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
     400, "malformed request: invalid character in content-length header", True),
    ("transfer-coding-gzip",
     b"POST /v1/check HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501,
     "transfer coding not supported (only chunked)", True),
    ("transfer-coding-twice",
     b"POST /v1/check HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, chunked\r\n\r\n"
     b"0\r\n\r\n", 501, "transfer coding not supported (only chunked)", True),
    ("bad-chunk-size",
     b"POST /v1/check HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400,
     "malformed request: invalid character in chunk size header", True),
    ("obs-fold", b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: b\r\n  folded\r\n\r\n", 400,
     "obsolete line folding in header", True),
    ("fragment", b"GET /healthz#top HTTP/1.1\r\nHost: x\r\n\r\n", 400,
     "fragment in request target", True),
    ("nul-in-header", b"GET /healthz HTTP/1.1\r\nHost: x\x00y\r\n\r\n", 400,
     "malformed request: invalid character in header", True),
    ("garbage", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03garbage\r\n\r\n", 400,
     "malformed request: invalid HTTP method", True),
    ("words", b"hello world\r\n\r\n", 400, "malformed request: invalid HTTP method", True),
    ("http2-preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 400,
     "malformed request: invalid HTTP method", True),
    ("http2-version", b"GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505, "HTTP version not supported",
     True),
    ("http09", b"GET /healthz\r\n\r\n", 505, "HTTP version not supported", True),
    # what a proxy in front could read otherwise (request smuggling)
    ("bare-lf", b"GET /healthz HTTP/1.1\nHost: x\n\n", 400,
     "a line of the header section ends in LF without CR", True),
    ("bare-lf-last", b"GET /healthz HTTP/1.1\r\nHost: x\r\n\n", 400,
     "a line of the header section ends in LF without CR", True),
    ("two-spaces", b"GET  /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 400,
     "more than one space between the parts of the request line", True),
]


@pytest.fixture
def weir(weir_factory):
    return weir_factory(RULES, *FLAGS)


@pytest.fixture(scope="module")
def shared_weir(weir_module_factory):
    """One daemon for the whole table: each case also proves that the
    cases before it left the server in order."""
    return weir_module_factory(RULES, *FLAGS)


def assert_problem(r, status, detail):
    assert r.status == status, r
    assert r.reason == TITLES[status]
    assert r.header("Content-Type") == "application/problem+json"
    assert r.json() == {"type": "about:blank", "title": TITLES[status], "status": status,
                        "detail": detail}


def assert_alive(weir):
    r = weir.get("/healthz")
    assert (r.status, r.body) == (200, b'{"status":"ok"}')


@pytest.mark.parametrize("data,status,detail,closes", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_bad_request(shared_weir, data, status, detail, closes):
    weir = shared_weir
    with weir.conn() as c:
        c.send(data)
        r = c.read_response()
        assert_problem(r, status, detail)
        if closes:
            assert r.header("Connection") == "close"
            assert c.wait_closed(3) < 3
        else:
            assert r.header("Connection") is None
            if status == 405:
                allowed = detail.rsplit("(allowed: ", 1)[1].rstrip(")")
                assert r.header("Allow") == allowed
            # the same connection goes on
            r = c.request("GET", "/healthz")
            assert r.status == 200
    assert_alive(weir)
    # nothing was charged by a refused request (the cases use "alice")
    r = weir.check("test", {"entries": [{"key": "user", "value": "alice"}], "hits": 0})
    assert r.header("X-RateLimit-Remaining") == "2"


def test_value_longer_than_a_counter_key(weir_factory):
    weir = weir_factory(RULES)
    # a string longer than any counter key: named, with the cap
    r = weir.check("test", {"user": "v" * 5000})
    assert_problem(r, 400, "descriptors[0].entries[0].value: 5000 bytes, more than the 4096 "
                           "a string may have")
    # within it, but not with the rule's path
    r = weir.check("test", {"user": "v" * 4090})
    assert_problem(r, 400, "descriptors[0] has values too long for a counter key (4096 bytes "
                           "with the rule's path)")
    assert_alive(weir)


def test_bad_request_after_good_ones_on_one_connection(weir):
    with weir.conn() as c:
        assert c.request("GET", "/healthz").status == 200
        c.send(b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: zz\r\n\r\n")
        r = c.read_response()
        assert r.status == 400
        assert c.wait_closed(3) < 3
    assert_alive(weir)


def test_whitespace_before_colon_is_refused(weir):
    # RFC 9112 5.1: a server MUST reject it (a request smuggling vector)
    with weir.conn() as c:
        c.send(b"GET /healthz HTTP/1.1\r\nHost : x\r\n\r\n")
        r = c.read_response()
        assert_problem(r, 400, "whitespace between header name and colon")
        assert r.header("Connection") == "close"
        c.wait_closed(3)
    assert_alive(weir)


def test_absolute_form_target(weir):
    # RFC 9112 3.2.2: a server MUST accept the absolute form
    r = weir.get("http://weir.test/healthz")
    assert (r.status, r.body) == (200, b'{"status":"ok"}')
    r = weir.get("http://weir.test/v1/check?domain=test&user=abs")
    assert r.status == 200
    assert r.header("X-RateLimit-Remaining") == "1"


def test_http11_without_host_is_refused(weir):
    # RFC 9112 3.2: a server MUST answer 400
    with weir.conn() as c:
        c.send(b"GET /healthz HTTP/1.1\r\n\r\n")
        r = c.read_response()
        assert_problem(r, 400, "missing Host header")
        assert r.header("Connection") == "close"
        c.wait_closed(3)
    # HTTP/1.0 has no Host requirement
    with weir.conn() as c:
        c.send(b"GET /healthz HTTP/1.0\r\n\r\n")
        assert c.read_response().status == 200


# RFC 9112 3.2: a server MUST respond 400 to more than one Host line
def test_two_host_headers_are_refused(weir):
    with weir.conn() as c:
        c.send(b"GET /healthz HTTP/1.1\r\nHost: a.test\r\nHost: b.test\r\n\r\n")
        r = c.read_response()
        assert r.status == 400, r


# ------------------------------------------------------------ framing


def test_http10_answered_then_closed(weir):
    with weir.conn() as c:
        c.send(get("/healthz", version="HTTP/1.0"))
        r = c.read_response()
        assert r.version == "HTTP/1.1"
        assert (r.status, r.body) == (200, b'{"status":"ok"}')
        assert r.header("Connection") == "close"
        assert c.wait_closed(3) < 3


def test_http10_keep_alive(weir):
    with weir.conn() as c:
        for _ in range(2):
            c.send(get("/healthz", {"Connection": "keep-alive"}, version="HTTP/1.0"))
            r = c.read_response()
            assert r.status == 200
            assert r.header("Connection") == "keep-alive"
        assert c.is_open(0.3)
        # HTTP/1.0 without keep-alive ends it
        c.send(get("/healthz", version="HTTP/1.0"))
        assert c.read_response().header("Connection") == "close"
        c.wait_closed(3)


def test_http11_connection_close(weir):
    with weir.conn() as c:
        r = c.request("GET", "/healthz", headers={"Connection": "close"})
        assert r.status == 200
        assert r.header("Connection") == "close"
        c.wait_closed(3)


def test_pipelining_answers_in_order(weir):
    check = {"domain": "test", "descriptors": [desc("pipe")]}
    data = (post("/v1/check", check) + get("/v1/check?domain=test&user=pipe")
            + post("/v1/check", check) + get("/nope") + get("/healthcheck"))
    with weir.conn() as c:
        c.send(data)  # all in one send
        answers = [c.read_response() for _ in range(5)]
        assert [a.status for a in answers] == [200, 200, 429, 404, 200]
        assert answers[0].json()["statuses"][0]["remaining"] == 1
        assert answers[1].header("X-RateLimit-Remaining") == "0"
        assert answers[1].body == b""
        assert answers[2].json()["code"] == "OVER_LIMIT"
        assert answers[4].body == b"OK"
        assert c.is_open(0.2)


def test_pipelining_three_in_one_send(weir):
    with weir.conn() as c:
        c.send(get("/healthz") + get("/healthcheck") + get("/v1/rules"))
        a, b, r = (c.read_response() for _ in range(3))
        assert a.body == b'{"status":"ok"}'
        assert b.body == b"OK"
        assert r.body.startswith(b"test.user: requests_per_unit=2")
        assert c.buf == b""


def test_connection_close_ends_the_stream(weir):
    with weir.conn() as c:
        c.send(get("/healthz", {"Connection": "close"}) + get("/healthcheck"))
        r = c.read_response()
        assert (r.status, r.header("Connection")) == (200, "close")
        # the pipelined request after "Connection: close" is not answered
        c.wait_closed(3)


def test_many_pipelined_requests_with_backpressure(weir):
    # ~14 MB of answers to requests sent at once: the server stops reading
    # while its answers queue up, and must go on once they are read
    n = 2000
    with weir.conn(timeout=10) as c:
        c.send(get("/metrics") * (n - 1) + get("/healthcheck"))
        for _ in range(n - 1):
            r = c.read_response()
            assert r.status == 200
            assert r.body.startswith(b"# HELP weir_build_info")
        assert c.read_response().body == b"OK"
        assert c.is_open(0.1)


def test_backpressure_is_not_a_slow_request(weir_factory):
    # the request timeout must not run while the server itself has stopped
    # reading (its answers queued up): these requests all arrived at once
    weir = weir_factory(RULES, "--request-timeout", "1s")
    n = 2000
    with weir.conn(timeout=10) as c:
        c.send(get("/metrics") * n)  # every request whole, at once
        time.sleep(1.5)  # then the client reads its answers slowly
        statuses = []
        try:
            for _ in range(n):
                statuses.append(c.read_response().status)
        except rawhttp.ConnectionClosed:
            pass
        assert statuses == [200] * n, f"{len(statuses)} answers, last {statuses[-1:]}"


def test_pipelined_request_gets_its_own_request_timeout(weir_factory):
    weir = weir_factory(RULES, "--request-timeout", "1s", "--idle-timeout", "10s")
    req = get("/healthz")
    with weir.conn() as c:
        c.send(req[:10])  # request 1 starts at t=0
        time.sleep(0.7)
        c.send(req[10:] + req[:10])  # request 1 ends, request 2 starts at t=0.7
        assert c.read_response().status == 200
        time.sleep(0.6)  # t=1.3: request 2 is 0.6 s old, within its 1 s
        c.send(req[10:])
        r = c.read_response()
        assert r.status == 200, r


def test_pipelined_error_ends_the_stream(weir):
    with weir.conn() as c:
        c.send(get("/healthz") + b"BAD\x01 / HTTP/1.1\r\n\r\n" + get("/healthz"))
        assert c.read_response().status == 200
        r = c.read_response()
        assert r.status == 400
        assert r.header("Connection") == "close"
        # the request after the error is never answered
        c.wait_closed(3)


def test_request_split_into_single_bytes(weir):
    data = post("/v1/check", {"domain": "test", "descriptors": [desc("bytes")]})
    with weir.conn() as c:
        c.send_bytewise(data)
        r = c.read_response()
        assert r.status == 200
        assert r.json()["statuses"][0]["remaining"] == 1
        # and a pipelined pair, byte by byte
        c.send_bytewise(data + get("/healthcheck"))
        assert c.read_response().json()["statuses"][0]["remaining"] == 0
        assert c.read_response().body == b"OK"


def test_oversized_header_split_into_single_bytes(weir):
    with weir.conn() as c:
        data = get("/healthz", {"X-Big": "a" * 2100})
        # the cap is noticed as soon as it is passed, not at the end
        c.send_bytewise(data[:2100])
        r = c.read_response(timeout=3)
        assert_problem(r, 431, "header section too large")
    assert_alive(weir)


def test_chunked_body(weir):
    body = json.dumps({"domain": "test", "descriptors": [desc("chunky")]}).encode()
    with weir.conn() as c:
        c.send(chunked("/v1/check", body, [10, 30, len(body) - 40]))
        r = c.read_response()
        assert r.status == 200
        assert r.json()["statuses"][0]["remaining"] == 1
        # with a trailer field and chunk extensions
        c.send(b"POST /v1/check HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
               + b"%x;ext=1\r\n" % len(body) + body + b"\r\n0\r\nX-Trailer: t\r\n\r\n")
        r = c.read_response()
        assert r.status == 200
        assert r.json()["statuses"][0]["remaining"] == 0


def test_blank_lines_before_a_request_are_skipped(weir):
    with weir.conn() as c:
        c.send(b"\r\n\r\n" + get("/healthz"))
        assert c.read_response().status == 200


# ------------------------------------------------------------ timeouts and caps


def test_slowloris_gets_408(weir_factory):
    weir = weir_factory(RULES, "--request-timeout", "1s", "--idle-timeout", "5s")
    with weir.conn() as c:
        t0 = time.monotonic()
        c.send(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        for _ in range(10):  # one header byte every 0.3 s, never finishing
            if not c.is_open(0.3):  # an answer (or the close) arrived
                break
            c.send(b"a")
        r = c.read_response(timeout=1)
        elapsed = time.monotonic() - t0
        assert_problem(r, 408, "the request did not arrive in time")
        assert r.header("Connection") == "close"
        # upper bound: a timer that restarted with each byte would have let
        # the request trickle for 3 s; the slack is for a loaded machine
        assert 0.9 <= elapsed <= 2.5, elapsed
        c.wait_closed(3)
    assert_alive(weir)
    assert weir.metric("weir_http_requests_total", route="other", code="408") == 1


def test_slow_but_whole_request_in_time(weir_factory):
    weir = weir_factory(RULES, "--request-timeout", "1s")
    data = get("/healthz")
    with weir.conn() as c:
        for i in range(0, len(data), 8):
            c.send(data[i:i + 8])
            time.sleep(0.05)
        assert c.read_response().status == 200
        # the request timeout starts again with each request
        time.sleep(0.6)
        c.send(data[:10])
        time.sleep(0.6)
        c.send(data[10:])
        assert c.read_response().status == 200


def test_idle_keep_alive_closed(weir_factory):
    weir = weir_factory(RULES, "--idle-timeout", "1s", "--request-timeout", "5s")
    with weir.conn() as c:
        assert c.request("GET", "/healthz").status == 200
        t0 = time.monotonic()
        c.wait_closed(3)
        assert 0.8 <= time.monotonic() - t0 <= 2.5  # not the 5 s request timeout
    # a connection that never sends anything is idle too
    with weir.conn() as c:
        t0 = time.monotonic()
        c.wait_closed(3)
        assert 0.8 <= time.monotonic() - t0 <= 2.5  # not the 5 s request timeout
    # activity keeps it open
    with weir.conn() as c:
        for _ in range(3):
            time.sleep(0.5)
            assert c.request("GET", "/healthz").status == 200
    assert_alive(weir)


def test_expect_100_continue(weir):
    """A client that waits for 100 Continue before its body (curl, past a
    size) gets it at once, not after its own timeout; one that sent its body
    anyway, or speaks HTTP/1.0, gets the answer alone."""
    body = json.dumps({"domain": "test", "descriptors": [
        {"entries": [{"key": "user", "value": "expect"}], "hits": 0}]}).encode()
    head = (b"POST /v1/check HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body))
    with weir.conn() as c:
        c.send(head)
        t0 = time.monotonic()
        while b"\r\n\r\n" not in c.buf:
            assert c._fill(time.monotonic() + 0.5), "closed"
        assert time.monotonic() - t0 < 0.5
        assert bytes(c.buf) == b"HTTP/1.1 100 Continue\r\n\r\n", c.buf
        c.buf = c.buf[len(b"HTTP/1.1 100 Continue\r\n\r\n"):]
        c.send(body)
        assert c.read_response().status == 200
        # the body in the same write: no interim answer
        c.send(head + body)
        r = c.read_response()
        assert r.status == 200  # a stray 100 would have been read as the answer
    with weir.conn() as c:
        c.send(head.replace(b"HTTP/1.1", b"HTTP/1.0"))
        assert c.is_open(0.3)  # nothing sent to an HTTP/1.0 client
        c.send(body)
        assert c.read_response().status == 200


def closed_within(c, seconds):
    """Whether the server closes @c within @seconds."""
    t0 = time.monotonic()
    try:
        c.wait_closed(seconds)
    except ConnectionResetError:
        pass
    return time.monotonic() - t0 < seconds


def test_max_connections_evicts_the_idle_longest(weir_factory):
    # one worker: connections are counted for the service, and a worker
    # closes an idle connection of its own to make room
    weir = weir_factory(RULES, "--max-connections", "3", "--request-timeout", "30s", threads=1)
    a, b, c = conns = [weir.conn() for _ in range(3)]
    try:
        for x in (a, b, c, a):  # b is now the one idle longest
            assert x.request("GET", "/healthz").status == 200
        d = weir.conn()
        conns.append(d)
        assert d.request("GET", "/healthz").status == 200  # let in
        assert closed_within(b, 2), "the connection idle longest was not closed"
        for x in (a, c, d):
            assert x.request("GET", "/healthz").status == 200
        assert weir_metric_via(a, "weir_connections_evicted_total") == 1
        assert weir_metric_via(a, "weir_connections") == 3
        assert weir_metric_via(a, "weir_connections_rejected_total") == 0

        # none idle (each in the middle of a request): a new one is refused
        for x in (a, c, d):
            x.send(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        time.sleep(0.2)
        extra = weir.conn()
        try:
            extra.send(get("/healthz"))
        except OSError:
            pass
        # closed at once, unanswered (a held connection would wait 30 s)
        assert closed_within(extra, 2)
        extra.close()
        for x in (a, c, d):  # each finishes its request
            x.send(b"\r\n")
            assert x.read_response().status == 200
        assert weir_metric_via(a, "weir_connections_rejected_total") == 1
        assert weir_metric_via(a, "weir_connections_evicted_total") == 1
    finally:
        for x in conns:
            x.close()


def test_a_socket_that_sends_nothing_gets_the_request_timeout(weir_factory):
    """A client that connects and sends nothing holds a connection for
    --request-timeout (1 s here), not --idle-timeout (60 s): HTTP and gRPC.
    A connection that was used gets the idle timeout."""
    weir = weir_factory(RULES, "--request-timeout", "1s", "--idle-timeout", "60s",
                        "--grpc", "127.0.0.1:0")
    used = weir.conn()
    assert used.request("GET", "/healthz").status == 200
    silent = weir.conn()
    assert closed_within(silent, 3)
    silent.close()
    # gRPC: the server's SETTINGS, then (nothing heard) its GOAWAY, then the end
    with socket.create_connection(("127.0.0.1", weir.grpc_port), timeout=4) as g:
        t0 = time.monotonic()
        while g.recv(4096):
            pass
        assert time.monotonic() - t0 < 4
    time.sleep(0.5)  # well past 1 s since it was used: still open
    assert used.request("GET", "/healthz").status == 200
    used.close()


def weir_metric_via(conn, name):
    """A metric read over an open connection (a new one may be refused)."""
    r = conn.request("GET", "/metrics")
    for line in r.text().splitlines():
        if line.startswith(name + '{protocol="http"} '):
            return float(line.split()[-1])
    raise AssertionError(f"{name} not in /metrics")


def test_half_closed_client_still_gets_its_answer(weir):
    with weir.conn() as c:
        c.send(get("/healthz"))
        c.sock.shutdown(socket.SHUT_WR)
        r = c.read_response()
        assert r.status == 200
        c.wait_closed(3)
    assert_alive(weir)


def test_no_memory_for_a_connection(weir_factory):
    """A connection there is no memory for is closed at once, and the
    listeners go on accepting (here every second connection's memory is
    refused, on one worker, so the refusals are known in advance)."""
    weir = weir_factory(RULES, "--grpc", "127.0.0.1:0", threads=1,
                        env={"WEIR_TEST_FAIL_CONN_ALLOC": "2"})
    keeper = weir.conn()  # allocation 1: served
    try:
        assert keeper.request("GET", "/healthz").status == 200
        outcomes = []
        for _ in range(6):  # allocations 2..7: refused, served, ...
            with weir.conn() as c:
                t0 = time.monotonic()
                try:
                    outcomes.append(c.request("GET", "/healthz", timeout=3).status)
                except (rawhttp.ConnectionClosed, ConnectionResetError, BrokenPipeError):
                    outcomes.append("closed")
                    # a held one would hit the 3 s timeout: there is no
                    # connection to time it out on the server's side
                    assert time.monotonic() - t0 < 2, "a refused connection was held"
        assert outcomes == ["closed", 200] * 3
        # gRPC: a served connection gets the server's SETTINGS at once, a
        # refused one is closed (allocations 8..11)
        grpc = []
        for _ in range(4):
            with socket.create_connection(("127.0.0.1", weir.grpc_port), timeout=3) as s:
                try:
                    grpc.append("settings" if s.recv(64) else "closed")
                except ConnectionResetError:
                    grpc.append("closed")
        assert grpc == ["closed", "settings"] * 2
        r = keeper.request("GET", "/metrics")
        text = r.text()
        assert 'weir_connections_rejected_total{protocol="http"} 3' in text
        assert 'weir_connections_rejected_total{protocol="grpc"} 2' in text
        weir.wait_for_log(r"event=connection_refused .*proto=grpc")
    finally:
        keeper.close()
