"""The egress guard behind the HTTP tool: internal addresses are refused unless the operator allowlists them,
the connection goes to the address that was checked, redirects are checked hop by hop, TLS keeps the
original name, and every failure reads the same."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
import trustme

from trainers.net import ALLOW_ENV, EGRESS_ERROR, EgressPolicy, egress_policy, guard, is_public
from trainers.net.guard import EgressError, GuardedTransport
from trainers.tools.http import HttpTool


class Recorder(BaseHTTPRequestHandler):
    """Records (path, Host header) of each request in its server's `seen`; `redirect_to` answers 307."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.server.seen.append((self.path, self.headers["Host"]))
        target = getattr(self.server, "redirect_to", None)
        self.send_response(307 if target else 200)
        if target:
            self.send_header("Location", target)
        body = b'{"ok": true}'
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST

    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def serve(host: str = "127.0.0.1", port: int = 0, tls: ssl.SSLContext | None = None) -> Iterator:
    server = ThreadingHTTPServer((host, port), Recorder)
    server.daemon_threads, server.seen = True, []
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(autouse=True)
def no_allowlist(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ALLOW_ENV, raising=False)


def fake_dns(monkeypatch: pytest.MonkeyPatch, *answers: list[str]) -> list[str]:
    """The guard's resolver answers `answers` in turn (the last one repeats); returns the names asked."""
    asked: list[str] = []

    def resolve(host: str, port: int) -> list:
        asked.append(host)
        return [ipaddress.ip_address(a) for a in answers[min(len(asked), len(answers)) - 1]]

    monkeypatch.setattr(guard, "resolve", resolve)
    return asked


def call(url: str, timeout_s: float = 5.0) -> object:
    async def run() -> object:
        tool = HttpTool(url=url, timeout_s=timeout_s)
        try:
            return await tool.invoke({"q": 1})
        finally:
            await tool.close()

    return asyncio.run(run())


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# Addresses ----------------------------------------------------------------------------------------


INTERNAL = [
    "127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254", "100.64.0.1", "0.0.0.0",
    "224.0.0.1", "240.0.0.1", "255.255.255.255", "::1", "::", "fe80::1", "fd00:ec2::254", "fc00::1",
    "ff02::1", "::ffff:127.0.0.1", "::ffff:169.254.169.254", "64:ff9b::a00:1", "2002:c0a8:101::1", "::7f00:1",
]  # fmt: skip


@pytest.mark.parametrize("address", INTERNAL)
def test_internal_addresses_are_not_public(address: str) -> None:
    assert not is_public(ipaddress.ip_address(address))


@pytest.mark.parametrize("address", ["93.184.215.14", "8.8.8.8", "2606:4700:4700::1111", "2002:808:808::1"])
def test_public_addresses_are_public(address: str) -> None:
    assert is_public(ipaddress.ip_address(address))


def test_allowlist_entries_parse_names_addresses_and_ports() -> None:
    policy = EgressPolicy.parse(["sandbox.internal:8080", "10.0.0.5", "[fd00::1]:80", "FD00::2", " "])
    assert [(e.host, e.port) for e in policy.allow] == [
        ("sandbox.internal", 8080), ("10.0.0.5", None), ("fd00::1", 80), ("fd00::2", None),
    ]  # fmt: skip
    private = [ipaddress.ip_address("10.9.9.9")]
    assert policy.refusal("Sandbox.Internal.", 8080, private) is None
    assert policy.refusal("sandbox.internal", 8081, private) is not None
    assert policy.refusal("any.name", 1234, [ipaddress.ip_address("10.0.0.5")]) is None
    for bad in ("host:port", "host:0", "host:70000", ":80"):
        with pytest.raises(ValueError, match=ALLOW_ENV):
            EgressPolicy.parse([bad])


# Refusals ---------------------------------------------------------------------------------------


def test_loopback_endpoint_is_refused_by_default_and_reachable_when_allowlisted(monkeypatch) -> None:
    with serve() as server:
        url = f"http://127.0.0.1:{server.server_port}/tool"
        refused = call(url)
        assert (refused.ok, refused.error) == (False, f"http: {EGRESS_ERROR}")
        assert server.seen == []
        monkeypatch.setenv(ALLOW_ENV, f"127.0.0.1:{server.server_port}")
        assert call(url).ok
        assert server.seen == [("/tool", f"127.0.0.1:{server.server_port}")]


@pytest.mark.parametrize(
    "address", ["127.0.0.1", "10.0.0.7", "169.254.169.254", "fd00:ec2::254", "::ffff:7f00:1"]
)
def test_names_resolving_to_internal_addresses_are_refused(monkeypatch, address: str) -> None:
    asked = fake_dns(monkeypatch, [address])
    result = call("http://tool.example.com/x")
    assert (result.ok, result.error, asked) == (False, f"http: {EGRESS_ERROR}", ["tool.example.com"])


def test_one_refused_address_refuses_the_name(monkeypatch) -> None:
    with serve() as server:
        monkeypatch.setenv(ALLOW_ENV, f"127.0.0.1:{server.server_port}")
        fake_dns(monkeypatch, ["127.0.0.1", "10.0.0.7"])  # the first would be allowed and would answer
        result = call(f"http://mixed.example.com:{server.server_port}/")
        assert (result.ok, result.error, server.seen) == (False, f"http: {EGRESS_ERROR}", [])


