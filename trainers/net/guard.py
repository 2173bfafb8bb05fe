"""An httpx transport that reaches only what the egress policy allows, at the address it checked.

Each request's host is resolved once; the request is refused unless every address passes the policy,
and is then sent to a checked address (the Host header and the TLS server name stay the original
host's), so a DNS answer that changes between check and connect cannot move it. Redirect hops, when a
client follows them, are new requests through the same check. Every refusal and every failure to reach
the host raises EgressError with one message: the error text tells nothing about the network behind.

The same checks guard both HTTP clients in use: httpx (the http tool, SandboxFusion) and httpx2, its
successor with the same interface, which the MCP SDK's streamable-HTTP client takes
(`GuardedTransport2`).
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import ssl
from types import ModuleType
from typing import Any, ClassVar

import anyio
import anyio.to_thread
import httpx
import httpx2

from trainers.net.policy import EGRESS_ERROR, EgressPolicy, IPAddress, current_policy

logger = logging.getLogger(__name__)

_DEFAULT_PORTS = {"http": 80, "https": 443}


class EgressError(httpx.TransportError):
    """Refused by policy, unresolvable, refused, timed out or broken: the same message for all."""

    def __init__(self, request: httpx.Request) -> None:
        super().__init__(EGRESS_ERROR, request=request)


class EgressError2(httpx2.TransportError):
    """EgressError for httpx2 clients."""

    def __init__(self, request: httpx2.Request) -> None:
        super().__init__(EGRESS_ERROR, request=request)


def resolve(host: str, port: int) -> list[IPAddress]:
    """Every address `host` resolves to, in resolver order (an IP literal resolves to itself)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(ipaddress.ip_address(info[4][0]) for info in infos))


def _ip_literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


class _Guard:
    """Resolve, check every address, connect to a checked one; `policy` defaults to `current_policy()`.
    Subclasses name the HTTP module (`http`) and its error class (`refused`)."""

    http: ClassVar[ModuleType]
    refused: ClassVar[type[Exception]]

    def __init__(
        self, policy: EgressPolicy | None = None, *, verify: ssl.SSLContext | bool = True, keepalive: int = 20
    ) -> None:
        self.policy = policy if policy is not None else current_policy()
        self._verify = verify
        self._keepalive = keepalive  # idle connections kept per host (httpx's default: 20)
        self._pools: dict[tuple[str, str, int], Any] = {}

    async def handle_async_request(self, request: Any) -> Any:
        host = request.url.raw_host.decode("ascii")  # IDNA-encoded: what DNS, SNI and the allowlist see
        port = request.url.port or _DEFAULT_PORTS.get(request.url.scheme)
        if port is None:
            logger.warning("egress refused: scheme %r", request.url.scheme)
            raise self.refused(request)
        addresses = await self._resolve(request, host, port)
        reason = self.policy.refusal(host, port, addresses)
        if reason is not None:
            logger.warning("egress refused: %s", reason)
            raise self.refused(request)
        return await self._send_to_first(request, host, addresses, port)

    async def _resolve(self, request: Any, host: str, port: int) -> list[IPAddress]:
        """Resolution counts against the connect timeout, as the connection it stands for would. An IP
        literal needs no resolver, nor the worker thread a lookup takes (a tenth of a loopback call)."""
        literal = _ip_literal(host)
        if literal is not None:
            return [literal]
        timeout = request.extensions.get("timeout", {}).get("connect")
        try:
            with anyio.fail_after(timeout):
                return await anyio.to_thread.run_sync(resolve, host, port, abandon_on_cancel=True)
        except (OSError, TimeoutError, UnicodeError, ValueError) as exc:
            logger.info("egress to %s:%s failed to resolve: %r", host, port, exc)
            raise self.refused(request) from exc

    async def _send_to_first(self, request: Any, host: str, addresses: list[IPAddress], port: int) -> Any:
        """The first checked address that accepts the connection gets the request (no retry after that)."""
        failure: Exception | None = None
        for address in addresses:
            try:
                return await self._send(request, host, address, port)
            except self.http.TransportError as exc:
                failure = exc
                if not isinstance(exc, self.http.ConnectError):
                    break
        logger.info("egress to %s:%s failed: %r", host, port, failure)
        raise self.refused(request) from failure

    async def _send(self, request: Any, host: str, address: IPAddress, port: int) -> Any:
        extensions = dict(request.extensions)
        if request.url.scheme == "https":
            extensions["sni_hostname"] = host  # and the certificate is checked for this name
        pinned = self.http.Request(
            request.method,
            request.url.copy_with(host=str(address)),
            headers=request.headers,  # Host: still the original name (and port)
            stream=request.stream,
            extensions=extensions,
        )
        return await self._pool(request.url.scheme, host, port).handle_async_request(pinned)

    def _pool(self, scheme: str, host: str, port: int) -> Any:
        """Connections are kept per original host: one host's TLS session never serves another name."""
        key = (scheme, host, port)
        if key not in self._pools:
            limits = self.http.Limits(
                max_connections=max(100, self._keepalive), max_keepalive_connections=self._keepalive
            )
            pool = self.http.AsyncHTTPTransport(verify=self._verify, trust_env=False, limits=limits)
            self._pools[key] = pool
        return self._pools[key]

    async def aclose(self) -> None:
        for pool in self._pools.values():
            await pool.aclose()
        self._pools.clear()


class GuardedTransport(_Guard, httpx.AsyncBaseTransport):
    """The guard as an httpx transport."""

    http = httpx
    refused = EgressError


class GuardedTransport2(_Guard, httpx2.AsyncBaseTransport):
    """The guard as an httpx2 transport (the MCP SDK's client)."""

    http = httpx2
    refused = EgressError2


def guarded_client(
    *,
    timeout: httpx.Timeout | float | None,
    headers: dict[str, str] | None = None,
    verify: ssl.SSLContext | bool = True,
) -> httpx.AsyncClient:
    """An AsyncClient on GuardedTransport under the current policy. It follows no redirects and ignores
    proxy variables from the environment (a proxy would connect on its behalf, unchecked)."""
    return _unredirected(httpx, GuardedTransport(verify=verify), timeout, headers)


def guarded_client2(
    *, policy: EgressPolicy, timeout: httpx2.Timeout | float | None, keepalive: int = 20
) -> httpx2.AsyncClient:
    """`guarded_client` for httpx2 (the MCP SDK's client), under `policy`, keeping `keepalive` idle
    connections per host."""
    return _unredirected(httpx2, GuardedTransport2(policy, keepalive=keepalive), timeout, None)


def _unredirected(http: ModuleType, transport: Any, timeout: Any, headers: dict[str, str] | None) -> Any:
    return http.AsyncClient(
        transport=transport, timeout=timeout, headers=headers, trust_env=False, follow_redirects=False
    )
