"""
conftest.py - runs the real `weir serve` for the integration tests.

The binary comes from the environment variable WEIR_BIN (ctest sets it to
the built target); WEIR_TEST_STORE, when set, is the --store of every
daemon that names none. Each test starts its own daemon on 127.0.0.1 with a
port chosen by the kernel, with its rules in a fresh temporary directory;
the daemon's stderr is collected line by line by a thread. On teardown
the daemon gets SIGTERM and must exit 0 within 10 s, and its stderr must
hold no sanitizer report (the binary may be built with ASan/UBSan).
"""

import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

sys.dont_write_bytecode = True  # keep the source tree clean

import rawhttp  # noqa: E402  (after dont_write_bytecode)

SANITIZER_MARKERS = ("AddressSanitizer", "LeakSanitizer", "UndefinedBehaviorSanitizer",
                     "runtime error", "ThreadSanitizer")


def weir_bin():
    path = os.environ.get("WEIR_BIN")
    if not path:
        pytest.fail("set WEIR_BIN to the weir binary (ctest does)", pytrace=False)
    if not os.access(path, os.X_OK):
        pytest.fail(f"WEIR_BIN={path} is not an executable", pytrace=False)
    return path


def parse_metrics(text):
    """Prometheus text -> {(name, ((label, value), ...)): float}."""
    out = {}
    label_re = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)", line)
        assert m, f"bad metrics line {line!r}"
        labels = tuple(sorted(label_re.findall(m.group(2) or "")))
        key = (m.group(1), labels)
        assert key not in out, f"duplicate series {line!r}"
        out[key] = float(m.group(3))
    return out


def clock_at(seconds_past_hour):
    """An environment for a daemon whose clock (WEIR_TEST_CLOCK_START, for
    the tests only) starts @seconds_past_hour into the current hour of the
    wall clock, and that hour's start: windows that reset on the hour are
    then known exactly, and no test waits for the top of an hour."""
    hour = int(time.time()) // 3600 * 3600
    return {"WEIR_TEST_CLOCK_START": str(hour + seconds_past_hour)}, hour


