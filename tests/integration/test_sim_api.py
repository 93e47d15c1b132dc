"""POST /admin/v1/sim: a trace of arrivals decided by weir's own algorithms
on fresh states (daemon/admin/sim.h), and the simulator's pages. Neither
takes a token: the route reads and writes nothing shared. Exact counts for
the boundary burst (the fixed window admits twice the limit within one
window length, the sliding log never more than the limit), the token
bucket's burst, the shaper's delays, concurrency's leases, and the caps."""
import json
import time

import pytest

import rawhttp

RULES = """\
domain: api
descriptors:
  - key: k
    rate_limit: {unit: second, requests_per_unit: 5}
"""

TOKEN = "t0ken-for-ops-alice-0123456789"
ALL = ["token_bucket", "gcra", "leaky_bucket", "leaky_bucket_shaper", "fixed_window",
       "sliding_window_log", "sliding_window_counter", "concurrency"]


@pytest.fixture(scope="module")
def weir(weir_module_factory, tmp_path_factory):
    tokens = tmp_path_factory.mktemp("tokens") / "tokens"
    tokens.write_text(f"ops-alice {TOKEN}\n")
    # a token file is there: the simulator takes no token all the same
    return weir_module_factory(RULES, "--admin", "127.0.0.1:0", "--admin-token-file", str(tokens))


def sim(weir, body, headers=None):
    return rawhttp.request(weir.admin_port, "POST", "/admin/v1/sim", body, headers or {})


def ok(weir, body):
    r = sim(weir, body)
    assert r.status == 200, r.body
    assert r.header("Content-Type") == "application/json"
    return r.json()


def by_algo(answer):
    return {x["algorithm"]: x for x in answer["results"]}


def most_in_any_window(times, allowed, window_ms):
    """The most admitted in any window (t - window, t], counted here from
    the verdicts alone."""
    admitted = [t for t, a in zip(times, allowed) if a]
    return max((sum(1 for s in admitted if t - window_ms < s <= t) for t in admitted), default=0)


def boundary_burst(n, edge_ms):
    """n arrivals in the n ms before a window edge and n from the edge on,
    as the page's Boundary burst button sends them."""
    return [edge_ms - n + i for i in range(n)] + [edge_ms + i for i in range(n)]


def test_boundary_burst_fixed_window_admits_twice_the_limit(weir):
    arrivals = boundary_burst(10, 1000)
    a = ok(weir, {"limit": {"requests_per_unit": 10, "window_ms": 1000},
                  "algorithms": ["fixed_window", "sliding_window_log"], "arrivals": arrivals})
    assert [x["algorithm"] for x in a["results"]] == ["fixed_window", "sliding_window_log"]
    res = by_algo(a)
    fw, log = res["fixed_window"], res["sliding_window_log"]
    # the fixed window: 10 before the edge and 10 after, 20 within 20 ms
    assert (fw["accepted"], fw["denied"]) == (20, 0)
    assert fw["max_in_window"] == 20
    assert fw["in_window"] == list(range(1, 21))
    assert most_in_any_window(a["t_ms"], fw["allowed"], 1000) == 20
    assert fw["remaining"] == list(range(9, -1, -1)) * 2
    # the sliding log: the limit, never more, in any window
    assert (log["accepted"], log["denied"]) == (10, 10)
    assert log["allowed"] == [True] * 10 + [False] * 10
    assert log["max_in_window"] == 10
    assert max(x for x in log["in_window"] if x is not None) == 10
    assert most_in_any_window(a["t_ms"], log["allowed"], 1000) == 10
    # denied until the first of the log leaves the window: 990 + 1000
    assert log["retry_after_ms"][10:] == [1990 - t for t in range(1000, 1010)]
    # the state panels after the last step
    assert fw["state"]["numbers"] == {"window": 1, "count": 10, "window_start_us": 1000000,
                                      "window_end_us": 2000000, "count_now": 10, "remaining": 0}
    logstate = log["state"]
    assert logstate["numbers"]["in_window"] == 10
    assert logstate["table"]["name"] == "log" and logstate["table"]["columns"] == ["t_us"]
    assert [r[0] for r in logstate["table"]["rows"]] == [t * 1000 for t in range(990, 1000)]


