"""A gRPC client that never lets weir send its answers: it sets its flow
control window to 0, opens calls, and keeps the connection busy with PINGs.
weir answers every call, and closes the connection once no call has been
taken for --idle-timeout, whatever else the client sends, so the answers it
holds are bounded in time. The client speaks HTTP/2 by hand (the frames
are few and simple), since no client library lets a test shut its window."""
import json
import socket
import struct
import time

import pytest

RULES = """\
domain: test
descriptors:
  - key: k
    rate_limit: {unit: hour, requests_per_unit: 1000}
"""

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, SETTINGS, PING, GOAWAY = 0x0, 0x1, 0x4, 0x6, 0x7
END_STREAM, END_HEADERS, ACK = 0x1, 0x4, 0x1
SETTINGS_INITIAL_WINDOW_SIZE = 0x4
PATH = b"/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"


def frame(ftype, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + \
        struct.pack(">I", stream) + payload


def literal(name, value):
    """HPACK: a literal field without indexing, new name (lengths < 127)."""
    return bytes([0x00, len(name)]) + name + bytes([len(value)]) + value


def call_frames(stream, timeout=None):
    fields = [(b":method", b"POST"), (b":scheme", b"http"), (b":path", PATH),
              (b":authority", b"weir"), (b"content-type", b"application/grpc"), (b"te", b"trailers")]
    if timeout:
        fields.append((b"grpc-timeout", timeout))
    block = b"".join(literal(n, v) for n, v in fields)
    entry = b"\x0a\x01k\x12\x01v"
    descriptor = b"\x0a" + bytes([len(entry)]) + entry
    request = b"\x0a\x04test\x12" + bytes([len(descriptor)]) + descriptor
    message = b"\x00" + struct.pack(">I", len(request)) + request
    return frame(HEADERS, END_HEADERS, stream, block) + frame(DATA, END_STREAM, stream, message)


def read_frames(sock, buf, streams=False):
    """Frames whole in @buf after reading what is there; None at the end.
    Each (type, flags, payload), and its stream id last with @streams."""
    try:
        data = sock.recv(65536)
    except socket.timeout:
        data = b"-"
    if not data:
        return None
    if data != b"-":
        buf.extend(data)
    out = []
    while len(buf) >= 9:
        n = int.from_bytes(buf[0:3], "big")
        if len(buf) < 9 + n:
            break
        f = (buf[3], buf[4], bytes(buf[9:9 + n]))
        out.append(f + (int.from_bytes(buf[5:9], "big") & 0x7fffffff,) if streams else f)
        del buf[:9 + n]
    return out


@pytest.mark.parametrize("calls", [1, 40])
def test_zero_window_client_is_closed_after_idle_timeout(weir_factory, calls):
    weir = weir_factory(RULES, "--grpc", "127.0.0.1:0", "--idle-timeout", "2s")
    s = socket.create_connection(("127.0.0.1", weir.grpc_port), timeout=0.2)
    s.sendall(PREFACE + frame(SETTINGS, 0, 0, struct.pack(">HI", SETTINGS_INITIAL_WINDOW_SIZE,
                                                             0)))
    buf = bytearray()
    acked = False
    t0 = time.monotonic()
    while not acked and time.monotonic() - t0 < 5:
        frames = read_frames(s, buf)
        assert frames is not None, "closed before its settings"
        for ftype, flags, _ in frames:
            if ftype == SETTINGS and not flags & ACK:
                s.sendall(frame(SETTINGS, ACK, 0))
                acked = True
    assert acked
    s.sendall(b"".join(call_frames(2 * i + 1) for i in range(calls)))
    # answered (their headers come: DATA waits for the window), then PINGs
    t0 = time.monotonic()
    heads = 0
    closed_after = None
    while time.monotonic() - t0 < 8:
        try:
            s.sendall(frame(PING, 0, 0, b"12345678"))
        except OSError:
            closed_after = time.monotonic() - t0
            break
        frames = read_frames(s, buf)
        if frames is None:
            closed_after = time.monotonic() - t0
            break
        heads += sum(1 for ftype, _, _ in frames if ftype == HEADERS)
        time.sleep(0.1)
    s.close()
    assert heads >= calls, f"{heads} answers began for {calls} calls"
    assert closed_after is not None, "the connection is still held after 8 s of PINGs"
    assert 1.5 < closed_after < 5, closed_after
    weir.wait_for_log(r"event=connection_stalled")


def connect(weir):
    """A connection past the settings exchange, and its read buffer."""
    s = socket.create_connection(("127.0.0.1", weir.grpc_port), timeout=0.2)
    s.sendall(PREFACE + frame(SETTINGS, 0, 0))
    buf = bytearray()
    t0 = time.monotonic()
    while time.monotonic() - t0 < 5:
        for ftype, flags, _ in read_frames(s, buf) or []:
            if ftype == SETTINGS and not flags & ACK:
                s.sendall(frame(SETTINGS, ACK, 0))
                return s, buf
    raise AssertionError("no settings from weir")


def answers(s, buf, calls):
    """Read until @calls streams ended (each answer ends with its trailers)."""
    ended = 0
    t0 = time.monotonic()
    while ended < calls and time.monotonic() - t0 < 10:
        frames = read_frames(s, buf)
        assert frames is not None, "closed"
        ended += sum(1 for ftype, flags, _ in frames if ftype == HEADERS and flags & END_STREAM)
    return ended


@pytest.mark.parametrize("timeout, charged", [(b"1n", 0), (b"10S", 50)])
def test_calls_past_their_deadline_are_not_charged(weir_factory, timeout, charged):
    """Calls whose grpc-timeout has passed by the time weir decides them
    are answered DEADLINE_EXCEEDED and charge nothing: 50 calls of 1 ns
    in one write (decided after their deadline, whatever the speed) leave
    the counter whole; 50 calls of 10 s are charged."""
    weir = weir_factory(RULES, "--grpc", "127.0.0.1:0")
    s, buf = connect(weir)
    s.sendall(b"".join(call_frames(2 * i + 1, timeout) for i in range(50)))
    assert answers(s, buf, 50) == 50
    s.close()
    r = weir.check("test", {"k": "v"})
    assert r.status == 200
    assert json.loads(r.text())["statuses"][0]["remaining"] == 1000 - charged - 1


RST_STREAM = 0x3
REFUSED_STREAM = 0x7


def test_answers_held_unsent_are_bounded(weir_factory):
    """A client that keeps its flow-control window shut and opens call
    after call: once the answers it holds pass --max-unsent-bytes, new
    calls are refused (RST_STREAM REFUSED_STREAM, safe to retry), so the
    connection holds a bounded amount; when the client opens its window,
    the answers go and new calls are taken again."""
    weir = weir_factory(RULES, "--grpc", "127.0.0.1:0", "--max-unsent-bytes", "64KiB")
    s = socket.create_connection(("127.0.0.1", weir.grpc_port), timeout=0.2)
    s.sendall(PREFACE + frame(SETTINGS, 0, 0, struct.pack(">HI", SETTINGS_INITIAL_WINDOW_SIZE,
                                                             0)))
    buf = bytearray()
    t0 = time.monotonic()
    acked = False
    while not acked and time.monotonic() - t0 < 5:
        for ftype, flags, _ in read_frames(s, buf) or []:
            if ftype == SETTINGS and not flags & ACK:
                s.sendall(frame(SETTINGS, ACK, 0))
                acked = True
    assert acked
    # in writes of 30 calls, each answered or refused before the next (a
    # store that decides later answers a write's calls after it is read)
    heads = refused = 0
    for k in range(10):
        s.sendall(b"".join(call_frames(2 * (30 * k + i) + 1) for i in range(30)))
        t0 = time.monotonic()
        while heads + refused < 30 * (k + 1) and time.monotonic() - t0 < 5:
            frames = read_frames(s, buf)
            assert frames is not None, "closed"
            for ftype, _, payload in frames:
                heads += ftype == HEADERS
                refused += ftype == RST_STREAM and \
                    struct.unpack(">I", payload)[0] == REFUSED_STREAM
    # 1 KiB a stream and its answer: about 60 answered under 64 KiB, and
    # at most one write's calls past it (decided after the write was read)
    assert refused > 0 and heads + refused == 300, (heads, refused)
    assert 30 <= heads <= 100, heads
    # the window opens: the answers go, and a new call is answered
    s.sendall(frame(SETTINGS, 0, 0, struct.pack(">HI", SETTINGS_INITIAL_WINDOW_SIZE, 65535)))
    s.sendall(call_frames(1001))
    answered_new = False
    t0 = time.monotonic()
    while not answered_new and time.monotonic() - t0 < 5:
        frames = read_frames(s, buf, streams=True)
        assert frames is not None, "closed"
        for ftype, _, _, stream in frames:
            assert not (ftype == RST_STREAM and stream == 1001), "the new call was refused"
            answered_new |= ftype == DATA and stream == 1001
    s.close()
    assert answered_new
