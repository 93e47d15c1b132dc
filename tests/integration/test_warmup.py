"""
test_warmup.py - a token bucket with a warm-up through the real binary:
`weir config` prints the fields and reports mistakes at their line and
column; `weir serve`, on the memory store and on a real redis-server shared
by two instances, admits a cold key at its burst / cold_factor where a
plain token bucket admits its whole burst.
"""

import subprocess

from conftest import weir_bin
from redis_server import redis_factory  # noqa: F401  (a fixture)

# 30 an hour: a token every 2 minutes, so nothing refills during a test.
RULES = """\
domain: warm
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 30, algorithm: token_bucket, warmup: 1h}
  - key: team
    rate_limit:
      unit: hour
      requests_per_unit: 30
      algorithm: token_bucket
      warmup: 30m
      cold_factor: 5
  - key: plain
    rate_limit: {unit: hour, requests_per_unit: 30, algorithm: token_bucket}
"""


def config(*args):
    return subprocess.run([weir_bin(), "config", *args], capture_output=True, text=True,
                          timeout=60)


def test_config_prints_the_fields_and_points_at_mistakes(tmp_path):
    good = tmp_path / "good.yaml"
    good.write_text(RULES)
    r = config("print", str(good))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert any(line.startswith("warm.user:") and " warmup_us=3600000000 cold_factor=3" in line
               for line in lines), r.stdout
    assert any(line.startswith("warm.team:") and " warmup_us=1800000000 cold_factor=5" in line
               for line in lines), r.stdout
    assert not any("warmup" in line for line in lines if line.startswith("warm.plain:"))

    bad = tmp_path / "bad.yaml"
    bad.write_text("domain: warm\n"
                   "descriptors:\n"
                   "  - key: a\n"
                   "    rate_limit: {unit: second, algorithm: gcra, warmup: 10s}\n"
                   "  - key: b\n"
                   "    rate_limit:\n"
                   "      unit: second\n"
                   "      algorithm: token_bucket\n"
                   "      warmup: 10s\n"
                   "      cold_factor: 0\n")
    r = config("check", str(bad))
    assert r.returncode == 1
    out = r.stdout + r.stderr
    assert f"{bad}:4:57: 'warmup' only applies to token_bucket, not gcra" in out, out
    assert f"{bad}:10:20: cold_factor must be from 1 to 100" in out, out


def admitted(weirs, key, value, n=40):
    ok = 0
    for i in range(n):
        r = weirs[i % len(weirs)].check("warm", {key: value})
        assert r.status in (200, 429), r.text()
        assert "failure_mode" not in r.text(), r.text()
        ok += r.status == 200
    return ok


def test_a_cold_key_takes_a_fraction_of_its_burst(weir_factory):
    w = weir_factory(RULES)
    assert admitted([w], "user", "a") == 10
    assert admitted([w], "team", "a") == 6
    assert admitted([w], "plain", "a") == 30
    assert " warmup_us=3600000000 cold_factor=3" in w.rules_text()


def test_redis_decides_as_memory(weir_factory, redis_factory):  # noqa: F811
    rd = redis_factory()
    weirs = [weir_factory(RULES, "--store", rd.url, "--redis-timeout", "1s") for _ in range(2)]
    assert admitted(weirs, "user", "a") == 10
    assert admitted(weirs, "team", "a") == 6
    assert admitted(weirs, "plain", "a") == 30
    for w in weirs:
        assert w.metric("weir_redis_calls_total") > 0