def test_sliding_log_never_exceeds_the_limit_under_any_load(weir):
    # every 7 ms for 5 s, plus boundary bursts at each second
    arrivals = list(range(0, 5000, 7))
    for edge in range(1000, 5000, 1000):
        arrivals += boundary_burst(10, edge)
    a = ok(weir, {"limit": {"requests_per_unit": 10, "window_ms": 1000},
                  "algorithms": ["sliding_window_log", "fixed_window"], "arrivals": arrivals})
    res = by_algo(a)
    assert a["t_ms"] == sorted(arrivals)
    log = res["sliding_window_log"]
    assert log["max_in_window"] == 10
    assert most_in_any_window(a["t_ms"], log["allowed"], 1000) == 10
    fw = res["fixed_window"]
    assert fw["max_in_window"] == most_in_any_window(a["t_ms"], fw["allowed"], 1000) > 10


def test_token_bucket_burst_then_refill(weir):
    a = ok(weir, {"limit": {"requests_per_unit": 10, "window_ms": 1000},
                  "algorithms": ["token_bucket", "gcra"], "arrivals": [0] * 15, "now_ms": 500})
    tb, gcra = by_algo(a)["token_bucket"], by_algo(a)["gcra"]
    assert (tb["accepted"], tb["denied"], tb["burst"]) == (10, 5, 10)
    assert tb["remaining"] == list(range(9, -1, -1)) + [0] * 5
    assert tb["retry_after_ms"] == [0] * 10 + [100] * 5
    # half a second later: five tokens back
    assert tb["state"]["numbers"]["tokens_milli"] == 5000
    assert tb["state"]["numbers"]["full_in_us"] == 500000
    assert tb["steps"][-1]["state"]["numbers"]["tokens_milli"] == 0
    # GCRA's default burst is 1: strict spacing
    assert (gcra["accepted"], gcra["burst"]) == (1, 1)
    assert gcra["state"]["numbers"]["backlog_ns"] == 0
    # an explicit burst
    a = ok(weir, {"limit": {"requests_per_unit": 10, "window_ms": 1000, "burst": 4},
                  "algorithms": ["token_bucket"], "arrivals": [0] * 6})
    assert by_algo(a)["token_bucket"]["accepted"] == 4
    assert a["limit"]["burst"] == 4


def test_shaper_delays_and_costs(weir):
    a = ok(weir, {"limit": {"requests_per_unit": 10, "window_ms": 1000},
                  "algorithms": ["leaky_bucket_shaper"],
                  "arrivals": [0, 0, 0, {"t_ms": 0, "hits": 3}, {"t_ms": 0, "hits": 5}]})
    sh = a["results"][0]
    assert sh["allowed"] == [True, True, True, True, False]
    assert sh["delay_ms"] == [0, 100, 200, 300, 0]
    assert a["hits"] == [1, 1, 1, 3, 5]
    # counted when they proceed: all six units within the window
    assert sh["in_window"] == [1, 2, 3, 6, None]
    assert sh["state"]["numbers"]["queue_milli"] == 6000


def test_concurrency_leases_are_held_then_released(weir):
    a = ok(weir, {"limit": {"requests_per_unit": 2, "window_ms": 1000, "hold_ms": 100},
                  "algorithms": ["concurrency"], "arrivals": [0, 0, 0, 50, 100], "now_ms": 120})
    c = a["results"][0]
    # both leases of time 0 released at 100 ms, just in time for the last
    assert c["allowed"] == [True, True, False, False, True]
    assert c["retry_after_ms"][2:4] == [1000, 950]
    st = c["state"]
    assert st["numbers"]["held"] == 1 and st["numbers"]["leases"] == 1
    assert st["table"]["columns"] == ["id", "expires_us", "units"]
    assert st["table"]["rows"] == [[3, 1100000, 1]]


