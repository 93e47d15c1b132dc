"""
test_xds.py - rules delivered over xDS (--config-type grpc-xds-sotw), as
Envoy Gateway configures envoyproxy/ratelimit: the real daemon subscribes
to a small aggregated discovery service written here with Debian's grpcio
(state of the world, snapshot-style like go-control-plane: a stream gets
the snapshot when the version it says it has is another). Covered: the
subscription (node id and metadata, type URL), rules that arrive and are
enforced, ACKs with the version and nonce, an update, NACKs with the
loader's error text while the last good rules stay in force, the server
going away and coming back (rules kept meanwhile, the new stream saying
the version in force), upstream's environment variables, and what is
refused at start.

The message classes come from the project's own proto/ files
(protoclasses.py).
"""

import os
import queue
import re
import subprocess
import threading
import time
from concurrent import futures

import grpc
import pytest
from conftest import clock_at, weir_bin
from protoclasses import message_classes

ADS = "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources"
RLS_TYPE = "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig"
RESOURCE_TYPE = "type.googleapis.com/envoy.service.discovery.v3.Resource"
UNKNOWN_UNIT, SECOND, MINUTE, HOUR = 0, 1, 2, 3
INVALID_ARGUMENT = 3


class Pb:
    def __init__(self, directory):
        self.Request, self.Response, self.Resource, self.Config = message_classes(
            directory, ["envoy/service/discovery/v3/discovery.proto",
                        "ratelimit/config/ratelimit/v3/rls_conf.proto"],
            ["envoy.service.discovery.v3.DiscoveryRequest",
             "envoy.service.discovery.v3.DiscoveryResponse",
             "envoy.service.discovery.v3.Resource",
             "ratelimit.config.ratelimit.v3.RateLimitConfig"])


@pytest.fixture(scope="module")
def pb(tmp_path_factory):
    return Pb(tmp_path_factory.mktemp("proto"))


def config(pb, domain, limits, name=None):
    """A RateLimitConfig: @limits maps a descriptor key to (requests, unit)."""
    c = pb.Config(name=name or domain, domain=domain)
    for key, (n, unit) in limits.items():
        d = c.descriptors.add(key=key)
        d.rate_limit.unit = unit
        d.rate_limit.requests_per_unit = n
    return c


class AdsServer:
    """An aggregated discovery service holding one snapshot (a version and
    its resources, as packed Anys); every request received is recorded."""

    def __init__(self, pb, port=0):
        self.pb = pb
        self.cond = threading.Condition()
        self.requests = []      # (stream number, DiscoveryRequest)
        self.sent = []          # DiscoveryResponse, in order
        self.streams = []       # per stream: its outgoing queue
        self.version = None
        self.resources = []
        self.nonce = 0
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        handler = grpc.stream_stream_rpc_method_handler(
            self._stream, request_deserializer=pb.Request.FromString,
            response_serializer=pb.Response.SerializeToString)
        self.server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(
                "envoy.service.discovery.v3.AggregatedDiscoveryService",
                {"StreamAggregatedResources": handler}),))
        self.port = self.server.add_insecure_port(f"127.0.0.1:{port}")
        assert self.port > 0
        self.server.start()

    def end_streams(self, code, message):
        """Ends every open stream with @code and @message (trailers; the
        connection stays)."""
        with self.cond:
            for q in self.streams:
                q.put((code, message))

    def stop(self):
        with self.cond:
            for q in self.streams:
                q.put(None)
        self.server.stop(0)

    # ------------------------------------------------------------ snapshot

    def _response(self):
        with self.cond:
            self.nonce += 1
            r = self.pb.Response(version_info=self.version, type_url=RLS_TYPE,
                                 nonce=f"n{self.nonce}")
            for type_url, value in self.resources:
                r.resources.add(type_url=type_url, value=value)
            self.sent.append(r)
            return r

    def set(self, version, configs, wrap=False, raw=None):
        """Publishes a snapshot to every open stream: @configs as
        RateLimitConfig resources (wrapped in Resource with @wrap), or the
        (type_url, bytes) pairs of @raw as they are. Returns its nonce on
        the newest stream."""
        resources = list(raw or [])
        for c in configs:
            value = c.SerializeToString()
            if wrap:
                res = self.pb.Resource(name=c.name, version=version)
                res.resource.type_url = RLS_TYPE
                res.resource.value = value
                resources.append((RESOURCE_TYPE, res.SerializeToString()))
            else:
                resources.append((RLS_TYPE, value))
        with self.cond:
            self.version = version
            self.resources = resources
            streams = list(self.streams)
        nonce = None
        for q in streams:
            r = self._response()
            nonce = r.nonce
            q.put(r)
        return nonce

    def _stream(self, request_iterator, context):
        out = queue.Queue()
        with self.cond:
            self.streams.append(out)
            number = len(self.streams)

        def read():
            try:
                for req in request_iterator:
                    with self.cond:
                        first = not any(n == number for n, _ in self.requests)
                        self.requests.append((number, req))
                        self.cond.notify_all()
                        # a new stream that has another version gets the snapshot
                        send = first and self.version is not None and \
                            req.version_info != self.version
                    if send:
                        out.put(self._response())
            except grpc.RpcError:
                pass
            out.put(None)

        threading.Thread(target=read, daemon=True).start()
        while True:
            item = out.get()
            if item is None or not context.is_active():
                return
            if isinstance(item, tuple):
                context.abort(*item)
            yield item

    # ------------------------------------------------------------ waiting

    def wait_request(self, predicate, timeout=10.0, what="request"):
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for n, req in self.requests:
                    if predicate(n, req):
                        return n, req
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no {what} within {timeout} s; received:\n"
                                         + "\n".join(f"{n}: {r}" for n, r in self.requests))
                self.cond.wait(left)

    def wait_answer(self, nonce, timeout=10.0):
        """The request answering the response of @nonce (ACK or NACK)."""
        return self.wait_request(lambda n, r: r.response_nonce == nonce, timeout,
                                 f"answer to nonce {nonce}")[1]


