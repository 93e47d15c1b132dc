"""
test_shed.py - weir protecting itself by priority: under a synthetic
overload (each decision made to cost its worker 3 ms, WEIR_TEST_DECISION_
COST_US, with one worker), the event loop falls behind and weir answers
the requests of a sheddable priority 503 at once instead of deciding
them, while critical ones keep being decided; priorities from the
Weir-Priority header and from a descriptor; weir_shed_total; the
shedding lifts when the load goes; bad settings refused.
"""
import subprocess
import threading
import time

import redis

import rawhttp
from conftest import weir_bin

RULES = """\
domain: api
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 1000000}
"""

SHED = ("--shed-lag", "test=5ms,sheddable=10ms", "--resp", "127.0.0.1:0")
COST = {"WEIR_TEST_DECISION_COST_US": "3000"}


def test_overload_sheds_sheddable_first(weir_factory):
    w = weir_factory(RULES, *SHED, threads=1, env=COST)
    results = {"critical": [], "sheddable": [], "descriptor": []}
    lock = threading.Lock()
    stop = time.monotonic() + 4

    def client(kind):
        conn = rawhttp.Conn(w.port)
        while time.monotonic() < stop:
            if kind == "descriptor":  # the priority as a descriptor, as Envoy would send it
                r = conn.request("POST", "/v1/check", {"domain": "api", "descriptors": [
                    {"entries": [{"key": "user", "value": "d"}]},
                    {"entries": [{"key": "priority", "value": "sheddable"}]}]})
            else:
                r = conn.request("GET", "/v1/check?domain=api&user=u",
                                 headers={"Weir-Priority": kind})
            with lock:
                results[kind].append((r.status, r.header("Retry-After"), r.body))
        conn.close()

    threads = [threading.Thread(target=client, args=(k,)) for k in
               ["critical"] * 3 + ["sheddable"] * 6 + ["descriptor"] * 3]
    for t in threads:
        t.start()
    # RESP during the overload: a descriptor names the priority
    rc = redis.Redis(port=w.resp_port)
    time.sleep(1.5)
    busy = 0
    for _ in range(20):
        try:
            rc.execute_command("WEIR.CHECK", "api", "user", "r", "DESCRIPTOR", "priority",
                               "sheddable")
        except redis.exceptions.ResponseError as e:
            assert str(e).startswith("BUSY weir is overloaded: sheddable"), e
            busy += 1
    for t in threads:
        t.join()

    crit = results["critical"]
    ok = sum(1 for s, _, _ in crit if s == 200)
    for kind, got in results.items():
        print(f"{kind}: {len(got)} requests, {sum(1 for x in got if x[0] == 200)} decided (200), "
              f"{sum(1 for x in got if x[0] == 503)} shed (503)")
    assert len(crit) > 50 and ok >= 0.99 * len(crit), [s for s, _, _ in crit][:40]
    for kind in ("sheddable", "descriptor"):
        got = results[kind]
        shed = [x for x in got if x[0] == 503]
        assert len(shed) >= 0.3 * len(got), (kind, len(shed), len(got))
        assert all(s in (200, 503) for s, _, _ in got)
        status, retry, body = shed[0]
        assert retry == "1" and b"overloaded: sheddable requests are shed" in body
    assert busy > 0
    m = w.metrics()
    def shed_total(prio, proto="http"):
        return m.get(("weir_shed_total", (("cause", "overload"), ("priority", prio), ("protocol", proto))), 0)
    assert shed_total("sheddable") >= len([x for k in ("sheddable", "descriptor")
                                           for x in results[k] if x[0] == 503])
    assert shed_total("critical") == 0 and shed_total("normal") == 0
    assert shed_total("sheddable", "resp") == busy
    # the load gone, the lag falls and nothing is shed
    time.sleep(0.5)
    r = w.get("/v1/check?domain=api&user=u", headers={"Weir-Priority": "sheddable"})
    assert r.status == 200, r


def test_without_overload_nothing_is_shed(weir_factory):
    # thresholds no scheduling hiccup of a loaded machine reaches (a
    # sanitizer build's loop can lag 5 ms with nothing to do)
    w = weir_factory(RULES, "--shed-lag", "test=300ms,sheddable=300ms")
    for prio in ("test", "sheddable", "normal", "critical", "unknown-name"):
        for _ in range(20):
            assert w.get("/v1/check?domain=api&user=u", headers={"Weir-Priority": prio}).status == 200
    assert all(v == 0 for (name, _), v in w.metrics().items() if name == "weir_shed_total")


def test_bad_settings(tmp_path):
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    for flags, want in [
        (["--priorities", ""], "--priorities: at least one name"),
        (["--priorities", "a,b,a"], "twice"),
        (["--priorities", "Bad Name"], "is not a name"),
        (["--default-priority", "urgent"], "--default-priority 'urgent' is not one of"),
        (["--shed-lag", "urgent=5ms"], "--shed-lag: 'urgent=5ms'"),
        (["--shed-lag", "test=soon"], "--shed-lag: 'test=soon'"),
        (["--shed-lag", "test"], "--shed-lag: 'test'"),
    ]:
        r = subprocess.run([weir_bin(), "serve", "--rules", str(rules), "--http", "127.0.0.1:0",
                            "--grpc", "", "--resp", "", "--admin", "", *flags],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 2 and want in r.stderr, (flags, r.stderr)
