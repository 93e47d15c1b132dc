"""
test_nginx.py - a real nginx in front of a tiny application, asking weir
for every request with auth_request, all on 127.0.0.1 with ports chosen
at run time.

The nginx configuration is examples/nginx.conf itself, with its fixed
ports replaced and, for a run as an ordinary user, its temporary files,
pid file and logs moved into the test's directory.
"""

import grp
import http.server
import os
import pwd
import re
import signal
import socket
import subprocess
import threading
import time

import pytest

import rawhttp

NGINX = "/usr/sbin/nginx"
EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples")
EXAMPLE = os.path.join(EXAMPLES, "nginx.conf")
LEASES_EXAMPLE = os.path.join(EXAMPLES, "nginx-leases.conf")

RULES = """\
domain: api
descriptors:
  - key: remote_address
    rate_limit: {unit: hour, requests_per_unit: 3, algorithm: token_bucket}
"""

pytestmark = pytest.mark.skipif(not os.access(NGINX, os.X_OK), reason="no " + NGINX)


class App:
    """The application behind nginx: 200 "app" for everything, counted;
    /slow/... after @delay seconds, counting how many are in at once."""

    def __init__(self, delay=0.5):
        app = self
        self.hits = []
        self.busy = self.peak = 0
        self.lock = threading.Lock()

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _answer(self):
                n = int(self.headers.get("Content-Length") or 0)
                if n:
                    self.rfile.read(n)
                app.hits.append((self.command, self.path))
                if self.path.startswith("/slow/"):
                    with app.lock:
                        app.busy += 1
                        app.peak = max(app.peak, app.busy)
                    time.sleep(delay)
                    with app.lock:
                        app.busy -= 1
                body = b"app"
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _answer

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def replace_once(text, old, new):
    assert text.count(old) == 1, f"the example: expected {old!r} exactly once"
    return text.replace(old, new)


def nginx_config(prefix, nginx_port, weir_port, app_port, example=EXAMPLE):
    with open(example) as f:
        text = f.read()
    text = replace_once(text, "server 127.0.0.1:8080;", f"server 127.0.0.1:{weir_port};")
    text = replace_once(text, "server 127.0.0.1:3000;", f"server 127.0.0.1:{app_port};")
    text = replace_once(text, "listen 127.0.0.1:8000;", f"listen 127.0.0.1:{nginx_port};")
    text = replace_once(text, "worker_processes auto;", "worker_processes 1;")
    local = [f"    access_log {prefix}/access.log;"]
    for name in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
        local.append(f"    {name}_temp_path {prefix}/{name}_temp;")
    text = replace_once(text, "\nhttp {\n", "\nhttp {\n" + "\n".join(local) + "\n")
    if os.geteuid() == 0:
        # as root, nginx would switch its workers to "nobody": keep the
        # current user, who owns the temporary directory
        user = pwd.getpwuid(os.geteuid()).pw_name
        group = grp.getgrgid(os.getegid()).gr_name
        text = f"user {user} {group};\n" + text
    return text


