"""
test_resp.py - weir serve's Redis-protocol listener (--resp) with the
clients people point at it: redis-cli, redis-py, hiredis from C
(resp_hiredis.c) and raw sockets.

Covered: CL.THROTTLE to redis-cell's contract (exact replies, rounding,
quantity 0, DEL, errors) and rates above 1,000/s; GCRA; WEIR.CHECK and
WEIR.PEEK through a rule file; the connection commands (PING, ECHO, HELLO,
AUTH, CLIENT, INFO, COMMAND); RESP3; 10,000 commands pipelined in one
write; inline commands; malformed input and the timeouts; the listener's
refusal to start off loopback without a password; CL.THROTTLE against a
reference model of GCRA over a random trace.

Times in CL.THROTTLE replies are whole seconds rounded up. The tests pick
emission intervals of whole seconds (or far longer than a test runs) so
that the time passing between commands, under a second, cannot change a
reply: ceil(n - d) == n for any whole n and 0 <= d < 1.
"""

import os
import random
import re
import socket
import subprocess
import time

import pytest
import redis

from conftest import clock_at, weir_bin

RESP_ON = ("--resp", "127.0.0.1:0")

# Any rule file: the CL.THROTTLE keys are the caller's, not the rules'.
# WEIR.CHECK's tests use API_RULES.
NO_RULES = """\
domain: unused
descriptors:
  - key: x
    rate_limit: {unit: hour, requests_per_unit: 1}
"""

API_RULES = """\
domain: api
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 3, algorithm: fixed_window, name: per_user}
  - key: ip
    rate_limit: {unit: minute, requests_per_unit: 5, algorithm: fixed_window, name: per_ip}
  - key: conn
    rate_limit: {unit: minute, requests_per_unit: 2, algorithm: concurrency, name: inflight}
"""

PASSWORD = "s3cret-pass"

CELL_USAGE = ("Cell error: Usage: cl.throttle <key> <max_burst> <count per period> <period> "
              "[<quantity>]")


# ---------------------------------------------------------------- helpers

class Err(str):
    """An error reply (its text without the leading '-')."""