def test_dns_rebinding_cannot_swap_the_checked_address(monkeypatch) -> None:
    """The name resolves to an allowed address at the check and to a refused one afterwards: the request
    still goes to the address that was checked, with the name in its Host header."""
    with serve("127.0.0.1") as allowed, serve("127.0.0.2", allowed.server_port) as internal:
        port = allowed.server_port
        monkeypatch.setenv(ALLOW_ENV, f"127.0.0.1:{port}")
        asked = fake_dns(monkeypatch, ["127.0.0.1"], ["127.0.0.2"])
        first = call(f"http://rebind.example.com:{port}/a")
        assert first.ok and asked == ["rebind.example.com"]  # resolved once, by the guard
        second = call(f"http://rebind.example.com:{port}/b")  # the rebound answer is checked, not used
        assert (second.ok, second.error) == (False, f"http: {EGRESS_ERROR}")
        assert allowed.seen == [("/a", f"rebind.example.com:{port}")]
        assert internal.seen == []


def test_redirect_to_loopback_is_refused(monkeypatch) -> None:
    with serve() as target, serve() as redirector:
        redirector.redirect_to = f"http://127.0.0.1:{target.server_port}/internal"
        monkeypatch.setenv(ALLOW_ENV, f"127.0.0.1:{redirector.server_port}")
        result = call(f"http://127.0.0.1:{redirector.server_port}/")  # the tool follows no redirect
        assert not result.ok and result.error.startswith("http: HTTP 307")

        async def follow(policy: EgressPolicy) -> httpx.Response:
            async with httpx.AsyncClient(transport=GuardedTransport(policy), follow_redirects=True) as client:
                return await client.get(f"http://127.0.0.1:{redirector.server_port}/")

        # A client that follows redirects sends each hop through the check: the hop is refused ...
        with pytest.raises(EgressError, match=EGRESS_ERROR):
            asyncio.run(follow(EgressPolicy.parse([f"127.0.0.1:{redirector.server_port}"])))
        assert target.seen == []
        # ... and taken once the operator allows it too.
        both = EgressPolicy.parse([f"127.0.0.1:{redirector.server_port}", f"127.0.0.1:{target.server_port}"])
        assert asyncio.run(follow(both)).status_code == 200
        assert target.seen == [("/internal", f"127.0.0.1:{target.server_port}")]


def test_every_failure_reads_the_same(monkeypatch) -> None:
    """Refused by policy, closed port, unresolvable name, resolution timing out: one text, no oracle."""
    errors = set()
    with serve() as server:
        errors.add(call(f"http://127.0.0.1:{server.server_port}/").error)  # live, but not allowed
    port = closed_port()
    monkeypatch.setenv(ALLOW_ENV, f"127.0.0.1:{port},slow.example.com")
    errors.add(call(f"http://127.0.0.1:{port}/").error)  # allowed, nothing listens

    def unresolvable(host: str, port: int) -> list:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(guard, "resolve", unresolvable)
    errors.add(call("http://no-such-host.example.com/").error)

    answer = threading.Event()

    def hangs(host: str, port: int) -> list:
        answer.wait(30)
        return [ipaddress.ip_address("93.184.215.14")]

    monkeypatch.setattr(guard, "resolve", hangs)
    try:  # resolving and connecting get half the call's 2 s, then fail like the rest
        errors.add(call("http://slow.example.com/", timeout_s=2.0).error)
    finally:
        answer.set()
    assert errors == {f"http: {EGRESS_ERROR}"}


def test_the_web_process_policy_overrides_the_environment(monkeypatch) -> None:
    """`egress_policy` (what the workbench passes from its settings) decides, not the variable."""
    with serve() as server:
        monkeypatch.setenv(ALLOW_ENV, f"127.0.0.1:{server.server_port}")
        with egress_policy(EgressPolicy()):
            result = call(f"http://127.0.0.1:{server.server_port}/")
        assert (result.ok, server.seen) == (False, [])


# TLS --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


def tls_server(ca: trustme.CA, name: str, names_seen: list) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert(name).configure_cert(context)
    context.sni_callback = lambda sock, server_name, ctx: names_seen.append(server_name)
    return context


def fetch_https(ca: trustme.CA, url: str) -> httpx.Response:
    client_context = ssl.create_default_context()
    ca.configure_trust(client_context)

    async def run() -> httpx.Response:
        policy = EgressPolicy.parse(["tool.internal"])
        async with httpx.AsyncClient(transport=GuardedTransport(policy, verify=client_context)) as client:
            return await client.post(url, json={})

    return asyncio.run(run())


def test_tls_keeps_the_original_name_for_sni_host_and_certificate(monkeypatch, ca) -> None:
    names_seen: list = []
    with serve(tls=tls_server(ca, "tool.internal", names_seen)) as server:
        fake_dns(monkeypatch, ["127.0.0.1"])
        response = fetch_https(ca, f"https://tool.internal:{server.server_port}/v1")
        assert response.status_code == 200
        assert names_seen == ["tool.internal"]
        assert server.seen == [("/v1", f"tool.internal:{server.server_port}")]


def test_tls_certificate_for_another_name_is_refused_alike(monkeypatch, ca) -> None:
    names_seen: list = []
    with serve(tls=tls_server(ca, "other.internal", names_seen)) as server:
        fake_dns(monkeypatch, ["127.0.0.1"])
        with pytest.raises(EgressError, match=EGRESS_ERROR):
            fetch_https(ca, f"https://tool.internal:{server.server_port}/v1")
        assert server.seen == []