class Nginx:
    def __init__(self, prefix, weir_port, app_port, example=EXAMPLE):
        self.prefix = str(prefix)
        self.example = example
        os.makedirs(self.prefix, exist_ok=True)
        self.weir_port = weir_port
        self.app_port = app_port
        self.lines = []
        self.proc = None

    def start(self):
        for attempt in range(3):  # the free port may be taken meanwhile
            self.port = free_port()
            conf = os.path.join(self.prefix, "nginx.conf")
            with open(conf, "w") as f:
                f.write(nginx_config(self.prefix, self.port, self.weir_port, self.app_port,
                                     self.example))
            self.proc = subprocess.Popen(
                [NGINX, "-p", self.prefix, "-e", "stderr", "-c", conf, "-g",
                 f"daemon off; pid {self.prefix}/nginx.pid; error_log stderr;"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            self.lines = []
            self.reader = threading.Thread(target=self._read, args=(self.proc, self.lines),
                                           daemon=True)
            self.reader.start()
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    break
                try:
                    socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                    return self
                except OSError:
                    time.sleep(0.02)
            self.stop()
            if not any("Address already in use" in ln for ln in self.lines):
                break
        raise AssertionError("nginx did not start:\n" + "\n".join(self.lines))

    @staticmethod
    def _read(proc, lines):
        for raw in proc.stderr:
            lines.append(raw.decode("utf-8", "replace").rstrip("\n"))

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)  # graceful
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc:
            self.reader.join(5)
            if not self.reader.is_alive():
                self.proc.stderr.close()

    def serious_errors(self):
        return [ln for ln in self.lines if re.search(r"\[(emerg|alert|crit)\]", ln)]


@pytest.fixture
def app():
    a = App()
    yield a
    a.stop()


@pytest.mark.parametrize("deny_status", ["403", "429"])
def test_nginx_auth_request(weir_factory, app, tmp_path, deny_status):
    """The example as documented (weir answering a denial 403, which
    auth_request takes quietly) and with weir's default 429 (nginx logs an
    [error] per denial, and the client still gets the 429)."""
    weir = weir_factory(RULES, "--check-deny-status", deny_status)
    nginx = Nginx(tmp_path / "nginx", weir.port, app.port).start()
    try:
        policy = '"api.remote_address";q=3;w=3600'
        for i, (remaining, t) in enumerate([(2, 1200), (1, 2400), (0, 3600)]):
            r = rawhttp.request(nginx.port, "GET", f"/page/{i}")
            assert r.status == 200, (r, nginx.lines)
            assert r.body == b"app"
            assert r.header("Server").startswith("nginx")
            assert r.header("RateLimit-Policy") == policy
            assert r.header("RateLimit") == f'"api.remote_address";r={remaining};t={t}'
            assert r.header("X-RateLimit-Limit") == "3"
            assert r.header("X-RateLimit-Remaining") == str(remaining)
            assert abs(int(r.header("X-RateLimit-Reset")) - (time.time() + t)) <= 2
            assert r.header("Retry-After") is None
        assert app.hits == [("GET", "/page/0"), ("GET", "/page/1"), ("GET", "/page/2")]

        for method, body in (("GET", None), ("POST", "payload")):
            r = rawhttp.request(nginx.port, method, "/page/3", body)
            assert r.status == 429, (r, nginx.lines)
            assert r.header("Retry-After") == "1200"
            assert r.header("RateLimit-Policy") == policy
            assert r.header("RateLimit") == '"api.remote_address";r=0;t=3600'
            assert r.header("X-RateLimit-Limit") == "3"
            assert r.header("X-RateLimit-Remaining") == "0"
            assert b"429 Too Many Requests" in r.body
        assert len(app.hits) == 3  # the denied requests never reached the app

        m = weir.metrics()

        def decisions(result):
            return m[("weir_decisions_total", (("domain", "api"), ("result", result),
                                               ("rule", "remote_address")))]

        assert (decisions("allowed"), decisions("denied")) == (3, 2)
        # nginx kept its connections to weir (upstream keepalive): fewer
        # than one per check (this scrape is one connection too)
        nginx_conns = m[("weir_connections_accepted_total", (("protocol", "http"),))] - 1
        assert 1 <= nginx_conns < 5

        # weir gone: the check fails and nginx fails closed with a 500
        weir.finish()
        r = rawhttp.request(nginx.port, "GET", "/page/4")
        assert r.status == 500
        assert r.header("RateLimit") is None
        assert r.header("Retry-After") is None
        assert len(app.hits) == 3
    finally:
        nginx.stop()
    assert nginx.proc.returncode == 0, nginx.lines
    assert nginx.serious_errors() == [], nginx.lines
    unexpected = [ln for ln in nginx.lines if "auth request unexpected status: 4" in ln]
    assert len(unexpected) == (0 if deny_status == "403" else 2), nginx.lines


def test_nginx_example_script_runs_as_its_caller(weir_factory, app, tmp_path):
    """examples/nginx.sh: nginx on a prefix of its own in a temporary
    directory, as the current user, with examples/nginx-rules.yaml behind
    it: the 4th request of five gets a 429, and the printed stop command
    stops it."""
    rules = os.path.join(os.path.dirname(EXAMPLE), "nginx-rules.yaml")
    weir = weir_factory(None, "--check-deny-status", "403", rules_path=rules)
    port = free_port()
    env = dict(os.environ, NGINX_PORT=str(port), WEIR_PORT=str(weir.port),
               APP_PORT=str(app.port), TMPDIR=str(tmp_path))
    script = os.path.join(os.path.dirname(EXAMPLE), "nginx.sh")
    out = subprocess.run([script], env=env, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out
    stop = re.search(r"stop:  (.*)", out.stdout).group(1)
    prefix = re.search(r"nginx runs from (\S+),", out.stdout).group(1)
    assert prefix.startswith(str(tmp_path))
    try:
        codes = []
        for i in range(5):
            deadline = time.monotonic() + 5
            while True:  # nginx daemonized: its port opens shortly
                try:
                    codes.append(rawhttp.request(port, "GET", f"/s/{i}").status)
                    break
                except OSError:
                    assert time.monotonic() < deadline, out.stdout
                    time.sleep(0.05)
        assert codes == [200, 200, 200, 429, 429]
    finally:
        subprocess.run(stop, shell=True, timeout=10)
    pid_file = os.path.join(prefix, "nginx.pid")
    deadline = time.monotonic() + 5
    while os.path.exists(pid_file):
        assert time.monotonic() < deadline, "nginx did not stop"
        time.sleep(0.05)
    with open(os.path.join(prefix, "error.log")) as f:
        log = f.read()
    assert "[error]" not in log and "[crit]" not in log and "[emerg]" not in log, log


LEASE_RULES = """\
domain: api
descriptors:
  - key: backend
    value: app
    rate_limit: {unit: minute, requests_per_unit: 2, algorithm: concurrency}
"""


def test_nginx_concurrency_leases(weir_factory, app, tmp_path):
    """examples/nginx-leases.conf: a lease per request, taken by
    auth_request and given back by post_action once the response is sent.
    Four slow requests at once: two reach the app, two get a 503; once
    they are done the leases are back (long before their minute's
    timeout), so two more get through at once again."""
    weir = weir_factory(LEASE_RULES, "--check-deny-status", "403")
    nginx = Nginx(tmp_path / "nginx", weir.port, app.port, LEASES_EXAMPLE).start()
    try:
        def burst(tag):
            out = []
            threads = [threading.Thread(
                target=lambda i=i: out.append(rawhttp.request(nginx.port, "GET", f"/slow/{tag}{i}")))
                for i in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            return sorted(r.status for r in out)

        for round_ in ("a", "b"):
            assert burst(round_) == [200, 200, 503, 503], nginx.lines
            # the releases run after the responses went out
            want = 2 if round_ == "a" else 4
            weir.wait_until(lambda: (weir.metric("weir_http_requests_total", route="/v1/release",
                                                 code="200") or 0) >= want,
                            timeout=5, what="the leases given back")
        assert app.peak == 2, app.peak
        assert not nginx.serious_errors(), nginx.lines
    finally:
        nginx.stop()
