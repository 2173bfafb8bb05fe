"""Which addresses outbound requests (the HTTP tool, a SandboxFusion service) may reach.

Public unicast addresses are allowed. Loopback, private, link-local, CGNAT, multicast, reserved and
unspecified addresses and the cloud metadata endpoints are refused, also when embedded in IPv6
(IPv4-mapped, 6to4; NAT64 and IPv4-compatible addresses lie in the reserved ::/8), unless the
operator allowlists a host or address in `WORKBENCH_EGRESS_ALLOW` ("sandbox.internal:8080,10.0.0.5":
a name or IP, optionally with a port).
Only the process environment or code sets the policy; nothing in a run config can widen it.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass

ALLOW_ENV = "WORKBENCH_EGRESS_ALLOW"
EGRESS_ERROR = "request failed: host not reachable or not allowed"

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

METADATA_ADDRESSES = frozenset(ipaddress.ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254"))


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 address an IPv4-mapped or 6to4 address reaches (Python's own flags differ by version)."""
    return [v4 for v4 in (ip.ipv4_mapped, ip.sixtofour) if v4 is not None]


def is_public(ip: IPAddress) -> bool:
    """True for a globally routable unicast address that is no metadata endpoint."""
    if ip in METADATA_ADDRESSES or not ip.is_global or ip.is_multicast or ip.is_reserved:
        return False
    return isinstance(ip, ipaddress.IPv4Address) or all(is_public(v4) for v4 in _embedded_ipv4(ip))


def _normal_host(host: str) -> str:
    return host.strip().strip("[]").rstrip(".").lower()


@dataclass(frozen=True)
class AllowEntry:
    """One allowlisted host name or IP address; `port` None allows every port."""

    host: str
    port: int | None = None

    @classmethod
    def parse(cls, text: str) -> AllowEntry:
        """'name', 'name:port', '10.0.0.5', '10.0.0.5:80', 'fd00::1' or '[fd00::1]:80'."""
        text = text.strip()
        host, port = text, None
        if text.startswith("[") and "]:" in text:
            host, _, port = text[1:].partition("]:")
        elif text.count(":") == 1:
            host, _, port = text.partition(":")
        if not _normal_host(host) or (port is not None and not (port.isdigit() and 0 < int(port) < 65536)):
            raise ValueError(f"{ALLOW_ENV}: not a host, host:port or IP address: {text!r}")
        return cls(_normal_host(host), int(port) if port is not None else None)

    def matches(self, host: str, port: int) -> bool:
        """Same name or same IP address (in any spelling), and the port if the entry names one."""
        return self.port in (None, port) and _same_host(self.host, _normal_host(host))


def _same_host(a: str, b: str) -> bool:
    try:
        return ipaddress.ip_address(a) == ipaddress.ip_address(b)
    except ValueError:
        return a == b


@dataclass(frozen=True)
class EgressPolicy:
    """Public addresses plus the operator's allowlist."""

    allow: tuple[AllowEntry, ...] = ()

    @classmethod
    def parse(cls, entries: Iterable[str]) -> EgressPolicy:
        return cls(tuple(AllowEntry.parse(entry) for entry in entries if entry.strip()))

    @classmethod
    def from_env(cls) -> EgressPolicy:
        return cls.parse(os.environ.get(ALLOW_ENV, "").split(","))

    def refusal(self, host: str, port: int, addresses: list[IPAddress]) -> str | None:
        """Why a request to host:port, resolved to `addresses`, is refused (None: allowed).

        Every address must pass: a name that resolves to one public and one private address is refused.
        """
        if not addresses:
            return f"{host} resolved to no address"
        if any(entry.matches(host, port) for entry in self.allow):
            return None
        for ip in addresses:
            if not is_public(ip) and not any(entry.matches(str(ip), port) for entry in self.allow):
                return f"{ip} is not a public address and {host}:{port} is not in {ALLOW_ENV}"
        return None


_policy: ContextVar[EgressPolicy | None] = ContextVar("egress_policy", default=None)


def current_policy() -> EgressPolicy:
    """The policy set by `egress_policy` in this context, else the one in the environment."""
    policy = _policy.get()
    return policy if policy is not None else EgressPolicy.from_env()


@contextlib.contextmanager
def egress_policy(policy: EgressPolicy) -> Iterator[EgressPolicy]:
    """Requests started in this context (asyncio tasks included) use `policy`: the web process passes
    its settings this way."""
    token = _policy.set(policy)
    try:
        yield policy
    finally:
        _policy.reset(token)
