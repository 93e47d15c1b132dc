"""
test_metrics_upstream.py - envoyproxy/ratelimit's per-descriptor counters
against the real daemon: their Prometheus series (labels from the rule's
levels, dots kept, sanitised as upstream), one count per descriptor,
detailed_metric, value_to_metric, the near_limit ratio, the caps on
series named by requests, and the statsd sink, received on a UDP socket
bound here on a loopback port.

Limits are upstream's fixed windows, on a clock started well inside an
hour (clock_at), so no window ends during a test.
"""

import re
import socket
import subprocess
import time

from conftest import clock_at, weir_bin

RULES = """\
domain: up
descriptors:
  - key: ip
    value: 10.0.0.1
    rate_limit: {unit: hour, requests_per_unit: 10}
  - key: ver
    value: v1.2
    descriptors:
      - key: user
        rate_limit: {unit: hour, requests_per_unit: 10}
  # two limits on one descriptor
  - key: multi
    rate_limits:
      - {unit: hour, requests_per_unit: 5, name: multi_hour}
      - {unit: day, requests_per_unit: 10, name: multi_day}
  - key: client
    detailed_metric: true
    rate_limit: {unit: hour, requests_per_unit: 10}
  # value_to_metric on a default and on a pattern
  - key: tenant
    value_to_metric: true
    descriptors:
      - key: path
        value: "/api/*"
        value_to_metric: true
        rate_limit: {unit: hour, requests_per_unit: 10}
  # a pattern without value_to_metric keeps its pattern
  - key: plain
    value: "p*"
    rate_limit: {unit: hour, requests_per_unit: 10}
  - key: near
    rate_limit: {unit: hour, requests_per_unit: 10}
"""

UP = "ratelimit_service_rate_limit_"


def start(weir_factory, *flags, env=None, threads=2):
    clock, _ = clock_at(60)  # 59 minutes before the window ends
    clock.update(env or {})
    return weir_factory(RULES, *flags, env=clock, threads=threads)


def series(m, stat, **labels):
    return m.get((UP + stat, tuple(sorted(labels.items()))))


def upstream_series(m):
    """{labels: {stat: value}} of every ratelimit_service_rate_limit_* series."""
    out = {}
    for (name, labels), v in m.items():
        if name.startswith(UP):
            out.setdefault(labels, {})[name[len(UP):]] = v
    return out


def test_dotted_values_stay_in_their_level(weir_factory):
    w = start(weir_factory)
    for _ in range(2):
        assert w.check("up", {"ip": "10.0.0.1"}).status == 200
    assert w.check("up", {"entries": [{"key": "ver", "value": "v1.2"},
                                      {"key": "user", "value": "u"}]}).status == 200
    m = w.metrics()
    # upstream sanitises an IPv4 address's dots; other dots stay
    assert series(m, "total_hits", domain="up", key1="ip_10_0_0_1") == 2
    assert series(m, "within_limit", domain="up", key1="ip_10_0_0_1") == 2
    assert series(m, "total_hits", domain="up", key1="ver_v1.2", key2="user") == 1
    labels = set(upstream_series(m))
    assert labels == {(("domain", "up"), ("key1", "ip_10_0_0_1")),
                      (("domain", "up"), ("key1", "ver_v1.2"), ("key2", "user"))}, labels


def test_total_hits_once_per_descriptor(weir_factory):
    w = start(weir_factory)
    for _ in range(3):
        assert w.check("up", {"multi": "m"}).status == 200
    r = w.check("up", {"entries": [{"key": "multi", "value": "m"}], "hits": 3})
    assert r.status == 429  # multi_hour: 3 + 3 > 5
    m = w.metrics()
    key = {"domain": "up", "key1": "multi"}
    # the descriptor is counted once, by the limit it reported (multi_hour:
    # 3 used, near from 4 on): 3 + 3 hits, 1 of the last 3 past the limit
    assert series(m, "total_hits", **key) == 6
    assert series(m, "within_limit", **key) == 3
    assert series(m, "over_limit", **key) == 1
    assert series(m, "near_limit", **key) == 1  # the 5th hit: past 4, within 5
    # weir's own series still count each limit
    text = w.metrics_text()
    assert 'weir_decisions_total{domain="up",rule="multi_hour",result="allowed"} 3' in text
    assert 'weir_decisions_total{domain="up",rule="multi_day",result="allowed"} 4' in text