def test_every_algorithm_and_the_state_steps(weir):
    body = {"limit": {"requests_per_unit": 8, "window_ms": 1000, "sub_windows": 4},
            "arrivals": list(range(0, 3000, 37)), "state_steps": 5}
    a = ok(weir, body)
    assert [x["algorithm"] for x in a["results"]] == ALL
    n = len(body["arrivals"])
    for x in a["results"]:
        assert len(x["allowed"]) == len(x["remaining"]) == len(x["retry_after_ms"]) == n
        assert x["accepted"] + x["denied"] == n
        assert [s["i"] for s in x["steps"]] == list(range(n - 5, n))
        assert all(isinstance(v, int) for v in x["state"]["numbers"].values())
    counter = by_algo(a)["sliding_window_counter"]["state"]
    assert counter["numbers"]["sub_windows"] == 4
    assert counter["table"]["name"] == "sub_windows" and len(counter["table"]["rows"]) == 5
    # the same body, the same answer, byte for byte
    assert sim(weir, body).body == sim(weir, body).body


def test_no_token_and_the_pages(weir):
    r = sim(weir, {"limit": {"requests_per_unit": 1, "window_ms": 10}, "arrivals": []},
            headers={"Authorization": "Bearer wrong-token-0123456789"})
    assert r.status == 200
    assert r.json()["results"][0]["accepted"] == 0
    r = rawhttp.request(weir.admin_port, "GET", "/admin/v1/sim")
    assert r.status == 405 and r.header("Allow") == "POST"
    for path, ctype in [("/sim", "text/html; charset=utf-8"),
                        ("/sim/sim.js", "text/javascript; charset=utf-8"),
                        ("/sim/sim.css", "text/css; charset=utf-8")]:
        r = rawhttp.request(weir.admin_port, "GET", path)
        assert r.status == 200, path
        assert r.header("Content-Type") == ctype
        assert "script-src 'self'" in r.header("Content-Security-Policy")
        assert r.header("X-Content-Type-Options") == "nosniff"
    page = rawhttp.request(weir.admin_port, "GET", "/sim").body.decode()
    assert "<script" in page and "http://" not in page and "https://" not in page
    assert rawhttp.request(weir.admin_port, "HEAD", "/sim").status == 200
    assert rawhttp.request(weir.admin_port, "POST", "/sim", "x").status == 405
    # the page's folder is its own: an unknown file there is a 404, no token asked
    assert rawhttp.request(weir.admin_port, "GET", "/sim/nothing.js").status == 404
    assert rawhttp.request(weir.admin_port, "GET", "/simx").status == 401
    # the data routes still take a token; the decision listener has none of this
    assert rawhttp.request(weir.admin_port, "GET", "/admin/v1/tiers").status == 401
    assert weir.get("/sim").status == 404
    assert weir.post("/admin/v1/sim", "{}").status == 404


LIMIT = {"requests_per_unit": 10, "window_ms": 1000}