class Weir:
    """One running `weir serve`."""

    def __init__(self, directory, rules, flags=(), rules_path=None, threads=2,
                 rules_name="rules.yaml", env=None):
        self.dir = str(directory)
        os.makedirs(self.dir, exist_ok=True)
        if rules_path is None:
            rules_path = os.path.join(self.dir, rules_name)
            with open(rules_path, "w") as f:
                f.write(rules)
        self.rules_path = str(rules_path)
        self.flags = list(flags)
        self.threads = threads
        self.extra_env = dict(env or {})
        self.lines = []
        self.cond = threading.Condition()
        self.proc = None
        self.port = None
        self.grpc_port = None
        self.resp_port = None
        self.admin_port = None
        self.returncode = None
        self._reader = None
        self._finished = False
        self._signals_ok = False

    # ---------------------------------------------------------------- process

    def start(self, timeout=10.0):
        flags = list(self.flags)
        if not any(f.startswith("--shutdown-timeout") for f in flags):
            # a test that leaves a half-sent request behind must not make
            # teardown wait for the default 10 s
            flags += ["--shutdown-timeout", "3s"]
        if not any(f.startswith("--log-level") for f in flags):
            # debug adds one line of interest: event=watching, logged once
            # the signal handlers are installed (see _signals_ready)
            flags += ["--log-level", "debug"]
        store = os.environ.get("WEIR_TEST_STORE")
        if store and not any(f.startswith("--store") for f in flags):
            # the whole suite again on another store (ctest runs it on
            # memory+deferred: every decision completes later)
            flags += ["--store", store]
        argv = [weir_bin(), "serve", "--http", "127.0.0.1:0", "--grpc", "", "--resp", "", "--admin", "",
                "--threads", str(self.threads), "--rules", self.rules_path] + flags
        # settings come from the flags only: no WEIR_* from the caller's shell
        env = {k: v for k, v in os.environ.items() if not k.startswith("WEIR_")}
        env.update(self.extra_env)
        env.setdefault("ASAN_OPTIONS", "detect_leaks=1")
        env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1")
        self.argv = argv
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, env=env, cwd=self.dir)
        self._reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._reader.start()
        try:
            line = self.wait_for_log(r"event=listening", timeout=timeout)
        except AssertionError:
            self._finished = True
            self.proc.kill()
            self.proc.wait()
            raise
        m = re.search(r"http=http://127\.0\.0\.1:(\d+)", line)
        assert m, f"no port in {line!r}"
        self.port = int(m.group(1))
        assert self.port > 0
        # the gRPC listener, when a test turned it on ("--grpc 127.0.0.1:0")
        m = re.search(r"grpc=http://127\.0\.0\.1:(\d+)", line)
        self.grpc_port = int(m.group(1)) if m else None
        # the RESP listener, when a test turned it on ("--resp 127.0.0.1:0")
        m = re.search(r"resp=redis://127\.0\.0\.1:(\d+)", line)
        self.resp_port = int(m.group(1)) if m else None
        # the admin listener, when a test turned it on ("--admin 127.0.0.1:0")
        m = re.search(r"admin=http://127\.0\.0\.1:(\d+)", line)
        self.admin_port = int(m.group(1)) if m else None
        return self

    def _read_stderr(self):
        for raw in self.proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            with self.cond:
                self.lines.append(line)
                self.cond.notify_all()
        with self.cond:
            self.cond.notify_all()

    def log_text(self):
        with self.cond:
            return "\n".join(self.lines)

    def mark(self):
        """The number of log lines so far, for wait_for_log(since=...)."""
        with self.cond:
            return len(self.lines)

    def wait_for_log(self, pattern, timeout=5.0, since=0):
        """The first log line (at index >= @since) matching regex @pattern;
        fails after @timeout seconds."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self.cond:
            i = since
            while True:
                while i < len(self.lines):
                    if rx.search(self.lines[i]):
                        return self.lines[i]
                    i += 1
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                if self.proc.poll() is not None and not self._reader.is_alive():
                    break
                self.cond.wait(min(left, 0.1))
        raise AssertionError(f"no log line matching {pattern!r} within {timeout} s; log:\n"
                             + self.log_text())

    def count_log(self, pattern, since=0):
        rx = re.compile(pattern)
        with self.cond:
            return sum(1 for line in self.lines[since:] if rx.search(line))

    def flag_value(self, name, default=None):
        """The value given to flag @name ("--name V" or "--name=V")."""
        value = default
        for i, f in enumerate(self.flags):
            if f == name and i + 1 < len(self.flags):
                value = self.flags[i + 1]
            elif f.startswith(name + "="):
                value = f[len(name) + 1:]
        return value

    def _signals_ready(self):
        """Waits until the main loop handles signals and watches the rule
        files: it logs event=watching (debug) once both are in place. Older
        builds logged event=listening before that, and a signal in between
        killed them; waiting costs nothing. Without a watch there is no such
        line, so wait a little."""
        if self._signals_ok:
            return
        self._signals_ok = True
        watch_off = self.flag_value("--watch", "true").lower() in ("false", "no", "off", "0")
        debug = self.flag_value("--log-level", "debug") == "debug"
        if debug and not watch_off:
            self.wait_for_log(r"event=(watching|watch_failed)", timeout=5)
        else:
            time.sleep(0.3)

    def signal(self, sig):
        self._signals_ready()
        self.proc.send_signal(sig)

    def sighup(self):
        self.signal(signal.SIGHUP)

    def wait_exit(self, timeout=10.0):
        """Waits for the process to end; returns its exit code."""
        try:
            self.returncode = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"weir did not exit within {timeout} s; log:\n"
                                 + self.log_text())
        self._reader.join(5)
        if not self._reader.is_alive():
            self.proc.stderr.close()
        return self.returncode

    def sanitizer_report(self):
        text = self.log_text()
        hits = [m for m in SANITIZER_MARKERS if m in text]
        return text if hits else None

    def finish(self):
        """SIGTERM, exit code 0 within 10 s, no sanitizer report."""
        if self._finished:
            return
        self._finished = True
        if self.proc.poll() is None:
            self.signal(signal.SIGTERM)
        rc = self.wait_exit(10.0)
        report = self.sanitizer_report()
        assert report is None, "sanitizer report on stderr:\n" + report
        assert rc == 0, f"weir exited with {rc}; log:\n" + self.log_text()

    # ---------------------------------------------------------------- rules

    def write_rules(self, text, path=None, atomic=True):
        """Replaces the rule file (atomically by default: write + rename,
        as deployment tools do)."""
        self._signals_ready()  # the watch is in place
        path = path or self.rules_path
        if atomic:
            tmp = os.path.join(os.path.dirname(path), ".tmp-" + os.path.basename(path))
            with open(tmp, "w") as f:
                f.write(text)
            os.replace(tmp, path)
        else:
            with open(path, "w") as f:
                f.write(text)

    # ---------------------------------------------------------------- HTTP

    def conn(self, **kw):
        return rawhttp.Conn(self.port, **kw)

    def request(self, method, target, body=None, headers=None, version="HTTP/1.1"):
        return rawhttp.request(self.port, method, target, body, headers, version)

    def get(self, target, headers=None):
        return self.request("GET", target, headers=headers)

    def post(self, target, body, headers=None):
        return self.request("POST", target, body, headers)

    def check(self, domain, *descriptors, path="/v1/check", **extra):
        """POST /v1/check with @descriptors given as dicts of entries
        ({"user": "alice"}) or as full descriptor objects (with "entries")."""
        descs = []
        for d in descriptors:
            if "entries" in d:
                descs.append(d)
            else:
                descs.append({"entries": [{"key": k, "value": v} for k, v in d.items()]})
        body = {"domain": domain, "descriptors": descs}
        body.update(extra)
        return self.post(path, body)

    def metrics_text(self):
        r = self.get("/metrics")
        assert r.status == 200, r
        return r.text()

    def metrics(self):
        return parse_metrics(self.metrics_text())

    def metric(self, name, **labels):
        """The value of one series; None when absent."""
        key = (name, tuple(sorted(labels.items())))
        return self.metrics().get(key)

    def rules_text(self):
        r = self.get("/v1/rules")
        assert r.status == 200, r
        return r.text()

    def wait_until(self, predicate, timeout=2.0, interval=0.02, what="condition"):
        """Polls @predicate until it holds. A request in it that times out
        (a sanitizer build on a loaded machine) is one more try, not the
        end: only the deadline fails the wait, with the daemon's log."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                value = predicate()
            except (TimeoutError, ConnectionError) as e:
                value, last = None, e
            else:
                last = None
            if value:
                return value
            if time.monotonic() > deadline:
                why = f" (last try: {last!r})" if last else ""
                raise AssertionError(f"{what} not reached within {timeout} s{why}; log:\n"
                                     + self.log_text())
            time.sleep(interval)


class _Factory:
    def __init__(self, base):
        self.base = base
        self.started = []

    def __call__(self, rules=None, *flags, **kw):
        w = Weir(self.base / f"weir{len(self.started)}", rules, flags, **kw)
        self.started.append(w)
        return w.start()

    def finish_all(self):
        errors = []
        for w in self.started:
            try:
                w.finish()
            except AssertionError as e:  # report every daemon, not just the first
                errors.append(str(e))
        if errors:
            pytest.fail("\n\n".join(errors), pytrace=False)


@pytest.fixture
def weir_factory(tmp_path):
    """start(rules, *flags, rules_path=None, threads=2) -> a running Weir.
    Every daemon started is stopped and checked at teardown."""
    f = _Factory(tmp_path)
    yield f
    f.finish_all()


@pytest.fixture(scope="module")
def weir_module_factory(tmp_path_factory):
    """weir_factory for daemons shared by the tests of one module."""
    f = _Factory(tmp_path_factory.mktemp("weir"))
    yield f
    f.finish_all()
