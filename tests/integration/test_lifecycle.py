"""
test_lifecycle.py - the daemon over time: rule reloads (SIGHUP, the file
watch, a Kubernetes ConfigMap symlink swap, bad files), counters kept
across reloads, and the SIGTERM drain.
"""

import os
import re
import signal
import socket
import subprocess
import threading
import time


import pytest

import rawhttp
from conftest import weir_bin

RULES = """\
domain: test
descriptors:
  - key: keep
    rate_limit: {{unit: hour, requests_per_unit: {keep}, algorithm: token_bucket}}
  - key: other
    rate_limit: {{unit: hour, requests_per_unit: {other}, algorithm: token_bucket}}
"""


def rules(keep=5, other=10):
    return RULES.format(keep=keep, other=other)


def take(weir, key="keep", value="k", hits=None):
    d = {"entries": [{"key": key, "value": value}]}
    if hits is not None:
        d["hits"] = hits
    r = weir.check("test", d)
    assert r.status in (200, 429), r
    return r


def remaining(weir, key="keep", value="k"):
    """The remaining count, by a peek (hits 0 charges nothing)."""
    r = take(weir, key, value, hits=0)
    return r.json()["statuses"][0]["remaining"]


def rule_line(weir, key):
    lines = [ln for ln in weir.rules_text().splitlines() if ln.startswith(f"test.{key}:")]
    assert len(lines) == 1, weir.rules_text()
    return lines[0]


def consume_three(weir):
    for want in (4, 3, 2):
        r = take(weir)
        assert r.status == 200
        assert r.json()["statuses"][0]["remaining"] == want
    assert remaining(weir) == 2


# ------------------------------------------------------------ reloads


def test_sighup_reload_keeps_state(weir_factory):
    weir = weir_factory(rules(), "--watch", "false")
    consume_three(weir)
    weir.write_rules(rules(other=20))
    time.sleep(0.3)  # no watch: nothing happens until the signal
    assert "requests_per_unit=10 " in rule_line(weir, "other")
    mark = weir.mark()
    weir.sighup()
    weir.wait_for_log(r"event=rules_loaded reason=signal", since=mark)
    line = weir.wait_for_log(r"event=rules_reloaded", since=mark)
    assert "limits=2 kept=1 new=1 removed=1" in line
    assert "requests_per_unit=20 " in rule_line(weir, "other")
    # the unchanged limit went on where it was
    assert remaining(weir) == 2
    assert take(weir).json()["statuses"][0]["remaining"] == 1
    # a SIGHUP reloads even an unchanged file
    mark = weir.mark()
    weir.sighup()
    weir.wait_for_log(r"event=rules_loaded reason=signal", since=mark)
    assert remaining(weir) == 1
    assert weir.metric("weir_rules_reloads_total", result="ok") == 3
    assert weir.metric("weir_rules_reloads_total", result="failed") == 0


def test_watched_file_reload_keeps_state(weir_factory):
    weir = weir_factory(rules())
    consume_three(weir)
    # rewritten in place, as an editor does
    mark = weir.mark()
    weir.write_rules(rules(other=30), atomic=False)
    weir.wait_for_log(r"event=rules_loaded reason=file_changed", since=mark, timeout=2)
    assert "requests_per_unit=30 " in rule_line(weir, "other")
    assert remaining(weir) == 2
    # replaced by a rename, as deployment tools do
    mark = weir.mark()
    weir.write_rules(rules(other=40))
    weir.wait_for_log(r"event=rules_loaded reason=file_changed", since=mark, timeout=2)
    assert "requests_per_unit=40 " in rule_line(weir, "other")
    assert remaining(weir) == 2
    # a changed limit starts fresh
    mark = weir.mark()
    weir.write_rules(rules(keep=6, other=40))
    weir.wait_for_log(r"event=rules_loaded reason=file_changed", since=mark, timeout=2)
    assert "limits=2 kept=1 new=1 removed=1" in weir.wait_for_log(r"event=rules_reloaded",
                                                                     since=mark)
    assert remaining(weir) == 6
    assert take(weir).json()["statuses"][0]["remaining"] == 5


