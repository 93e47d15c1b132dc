"""
rawhttp.py - a small HTTP/1.1 client over plain sockets, for tests that
need to see exactly what goes over the wire: several answers on one
connection (pipelining, keep-alive), byte-by-byte requests, malformed
input, and whether (and when) the server closes the connection.

Only the standard library; every read has a timeout so a hung server
fails a test instead of hanging it.
"""

import json
import socket
import time

DEFAULT_TIMEOUT = 5.0


class Response:
    """One parsed HTTP response."""

    def __init__(self, version, status, reason, headers, body, raw):
        self.version = version
        self.status = status
        self.reason = reason
        self.headers = headers  # [(name, value)] in order, names as sent
        self.body = body
        self.raw = raw

    def all(self, name):
        """Every value of header @name (case-insensitive), in order."""
        n = name.lower()
        return [v for k, v in self.headers if k.lower() == n]

    def header(self, name):
        """The value of header @name, None when absent; fails when repeated."""
        values = self.all(name)
        assert len(values) <= 1, f"header {name} sent {len(values)} times: {values}"
        return values[0] if values else None

    def has(self, name):
        return bool(self.all(name))

    def text(self):
        return self.body.decode("utf-8")

    def json(self):
        return json.loads(self.body)

    def header_names(self):
        return [k.lower() for k, _ in self.headers]

    def __repr__(self):
        return f"<Response {self.status} {self.headers!r} {self.body[:300]!r}>"


class ConnectionClosed(Exception):
    """The server closed the connection before a whole response arrived."""


def build_request(method, target, body=None, headers=None, version="HTTP/1.1", host=True):
    """The bytes of one request. @body (bytes, str or a JSON-able object)
    gets a Content-Length unless @headers name a Content-Length or a
    Transfer-Encoding themselves."""
    headers = list(headers.items() if isinstance(headers, dict) else (headers or []))
    names = {k.lower() for k, _ in headers}
    if body is not None and not isinstance(body, (bytes, str)):
        body = json.dumps(body)
    if isinstance(body, str):
        body = body.encode("utf-8")
    lines = [f"{method} {target} {version}"]
    if host and "host" not in names:
        lines.append("Host: weir.test")
    for k, v in headers:
        lines.append(f"{k}: {v}")
    if body is not None and "content-length" not in names and "transfer-encoding" not in names:
        lines.append(f"Content-Length: {len(body)}")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head + (body or b"")


class Conn:
    """One client connection; responses are read in order from one buffer,
    so pipelined answers come out one by one."""

    def __init__(self, port, host="127.0.0.1", timeout=DEFAULT_TIMEOUT, nodelay=True):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        if nodelay:
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.eof = False
        self.timeout = timeout

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def send(self, data):
        if isinstance(data, str):
            data = data.encode("latin-1")
        self.sock.sendall(data)

    def send_bytewise(self, data, delay=0.0):
        """Sends @data one byte per send() (TCP_NODELAY is on)."""
        for i in range(len(data)):
            self.sock.sendall(data[i:i + 1])
            if delay:
                time.sleep(delay)

    def _fill(self, deadline):
        """Reads more into the buffer; False at end of stream."""
        if self.eof:
            return False
        left = deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout("timed out waiting for the server")
        self.sock.settimeout(left)
        try:
            data = self.sock.recv(65536)
        except ConnectionResetError:
            data = b""
        if not data:
            self.eof = True
            return False
        self.buf += data
        return True

    def read_response(self, head=False, timeout=None):
        """The next whole response (@head: the request was HEAD, so no body
        follows whatever Content-Length says)."""
        deadline = time.monotonic() + (timeout if timeout is not None else self.timeout)
        while b"\r\n\r\n" not in self.buf:
            if not self._fill(deadline):
                raise ConnectionClosed(f"closed after {self.buf!r}")
        end = self.buf.index(b"\r\n\r\n")
        head_bytes = self.buf[:end].decode("latin-1")
        lines = head_bytes.split("\r\n")
        version, status, reason = (lines[0].split(" ", 2) + [""])[:3]
        headers = []
        for line in lines[1:]:
            name, _, value = line.partition(":")
            assert name and name == name.strip(), f"bad header line {line!r}"
            headers.append((name, value.strip()))
        status = int(status)
        length = 0
        cls = [v for k, v in headers if k.lower() == "content-length"]
        assert not any(k.lower() == "transfer-encoding" for k, _ in headers), \
            "the server never sends chunked answers"
        if cls:
            assert len(cls) == 1, f"several Content-Length: {cls}"
            length = int(cls[0])
        if head or status in (204, 304) or 100 <= status < 200:
            length = 0
        total = end + 4 + length
        while len(self.buf) < total:
            if not self._fill(deadline):
                raise ConnectionClosed(f"closed in the body after {self.buf!r}")
        raw = self.buf[:total]
        body = self.buf[end + 4:total]
        self.buf = self.buf[total:]
        return Response(version, status, reason, headers, body, raw)

    def request(self, method, target, body=None, headers=None, version="HTTP/1.1",
                timeout=None):
        self.send(build_request(method, target, body, headers, version))
        return self.read_response(head=(method == "HEAD"), timeout=timeout)

    def wait_closed(self, timeout=DEFAULT_TIMEOUT):
        """Waits until the server closes; returns the seconds it took.
        Fails if any byte arrives meanwhile (beyond what is buffered) or
        if the connection stays open past @timeout."""
        t0 = time.monotonic()
        deadline = t0 + timeout
        before = len(self.buf)
        try:
            while self._fill(deadline):
                pass
        except socket.timeout:
            raise AssertionError(f"the server kept the connection open for {timeout} s")
        assert len(self.buf) == before, f"unexpected bytes before close: {self.buf[before:]!r}"
        return time.monotonic() - t0

    def is_open(self, wait=0.2):
        """True when nothing (no close, no bytes) arrives within @wait s."""
        deadline = time.monotonic() + wait
        before = len(self.buf)
        try:
            while True:
                if not self._fill(deadline):
                    return False
                if len(self.buf) != before:
                    return False
        except socket.timeout:
            return True


def request(port, method, target, body=None, headers=None, version="HTTP/1.1",
            timeout=DEFAULT_TIMEOUT):
    """One request on a fresh connection, closed afterwards."""
    with Conn(port, timeout=timeout) as c:
        return c.request(method, target, body, headers, version, timeout)
