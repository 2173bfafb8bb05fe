"""MCP sessions shared by a process: one per server, on a background event loop, reused and reopened.

Rollouts run each step under its own `asyncio.run`, and an MCP session belongs to the event loop and
task that opened it; so sessions live on one loop thread of their own and callers on any loop await
them through `asyncio.wrap_future`. A session whose transport failed (the server restarted or exited)
is closed and the next call opens a new one. Streamable-HTTP servers are reached through the egress
guard, allowed because the operator listed them; stdio servers start with a clean environment (the
SDK passes on only HOME, PATH, SHELL, TERM, USER and LOGNAME, plus the operator's `env`).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, TypeVar
from urllib.parse import urlsplit

from trainers.mcp.servers import McpServer
from trainers.net.policy import AllowEntry, EgressPolicy, current_policy

T = TypeVar("T")
# Connections kept open to one server: a rollout's turn sends every trajectory's call at once, and each
# connection past the kept ones is set up and torn down again on both sides
MCP_KEEPALIVE = 256
SESSION_CLOSED = -32000  # the SDK's CONNECTION_CLOSED: the transport ended under a request
SESSION_TERMINATED = "Session terminated"  # the SDK's answer to HTTP 404: the server forgot the session


class McpCallError(Exception):
    """The server could not be reached, broke the protocol, or did not answer in time."""


class _Session:
    """One open session, held by a task that keeps the transport's context managers entered."""

    def __init__(self, server: McpServer, policy: EgressPolicy) -> None:
        self.server = server
        self.policy = policy
        self.session: Any = None
        self.failure: BaseException | None = None
        self.started = time.monotonic()
        self._ready = asyncio.Event()
        self._close = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._hold())

    @property
    def alive(self) -> bool:
        return self.session is not None and not self._task.done()

    async def opened(self) -> Any:
        """The initialised ClientSession; McpCallError when it did not open in the connect timeout."""
        try:
            await asyncio.wait_for(self._ready.wait(), self.server.connect_timeout_s)
        except TimeoutError:
            await self.close()
            self.failure = TimeoutError(f"no answer to initialize in {self.server.connect_timeout_s:g}s")
        if self.session is None:
            raise McpCallError(f"MCP server {self.server.name!r} is unreachable: {_describe(self.failure)}")
        return self.session

    async def _hold(self) -> None:
        from mcp import Client

        try:
            async with (
                _transport(self.server, self.policy) as transport,
                Client(transport, cache=None) as client,
            ):
                self.session = client
                self._ready.set()
                await self._close.wait()
        except Exception as exc:  # every end of the transport is reported to the callers
            self.failure = exc
        finally:
            self.session = None
            self._ready.set()

    async def close(self) -> None:
        self._close.set()
        with contextlib.suppress(asyncio.TimeoutError, Exception):
            await asyncio.wait_for(asyncio.shield(self._task), 5.0)
        if not self._task.done():
            self._task.cancel()


@contextlib.asynccontextmanager
async def _transport(server: McpServer, policy: EgressPolicy) -> AsyncIterator[Any]:
    """What `mcp.Client` connects through: a guarded streamable-HTTP transport, or stdio parameters."""
    if server.url is None:
        from mcp.client.stdio import StdioServerParameters

        program, *args = server.command or ()
        yield StdioServerParameters(command=program, args=args, env=dict(server.env))
        return
    from mcp.client.streamable_http import streamable_http_client

    async with _guarded_http_client(server.url, policy) as http_client:
        yield streamable_http_client(server.url, http_client=http_client)


@contextlib.asynccontextmanager
async def _guarded_http_client(url: str, policy: EgressPolicy) -> AsyncIterator[Any]:
    """The egress guard's client, with the listed server's own host and port added to the policy."""
    import httpx2

    from trainers.net.guard import guarded_client2

    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    allowed = EgressPolicy(allow=(*policy.allow, AllowEntry(parts.hostname or "", port)))
    timeout = httpx2.Timeout(30.0, read=300.0)
    client = guarded_client2(policy=allowed, timeout=timeout, keepalive=MCP_KEEPALIVE)
    async with client:
        yield client