def test_watch_ignores_other_files_next_to_the_rules(weir_factory):
    """A log file or an editor's swap file beside the rule file changes no
    rule: it must not make the watch reload (written every 20 ms, it would
    reload again and again)."""
    weir = weir_factory(rules())
    mark = weir.mark()
    other = os.path.join(weir.dir, "access.log")
    for i in range(15):
        with open(other, "a") as f:
            f.write(f"line {i}\n")
        with open(os.path.join(weir.dir, ".rules.yaml.swp"), "w") as f:
            f.write("x")
        time.sleep(0.02)
    time.sleep(0.4)  # past the settle time
    assert weir.count_log(r"event=rules_(unchanged|loaded|reload)", since=mark) == 0, \
        weir.log_text()
    # the rule file itself still reloads
    weir.write_rules(rules(other=21))
    weir.wait_for_log(r"event=rules_loaded reason=file_changed", since=mark, timeout=2)


def test_watch_reload_is_quick(weir_factory):
    """The watch reloads at its settle time (100 ms), not on a slow poll.
    The best of three changes must be seen within 0.5 s: a single change
    can wait longer for a processor when other tests load the machine."""
    weir = weir_factory(rules())
    seen = []
    for other in (11, 12, 13):
        t0 = time.monotonic()
        weir.write_rules(rules(other=other))
        weir.wait_until(lambda: f"requests_per_unit={other} " in rule_line(weir, "other"),
                        timeout=3, what="the new rules")
        seen.append(time.monotonic() - t0)
    assert min(seen) < 0.5, seen


def test_removed_rule_and_domain(weir_factory):
    weir = weir_factory(rules())
    consume_three(weir)
    mark = weir.mark()
    weir.write_rules("domain: test\ndescriptors:\n  - key: other\n    rate_limit:"
                     " {unit: hour, requests_per_unit: 10, algorithm: token_bucket}\n")
    weir.wait_for_log(r"event=rules_loaded reason=file_changed", since=mark, timeout=2)
    r = take(weir)
    assert r.status == 200
    assert r.json()["statuses"] == [{"code": "OK"}]
    mark = weir.mark()
    weir.write_rules("domain: elsewhere\ndescriptors:\n  - key: other\n"
                     "    rate_limit: {unit: hour, requests_per_unit: 10}\n")
    weir.wait_for_log(r"event=rules_loaded reason=file_changed", since=mark, timeout=2)
    assert weir.check("test", {"keep": "k"}).status == 404
    r = weir.post("/json", {"domain": "test", "descriptors": [
        {"entries": [{"key": "keep", "value": "k"}]}]})
    assert (r.status, r.body) == (200, b'{"overallCode":"OK","statuses":[{"code":"OK"}]}')
    assert "test." not in weir.rules_text()