def test_detailed_metric_names_series_by_request_values(weir_factory):
    w = start(weir_factory)
    for value in ("a", "a", "b", "x:y|z"):
        assert w.check("up", {"client": value}).status == 200
    m = w.metrics()
    assert series(m, "total_hits", domain="up", key1="client_a") == 2
    assert series(m, "total_hits", domain="up", key1="client_b") == 1
    assert series(m, "total_hits", domain="up", key1="client_x_y_z") == 1
    assert series(m, "total_hits", domain="up", key1="client") is None


def test_value_to_metric_on_default_and_pattern(weir_factory):
    w = start(weir_factory)
    for path in ("/api/users", "/api/users", "/api/items"):
        r = w.check("up", {"entries": [{"key": "tenant", "value": "acme"},
                                       {"key": "path", "value": path}]})
        assert r.status == 200
    assert w.check("up", {"plain": "pq"}).status == 200
    m = w.metrics()
    assert series(m, "total_hits", domain="up", key1="tenant_acme", key2="path_/api/users") == 2
    assert series(m, "total_hits", domain="up", key1="tenant_acme", key2="path_/api/items") == 1
    assert series(m, "total_hits", domain="up", key1="tenant", key2="path_/api/*") is None
    assert series(m, "total_hits", domain="up", key1="plain_p*") == 1


def near_run(w):
    """Hits 7 (allowed), 4 (denied: 11 > 10), 3 (allowed: 10), 1 (denied)."""
    for hits, status in ((7, 200), (4, 429), (3, 200), (1, 429)):
        r = w.check("up", {"entries": [{"key": "near", "value": "n"}], "hits": hits})
        assert r.status == status, (hits, r.json())
    m = w.metrics()
    return {stat: series(m, stat, domain="up", key1="near")
            for stat in ("total_hits", "within_limit", "over_limit", "near_limit")}


def test_near_limit_ratio(weir_factory):
    # the default, 0.8: near from 8 hits. 11 > 10: 1 over, 9 and 10 near;
    # then 8..10: 9 and 10 near again; the last hit over
    default = near_run(start(weir_factory))
    assert default == {"total_hits": 15, "within_limit": 10, "over_limit": 2,
                       "near_limit": 4}
    # upstream's variable, 0.5: near from 5 hits: 6 and 7; 8..10; 8..10
    half = near_run(start(weir_factory, env={"NEAR_LIMIT_RATIO": "0.5"}))
    assert half == {"total_hits": 15, "within_limit": 10, "over_limit": 2, "near_limit": 8}
    # and weir's own flag
    flag = near_run(start(weir_factory, "--near-limit-ratio", "1"))
    assert flag["near_limit"] == 0


def refused(tmp_path, *flags, env=None):
    """Runs weir serve with @flags on a valid rule file; its stderr, after
    checking it exited with 2 (a setting refused) at once."""
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    p = subprocess.run([weir_bin(), "serve", "--http", "127.0.0.1:0", "--grpc", "", "--resp", "", "--admin", "",
                        "--rules", str(rules)] + list(flags),
                       capture_output=True, text=True, timeout=10, env=env or {})
    assert p.returncode == 2, (p.returncode, p.stderr)
    return p.stderr


def test_near_limit_ratio_refused_out_of_range(tmp_path):
    for bad in ("1.5", "-0.1", "abc", "0.5x"):
        assert "--near-limit-ratio" in refused(tmp_path, "--near-limit-ratio", bad)
    assert "NEAR_LIMIT_RATIO" in refused(tmp_path, env={"NEAR_LIMIT_RATIO": "2"})


def test_request_valued_series_are_capped(weir_factory):
    # one worker: its 4096 series named by request values, then _overflow
    w = start(weir_factory, "--max-batch", "100", threads=1)
    n = 4100
    for first in range(0, n, 100):
        reqs = [{"domain": "up", "descriptors": [{"entries": [
            {"key": "client", "value": f"c{i}"}]}]} for i in range(first, min(n, first + 100))]
        r = w.post("/v1/check/batch", {"requests": reqs})
        assert r.status == 200
    assert w.check("up", {"near": "n"}).status == 200  # a rule's own series still counts
    m = w.metrics()
    rows = upstream_series(m)
    clients = [lab for lab in rows if dict(lab)["key1"].startswith("client_")]
    assert len(clients) == 4096
    assert series(m, "total_hits", domain="up", key1="_overflow") == n - 4096
    assert series(m, "total_hits", domain="up", key1="near") == 1
    # a value seen before the cap keeps its own series
    assert w.check("up", {"client": "c0"}).status == 200
    assert series(w.metrics(), "total_hits", domain="up", key1="client_c0") == 2


