"""GET /admin/v1/top: the keys a domain denied most, from every worker's
sketches merged, on the admin listener behind its token. One abusive key
among light ones comes first, with the 429s the clients saw; entries come
back whole (whatever bytes they hold) or marked truncated; shadow denials
and allowed requests are not counted; the keys never become metric labels;
bad parameters are 400, an unknown domain 404."""
import pytest

from test_admin import Admin, OTHER, token_file

RULES = """\
domain: api
descriptors:
  - key: api_key
    rate_limit: {unit: hour, requests_per_unit: 5}
  - key: user
    descriptors:
      - key: path
        rate_limit: {unit: hour, requests_per_unit: 1}
  - key: probe
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
"""


@pytest.fixture
def weir(weir_factory, tmp_path):
    return weir_factory(RULES, "--admin", "127.0.0.1:0", "--admin-token-file", token_file(tmp_path))


def load(weir, sends):
    """Each (descriptor dict, times) sent `times` times over four
    connections (so both workers decide); the 429s seen per descriptor."""
    conns = [weir.conn() for _ in range(4)]
    denied = {}
    k = 0
    try:
        for entries, times in sends:
            key = tuple(entries.items())
            denied.setdefault(key, 0)
            for _ in range(times):
                body = {"domain": "api", "descriptors": [
                    {"entries": [{"key": a, "value": b} for a, b in entries.items()]}]}
                r = conns[k % len(conns)].request("POST", "/v1/check", body)
                k += 1
                assert r.status in (200, 429), r
                denied[key] += r.status == 429
    finally:
        for c in conns:
            c.close()
    return denied


def top(weir, query="domain=api", token=None):
    a = Admin(weir) if token is None else Admin(weir, token)
    return a.get("/admin/v1/top?" + query)


def as_key(item):
    return tuple((e["key"], e["value"]) for e in item["entries"])


def test_the_abusive_key_comes_first(weir):
    sends = [({"api_key": "mallory"}, 120)]
    sends += [({"api_key": f"light-{i}"}, 5 + i % 3) for i in range(15)]  # 0 to 2 denials
    sends += [({"probe": "shadowed"}, 10)]  # a shadow limit denies nothing
    seen = load(weir, sends)
    assert seen[(("api_key", "mallory"),)] == 115
    r = top(weir)
    assert r.status == 200, r
    body = r.json()
    assert body["domain"] == "api"
    assert 60 <= body["window_seconds"] < 120
    assert body["since"].endswith(":00Z")
    keys = body["keys"]
    assert len(keys) == 10  # n defaults to 10 (11 keys were denied)
    assert as_key(keys[0]) == (("api_key", "mallory"),)
    # fewer keys than counters: every count exact, the 429s the clients saw
    for item in keys:
        assert item["error"] == 0 and "truncated" not in item
        assert item["denied"] == seen[as_key(item)], item
    counts = [item["denied"] for item in keys]
    assert counts == sorted(counts, reverse=True)
    assert body["denied"] == sum(seen.values())
    sk = body["sketch"]
    assert sk["counters"] == 1024 and sk["error_bound"] == 0
    assert 0 < sk["bytes"] <= 2 * 2 * 1024 * 1024  # two workers, two minutes each
    # n=100 lists every denied key, and only those
    every = top(weir, "n=100&domain=api").json()["keys"]
    assert {as_key(i): i["denied"] for i in every} == {k: v for k, v in seen.items() if v}
    assert (("probe", "shadowed"),) not in {as_key(i) for i in every}
    assert [as_key(i) for i in top(weir, "domain=api&n=1").json()["keys"]] == [
        (("api_key", "mallory"),)]
    # never as labels: the metrics hold no request value
    text = weir.metrics_text()
    assert "mallory" not in text and "light-" not in text


def test_entries_come_back_whole(weir):
    odd = {"user": 'a,b=c "q" \\ é', "path": "/x=1,y=2"}
    long = {"user": "bob", "path": "/" + "p" * 300}
    seen = load(weir, [(odd, 3), (long, 4)])
    keys = top(weir).json()["keys"]
    assert len(keys) == 2
    second, first = keys  # 3 denials, then 2
    assert first["entries"] == [{"key": "user", "value": 'a,b=c "q" \\ é'},
                                {"key": "path", "value": "/x=1,y=2"}]
    assert first["denied"] == seen[tuple(odd.items())] == 2
    # a key past the bytes kept: its first entries, marked truncated
    assert second["entries"] == [{"key": "user", "value": "bob"}]
    assert second["truncated"] is True and second["denied"] == 3 == seen[tuple(long.items())]


def test_no_denials_no_keys(weir):
    load(weir, [({"api_key": "quiet"}, 3)])
    r = top(weir)
    assert r.status == 200, r
    body = r.json()
    assert body["keys"] == [] and body["denied"] == 0
    assert body["sketch"]["bytes"] == 0  # nothing made before a first denial


def test_a_token_is_required(weir):
    for token in (None, "wrong-token-0123456789"):
        a = Admin(weir, token)
        r = a.get("/admin/v1/top?domain=api")
        assert r.status == 401, r
    assert top(weir, token=OTHER).status == 200
    # not on the decision listener
    assert weir.get("/admin/v1/top?domain=api").status == 404
    assert Admin(weir).request("POST", "/admin/v1/top?domain=api", "{}").status == 405


@pytest.mark.parametrize("query,status,detail", [
    ("", 400, "domain is required"),
    ("n=5", 400, "domain is required"),
    ("domain=", 400, "domain is required"),
    ("domain=%zz", 400, "bad domain"),
    ("domain=api&n=0", 400, "n is 1 to 100"),
    ("domain=api&n=101", 400, "n is 1 to 100"),
    ("domain=api&n=ten", 400, "n is 1 to 100"),
    ("domain=api&n=", 400, "n is 1 to 100"),
    ("domain=api&n=-1", 400, "n is 1 to 100"),
    ("domain=api&limit=5", 400, "unknown query parameter 'limit' (takes domain, n)"),
    ("domain=nope", 404, "no such domain"),
])
def test_bad_parameters(weir, query, status, detail):
    r = top(weir, query)
    assert r.status == status, r
    assert r.header("Content-Type") == "application/problem+json"
    assert detail in r.json()["detail"], r.json()


def test_turned_off(weir_factory, tmp_path):
    w = weir_factory(RULES, "--admin", "127.0.0.1:0", "--admin-token-file", token_file(tmp_path),
                     "--top-keys", "0")
    load(w, [({"api_key": "mallory"}, 8)])
    r = top(w)
    assert r.status == 404 and "--top-keys 0" in r.json()["detail"], r


def test_counters_set_by_flag(weir_factory, tmp_path):
    w = weir_factory(RULES, "--admin", "127.0.0.1:0", "--admin-token-file", token_file(tmp_path),
                     "--top-keys", "4")
    # more keys than counters: the heavy one still first, every count an
    # upper bound within its error of the truth
    sends = [({"api_key": "mallory"}, 60)] + [({"api_key": f"k{i}"}, 7) for i in range(12)]
    seen = load(w, sends)
    body = top(w, "domain=api&n=4").json()
    assert as_key(body["keys"][0]) == (("api_key", "mallory"),)
    assert body["sketch"]["counters"] == 4
    for item in body["keys"]:
        truth = seen[as_key(item)]
        assert item["denied"] - item["error"] <= truth <= item["denied"], (item, truth)
        assert item["error"] <= body["sketch"]["error_bound"]
    assert body["sketch"]["error_bound"] <= body["denied"] / 4