XDS_FLAGS = ("--watch", "false", "--xds-backoff-initial", "100ms", "--xds-backoff-max", "400ms",
             "--xds-connect-retry", "100ms")


def start_weir(weir_factory, server, *flags, env=None):
    clock_env, _ = clock_at(60)  # no hour boundary during a test
    clock_env.update(env or {})
    return weir_factory("", "--config-type", "grpc-xds-sotw", "--xds-server",
                        f"127.0.0.1:{server.port}", *XDS_FLAGS, *flags, env=clock_env)


def statuses(w, user, n, domain="xds"):
    return [w.check(domain, {"user": user}).status for _ in range(n)]


@pytest.fixture
def ads(pb):
    servers = []

    def make(port=0):
        s = AdsServer(pb, port)
        servers.append(s)
        return s

    yield make
    for s in servers:
        s.stop()


def test_rules_arrive_are_enforced_and_acked(weir_factory, pb, ads):
    server = ads()
    w = start_weir(weir_factory, server, "--xds-node-id", "rl-node", "--xds-node-metadata",
                   "zone=a,team=edge,bare", "--health-needs-rules")
    _, first = server.wait_request(lambda n, r: True, what="subscription")
    assert first.type_url == RLS_TYPE
    assert first.version_info == "" and first.response_nonce == ""
    assert list(first.resource_names) == []
    assert first.node.id == "rl-node"
    assert first.node.user_agent_name == "weir"
    meta = {k: v.string_value for k, v in first.node.metadata.fields.items()}
    assert meta == {"zone": "a", "team": "edge"}
    assert not first.HasField("error_detail")

    # before any rules: no domain (weir's API says so with 404), not healthy
    assert statuses(w, "alice", 5) == [404] * 5
    assert w.get("/healthz").status == 503

    nonce = server.set("v1", [config(pb, "xds", {"user": (3, HOUR)})])
    ack = server.wait_answer(nonce)
    assert ack.version_info == "v1"
    assert not ack.HasField("error_detail")
    assert ack.type_url == RLS_TYPE and ack.node.id == "rl-node"
    w.wait_for_log(r"event=xds_accepted version=v1")
    assert statuses(w, "alice", 4) == [200, 200, 200, 429]
    assert w.get("/healthz").status == 200
    assert "xds" in w.rules_text()
    assert re.search(r"(?m)^xds\.user.*3", w.get("/rlconfig").text()) or \
        "requests_per_unit=3" in w.get("/rlconfig").text(), w.get("/rlconfig").text()
    assert w.metric("weir_rules_reloads_total", result="ok") == 2  # start, then v1