def _describe(exc: BaseException | None) -> str:
    """A failure in a line, the innermost cause of an exception group first."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if exc is None:
        return "the connection closed"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class _StaleSession(Exception):
    """The server answered 404 for the session: it restarted, and ran nothing of this request."""


class McpClientPool:
    """The process's sessions, by server name; every method may be awaited from any event loop."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()
        self._sessions: dict[str, _Session] = {}
        self._opening: dict[str, asyncio.Lock] = {}

    async def list_tools(self, server: McpServer) -> list[Any]:
        """Every tool the server offers (all pages of `tools/list`)."""
        policy = current_policy()  # the caller's: the background loop does not share its context
        return await self._run(lambda: self._list_tools(server, policy))

    async def call_tool(
        self, server: McpServer, tool: str, arguments: dict[str, Any], timeout_s: float
    ) -> Any:
        """The server's CallToolResult; McpCallError when the call could not complete."""
        policy = current_policy()
        return await self._run(lambda: self._call_tool(server, policy, tool, arguments, timeout_s))

    async def close(self) -> None:
        """Close every session (tests and shutdown); the loop thread stays for later calls."""
        if self._loop is not None:
            await self._run(self._close_all)

    async def _run(self, make: Callable[[], Coroutine[Any, Any, T]]) -> T:
        future = asyncio.run_coroutine_threadsafe(make(), self._background_loop())
        return await asyncio.wrap_future(future)  # cancelling the caller cancels the call

    def _background_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._loop.is_closed():
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="mcp-sessions", daemon=True).start()
                self._loop = loop
            return self._loop

    async def _session(self, server: McpServer, policy: EgressPolicy) -> Any:
        """The open session for `server`. One caller opens it while the others wait; those that were
        waiting on an attempt that failed get its error instead of each trying again in turn."""
        asked = time.monotonic()
        async with self._opening.setdefault(server.name, asyncio.Lock()):
            current = self._sessions.get(server.name)
            if current is not None and current.alive and (current.server, current.policy) == (server, policy):
                return current.session
            if current is not None and current.failure is not None and current.started >= asked:
                raise McpCallError(f"MCP server {server.name!r} is unreachable: {_describe(current.failure)}")
            if current is not None:
                await current.close()
            current = _Session(server, policy)
            self._sessions[server.name] = current
            return await current.opened()

    async def _drop(self, server: McpServer, session: Any) -> None:
        current = self._sessions.get(server.name)
        if current is not None and current.session is session:
            await current.close()

    async def _list_tools(self, server: McpServer, policy: EgressPolicy) -> list[Any]:
        session = await self._session(server, policy)
        tools, cursor = [], None
        try:
            while True:
                page = await session.list_tools(cursor=cursor, cache_mode="refresh")
                tools.extend(page.tools)
                cursor = page.next_cursor
                if not cursor:
                    return tools
        except Exception as exc:
            await self._drop(server, session)
            raise McpCallError(f"MCP server {server.name!r}: tools/list failed: {_describe(exc)}") from exc

    async def _call_tool(
        self, server: McpServer, policy: EgressPolicy, tool: str, arguments: dict[str, Any], timeout_s: float
    ) -> Any:
        try:
            return await self._call_once(server, policy, tool, arguments, timeout_s)
        except _StaleSession:  # the server restarted: one new session, one more try
            try:
                return await self._call_once(server, policy, tool, arguments, timeout_s)
            except _StaleSession:
                raise McpCallError(f"MCP server {server.name!r} ended the session twice") from None

    async def _call_once(
        self, server: McpServer, policy: EgressPolicy, tool: str, arguments: dict[str, Any], timeout_s: float
    ) -> Any:
        from mcp.shared.exceptions import MCPError

        session = await self._session(server, policy)
        try:
            # the SDK's own deadline is a backstop: the tool's timeout fires first, with one message
            return await session.call_tool(tool, arguments, read_timeout_seconds=timeout_s + 1.0)
        except MCPError as exc:
            stale = exc.message == SESSION_TERMINATED
            if stale or exc.code == SESSION_CLOSED:
                await self._drop(server, session)
            if stale:
                raise _StaleSession from exc
            raise McpCallError(f"MCP server {server.name!r}: {exc.message}") from exc
        except Exception as exc:
            await self._drop(server, session)
            raise McpCallError(f"MCP server {server.name!r}: {_describe(exc)}") from exc

    async def _close_all(self) -> None:
        sessions, self._sessions = list(self._sessions.values()), {}
        await asyncio.gather(*(s.close() for s in sessions))


POOL = McpClientPool()
"""The process's pool: rollouts, "try it" and `tools list-mcp` share it."""
