"""
test_quota_db_pg.py - the quota database on a real PostgreSQL: the unit
tests of tests/unit/daemon/test_quota_db.c run again against a throwaway
server (WEIR_TEST_PG_URL), PostgreSQL's own cases included (two handles
that see each other's changes through NOTIFY, a connection the server
drops, concurrent creates, concurrent migrations); and the helper's
stop/start, which later tests lean on.
"""

import os
import re
import subprocess

from conftest import weir_bin
from postgres import postgres  # noqa: F401  (a fixture)


def unit_test_binary():
    """The unit test executable: <build>/tests/daemon_test_quota_db, the
    build directory being WEIR_BIN's."""
    path = os.path.join(os.path.dirname(weir_bin()), "tests", "daemon_test_quota_db")
    assert os.access(path, os.X_OK), f"{path} is not built"
    return path


def test_unit_tests_on_postgres(postgres):  # noqa: F811
    env = dict(os.environ, WEIR_TEST_PG_URL=postgres.url)
    r = subprocess.run([unit_test_binary()], env=env, capture_output=True, text=True,
                       timeout=500)
    out = r.stdout + r.stderr
    print(out)
    assert r.returncode == 0, out + "\npostgres log:\n" + postgres.log()
    assert "quota db tests on PostgreSQL" in out
    assert "load: 100000 tenants" in out
    # only SQLite's own cases are skipped
    skipped = set(re.findall(r"^\[  SKIPPED \] (\w+)$", out, re.M))
    assert skipped == {"sqlite_relative_path", "sqlite_busy_is_unavailable"}, skipped
    assert "AddressSanitizer" not in out and "runtime error" not in out


def test_stop_and_start_keep_the_data(postgres):  # noqa: F811
    postgres.psql("CREATE TABLE t (v INTEGER); INSERT INTO t VALUES (42)")
    port = postgres.port
    postgres.stop()
    assert not postgres.running()
    postgres.start(port=port)
    assert postgres.port == port
    assert postgres.psql("SELECT v FROM t") == "42"
    assert postgres.psql("SHOW listen_addresses") == "127.0.0.1"
