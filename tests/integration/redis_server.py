"""
redis_server.py - a real redis-server for the integration tests: started
in a temporary directory on 127.0.0.1 at a port chosen at run time, with
no persistence, and stopped, killed, paused (SIGSTOP) or restarted on the
same port by the tests.
"""

import os
import shutil
import signal
import socket
import subprocess
import time

import pytest
import redis


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    def __init__(self, directory, *args, password=None):
        if not shutil.which("redis-server"):
            pytest.fail("redis-server is missing: make test installs it (scripts/deps.sh)",
                        pytrace=False)
        self.dir = str(directory)
        os.makedirs(self.dir, exist_ok=True)
        self.args = list(args)
        self.password = password
        self.port = None
        self.proc = None
        self.socket = os.path.join(self.dir, "redis.sock")

    def start(self, port=None):
        for attempt in range(5):
            self.port = port or free_port()
            argv = ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port),
                    "--unixsocket", self.socket, "--unixsocketperm", "700",
                    "--save", "", "--appendonly", "no", "--dir", self.dir,
                    "--logfile", os.path.join(self.dir, "redis.log")] + self.args
            if self.password:
                argv += ["--requirepass", self.password]
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if self._wait_ready():
                return self
            self.proc.kill()
            self.proc.wait()
            if port:  # the caller's port: no other to try
                break
        pytest.fail("redis-server did not start; its log:\n" + self.log(), pytrace=False)

    def _wait_ready(self, timeout=10.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                if self.client().ping():
                    return True
            except redis.exceptions.ConnectionError:
                pass
            time.sleep(0.02)
        return False

    def log(self):
        try:
            with open(os.path.join(self.dir, "redis.log")) as f:
                return f.read()[-4000:]
        except OSError:
            return "(no log)"

    def client(self):
        return redis.Redis(host="127.0.0.1", port=self.port, password=self.password,
                           socket_timeout=5)

    @property
    def url(self):
        return f"redis://127.0.0.1:{self.port}"

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)  # a paused one must hear SIGTERM
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def kill(self):
        self.proc.kill()
        self.proc.wait()

    def pause(self):
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self):
        self.proc.send_signal(signal.SIGCONT)

    def restart(self):
        """Start again on the same port (the old process must be gone)."""
        return self.start(port=self.port)


@pytest.fixture
def redis_factory(tmp_path):
    """start(*args, password=None) -> a running RedisServer; all stopped at
    teardown."""
    started = []

    def start(*args, password=None):
        r = RedisServer(tmp_path / f"redis{len(started)}", *args, password=password)
        started.append(r)
        return r.start()

    yield start
    for r in started:
        r.stop()