def test_reloads_under_load(weir_factory):
    # Reloads free the rules a decision in flight may still point to: with
    # ASan this catches any use of weir_descriptor_status.limit after the
    # engine's callback (engine.h), which it did in the daemon once.
    big = ("domain: test\ndescriptors:\n  - key: keep\n    rate_limit: {unit: year, "
           "requests_per_unit: 1000000, algorithm: token_bucket}\n  - key: other\n"
           "    rate_limit: {unit: hour, requests_per_unit: %d}\n")
    weir = weir_factory(big % 10)
    weir.wait_for_log(r"event=watching")
    stop = threading.Event()
    counts, errors = [], []

    def client():
        n = 0
        try:
            with weir.conn() as c:
                while not stop.is_set():
                    r = c.request("POST", "/v1/check", {"domain": "test", "descriptors": [
                        {"entries": [{"key": "keep", "value": "load"}]}]})
                    assert r.status == 200, r
                    assert r.header("RateLimit-Policy") == '"test.keep";q=1000000;w=31536000'
                    n += 1
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
        counts.append(n)

    threads = [threading.Thread(target=client) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        for i in range(40):
            mark = weir.mark()
            if i % 10 == 9:
                weir.write_rules(big % (100 + i))
                weir.wait_for_log(r"event=rules_loaded reason=file_changed", since=mark)
            else:
                weir.sighup()  # reloads even unchanged rules
                weir.wait_for_log(r"event=rules_loaded reason=signal", since=mark)
            time.sleep(0.01)
    finally:
        stop.set()
        for t in threads:
            t.join(10)
    assert errors == []
    assert sum(counts) > 0
    # every decision was counted once, across all the reloads (a token
    # comes back every 31.5 s)
    assert 0 <= remaining(weir, value="load") - (1000000 - sum(counts)) <= 1
    assert weir.metric("weir_rules_reloads_total", result="ok") == 41
    # a sanitizer report or a crash fails the test here (not only at teardown)
    weir.finish()


def test_bad_rule_file_keeps_old_rules(weir_factory):
    weir = weir_factory(rules())
    consume_three(weir)
    before = weir.rules_text()
    mark = weir.mark()
    weir.write_rules("domain: test\ndescriptors:\n  - key: keep\n    rate_limit:\n"
                     "      unit: fortnight\n      requests_per_unit: 5\n")
    line = weir.wait_for_log(r"event=rules_reload_failed", since=mark, timeout=2)
    assert "reason=file_changed" in line
    err = weir.wait_for_log(r"event=rules_error", since=mark)
    assert "line=5" in err and "invalid rate limit unit 'fortnight'" in err, err
    assert weir.metric("weir_rules_reloads_total", result="failed") == 1
    assert weir.metric("ratelimit_service_config_load_error") == 1
    assert weir.metric("weir_rules_reloads_total", result="ok") == 1
    # the rules in force and their counters are untouched
    assert weir.rules_text() == before
    assert remaining(weir) == 2
    # a SIGHUP with the file still bad fails the same way
    mark = weir.mark()
    weir.sighup()
    assert "reason=signal" in weir.wait_for_log(r"event=rules_reload_failed", since=mark)
    assert weir.metric("weir_rules_reloads_total", result="failed") == 2
    # YAML that does not even parse
    mark = weir.mark()
    weir.write_rules("domain: [unclosed\n")
    weir.wait_for_log(r"event=rules_reload_failed", since=mark, timeout=2)
    assert weir.metric("weir_rules_reloads_total", result="failed") == 3
    assert weir.rules_text() == before
    # fixed: loaded, state kept
    mark = weir.mark()
    weir.write_rules(rules(other=12))
    weir.wait_for_log(r"event=rules_loaded reason=file_changed", since=mark, timeout=2)
    assert remaining(weir) == 2
    assert weir.metric("weir_rules_reloads_total", result="ok") == 2


def test_configmap_symlink_swap(weir_factory, tmp_path):
    cfg = tmp_path / "config"
    (cfg / "..2024_01_01_v1").mkdir(parents=True)
    (cfg / "..2024_01_01_v1" / "rules.yaml").write_text(rules())
    os.symlink("..2024_01_01_v1", cfg / "..data")
    os.symlink("..data/rules.yaml", cfg / "rules.yaml")
    weir = weir_factory(None, rules_path=cfg)
    weir.wait_for_log(r"event=watching")
    consume_three(weir)
    assert "requests_per_unit=10 " in rule_line(weir, "other")

    # what the kubelet does: a new directory, a new ..data link renamed
    # over the old one, then the old directory removed
    (cfg / "..2024_01_02_v2").mkdir()
    (cfg / "..2024_01_02_v2" / "rules.yaml").write_text(rules(other=50))
    os.symlink("..2024_01_02_v2", cfg / "..data_tmp")
    t0 = time.monotonic()
    os.rename(cfg / "..data_tmp", cfg / "..data")
    (cfg / "..2024_01_01_v1" / "rules.yaml").unlink()
    (cfg / "..2024_01_01_v1").rmdir()
    # within a second or so (the watch, else its poll); slack for a
    # sanitizer build on a loaded machine
    weir.wait_until(lambda: "requests_per_unit=50 " in rule_line(weir, "other"), timeout=10,
                    what="the swapped rules")
    assert time.monotonic() - t0 < 10
    assert remaining(weir) == 2
    assert weir.count_log(r"event=rules_reload_failed") == 0


def other_limit(weir):
    return rule_line(weir, "other")


def test_watch_survives_the_rule_directory_replaced(weir_factory, tmp_path):
    """rm -rf rules && mv rules.new rules, as deploy tools do: the new
    directory is watched from then on, edits included."""
    d = tmp_path / "rules"
    d.mkdir()
    (d / "a.yaml").write_text(rules(other=1))
    weir = weir_factory(None, rules_path=d)
    assert "requests_per_unit=1 " in other_limit(weir)
    for n in (2, 3):
        new = tmp_path / "rules.new"
        new.mkdir()
        (new / "a.yaml").write_text(rules(other=n))
        subprocess.run(["rm", "-rf", str(d)], check=True)
        os.rename(new, d)
        weir.wait_until(lambda: f"requests_per_unit={n} " in other_limit(weir), timeout=3,
                        what=f"the replaced directory's rules ({n})")
    # an edit inside the new directory is seen too
    (d / "a.yaml").write_text(rules(other=4))
    weir.wait_until(lambda: "requests_per_unit=4 " in other_limit(weir), timeout=3,
                    what="an edit in the replaced directory")
    # and removed, then back: the watch comes back with it
    subprocess.run(["rm", "-rf", str(d)], check=True)
    weir.wait_for_log(r"event=rules_reload_failed", timeout=3)
    d.mkdir()
    (d / "a.yaml").write_text(rules(other=5))
    weir.wait_until(lambda: "requests_per_unit=5 " in other_limit(weir), timeout=3,
                    what="the directory back")
    (d / "a.yaml").write_text(rules(other=6))
    weir.wait_until(lambda: "requests_per_unit=6 " in other_limit(weir), timeout=3,
                    what="an edit in the directory back")


def test_watch_follows_a_swapped_symlink_to_the_rules(weir_factory, tmp_path):
    """--rules names a symlink to a directory, swapped atomically
    (ln -s v2 tmp && mv -T tmp current): the swap reloads, and edits to the
    new target are seen, not those to the old one."""
    for v, n in (("v1", 1), ("v2", 2)):
        (tmp_path / v).mkdir()
        (tmp_path / v / "r.yaml").write_text(rules(other=n))
    current = tmp_path / "current"
    os.symlink("v1", current)
    weir = weir_factory(None, rules_path=current)
    assert "requests_per_unit=1 " in other_limit(weir)
    os.symlink("v2", tmp_path / "tmp")
    os.rename(tmp_path / "tmp", current)
    weir.wait_until(lambda: "requests_per_unit=2 " in other_limit(weir), timeout=3,
                    what="the swapped symlink's rules")
    (tmp_path / "v2" / "r.yaml").write_text(rules(other=3))
    weir.wait_until(lambda: "requests_per_unit=3 " in other_limit(weir), timeout=3,
                    what="an edit to the new target")
    # the old target is not watched any more
    mark = weir.mark()
    (tmp_path / "v1" / "r.yaml").write_text(rules(other=9))
    time.sleep(0.5)
    assert weir.count_log(r"event=rules_(loaded|unchanged)", since=mark) == 0
    assert "requests_per_unit=3 " in other_limit(weir)


def test_watch_sees_a_change_inotify_does_not_report(weir_factory, tmp_path):
    """A rule file reached through a symlink from elsewhere: an edit of the
    target makes no event in the watched directory. The once-a-second look
    at the rule files catches it."""
    (tmp_path / "elsewhere").mkdir()
    target = tmp_path / "elsewhere" / "real.yaml"
    target.write_text(rules(other=1))
    (tmp_path / "config").mkdir()
    os.symlink("../elsewhere/real.yaml", tmp_path / "config" / "rules.yaml")
    weir = weir_factory(None, rules_path=tmp_path / "config")
    assert "requests_per_unit=1 " in other_limit(weir)
    time.sleep(0.05)
    with open(target, "w") as f:  # in place: no event in config/
        f.write(rules(other=2))
    weir.wait_until(lambda: "requests_per_unit=2 " in other_limit(weir), timeout=3,
                    what="the edit through the symlink")


def test_bad_rules_at_start(tmp_path):
    path = tmp_path / "rules.yaml"
    path.write_text("domain: test\ndescriptors:\n  - key: x\n    rate_limit: {unit: fortnight}\n")
    p = subprocess.run([weir_bin(), "serve", "--http", "127.0.0.1:0", "--grpc", "", "--resp", "", "--admin", "",
                        "--rules", str(path)], capture_output=True, timeout=10)
    err = p.stderr.decode()
    assert p.returncode == 1, err
    assert "the rules did not load" in err
    assert "invalid rate limit unit 'fortnight'" in err
    assert "event=listening" not in err
    assert "AddressSanitizer" not in err and "runtime error" not in err


@pytest.mark.parametrize("proto", ["http", "grpc"])
def test_second_instance_on_a_port_in_use_fails(weir_factory, tmp_path, proto):
    # SO_REUSEPORT would let a second weir join the first one's port, the
    # kernel splitting the connections (and the limits) between the two
    first = weir_factory(rules(), "--grpc", "127.0.0.1:0", threads=2)
    port = first.port if proto == "http" else first.grpc_port
    path = tmp_path / "rules.yaml"
    path.write_text(rules())
    argv = [weir_bin(), "serve", "--http", "127.0.0.1:0", "--grpc", "", "--resp", "", "--admin", "",
            "--rules", str(path), f"--{proto}", f"127.0.0.1:{port}"]
    p = subprocess.run(argv, capture_output=True, timeout=10)
    err = p.stderr.decode()
    assert p.returncode == 1, err
    assert f"--{proto} 127.0.0.1:{port}: address already in use" in err
    assert "event=listening" not in err
    # the first one serves on, alone
    assert first.get("/healthz").status == 200


def test_port_of_a_stopped_instance_is_free_again(weir_factory, tmp_path):
    first = weir_factory(rules())
    port = first.port
    r = first.get("/healthz")  # a connection, now in TIME_WAIT on the server's side
    assert r.status == 200
    first.finish()
    second = weir_factory(rules(), "--http", f"127.0.0.1:{port}")
    assert second.port == port
    assert second.get("/healthz").status == 200


def start_log(argv, env=None):
    """Start weir serve with @argv, read its log up to event=listening (or
    its exit), stop it with SIGTERM; (exit code, the whole log)."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("WEIR_")}
    full_env.update(env or {})
    p = subprocess.Popen([weir_bin(), "serve", "--http", "127.0.0.1:0", "--grpc", "", "--resp", "", "--admin", "",
                          "--threads", "1"] + argv, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, env=full_env)
    lines = []
    try:
        for line in p.stderr:
            lines.append(line.decode())
            if "event=listening" in lines[-1]:
                break
    finally:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
        rest = p.communicate(timeout=10)[1].decode()
    return p.returncode, "".join(lines) + rest


WARNED = """\
domain: api
descriptors:
  - key: user
    rate_limit:
  - key: ip
    rate_limit: {unit: minute}
"""


def test_rule_warnings_are_logged_and_strict_refuses_them(tmp_path):
    path = tmp_path / "rules.yaml"
    path.write_text(WARNED)
    rc, log = start_log(["--rules", str(path)])
    assert rc == 0, log
    assert log.count("level=warn event=rules_warning") == 2, log
    assert re.search(r"line=4 column=5 warning=\"empty 'rate_limit'", log), log
    assert re.search(r"line=6 column=17 warning=\"no 'requests_per_unit'", log), log
    assert "event=rules_loaded reason=start" in log and "domains=1 descriptors=2 limits=1" in log
    rc, log = start_log(["--rules", str(path), "--strict"])
    assert rc == 1, log
    assert "event=rules_rejected" in log and "event=listening" not in log, log
    # no domain at all: every request would be allowed
    empty = tmp_path / "empty"
    empty.mkdir()
    rc, log = start_log(["--rules", str(empty)])
    assert rc == 0 and "warning=\"no domain loaded: every request is allowed" in log, log
    assert "domains=0" in log


def test_upstream_shadow_mode_and_port(weir_factory):
    """envoyproxy/ratelimit's SHADOW_MODE=true: every limit counts and
    reports, none denies; its PORT is weir's HTTP port unless a flag says
    otherwise (the harness gives --http, which wins)."""
    w = weir_factory(rules(keep=2), env={"SHADOW_MODE": "true", "PORT": "1"})
    for _ in range(3):
        assert take(w).status == 200
    status = take(w).json()["statuses"][0]
    assert status["shadow"] is True and status["would_deny"] is True, status


def test_force_start_without_rules_then_healthy_once_they_load(weir_factory):
    """--force-start (upstream's FORCE_START_WITHOUT_INITIAL_CONFIG): rules
    that do not load leave the service up and allowing everything, until a
    fix loads; with --health-needs-rules (HEALTHY_WITH_AT_LEAST_ONE_CONFIG_
    LOADED) the health checks fail until then."""
    w = weir_factory("domain: test\ndescriptors: [\n", "--force-start", "--health-needs-rules")
    assert w.count_log(r"level=warn event=started_without_rules") == 1
    r = w.get("/healthz")
    assert r.status == 503 and r.json()["status"] == "no_rules", r
    assert w.get("/healthcheck").status == 503
    assert w.post("/json", {"domain": "test", "descriptors": [
        {"entries": [{"key": "keep", "value": "k"}]}]}).status == 200
    mark = len(w.lines)
    w.write_rules(rules(keep=1))
    w.wait_for_log(r"event=rules_loaded reason=file_changed .*domains=1", since=mark, timeout=5)
    assert w.get("/healthz").status == 200
    assert take(w).status == 200
    assert take(w).status == 429  # the rules are in force now


def test_health_needs_no_rules_by_default(weir_factory):
    w = weir_factory("domain: test\ndescriptors: [\n", "--force-start")
    assert w.get("/healthz").status == 200


def test_upstream_runtime_root_layout(tmp_path):
    """RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config, as envoyproxy/ratelimit reads
    it, when no --rules (or WEIR_RULES) is given; a --rules at the root says
    where the files are."""
    config = tmp_path / "runtime" / "ratelimit" / "config"
    config.mkdir(parents=True)
    (config / "api.yaml").write_text(rules())
    env = {"RUNTIME_ROOT": str(tmp_path / "runtime"), "RUNTIME_SUBDIRECTORY": "ratelimit"}
    rc, log = start_log([], env)
    assert rc == 0, log
    assert f"path={config} domains=1" in log, log
    rc, log = start_log(["--rules", str(tmp_path / "runtime")])
    assert rc == 0, log
    assert f"use --rules {config}" in log, log


def test_default_start_warns_of_nothing(tmp_path):
    # every listener on (on free ports), the rest the defaults: no warning
    path = tmp_path / "rules.yaml"
    path.write_text(rules())
    rc, log = start_log(["--grpc", "127.0.0.1:0", "--resp", "127.0.0.1:0", "--rules", str(path)])
    assert rc == 0, log
    assert "event=listening" in log
    assert "level=warn" not in log and "level=error" not in log, log


def test_store_settings_it_does_not_take(tmp_path):
    path = tmp_path / "rules.yaml"
    path.write_text(rules())
    p = subprocess.run([weir_bin(), "serve", "--http", "127.0.0.1:0", "--grpc", "", "--resp", "", "--admin", "",
                        "--rules", str(path), "--store", "memory:cap=5"],
                       capture_output=True, timeout=10)
    err = p.stderr.decode()
    assert p.returncode == 1, err
    assert "--store 'memory:cap=5': the memory store takes no settings after ':'" in err
    assert "event=listening" not in err


def test_signal_right_after_listening(tmp_path):
    # event=listening means ready: a reload signal from then on must never
    # kill the process (the handlers were once installed after the log line)
    path = tmp_path / "rules.yaml"
    path.write_text(rules())
    for attempt in range(15):
        p = subprocess.Popen([weir_bin(), "serve", "--http", "127.0.0.1:0", "--grpc", "",
                              "--resp", "", "--admin", "", "--threads", "1", "--rules", str(path)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            for line in p.stderr:
                if b"event=listening" in line:
                    break
            p.send_signal(signal.SIGHUP)  # "reload": must never kill it
            time.sleep(0.05)
            alive = p.poll() is None
        finally:
            if p.poll() is None:
                time.sleep(0.1)
                p.send_signal(signal.SIGTERM)
            rc = p.wait(10)
            p.stderr.close()
        assert alive, f"SIGHUP right after event=listening killed weir (attempt {attempt})"
        assert rc == 0


def test_change_during_startup_is_not_lost(tmp_path):
    # a rule file changed after the initial load but before the watch is in
    # place (worker start-up) must still be loaded (it once was not)
    path = tmp_path / "rules.yaml"
    for attempt in range(5):  # the window is short: try a few times
        path.write_text(rules(other=10))
        p = subprocess.Popen([weir_bin(), "serve", "--http", "127.0.0.1:0", "--grpc", "",
                              "--resp", "", "--admin", "", "--threads", "2", "--rules", str(path)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            port = None
            for line in p.stderr:
                if b"event=rules_loaded reason=start" in line:
                    # e.g. a config management run right as the service starts
                    tmp = tmp_path / ".rules.tmp"
                    tmp.write_text(rules(other=77 + attempt))
                    os.replace(tmp, path)
                if b"event=listening" in line:
                    port = int(line.split(b"http=http://127.0.0.1:")[1].split()[0])
                    break
            assert port
            want = f"requests_per_unit={77 + attempt} "
            deadline = time.monotonic() + 0.8
            text = ""
            while time.monotonic() < deadline:
                text = rawhttp.request(port, "GET", "/v1/rules").text()
                if want in text:
                    break
                time.sleep(0.05)
            assert want in text, f"attempt {attempt}: the change was lost:\n{text}"
        finally:
            time.sleep(0.1)
            p.send_signal(signal.SIGTERM)
            p.wait(10)
            p.stderr.close()


# ------------------------------------------------------------ SIGTERM


def refused(port):
    """Whether a connection to @port is refused (the workers close their
    listeners just after the main thread logs event=closing)."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return False
    except ConnectionRefusedError:
        return True
    except ConnectionResetError:
        # the connection reached a listener's queue as that listener closed
        # (one closes per worker): not refused yet, so look again
        return False


def test_sigterm_drain(weir_factory):
    weir = weir_factory(rules(), "--drain-delay", "1s", "--shutdown-timeout", "5s")
    check = rawhttp.build_request("POST", "/v1/check", {
        "domain": "test", "descriptors": [{"entries": [{"key": "keep", "value": "d"}]}]})
    split = len(check) - 10

    a = weir.conn()  # an established keep-alive connection
    assert a.request("GET", "/healthz").status == 200
    b = weir.conn()  # a request half-sent when SIGTERM comes
    b.send(check[:split])
    time.sleep(0.1)

    mark = weir.mark()
    t0 = time.monotonic()
    weir.signal(signal.SIGTERM)
    weir.wait_for_log(r"event=draining signal=SIGTERM", since=mark)

    # draining: /healthz fails, everything else is served, and every
    # answer tells a keep-alive client to move on (Connection: close)
    r = a.request("GET", "/healthz")
    assert (r.status, r.body) == (503, b'{"status":"draining"}')
    assert r.header("Connection") == "close"
    a.wait_closed(2)
    a.close()
    with weir.conn() as c:  # new connections are still accepted
        r = c.request("GET", "/healthcheck")
        assert (r.status, r.body) == (503, b"draining")
    with weir.conn() as c:
        r = c.request("POST", "/v1/check", {"domain": "test", "descriptors": [
            {"entries": [{"key": "keep", "value": "d"}]}]})
        assert r.status == 200
        assert r.json()["statuses"][0]["remaining"] == 4
        assert r.header("Connection") == "close"
    idle = weir.conn()  # connected during the drain, idle when it ends

    # then the listeners close, and idle connections with them
    weir.wait_for_log(r"event=closing", since=mark, timeout=3)
    assert time.monotonic() - t0 >= 0.9
    idle.wait_closed(2)
    idle.close()
    weir.wait_until(lambda: refused(weir.port), timeout=1, what="listeners closed")

    # the request in progress completes, and is told the connection ends
    b.send(check[split:])
    r = b.read_response()
    assert r.status == 200
    assert r.json()["statuses"][0]["remaining"] == 3
    assert r.header("Connection") == "close"
    b.wait_closed(2)
    b.close()

    assert weir.wait_exit(5) == 0
    # under the 1 s drain + 5 s shutdown timeout that a held shutdown
    # would take, with room for a loaded machine's exit
    assert time.monotonic() - t0 < 5.5
    assert weir.count_log(r"event=stopped", since=mark) == 1
    assert weir.count_log(r"event=shutdown_timeout", since=mark) == 0


def test_sigterm_answers_requests_that_reached_the_socket(weir_factory):
    """Requests sent on idle keep-alive connections as SIGTERM comes: the
    drain never closes a connection with a request unread in its socket
    (that would reset it, and the request would go unanswered); each is
    answered, with Connection: close, and then the connection ends."""
    weir = weir_factory(rules(), "--shutdown-timeout", "5s", threads=1)
    body = {"domain": "test", "descriptors": [{"entries": [{"key": "other", "value": "x"}],
                                               "hits": 0}]}
    conns = [weir.conn() for _ in range(60)]
    for c in conns:
        assert c.request("GET", "/healthz").status == 200
    req = rawhttp.build_request("POST", "/v1/check", body)
    mark = weir.mark()
    # the requests and the signal at once, the requests in the sockets
    # before the drain comes to their connections
    for c in conns[:30]:
        c.send(req)
    weir.signal(signal.SIGTERM)
    for c in conns[30:]:
        c.send(req)
    answered = unanswered = 0
    for c in conns:
        try:
            r = c.read_response(timeout=5)
        except (rawhttp.ConnectionClosed, ConnectionResetError):
            unanswered += 1
            continue
        assert r.status == 200
        answered += 1
        c.close()
    weir.wait_for_log(r"event=draining", since=mark)
    # the first half reached the sockets before the signal was sent: every
    # one of them is answered; of the rest, one that came after its
    # connection was ended is told so by an orderly close, never a reset
    assert answered >= 30, (answered, unanswered)
    assert weir.wait_exit(10) == 0


def test_sigterm_answers_requests_sent_just_after(weir_factory):
    """Requests sent on idle keep-alive connections just after SIGTERM,
    while they travel: an idle connection waits a moment before it ends,
    so each is read and answered (with Connection: close) instead of
    meeting a closed socket."""
    weir = weir_factory(rules(), "--shutdown-timeout", "5s", threads=1)
    body = {"domain": "test", "descriptors": [{"entries": [{"key": "other", "value": "x"}],
                                               "hits": 0}]}
    conns = [weir.conn() for _ in range(20)]
    for c in conns:
        assert c.request("GET", "/healthz").status == 200
    req = rawhttp.build_request("POST", "/v1/check", body)
    mark = weir.mark()
    weir.signal(signal.SIGTERM)
    weir.wait_for_log(r"event=closing", since=mark)
    for c in conns:
        c.send(req)
    for c in conns:
        r = c.read_response(timeout=5)
        assert r.status == 200
        assert r.header("connection") == "close"
        c.close()
    assert weir.wait_exit(10) == 0


def test_sigterm_shutdown_timeout_closes_stragglers(weir_factory):
    weir = weir_factory(rules(), "--shutdown-timeout", "1s", "--request-timeout", "30s")
    with weir.conn() as c:
        c.send(b"POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
        time.sleep(0.1)
        mark = weir.mark()
        t0 = time.monotonic()
        weir.signal(signal.SIGTERM)
        weir.wait_for_log(r"event=shutdown_timeout", since=mark, timeout=5)
        c.wait_closed(2)
        # Closed by the 1 s shutdown timeout, not by the 30 s request
        # timeout: the bound leaves a loaded machine (and a sanitizer
        # build) room, and still tells the two apart. The exit, with its
        # frees and the leak check, is bounded on its own below.
        assert 0.9 <= time.monotonic() - t0 < 6
        assert weir.wait_exit(10) == 0


def test_sigint_stops(weir_factory):
    weir = weir_factory(rules())
    mark = weir.mark()
    weir.signal(signal.SIGINT)
    weir.wait_for_log(r"event=draining signal=SIGINT", since=mark)
    assert weir.wait_exit(5) == 0


def test_environment_settings_and_json_logs(tmp_path):
    """Every setting comes from WEIR_* as well; --log-format json logs one
    JSON object per line."""
    import json
    path = tmp_path / "rules.yaml"
    path.write_text(rules())
    env = {k: v for k, v in os.environ.items() if not k.startswith("WEIR_")}
    env.update(WEIR_HTTP="127.0.0.1:0", WEIR_GRPC="", WEIR_RESP="", WEIR_THREADS="1",
               WEIR_LOG_FORMAT="json", WEIR_RULES=str(path), WEIR_HEADERS="legacy")
    p = subprocess.Popen([weir_bin(), "serve"], env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    events = []
    try:
        for line in p.stderr:
            events.append(json.loads(line))
            if events[-1]["event"] == "listening":
                break
        listening = events[-1]
        assert listening["level"] == "info" and listening["threads"] == "1"
        port = int(listening["http"].rsplit(":", 1)[1])
        r = rawhttp.request(port, "GET", "/v1/check?domain=test&keep=k")
        assert r.status == 200
        assert r.header("X-RateLimit-Limit") == "5"
        assert r.header("RateLimit") is None  # WEIR_HEADERS=legacy
    finally:
        p.send_signal(signal.SIGTERM)
        rest = p.stderr.read()
        rc = p.wait(10)
        p.stderr.close()
    assert rc == 0
    tail = [json.loads(line) for line in rest.splitlines() if line.strip()]
    assert [e["event"] for e in tail][-1] == "stopped"
    assert all("ts" in e and "level" in e for e in events + tail)
