"""
postgres.py - a throwaway PostgreSQL server for the integration tests:
initdb into a temporary directory, postgres on 127.0.0.1 at a port chosen
at run time (its Unix socket in that directory), one database created, and
stopped (fast shutdown) or started again on the same port and data by the
tests. Superuser "weir", trust authentication, loopback only.

PostgreSQL refuses to run as root: as root (CI), initdb and postgres run as
nobody (setpriv --reuid/--regid/--clear-groups: no PAM session, no shell,
and it execs, so the server is our child and hears our signals), in a
directory given to nobody. psql runs as whoever we are: it connects over TCP.
"""

import glob
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest

USER = "weir"


def bindir():
    """/usr/lib/postgresql/N/bin of the newest N that has a server."""
    def version(d):
        m = re.search(r"/postgresql/(\d+)/bin$", d)
        return int(m.group(1)) if m else 0
    for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=version, reverse=True):
        if os.access(os.path.join(d, "postgres"), os.X_OK):
            return d
    pytest.fail("PostgreSQL's server is missing: make test installs it (scripts/deps.sh)",
                pytrace=False)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Postgres:
    def __init__(self, database="weir"):
        self.bin = bindir()
        self.database = database
        self.dir = tempfile.mkdtemp(prefix="weir-pg-")
        self.data = os.path.join(self.dir, "data")
        self.logfile = os.path.join(self.dir, "postgres.log")
        self.port = None
        self.proc = None
        self.as_server = []  # what runs initdb and postgres as their user
        if os.geteuid() == 0:
            nobody = pwd.getpwnam("nobody")
            os.chown(self.dir, nobody.pw_uid, nobody.pw_gid)
            self.as_server = ["setpriv", f"--reuid={nobody.pw_uid}",
                              f"--regid={nobody.pw_gid}", "--clear-groups"]
        os.chmod(self.dir, 0o700)
        # --no-sync, and fsync=off below: a throwaway cluster
        self._server(["initdb", "-D", self.data, "-U", USER, "--auth=trust",
                      "--encoding=UTF8", "--locale=C", "--no-sync"])

    def _env(self):
        return {"PATH": "/usr/bin:/bin", "LC_ALL": "C", "TZ": "UTC"}

    def _server(self, argv):
        """Runs a server program (initdb) as the server's user; fails with
        its output."""
        argv = self.as_server + [os.path.join(self.bin, argv[0])] + argv[1:]
        with open(self.logfile, "ab") as log:
            r = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=log,
                               stderr=subprocess.STDOUT, env=self._env(), cwd=self.dir)
        if r.returncode != 0:
            pytest.fail(f"{argv} exited {r.returncode}; the log:\n{self.log()}", pytrace=False)

    def start(self, port=None):
        for attempt in range(5):
            self.port = port or free_port()
            argv = self.as_server + [
                os.path.join(self.bin, "postgres"), "-D", self.data, "-k", self.dir,
                "-p", str(self.port), "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"]
            with open(self.logfile, "ab") as log:
                self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                             stderr=subprocess.STDOUT, env=self._env(),
                                             cwd=self.dir)
            if self._wait_ready():
                if not self.psql(f"SELECT 1 FROM pg_database WHERE datname = '{self.database}'",
                                 database="postgres"):
                    self.psql(f'CREATE DATABASE "{self.database}"', database="postgres")
                return self
            self.stop()
            if port:  # the caller's port: no other to try
                break
        pytest.fail("postgres did not start; its log:\n" + self.log(), pytrace=False)

    def _wait_ready(self, timeout=30.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False  # a port taken, most likely
            r = subprocess.run([os.path.join(self.bin, "pg_isready"), "-q", "-h", "127.0.0.1",
                                "-p", str(self.port), "-U", USER, "-d", "postgres", "-t", "1"])
            if r.returncode == 0:
                return True
            time.sleep(0.05)
        return False

    def psql(self, sql, database=None):
        """Runs @sql (statements separated by ';'); its rows as text,
        unaligned, one a line. Fails with psql's error."""
        r = subprocess.run([os.path.join(self.bin, "psql"), "-X", "-q", "-A", "-t",
                            "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", str(self.port),
                            "-U", USER, "-d", database or self.database, "-c", sql],
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise AssertionError(f"psql {sql!r}: {r.stderr.strip()}")
        return r.stdout.strip()

    @property
    def url(self):
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{self.database}"

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self):
        """Fast shutdown (SIGINT): sessions are ended, the data kept."""
        if self.running():
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def restart(self):
        """Start again on the same port and data (stopped first)."""
        self.stop()
        return self.start(port=self.port)

    def close(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def log(self):
        try:
            with open(self.logfile, errors="replace") as f:
                return f.read()[-4000:]
        except OSError:
            return "(no log)"


@pytest.fixture
def postgres():
    """A running PostgreSQL with an empty database; removed at teardown."""
    pg = Postgres()
    try:
        yield pg.start()
    finally:
        pg.close()