# ------------------------------------------------------------------ statsd

def udp_listener():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    return s


def drain(sock):
    """Every datagram waiting on @sock."""
    out = []
    sock.settimeout(0.5)
    try:
        while True:
            out.append(sock.recv(65536))
    except socket.timeout:
        pass
    return out


LINE = re.compile(rb"([^:|\n]+):(\d+)\|c")


def sums(datagrams):
    """{name: summed value} over every counter line of every datagram."""
    out = {}
    for d in datagrams:
        assert 0 < len(d) <= 1432, len(d)
        assert d.endswith(b"\n"), d
        for line in d[:-1].split(b"\n"):
            m = LINE.fullmatch(line)
            assert m, line
            name = m.group(1).decode()
            out[name] = out.get(name, 0) + int(m.group(2))
    return out


def test_statsd_sink(weir_factory):
    sock = udp_listener()
    port = sock.getsockname()[1]
    # upstream's variables, as a deployment moved over sets them
    w = start(weir_factory, env={"USE_STATSD": "true", "STATSD_HOST": "127.0.0.1",
                                 "STATSD_PORT": str(port), "STATS_FLUSH_INTERVAL": "100ms"})
    for _ in range(2):
        w.check("up", {"ip": "10.0.0.1"})
    w.check("up", {"entries": [{"key": "ver", "value": "v1.2"}, {"key": "user", "value": "u"}]})
    for _ in range(3):
        w.check("up", {"multi": "m"})
    w.check("up", {"client": "a"})
    w.check("up", {"entries": [{"key": "tenant", "value": "acme"},
                               {"key": "path", "value": "/api/users"}]})
    for hits in (7, 4, 3, 1):
        w.check("up", {"entries": [{"key": "near", "value": "n"}], "hits": hits})
    # a first flush has come by the interval, before the daemon stops
    first = w.wait_until(lambda: drain(sock), timeout=5, what="a first datagram")
    w.finish()  # the sink's last flush sends the rest
    got = sums(first + drain(sock))
    p = "ratelimit.service.rate_limit.up."
    expected = {
        "ratelimit.service.config_load_success": 1,
        p + "ip_10_0_0_1.total_hits": 2, p + "ip_10_0_0_1.within_limit": 2,
        p + "ver_v1.2.user.total_hits": 1, p + "ver_v1.2.user.within_limit": 1,
        p + "multi.total_hits": 3, p + "multi.within_limit": 3,
        p + "client_a.total_hits": 1, p + "client_a.within_limit": 1,
        p + "tenant_acme.path_/api/users.total_hits": 1,
        p + "tenant_acme.path_/api/users.within_limit": 1,
        p + "near.total_hits": 15, p + "near.within_limit": 10, p + "near.over_limit": 2,
        p + "near.near_limit": 4,
    }
    assert got == expected


def test_statsd_packs_datagrams_and_survives_no_listener(weir_factory):
    sock = udp_listener()
    port = sock.getsockname()[1]
    w = start(weir_factory, "--statsd", f"127.0.0.1:{port}", "--statsd-interval", "1h")
    for i in range(100):
        w.check("up", {"client": f"client-{i:03d}"})
    w.finish()  # one flush, at the stop
    datagrams = drain(sock)
    assert len(datagrams) > 1  # 200 lines do not fit one datagram
    got = sums(datagrams)
    for i in range(100):
        assert got[f"ratelimit.service.rate_limit.up.client_client-{i:03d}.total_hits"] == 1
    assert len(got) == 201
    # nothing listens there now: decisions go on, the daemon stops cleanly
    sock.close()
    w = start(weir_factory, "--statsd", f"127.0.0.1:{port}", "--statsd-interval", "50ms")
    for i in range(20):
        assert w.check("up", {"client": f"n{i}"}).status == 200
    time.sleep(0.3)  # a few intervals: sends to no one
    w.finish()
    m = re.search(r"event=statsd_stopped datagrams=(\d+) dropped=(\d+)", w.log_text())
    assert m, w.log_text()
    assert int(m.group(1)) + int(m.group(2)) >= 1  # it tried, and nothing broke


def test_statsd_refuses_a_bad_address(tmp_path):
    for bad in ("nohost", "127.0.0.1:", "127.0.0.1:99999", "[::1]:x"):
        assert "--statsd" in refused(tmp_path, "--statsd", bad)
    assert "USE_STATSD" in refused(tmp_path, env={"USE_STATSD": "maybe"})
    assert "statsd" in refused(tmp_path, env={"STATSD_PORT": "http"})