class Conn:
    """A raw RESP connection: commands as multibulk or as raw bytes, replies
    parsed from RESP2 and RESP3 (simple string -> str, error -> Err, integer
    -> int, bulk -> bytes, null -> None, array/set -> list, map -> dict)."""

    def __init__(self, port, timeout=10.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buf = b""
        self.pos = 0  # bytes of buf already parsed

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @staticmethod
    def encode(*args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        return b"".join(out)

    def send(self, data):
        self.sock.sendall(data)

    def _fill(self):
        data = self.sock.recv(1 << 16)
        if not data:
            raise ConnectionError("closed by the server")
        if self.pos > 0:  # drop what was read, once per receive
            self.buf = self.buf[self.pos:]
            self.pos = 0
        self.buf += data

    def read_line(self):
        while True:
            i = self.buf.find(b"\r\n", self.pos)
            if i >= 0:
                line, self.pos = self.buf[self.pos:i], i + 2
                return line
            self._fill()

    def _bytes(self, n):
        while len(self.buf) - self.pos < n + 2:
            self._fill()
        data = self.buf[self.pos:self.pos + n]
        self.pos += n + 2
        return data

    def read(self):
        line = self.read_line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            return Err(rest.decode("utf-8", "replace"))
        if kind == b":":
            return int(rest)
        if kind == b"_":
            return None
        if kind in (b"$", b"="):
            n = int(rest)
            return None if n < 0 else self._bytes(n)
        if kind in (b"*", b"~", b">"):
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        if kind == b"%":
            return {self._key(self.read()): self.read() for _ in range(int(rest))}
        if kind == b"#":
            return rest == b"t"
        raise AssertionError(f"unexpected reply line {line!r}")

    @staticmethod
    def _key(k):
        return k.decode() if isinstance(k, bytes) else k

    def call(self, *args):
        self.send(self.encode(*args))
        return self.read()

    def read_raw(self, n):
        """Exactly @n bytes of the stream, unparsed."""
        while len(self.buf) - self.pos < n:
            self._fill()
        data = self.buf[self.pos:self.pos + n]
        self.pos += n
        return data

    def expect(self, raw):
        """The next bytes of the stream are exactly @raw."""
        got = self.read_raw(len(raw))
        assert got == raw

    def read_until_closed(self, timeout):
        """Everything the server sends until it closes the connection;
        fails if it is still open after @timeout seconds."""
        deadline = time.monotonic() + timeout
        data, self.buf, self.pos = self.buf[self.pos:], b"", 0
        while True:
            left = deadline - time.monotonic()
            assert left > 0, f"connection still open after {timeout} s; got {data!r}"
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(1 << 16)
            except socket.timeout:
                continue
            except ConnectionResetError:
                return data
            if not chunk:
                return data
            data += chunk


def cli(w, *args, resp3=False):
    """redis-cli's output (not a terminal: raw values, one per line)."""
    argv = ["redis-cli", "-h", "127.0.0.1", "-p", str(w.resp_port)]
    if resp3:
        argv.append("-3")
    r = subprocess.run(argv + [str(a) for a in args], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r
    return r.stdout.rstrip("\n")


def cli_throttle(w, *args):
    """CL.THROTTLE through redis-cli: its 5 integers."""
    out = cli(w, "CL.THROTTLE", *args)
    return [int(x) for x in out.split("\n")]


def cli_many(w, *commands):
    """Several commands through one redis-cli, which reads them from its
    stdin: they run within milliseconds of each other, however busy the
    machine. One reply each: a CL.THROTTLE's 5 integers as a list, an
    integer as an int, an error as its text."""
    script = "".join(" ".join(str(a) for a in cmd) + "\n" for cmd in commands)
    r = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(w.resp_port)], input=script,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r
    lines = r.stdout.split("\n")
    replies = []
    for cmd in commands:
        if re.fullmatch(r"-?\d+", lines[0]):
            n = 5 if cmd[0].upper() == "CL.THROTTLE" else 1
            ints = [int(x) for x in lines[:n]]
            lines = lines[n:]
            replies.append(ints if n == 5 else ints[0])
        else:
            replies.append(lines[0])
            lines = lines[2:]  # an error is followed by an empty line
    return replies


def assert_alive(w):
    """The daemon still answers on a new connection."""
    with Conn(w.resp_port) as c:
        assert c.call("PING") == "PONG"


def vm_rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def plain_env():
    """The caller's environment without WEIR_* (settings come from flags)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("WEIR_")}


@pytest.fixture(scope="module")
def w(weir_module_factory):
    """One daemon for the tests that need no flags of their own (each uses
    keys of its own). Its clock starts 5 s into the current hour, so no
    window of API_RULES turns over while the module runs (under a minute)."""
    env, _ = clock_at(5)
    return weir_module_factory(API_RULES, *RESP_ON, env=env)


@pytest.fixture(scope="module")
def w_auth(weir_module_factory):
    """A daemon whose clients must AUTH with PASSWORD."""
    return weir_module_factory(NO_RULES, *RESP_ON, "--resp-password", PASSWORD)


# ---------------------------------------------------------------- CL.THROTTLE (redis-cli)

def test_cl_throttle_readme_example(w):
    assert cli_throttle(w, "user123", 15, 30, 60) == [0, 16, 15, -1, 2]


def test_cl_throttle_sequence_until_limited(w):
    # T = 10 s, limit 3: each admission pushes the reset 10 s further
    assert cli_many(w, *[("CL.THROTTLE", "seq", 2, 1, 10)] * 5) == [
        [0, 3, 2, -1, 10],
        [0, 3, 1, -1, 20],
        [0, 3, 0, -1, 30],
        [1, 3, 0, 10, 30],
        [1, 3, 0, 10, 30],  # a denial charges nothing
    ]


def test_cl_throttle_quantity_zero_is_a_look_that_writes_nothing(w):
    take, look = ("CL.THROTTLE", "look", 2, 1, 10), ("CL.THROTTLE", "look", 2, 1, 10, 0)
    assert cli_many(w, take, take, take, look, look, take) == [
        [0, 3, 2, -1, 10],
        [0, 3, 1, -1, 20],
        [0, 3, 0, -1, 30],
        [0, 3, 0, -1, 30],  # never limited, even when exhausted
        [0, 3, 0, -1, 30],  # and the look changed nothing
        [1, 3, 0, 10, 30],
    ]
    # on a fresh key: nothing to report, and nothing created
    assert cli_many(w, ("CL.THROTTLE", "look-fresh", 2, 1, 10, 0), ("DEL", "look-fresh")) == \
        [[0, 3, 3, -1, 0], 0]


def test_cl_throttle_quantity_above_the_limit_can_never_fit(w):
    assert cli_many(w, ("CL.THROTTLE", "toobig", 2, 1, 10, 4),
                    ("CL.THROTTLE", "toobig", 2, 1, 10, 3)) == [
        [1, 3, 3, -1, 0],
        [0, 3, 0, -1, 30],  # the refused one took nothing
    ]


def test_cl_throttle_exact_seconds_are_not_rounded_up_further(w):
    # T = 1/3 s (333,333,334 ns in weir): 3 requests make exactly 1 s
    assert cli_many(w, *[("CL.THROTTLE", "round", 2, 3, 1)] * 3) == [
        [0, 3, 2, -1, 1],
        [0, 3, 1, -1, 1],
        [0, 3, 0, -1, 1],
    ]


def test_del_resets_a_cl_throttle_key(w):
    take = ("CL.THROTTLE", "gone", 2, 1, 10)
    replies = cli_many(w, take, take, take, take, ("DEL", "gone"), take, take, take,
                       ("DEL", "never-seen"), ("WEIR.RESET", "gone", "never-seen"))
    assert replies[3][0] == 1
    assert replies[4] == 1
    assert [r[2] for r in replies[5:8]] == [2, 1, 0]  # a full burst again
    assert replies[8:] == [0, 1]


def test_cl_throttle_error_replies(w):
    assert cli(w, "CL.THROTTLE", "e") == CELL_USAGE
    assert cli(w, "CL.THROTTLE", "e", 1, 1) == CELL_USAGE
    assert cli(w, "CL.THROTTLE", "e", 1, 1, 1, 1, 1) == CELL_USAGE
    assert cli(w, "CL.THROTTLE", "e", 1, "x", 60) == "Cell error: Couldn't parse as integer: x"
    assert cli(w, "CL.THROTTLE", "e", "1.5", 1, 60) == \
        "Cell error: Couldn't parse as integer: 1.5"
    assert cli(w, "CL.THROTTLE", "e", 1, 1, 60, "q") == "Cell error: Couldn't parse as integer: q"
    assert cli(w, "CL.THROTTLE", "e", 1, 0, 60) == "Cell error: Zero rates are not supported"
    assert cli(w, "CL.THROTTLE", "e", 1, 1, 0) == "Cell error: Zero rates are not supported"


def test_cl_throttle_refuses_what_redis_cell_would_compute_with(w):
    with Conn(w.resp_port) as c:
        assert c.call("CL.THROTTLE", "n", -1, 1, 60) == \
            Err("Cell error: max_burst must not be negative")
        assert c.call("CL.THROTTLE", "n", 1, 1, 60, -1) == \
            Err("Cell error: the quantity must not be negative")
        assert c.call("CL.THROTTLE", "", 1, 1, 60) == \
            Err("Cell error: the key must be 1 to 4000 bytes")
        assert c.call("CL.THROTTLE", "k" * 4001, 1, 1, 60) == \
            Err("Cell error: the key must be 1 to 4000 bytes")
        assert c.call("CL.THROTTLE", "k" * 4000, 1, 1, 60) == [0, 2, 1, -1, 60]
        # the extremes of int64 are refused, not computed with (UBSan watches)
        lo, hi = -(2 ** 63), 2 ** 63 - 1
        assert c.call("CL.THROTTLE", "n", 1, 1, lo) == \
            Err("Cell error: the period must not be negative")
        assert c.call("CL.THROTTLE", "n", 1, lo, 60) == \
            Err("Cell error: the count must not be negative")
        assert c.call("CL.THROTTLE", "n", 1, 1, hi) == \
            Err("Cell error: the period is past 100 years")
        for args in ((hi, 1, 60), (1, hi, 60)):
            r = c.call("CL.THROTTLE", "n", *args)
            assert isinstance(r, Err) and r.startswith("Cell error: the rate is out of range"), r
        assert c.call("CL.THROTTLE", "huge", 3, 1, 3, hi) == [1, 4, 4, -1, 0]


def test_cl_throttle_and_gcra_share_a_key(w):
    with Conn(w.resp_port) as c:
        assert c.call("GCRA", "shared", 5, 1, "60") == [0, 6, 5, -1, 60]
        assert c.call("CL.THROTTLE", "shared", 5, 1, 60) == [0, 6, 4, -1, 120]
        assert c.call("DEL", "shared", "shared") == 1


def test_cl_throttle_above_1000_per_second(w):
    # 5000/s, T = 200 us, limit 1000: redis-cell kept T in ms and got this wrong
    def batch(n):
        with Conn(w.resp_port) as c:
            t0 = time.monotonic()
            c.send(Conn.encode("CL.THROTTLE", "fast", 999, 5000, 1) * n)
            replies = [c.read() for _ in range(n)]
            return replies, t0, time.monotonic()

    replies, sent1, got1 = batch(2000)
    admitted = sum(1 for r in replies if r[0] == 0)
    # the burst, plus what the rate refilled while the batch ran
    assert 1000 <= admitted <= 1000 + 5000 * (got1 - sent1) + 1, (admitted, got1 - sent1)
    # the burst is admitted whatever the timing (remaining also counts what
    # came back while the batch ran, a token per 200 us)
    assert all(r[:2] == [0, 1000] and r[3:] == [-1, 1] for r in replies[:1000]), replies[:3]
    limited = [r for r in replies if r[0] == 1]
    assert limited, f"2000 in {got1 - sent1:.3f} s and none limited"
    assert all(r == [1, 1000, 0, 1, 1] for r in limited), limited[:3]  # 200 us: 1 s
    time.sleep(0.1)
    replies, sent2, got2 = batch(2000)
    admitted = sum(1 for r in replies if r[0] == 0)
    # refilled at 5000/s between the batches (capped at the burst). The
    # bounds are the client's view of the server's times: the refill began
    # with batch 1's last admission (after sent1, before got1) and ended
    # with batch 2's last reply (after sent2, before got2). A rate of
    # 1000/s would admit about 100, one of 10,000/s about 1000.
    low = min(1000, 5000 * (sent2 - got1)) - 1
    high = 5000 * (got2 - sent1) + 2
    assert low <= admitted <= high, (admitted, sent2 - got1, got2 - sent1)
    assert admitted >= 450


# ---------------------------------------------------------------- GCRA, other commands

def test_gcra_with_a_decimal_period(w):
    # 4 per 0.5 s: T = 125 ms, limit 3
    assert cli_throttle_gcra(w, "g1", 2, 4, "0.5") == [0, 3, 2, -1, 1]
    assert cli_throttle_gcra(w, "g2", 2, 4, "0.5", "TOKENS", 3) == [0, 3, 0, -1, 1]
    assert cli_throttle_gcra(w, "g2", 2, 4, "0.5", "TOKENS", 3) == [1, 3, 0, 1, 1]
    assert cli(w, "GCRA", "g3", 2, 4, "0.5", "TOKENS") == "ERR syntax error"
    assert cli(w, "GCRA", "g3", 2, 4, "abc") == \
        "ERR the period must be a positive number of seconds, at most 6 decimals, up to 100 years"


def cli_throttle_gcra(w, *args):
    return [int(x) for x in cli(w, "GCRA", *args).split("\n")]


def test_unknown_command_is_worded_as_redis(w):
    assert cli(w, "foo", "a", "b") == \
        "ERR unknown command 'foo', with args beginning with: 'a' 'b' "
    with Conn(w.resp_port) as c:
        c.send(Conn.encode("foo", "a", "b"))
        c.expect(b"-ERR unknown command 'foo', with args beginning with: 'a' 'b' \r\n")


def test_wrong_arity(w):
    assert cli(w, "ECHO") == "ERR wrong number of arguments for 'echo' command"
    with Conn(w.resp_port) as c:
        assert c.call("ECHO", "a", "b") == Err("ERR wrong number of arguments for 'echo' command")
        assert c.call("SELECT") == Err("ERR wrong number of arguments for 'select' command")


def test_ping_with_two_arguments_is_a_wrong_arity(w):
    """Redis 7: "-ERR wrong number of arguments for 'ping' command", whole.
    (weir once sent "... for 'ping' comman": a length of 47 for 48 bytes.)"""
    with Conn(w.resp_port) as c:
        c.send(Conn.encode("PING", "a", "b"))
        assert c.read_line() == b"-ERR wrong number of arguments for 'ping' command"
        assert c.call("PING") == "PONG"


def test_command_count_matches_command_list(w):
    with Conn(w.resp_port) as c:
        names = c.call("COMMAND", "LIST")
        assert c.call("COMMAND", "COUNT") == len(names)
        for name in (b"cl.throttle", b"gcra", b"weir.check", b"weir.peek", b"weir.acquire",
                     b"weir.release", b"del", b"ping"):
            assert name in names


# ---------------------------------------------------------------- WEIR.CHECK, WEIR.PEEK

def strip_times(reply):
    """[code, limit, remaining, reset_ms, retry_ms, rule] -> its fields
    without the times, which are checked on their own."""
    code, limit, remaining, reset_ms, retry_ms, rule = reply
    return [code, limit, remaining, rule]


def test_weir_check_one_descriptor(w):
    with Conn(w.resp_port) as c:
        got = [c.call("WEIR.CHECK", "api", "user", "alice") for _ in range(4)]
    assert [strip_times(r[0]) for r in got] == [
        [b"OK", 3, 2, b"per_user"],
        [b"OK", 3, 1, b"per_user"],
        [b"OK", 3, 0, b"per_user"],
        [b"OVER_LIMIT", 3, 0, b"per_user"],
    ]
    # the minute window started 5 s into the hour (clock_at): it resets at
    # 60 s, 55 s after the daemon started, less what the module has taken
    for r in got:
        reset_ms, retry_ms = r[0][3], r[0][4]
        assert 25000 < reset_ms <= 55000, r
        assert retry_ms == (reset_ms if r[0][0] == b"OVER_LIMIT" else 0), r


def test_weir_check_several_descriptors(w):
    with Conn(w.resp_port) as c:
        r = c.call("WEIR.CHECK", "api", "user", "bob", "DESCRIPTOR", "ip", "10.0.0.1",
                   "DESCRIPTOR", "nothing", "matches")
        assert [strip_times(d) for d in r] == [
            [b"OK", 3, 2, b"per_user"],
            [b"OK", 5, 4, b"per_ip"],
            [b"OK", 0, 0, None],  # no limit applies
        ]


def test_weir_check_hits(w):
    with Conn(w.resp_port) as c:
        assert strip_times(c.call("WEIR.CHECK", "api", "user", "erin", "HITS", 2)[0]) == \
            [b"OK", 3, 1, b"per_user"]
        # 2 more do not fit, and a denial charges nothing
        assert strip_times(c.call("WEIR.CHECK", "api", "HITS", 2, "user", "erin")[0]) == \
            [b"OVER_LIMIT", 3, 1, b"per_user"]
        assert strip_times(c.call("WEIR.CHECK", "api", "user", "erin")[0]) == \
            [b"OK", 3, 0, b"per_user"]


def test_weir_peek_does_not_consume(w):
    with Conn(w.resp_port) as c:
        c.call("WEIR.CHECK", "api", "user", "carol")
        for _ in range(3):
            assert strip_times(c.call("WEIR.PEEK", "api", "user", "carol")[0]) == \
                [b"OK", 3, 2, b"per_user"]
        assert strip_times(c.call("WEIR.CHECK", "api", "user", "carol", "HITS", 0)[0]) == \
            [b"OK", 3, 2, b"per_user"]
        assert strip_times(c.call("WEIR.CHECK", "api", "user", "carol")[0]) == \
            [b"OK", 3, 1, b"per_user"]


def test_weir_check_charges_only_when_every_descriptor_admits(w):
    with Conn(w.resp_port) as c:
        c.call("WEIR.CHECK", "api", "user", "dave", "HITS", 3)
        r = c.call("WEIR.CHECK", "api", "user", "dave", "DESCRIPTOR", "ip", "10.0.0.9")
        assert [d[0] for d in r] == [b"OVER_LIMIT", b"OK"]
        assert strip_times(c.call("WEIR.PEEK", "api", "ip", "10.0.0.9")[0]) == \
            [b"OK", 5, 5, b"per_ip"]


def test_weir_check_errors(w):
    with Conn(w.resp_port) as c:
        assert c.call("WEIR.CHECK", "x", "user", "a") == Err("ERR unknown domain 'x'")
        assert c.call("WEIR.CHECK", "api", "user", "a", "extra") == \
            Err("ERR syntax error: entry 'extra' has no value")
        assert c.call("WEIR.CHECK", "api", "user") == \
            Err("ERR wrong number of arguments for 'weir.check' command")
        assert c.call("WEIR.CHECK", "api", "user", "a", "DESCRIPTOR") == \
            Err("ERR a descriptor has no entries")
        assert c.call("WEIR.CHECK", "api", "user", "a", "HITS", -1) == \
            Err("ERR HITS must be a whole number of 0 or more")
        assert c.call("PING") == "PONG"  # errors leave the connection usable


# ---------------------------------------------------------------- WEIR.ACQUIRE, WEIR.RELEASE

def test_weir_acquire_holds_until_released(w):
    with Conn(w.resp_port) as c:
        first = c.call("WEIR.ACQUIRE", "api", "conn", "c1")
        token, st = first
        assert token.startswith(b"1;2,60000000,"), first
        assert [strip_times(d) for d in st] == [[b"OK", 2, 1, b"inflight"]]
        second = c.call("WEIR.ACQUIRE", "api", "conn", "c1")
        assert strip_times(second[1][0]) == [b"OK", 2, 0, b"inflight"]
        token2 = second[0]
        assert token2 != token
        full = c.call("WEIR.ACQUIRE", "api", "conn", "c1")
        assert full[0] is None
        assert strip_times(full[1][0]) == [b"OVER_LIMIT", 2, 0, b"inflight"]
        # given back once: the unit is free again
        assert c.call("WEIR.RELEASE", token) == 1
        assert c.call("WEIR.RELEASE", token) == 0
        again = c.call("WEIR.ACQUIRE", "api", "conn", "c1")
        assert again[0] is not None
        assert c.call("WEIR.RELEASE", again[0]) == 1
        assert c.call("WEIR.RELEASE", token2) == 1


def test_weir_acquire_of_several_leases_and_of_none(w):
    with Conn(w.resp_port) as c:
        token, st = c.call("WEIR.ACQUIRE", "api", "conn", "c2", "DESCRIPTOR", "conn", "c3",
                           "DESCRIPTOR", "user", "gina")
        assert token.count(b";") == 2  # the user limit is a rate: no lease
        assert [d[0] for d in st] == [b"OK", b"OK", b"OK"]
        assert c.call("WEIR.RELEASE", token) == 2
        # a decision with no concurrency limit: a token with nothing to give back
        token, st = c.call("WEIR.ACQUIRE", "api", "user", "hank")
        assert token == b"1"
        assert c.call("WEIR.RELEASE", token) == 0
        for bad in (b"", b"2", b"1;", b"1;2,60000000,5,zz", b"1;0,1,1,00", b"1;2,60000000,5,0"):
            assert c.call("WEIR.RELEASE", bad) == Err("ERR not a lease token of WEIR.ACQUIRE"), bad
        assert c.call("PING") == "PONG"


def test_weir_peek_treats_hits_as_a_keyword(w):
    """docs/RESP.md: "HITS and DESCRIPTOR are keywords wherever they stand";
    in WEIR.PEEK, HITS n still only looks. (weir once took HITS there as an
    entry key: {user: frank, HITS: 2} matched no rule, and the reply said
    no limit applied.)"""
    with Conn(w.resp_port) as c:
        for _ in range(2):
            r = c.call("WEIR.PEEK", "api", "user", "frank", "HITS", 2)
            assert [strip_times(d) for d in r] == [[b"OK", 3, 3, b"per_user"]]


# ---------------------------------------------------------------- redis-py

def test_redis_py_commands(w):
    r = redis.Redis(host="127.0.0.1", port=w.resp_port, socket_timeout=10)
    try:
        assert r.execute_command("CL.THROTTLE", "py", 15, 30, 60) == [0, 16, 15, -1, 2]
        assert r.ping() is True
        assert r.client_setname("weir-test") is True
        assert r.client_getname() == "weir-test"
        info = r.info()
        assert isinstance(info, dict)
        assert info["redis_version"] == "7.0.0"
        assert info["tcp_port"] == w.resp_port
    finally:
        r.close()


def test_redis_py_pipeline_of_100_in_order(w):
    r = redis.Redis(host="127.0.0.1", port=w.resp_port, socket_timeout=10)
    try:
        p = r.pipeline(transaction=False)
        for i in range(50):
            p.execute_command("CL.THROTTLE", "pypipe", 200, 1, 3600)
            p.echo(f"n{i}")
        got = p.execute()
    finally:
        r.close()
    assert len(got) == 100
    for i in range(50):
        assert got[2 * i] == [0, 201, 200 - i, -1, 3600 * (i + 1)], (i, got[2 * i])
        assert got[2 * i + 1] == f"n{i}".encode()


def test_redis_py_auth_with_password(w_auth):
    r = redis.Redis(host="127.0.0.1", port=w_auth.resp_port, password=PASSWORD, socket_timeout=10)
    try:
        assert r.ping() is True
        assert r.execute_command("CL.THROTTLE", "authed", 15, 30, 60) == [0, 16, 15, -1, 2]
    finally:
        r.close()


def test_redis_py_wrong_password(w_auth):
    """Redis 7 answers a wrong AUTH with WRONGPASS, which redis-py 4.3.4
    raises as a ResponseError (its AuthenticationError is for NOAUTH and
    Redis 5's "invalid password"): weir must do exactly as Redis."""
    r = redis.Redis(host="127.0.0.1", port=w_auth.resp_port, password="wrong", socket_timeout=10)
    try:
        with pytest.raises(redis.exceptions.ResponseError) as e:
            r.ping()
        assert str(e.value) == "WRONGPASS invalid username-password pair or user is disabled."
    finally:
        r.close()


def test_command_before_auth_is_refused(w_auth):
    r = redis.Redis(host="127.0.0.1", port=w_auth.resp_port, socket_timeout=10)
    try:
        with pytest.raises(redis.exceptions.AuthenticationError, match="Authentication required"):
            r.execute_command("CL.THROTTLE", "noauth", 1, 1, 60)
    finally:
        r.close()
    with Conn(w_auth.resp_port) as c:
        c.send(Conn.encode("CL.THROTTLE", "noauth", 1, 1, 60))
        c.expect(b"-NOAUTH Authentication required.\r\n")
        assert c.call("AUTH", "default", "wrong") == \
            Err("WRONGPASS invalid username-password pair or user is disabled.")
        assert c.call("AUTH", "default", PASSWORD) == "OK"
        assert c.call("CL.THROTTLE", "noauth", 1, 1, 60) == [0, 2, 1, -1, 60]
        # authenticated: Redis's caps before AUTH no longer apply
        assert c.call("DEL", *[f"k{i}" for i in range(11)]) == 0


def test_before_auth_redis_caps_apply(w_auth):
    """As Redis: a client not yet authenticated may send at most 10
    arguments of at most 16384 bytes in a RESP array."""
    for raw, message in ((b"*11\r\n", b"unauthenticated multibulk length"),
                         (b"*1\r\n$16385\r\n", b"unauthenticated bulk length")):
        with Conn(w_auth.resp_port) as c:
            c.send(raw)
            assert c.read_until_closed(5) == b"-ERR Protocol error: " + message + b"\r\n"


# ---------------------------------------------------------------- RESP3

def test_hello_3_with_redis_cli(w):
    lines = cli(w, "HELLO", "3", resp3=True).split("\n")
    assert lines[:3] == ["server weir", "version 7.0.0", "proto 3"]
    assert re.fullmatch(r"id \d+", lines[3]), lines
    assert lines[4:6] == ["mode standalone", "role master"]


def test_hello_3_on_a_raw_socket_replies_a_map(w):
    with Conn(w.resp_port) as c:
        c.send(b"*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n")
        c.expect(b"%7\r\n$6\r\nserver\r\n$4\r\nweir\r\n$7\r\nversion\r\n$5\r\n7.0.0\r\n"
                 b"$5\r\nproto\r\n:3\r\n")
        rest = {}
        for _ in range(4):
            key = c.read().decode()
            rest[key] = c.read()
        assert rest["mode"] == b"standalone" and rest["role"] == b"master"
        assert rest["modules"] == []
        assert c.call("CLIENT", "ID") == rest["id"]
        # a rule that matches nothing is null: "_" in RESP3
        c.send(Conn.encode("WEIR.CHECK", "api", "nothing", "matches"))
        c.expect(b"*1\r\n*6\r\n$2\r\nOK\r\n:0\r\n:0\r\n:0\r\n:0\r\n_\r\n")


def test_client_getname_null_in_resp2_and_resp3(w):
    with Conn(w.resp_port) as c:
        c.send(Conn.encode("CLIENT", "GETNAME"))
        c.expect(b"$-1\r\n")
        assert isinstance(c.call("HELLO", "3"), dict)
        c.send(Conn.encode("CLIENT", "GETNAME"))
        c.expect(b"_\r\n")
        assert isinstance(c.call("HELLO", "2"), list)  # a map is an array in RESP2
        c.send(Conn.encode("CLIENT", "GETNAME"))
        c.expect(b"$-1\r\n")


# ---------------------------------------------------------------- pipelining, inline

def test_10000_commands_in_one_write(w):
    n = 10000
    with Conn(w.resp_port, timeout=60) as c:
        t0 = time.monotonic()
        c.send(Conn.encode("CL.THROTTLE", "piped", 20000, 1, 3600) * n)
        replies = [c.read() for _ in range(n)]
        took = time.monotonic() - t0
    slack = int(took) + 1  # seconds that may have passed since the first
    for i, r in enumerate(replies):
        limited, limit, remaining, retry, reset = r
        assert [limited, limit, remaining, retry] == [0, 20001, 20000 - i, -1], (i, r)
        assert 3600 * (i + 1) - slack <= reset <= 3600 * (i + 1), (i, r)


def test_inline_commands(w):
    with Conn(w.resp_port) as c:
        c.send(b"PING\r\n")
        c.expect(b"+PONG\r\n")
        c.send(b"CL.THROTTLE inline 1 1 60\r\n")
        c.expect(b"*5\r\n:0\r\n:2\r\n:1\r\n:-1\r\n:60\r\n")
        c.send(b'ECHO "a b"\r\n')
        c.expect(b"$3\r\na b\r\n")
        c.send(b"ECHO 'it''s'\r\n")  # a closing quote must end the word
        assert c.read_until_closed(10) == b"-ERR Protocol error: unbalanced quotes in request\r\n"
    with Conn(w.resp_port) as c:
        c.send(b'ECHO "tab\\there\\x41"\nECHO \'x\\\'y\'\n\r\n\r\nPING\n')
        assert c.read() == b"tab\thereA"
        assert c.read() == b"x'y"
        assert c.read() == "PONG"


# ---------------------------------------------------------------- malformed input

MALFORMED = [
    (b"*abc\r\n", b"-ERR Protocol error: invalid multibulk length\r\n"),
    (b"*1\r\n+x\r\n", b"-ERR Protocol error: expected '$', got '+'\r\n"),
    (b"*1\r\n$-3\r\n", b"-ERR Protocol error: invalid bulk length\r\n"),
    (b"*1\r\n$1000000000\r\n", b"-ERR Protocol error: invalid bulk length\r\n"),
    (b"*900000000\r\n", b"-ERR Protocol error: invalid multibulk length\r\n"),
    (b"*2\r\n$4\r\nECHO\r\n$01\r\n", b"-ERR Protocol error: invalid bulk length\r\n"),
    (b'ECHO "open\r\n', b"-ERR Protocol error: unbalanced quotes in request\r\n"),
    (b"x" * 70000, b"-ERR Protocol error: too big inline request\r\n"),
    (b"*" + b"1" * 70000, b"-ERR Protocol error: too big mbulk count string\r\n"),
]


@pytest.mark.parametrize("data,reply", MALFORMED, ids=lambda v: repr(v[:20]))
def test_malformed_input_gets_an_error_and_a_close(w, data, reply):
    rss = vm_rss_kb(w.proc.pid)
    with Conn(w.resp_port) as c:
        c.send(data)
        assert c.read_until_closed(10) == reply
    assert vm_rss_kb(w.proc.pid) - rss < 64 * 1024  # nothing the size announced
    assert_alive(w)


def test_commands_before_a_protocol_error_are_answered(w):
    with Conn(w.resp_port) as c:
        c.send(b"PING\r\n" + Conn.encode("CL.THROTTLE", "before-error", 1, 1, 60) +
               Conn.encode("ECHO", "x") + b"*1\r\n$-3\r\nPING\r\n")
        assert c.read_until_closed(10) == (
            b"+PONG\r\n*5\r\n:0\r\n:2\r\n:1\r\n:-1\r\n:60\r\n$1\r\nx\r\n"
            b"-ERR Protocol error: invalid bulk length\r\n")


def test_quit_ends_a_pipeline(w):
    with Conn(w.resp_port) as c:
        c.send(Conn.encode("CL.THROTTLE", "quit", 1, 1, 60) + Conn.encode("QUIT") +
               Conn.encode("PING"))
        assert c.read_until_closed(10) == b"*5\r\n:0\r\n:2\r\n:1\r\n:-1\r\n:60\r\n+OK\r\n"
    assert_alive(w)


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_binary_garbage(w, seed):
    data = random.Random(seed).randbytes(8192)
    with Conn(w.resp_port, timeout=5) as c:
        try:
            c.send(data)
            c.sock.settimeout(1.0)
            got = b""
            while True:
                chunk = c.sock.recv(1 << 16)
                if not chunk:
                    break
                got += chunk
        except (socket.timeout, ConnectionResetError, BrokenPipeError):
            pass
    # whatever came back is error replies (an error's text holds no CR LF)
    for line in got.split(b"\r\n")[:-1]:
        assert line.startswith(b"-"), (seed, line[:80])
    assert_alive(w)


def test_half_sent_frame_then_close(w):
    c = Conn(w.resp_port)
    c.send(b"*2\r\n$4\r\nECHO\r\n$10\r\nabc")
    c.close()
    assert_alive(w)
    with Conn(w.resp_port) as c:
        # the pieces of one command, in several writes
        for piece in (b"*2\r\n$4\r", b"\nEC", b"HO\r\n$3\r\na", b"bc\r", b"\n"):
            c.send(piece)
            time.sleep(0.01)
        assert c.read() == b"abc"


def test_half_sent_frame_left_open_past_request_timeout(weir_factory):
    w = weir_factory(NO_RULES, *RESP_ON, "--request-timeout", "1s")
    with Conn(w.resp_port) as c:
        c.send(b"*2\r\n$4\r\nECHO\r\n$10\r\nabc")
        t0 = time.monotonic()
        got = c.read_until_closed(10)
        took = time.monotonic() - t0
    assert got == b"-ERR the command did not arrive whole in time\r\n"
    assert took >= 0.5, took
    assert_alive(w)


def test_request_timeout_counts_from_each_command_begun(weir_factory):
    """docs/RESP.md: "a command begun must arrive whole within
    --request-timeout". A client streams PINGs for 3 s, each read ending
    one byte into the next command: every command arrives whole within
    about 50 ms, and the connection must stay. (weir once timed from the
    first partial command until a read ended on a command boundary, and
    closed it after 1 s: "the command did not arrive whole in time".)"""
    w = weir_factory(NO_RULES, *RESP_ON, "--request-timeout", "1s")
    ping = Conn.encode("PING")
    sent, got = 0, []
    with Conn(w.resp_port) as c:
        t0 = time.monotonic()
        try:
            c.send(ping[:1])
            while time.monotonic() - t0 < 3:
                time.sleep(0.05)
                c.send(ping[1:] + ping[:1])  # ends one command, begins the next
                sent += 1
            c.send(ping[1:])
            sent += 1
        except (BrokenPipeError, ConnectionResetError):
            pass  # closed by the server: what came back says why
        took = time.monotonic() - t0
        try:
            while len(got) < sent:
                got.append(c.read())
        except (ConnectionError, OSError):
            pass
    assert got == ["PONG"] * sent, \
        f"{sent} PINGs over {took:.1f} s, {len(got)} replies, the last: {got[-2:]}"


def test_a_command_trickled_past_request_timeout_is_cut_off(weir_factory):
    """The other side of the deadline: one command sent a byte per 100 ms
    (4 s in all) keeps the connection busy but never arrives whole in
    time; every byte must not restart the clock."""
    w = weir_factory(NO_RULES, *RESP_ON, "--request-timeout", "1s")
    cmd = Conn.encode("ECHO", "x" * 20)  # 41 bytes
    with Conn(w.resp_port) as c:
        t0 = time.monotonic()
        try:
            for i in range(len(cmd)):
                c.send(cmd[i:i + 1])
                time.sleep(0.1)
                if time.monotonic() - t0 > 2.5:
                    break  # the deadline is long past: stop feeding it
        except (BrokenPipeError, ConnectionResetError):
            pass
        got = c.read_until_closed(10)
    assert got == b"-ERR the command did not arrive whole in time\r\n"
    assert_alive(w)


def test_idle_connection_closed_after_resp_idle_timeout(weir_factory):
    w = weir_factory(NO_RULES, *RESP_ON, "--resp-idle-timeout", "1s")
    with Conn(w.resp_port) as c:
        assert c.call("PING") == "PONG"
        t0 = time.monotonic()
        assert c.read_until_closed(10) == b""
        took = time.monotonic() - t0
    assert took >= 0.5, took
    assert_alive(w)


def test_idle_connection_stays_open_by_default(w):
    with Conn(w.resp_port) as c:
        assert c.call("PING") == "PONG"
        time.sleep(2)
        assert c.call("PING") == "PONG"


# ---------------------------------------------------------------- the listener's address

def serve_exit(tmp_path, *flags):
    rules = tmp_path / "rules.yaml"
    rules.write_text(NO_RULES)
    r = subprocess.run([weir_bin(), "serve", "--http", "", "--grpc", "", "--rules", str(rules),
                        *flags], capture_output=True, text=True, timeout=30, env=plain_env(),
                       cwd=str(tmp_path))
    return r.returncode, r.stderr


@pytest.mark.parametrize("addr", ["0.0.0.0:0", "[::]:0", ":0", "10.1.2.3:0"])
def test_refuses_non_loopback_without_password(tmp_path, addr):
    rc, err = serve_exit(tmp_path, "--resp", addr)
    assert rc == 2, err
    assert "--resp-password" in err
    assert "listening" not in err


def test_refuses_a_hostname_that_only_looks_like_loopback(tmp_path):
    """`127.invalid` (RFC 2606: never resolves) is a host name, not an
    address in 127.0.0.0/8; a name such as 127.example.com may resolve to
    any address, so it needs a password. (weir once took any host starting
    with "127." for loopback, and went on to resolve the name: exit 1,
    "Name or service not known".)"""
    rc, err = serve_exit(tmp_path, "--resp", "127.invalid:0")
    assert rc == 2, err
    assert "--resp-password" in err


# ---------------------------------------------------------------- parity with a GCRA model

NS = 10 ** 9


class GcraModel:
    """redis-cell's GCRA in integer nanoseconds with time frozen at 0."""

    def __init__(self, max_burst, count, period_s):
        self.limit = max_burst + 1
        self.t = -(-period_s * NS // count)  # ceil
        self.capacity = self.limit * self.t
        self.tat = None  # no state

    def take(self, n):
        now = 0
        tat = self.tat if self.tat is not None else now
        backlog = max(tat, now) - now
        admitted = n <= self.limit and backlog + n * self.t <= self.capacity
        if admitted and n > 0:
            self.tat = max(tat, now) + n * self.t
            backlog = self.tat - now
        limited = 0 if (admitted or n == 0) else 1
        if limited and n <= self.limit:
            retry = backlog + n * self.t - self.capacity
            retry = -(-retry // NS)
        else:
            retry = -1
        remaining = (self.capacity - backlog) // self.t
        reset = -(-backlog // NS)
        return [limited, self.limit, remaining, retry, reset]

    def reset(self):
        held = self.tat is not None
        self.tat = None
        return int(held)


def test_cl_throttle_matches_a_gcra_model_over_a_random_trace(w):
    """weir's test clock (WEIR_TEST_CLOCK_START) moves the clock's start but
    does not stop it, so time cannot be frozen. The rates are slow instead
    (emission intervals of 30 to 60 minutes, whole seconds) and the whole
    trace is sent in one write: the under-a-second that passes cannot move
    a decision, a remaining count or a time rounded up to whole seconds."""
    params = {"par0": (2, 1, 3600), "par1": (4, 2, 7200), "par2": (0, 3, 5400)}
    models = {k: GcraModel(*p) for k, p in params.items()}
    rng = random.Random(20240601)
    ops, expected = [], []
    for _ in range(500):
        key = rng.choice(sorted(params))
        if rng.random() < 0.08:
            ops.append(("DEL", key))
            expected.append(models[key].reset())
        else:
            q = rng.randint(0, 5)
            ops.append(("CL.THROTTLE", key, *params[key], q))
            expected.append(models[key].take(q))
    with Conn(w.resp_port, timeout=30) as c:
        t0 = time.monotonic()
        c.send(b"".join(Conn.encode(*op) for op in ops))
        got = [c.read() for _ in ops]
        took = time.monotonic() - t0
    assert took < 1.0, f"the trace took {took:.2f} s: the model's frozen time does not hold"
    for i, (op, want, have) in enumerate(zip(ops, expected, got)):
        assert have == want, f"step {i}: {op} -> {have}, the model says {want}"


# ---------------------------------------------------------------- hiredis (C)

def hiredis_bin():
    """resp_hiredis, built next to the weir binary (tests/CMakeLists.txt)."""
    path = os.path.join(os.path.dirname(weir_bin()), "resp_hiredis")
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} is not an executable: build the resp_hiredis target", pytrace=False)
    return path


def test_hiredis_client(w):
    r = subprocess.run([hiredis_bin(), str(w.resp_port)], capture_output=True, text=True,
                       timeout=30, env=plain_env())
    assert r.returncode == 0, r
    assert r.stderr == "", r.stderr
    assert r.stdout.splitlines() == [
        "cmd 1: [0 4 3 -1 60]",
        "cmd 2: [0 4 2 -1 120]",
        "cmd 3: [0 4 1 -1 180]",
        "cmd 4: [0 4 0 -1 240]",
        "cmd 5: [1 4 0 60 240]",
        "pipe 1: PONG",
        "pipe 2: [0 4 0 -1 240]",  # quantity 0: a look
        "pipe 3: [0 4 3 -1 60]",
        "pipe 4: a b",
        "pipe 5: 1",  # DEL c nothing
        "pipe 6: [0 4 3 -1 60]",  # c from rest again
        "pipe 7: (error) ERR unknown command 'NOSUCH', with args beginning with: 'x' ",
    ]