def test_update_changes_the_limit(weir_factory, pb, ads):
    server = ads()
    w = start_weir(weir_factory, server)
    server.wait_request(lambda n, r: True, what="subscription")
    ack = server.wait_answer(server.set("v1", [config(pb, "xds", {"user": (1, HOUR)})]))
    assert ack.version_info == "v1"
    assert statuses(w, "bob", 2) == [200, 429]

    # v2, its resource wrapped in a Resource (as servers with TTLs send it),
    # and a second domain
    nonce = server.set("v2", [config(pb, "xds", {"user": (4, HOUR)}),
                              config(pb, "other", {"user": (1, MINUTE)})], wrap=True)
    ack = server.wait_answer(nonce)
    assert ack.version_info == "v2" and not ack.HasField("error_detail")
    assert statuses(w, "carol", 5) == [200, 200, 200, 200, 429]
    assert statuses(w, "dave", 2, domain="other") == [200, 429]
    rules = w.rules_text()
    assert "other" in rules and "xds" in rules

    # an empty snapshot: no rules, no domain (and ACKed)
    ack = server.wait_answer(server.set("v3", []))
    assert ack.version_info == "v3" and not ack.HasField("error_detail")
    assert statuses(w, "carol", 3) == [404] * 3


def test_bad_config_is_nacked_and_the_last_good_rules_stay(weir_factory, pb, ads):
    server = ads()
    w = start_weir(weir_factory, server)
    server.wait_request(lambda n, r: True, what="subscription")
    server.wait_answer(server.set("v1", [config(pb, "xds", {"user": (2, HOUR)})]))
    assert statuses(w, "erin", 3) == [200, 200, 429]
    ok_before = w.metric("weir_rules_reloads_total", result="ok")

    # a limit without a unit: upstream's words, with the resource's name
    bad = config(pb, "xds", {"user": (9, UNKNOWN_UNIT)}, name="team-a")
    nack = server.wait_answer(server.set("v2", [bad]))
    assert nack.version_info == "v1"   # the version still in force
    assert nack.HasField("error_detail")
    assert nack.error_detail.code == INVALID_ARGUMENT
    assert re.search(r"xds:team-a:\d+:\d+: invalid rate limit unit 'UNKNOWN'",
                     nack.error_detail.message), nack.error_detail.message
    w.wait_for_log(r"event=xds_rejected version=v2")

    # two resources naming one domain, and an empty key
    dup = [config(pb, "xds", {"a": (1, SECOND)}, name="one"),
           config(pb, "xds", {"b": (1, SECOND)}, name="two")]
    nack = server.wait_answer(server.set("v3", dup))
    assert nack.version_info == "v1"
    assert "xds:two" in nack.error_detail.message
    assert "duplicate domain 'xds'" in nack.error_detail.message
    empty_key = pb.Config(name="k", domain="xds")
    empty_key.descriptors.add(key="").rate_limit.unit = SECOND
    nack = server.wait_answer(server.set("v4", [empty_key]))
    assert "descriptor has empty key" in nack.error_detail.message

    # a resource of another type, and bytes that are no RateLimitConfig
    nack = server.wait_answer(server.set("v5", [], raw=[
        ("type.googleapis.com/envoy.config.cluster.v3.Cluster", b"")]))
    assert "not a ratelimit.config.ratelimit.v3.RateLimitConfig" in nack.error_detail.message
    nack = server.wait_answer(server.set("v6", [], raw=[(RLS_TYPE, b"\x0a\xff")]))
    assert "malformed RateLimitConfig" in nack.error_detail.message
    assert nack.version_info == "v1"

    # v1 is still in force: erin is still denied, a new user gets 2
    assert statuses(w, "erin", 1) == [429]
    assert statuses(w, "frank", 3) == [200, 200, 429]
    assert w.metric("weir_rules_reloads_total", result="ok") == ok_before
    assert w.metric("weir_rules_reloads_total", result="failed") >= 5

    # and a good version after bad ones is taken
    ack = server.wait_answer(server.set("v7", [config(pb, "xds", {"user": (5, HOUR)})]))
    assert ack.version_info == "v7" and not ack.HasField("error_detail")
    assert statuses(w, "gina", 6) == [200] * 5 + [429]