@pytest.mark.parametrize("body,field,detail", [
    ("{", "", "malformed JSON"),
    ("[]", "", "must be a JSON object"),
    ({"arrivals": []}, "limit", "limit is required"),
    ({"limit": {"window_ms": 1000}, "arrivals": []}, "limit.requests_per_unit", "required"),
    ({"limit": {"requests_per_unit": 65537, "window_ms": 1000}, "arrivals": []},
     "limit.requests_per_unit", "from 0 to 65536"),
    ({"limit": {"requests_per_unit": 10, "window_ms": 0}, "arrivals": []},
     "limit.window_ms", "from 1 to 86400000"),
    ({"limit": {"requests_per_unit": 10, "window_ms": 1.5}, "arrivals": []},
     "limit.window_ms", "integer"),
    ({"limit": {"requests_per_unit": 10, "window_ms": 1000, "sub_windows": 7}, "arrivals": []},
     "limit.sub_windows", "divide the window"),
    ({"limit": {"requests_per_unit": 10, "window_ms": 1000, "rate": 1}, "arrivals": []},
     "limit.rate", "unknown member"),
    ({"limit": {"requests_per_unit": 10, "window_ms": 1000, "sub_windows": 100}, "arrivals": []},
     "limit.sub_windows", "from 1 to 64"),
    ({"limit": LIMIT, "arrivals": [], "extra": 1}, "extra", "unknown member"),
    ({"limit": LIMIT, "arrivals": [-1]}, "arrivals[0]", "from 0 to"),
    ({"limit": LIMIT, "arrivals": [0, "1"]}, "arrivals[1]", "time in milliseconds"),
    ({"limit": LIMIT, "arrivals": [{"t_ms": 0, "hits": 1001}]}, "arrivals[0].hits", "1 to 1000"),
    ({"limit": LIMIT, "arrivals": [{"hits": 1}]}, "arrivals[0].t_ms", "required"),
    ({"limit": LIMIT, "arrivals": [0] * 10001}, "arrivals", "more than the 10000 allowed"),
    ({"limit": LIMIT, "arrivals": [], "algorithms": ["fixed"]}, "algorithms[0]",
     "unknown algorithm 'fixed'"),
    ({"limit": LIMIT, "arrivals": [], "algorithms": ["gcra", "gcra"]}, "algorithms[1]",
     "given twice"),
    ({"limit": LIMIT, "arrivals": [], "algorithms": ALL + ["gcra"]}, "algorithms", "1 to 8"),
    ({"limit": LIMIT, "arrivals": [], "algorithms": []}, "algorithms", "1 to 8"),
    ({"limit": LIMIT, "arrivals": [], "state_steps": 101}, "state_steps", "from 0 to 100"),
    ({"limit": {"requests_per_unit": 10, "window_ms": 1000, "burst": 70000}, "arrivals": []},
     "limit.burst", "from 0 to 65536"),
])
def test_bad_input_is_400_with_a_clear_detail(weir, body, field, detail):
    r = sim(weir, body)
    assert r.status == 400, r.body
    assert r.header("Content-Type") == "application/problem+json"
    p = r.json()
    assert p["status"] == 400 and p["field"] == field, p
    assert detail in p["detail"], p


def test_a_body_over_64_kib_is_413(weir):
    body = json.dumps({"limit": LIMIT, "arrivals": [0] * 40000})
    assert len(body) > 64 * 1024
    assert sim(weir, body).status == 413


def test_the_worst_case_is_bounded(weir):
    """The most a body may ask for: 10,000 arrivals of the largest cost at
    one instant, every algorithm at the largest limit and the most
    sub-windows, the most states."""
    body = {"limit": {"requests_per_unit": 65536, "window_ms": 86400000, "sub_windows": 64,
                      "hold_ms": 86400000},
            "arrivals": [{"t_ms": 0, "hits": 1000}] * 2000 + [0] * 8000, "state_steps": 100}
    text = json.dumps(body, separators=(",", ":"))
    assert len(text) <= 64 * 1024
    t0 = time.monotonic()
    r = sim(weir, text)
    took = time.monotonic() - t0
    assert r.status == 200, r.body
    print(f"worst-case body: {len(r.body)} bytes answered in {took:.2f} s")
    assert took < 20
    # the sliding counter's sub-windows, at the cap, with every step denied
    body = {"limit": {"requests_per_unit": 1, "window_ms": 64000, "sub_windows": 64},
            "algorithms": ["sliding_window_counter"], "arrivals": list(range(10000))}
    t0 = time.monotonic()
    assert sim(weir, body).status == 200
    print(f"10,000 steps over 64 sub-windows in {time.monotonic() - t0:.2f} s")