def test_server_goes_away_and_comes_back(weir_factory, pb, ads):
    server = ads()
    w = start_weir(weir_factory, server, "--xds-node-id", "n1")
    server.wait_request(lambda n, r: True, what="subscription")
    server.wait_answer(server.set("v1", [config(pb, "xds", {"user": (2, HOUR)})]))
    assert statuses(w, "hal", 3) == [200, 200, 429]

    port = server.port
    mark = w.mark()
    server.stop()
    w.wait_for_log(r"event=xds_(stream_ended|disconnected)", since=mark)
    w.wait_for_log(r"event=xds_connect_failed", since=mark)  # nothing listens now
    # the rules stay in force while the server is away
    assert statuses(w, "hal", 1) == [429]
    assert statuses(w, "ivy", 3) == [200, 200, 429]
    assert w.metric("weir_rules_reloads_total", result="failed") == 0

    # back, with a newer snapshot: the new stream says v1 is in force and gets v2
    back = ads(port)
    back.set("v2", [config(pb, "xds", {"user": (3, HOUR)})])
    _, first = back.wait_request(lambda n, r: True, what="subscription after the restart")
    assert first.version_info == "v1" and first.response_nonce == ""
    assert first.node.id == "n1"
    ack = back.wait_request(lambda n, r: r.version_info == "v2", what="ACK of v2")[1]
    assert ack.response_nonce == back.sent[-1].nonce
    assert statuses(w, "jo", 4) == [200, 200, 200, 429]


def test_stream_ended_by_the_server(weir_factory, pb, ads):
    server = ads()
    w = start_weir(weir_factory, server)
    server.wait_request(lambda n, r: True, what="subscription")
    server.wait_answer(server.set("v1", [config(pb, "xds", {"user": (1, HOUR)})]))
    mark = w.mark()
    server.end_streams(grpc.StatusCode.UNAVAILABLE, "maintenance")
    w.wait_for_log(r"event=xds_stream_ended .*grpc_status=14 message=maintenance", since=mark)
    # a new stream on a new connection, saying v1 is in force
    _, again = server.wait_request(lambda n, r: n == 2, what="a second stream")
    assert again.version_info == "v1" and again.response_nonce == ""
    assert statuses(w, "lee", 2) == [200, 429]


def test_upstream_environment(weir_factory, pb, ads):
    server = ads()
    env = {"CONFIG_TYPE": "GRPC_XDS_SOTW",
           "CONFIG_GRPC_XDS_SERVER_URL": f"127.0.0.1:{server.port}",
           "CONFIG_GRPC_XDS_NODE_ID": "envoy-ratelimit",
           "CONFIG_GRPC_XDS_NODE_METADATA": "gateway=eg",
           "XDS_CLIENT_BACKOFF_INITIAL_INTERVAL": "100ms",
           "XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES": "65536"}
    clock_env, _ = clock_at(60)
    env.update(clock_env)
    w = weir_factory("", "--watch", "false", env=env)
    _, first = server.wait_request(lambda n, r: True, what="subscription")
    assert first.node.id == "envoy-ratelimit"
    assert first.node.metadata.fields["gateway"].string_value == "eg"
    ack = server.wait_answer(server.set("1", [config(pb, "xds", {"user": (1, HOUR)})]))
    assert ack.version_info == "1"
    assert statuses(w, "kim", 2) == [200, 429]

    # a response past XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES ends the stream; the
    # rules stay, and the stream is opened again
    mark = w.mark()
    big = config(pb, "xds", {f"key{i:05d}-{'x' * 24}": (1, HOUR) for i in range(4000)})
    server.set("2", [big])
    w.wait_for_log(r"event=xds_stream_ended .*grpc_status=8", since=mark)
    w.wait_for_log(r"event=xds_connected .*version=1", since=mark)
    assert statuses(w, "kim", 1) == [429]


@pytest.mark.parametrize("env,flags,message", [
    ({"CONFIG_TYPE": "GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_SERVER_USE_TLS": "true"}, [],
     "CONFIG_GRPC_XDS_SERVER_USE_TLS=true: weir's xDS client speaks plain-text"),
    ({}, ["--config-type", "grpc-xds-sotw", "--xds-server", "no-port"], "HOST:PORT"),
    ({}, ["--config-type", "xml"], "--config-type 'xml'"),
    ({"CONFIG_TYPE": "GRPC_XDS_SOTW", "XDS_CLIENT_BACKOFF_RANDOM_FACTOR": "2"}, [],
     "--xds-backoff-random-factor '2'"),
])
def test_refused_at_start(tmp_path, env, flags, message):
    full = {k: v for k, v in os.environ.items() if not k.startswith("WEIR_")}
    full.update(env)
    p = subprocess.run([weir_bin(), "serve", "--http", "127.0.0.1:0", "--grpc", "", "--resp", "", "--admin", "",
                        *flags], env=full, cwd=str(tmp_path), capture_output=True, timeout=20)
    assert p.returncode == 2, p
    assert message in p.stderr.decode(), p.stderr.decode()
