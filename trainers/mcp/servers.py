"""The MCP servers the operator lists: name, transport (streamable HTTP URL or stdio command), teams.

Only the operator lists servers, in `WORKBENCH_MCP_SERVERS`: a JSON list, or the path of a JSON file
holding one (read again when the file changes). A run config names a server, never a URL or a command,
so nothing a team writes can reach a host or start a program the operator did not list.

    [{"name": "search", "url": "https://mcp.internal/mcp", "teams": ["Research"]},
     {"name": "files", "command": ["/opt/mcp/files-server", "--root", "/srv/docs"]}]
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from collections.abc import Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

SERVERS_ENV = "WORKBENCH_MCP_SERVERS"
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


class McpServerError(ValueError):
    """The operator's server list is malformed, or a server is unknown or not open to a team."""


class McpServer(BaseModel):
    """One server: exactly one of `url` (streamable HTTP) or `command` (stdio, argv list)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=NAME_PATTERN)
    url: str | None = Field(None, pattern=r"^https?://")
    command: tuple[str, ...] | None = None
    env: dict[str, str] = Field(default_factory=dict, description="extra environment of a stdio server")
    teams: tuple[str, ...] | None = Field(None, description="team names allowed; None: every team")
    connect_timeout_s: float = Field(10.0, gt=0, le=120)

    @model_validator(mode="after")
    def _one_transport(self) -> McpServer:
        if (self.url is None) == (self.command is None):
            raise ValueError("give exactly one of url (streamable HTTP) or command (stdio)")
        if self.command is not None and not self.command:
            raise ValueError("command must name a program")
        return self

    @property
    def transport(self) -> str:
        return "http" if self.url is not None else "stdio"

    @property
    def address(self) -> str:
        """What the server is, for people: its URL, or its command line."""
        return self.url if self.url is not None else " ".join(self.command or ())

    def open_to(self, team: str | None) -> bool:
        """Whether `team` (a team name) may use the server; None asks for the operator's own use."""
        return self.teams is None or team is None or team in self.teams


def parse_servers(text: str) -> dict[str, McpServer]:
    """Servers by name from the setting's text: a JSON list, or a path to a JSON file with one."""
    text = text.strip()
    if not text:
        return {}
    if not text.startswith(("[", "{")):
        return _servers_from_file(Path(text))
    return _servers_from_json(text, SERVERS_ENV)


def _servers_from_file(path: Path) -> dict[str, McpServer]:
    try:
        stat = path.stat()
    except OSError as exc:
        raise McpServerError(f"{SERVERS_ENV}: cannot read {path}: {exc.strerror}") from None
    return _cached_file(str(path), stat.st_mtime_ns, stat.st_size)


_file_cache: dict[str, tuple[int, int, dict[str, McpServer]]] = {}


def _cached_file(path: str, mtime_ns: int, size: int) -> dict[str, McpServer]:
    """The file parsed once per version (mtime and size), so each tool call need not read it."""
    cached = _file_cache.get(path)
    if cached is not None and cached[:2] == (mtime_ns, size):
        return cached[2]
    servers = _servers_from_json(Path(path).read_text(encoding="utf-8"), path)
    _file_cache[path] = (mtime_ns, size, servers)
    return servers


def _servers_from_json(text: str, source: str) -> dict[str, McpServer]:
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise McpServerError(f"{source}: not JSON: {exc.msg} (line {exc.lineno})") from None
    if not isinstance(raw, list):
        raise McpServerError(f"{source}: must be a JSON list of servers")
    servers: dict[str, McpServer] = {}
    for index, item in enumerate(raw):
        try:
            server = McpServer.model_validate(item)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "server"
            raise McpServerError(f"{source}: server {index}: {where}: {first['msg']}") from None
        if server.name in servers:
            raise McpServerError(f"{source}: two servers are named {server.name!r}")
        servers[server.name] = server
    return servers


_listed: ContextVar[dict[str, McpServer] | None] = ContextVar("mcp_servers", default=None)


def configured_servers() -> dict[str, McpServer]:
    """The operator's servers: those `listed_servers` set in this context, else the process environment's."""
    listed = _listed.get()
    return listed if listed is not None else parse_servers(os.environ.get(SERVERS_ENV, ""))


@contextlib.contextmanager
def listed_servers(servers: dict[str, McpServer]) -> Iterator[dict[str, McpServer]]:
    """Tools built and called in this context (asyncio tasks included) see `servers`: the web process
    passes its settings this way, as it does the egress policy."""
    token = _listed.set(servers)
    try:
        yield servers
    finally:
        _listed.reset(token)


def server_for(name: str, team: str | None = None) -> McpServer:
    """The named server, if the operator lists it and it is open to `team`."""
    servers = configured_servers()
    server = servers.get(name)
    if server is None or not server.open_to(team):
        known = ", ".join(n for n, s in servers.items() if s.open_to(team)) or "none"
        raise McpServerError(f"no MCP server named {name!r} is registered for this team; registered: {known}")
    return server


def schema_hash(input_schema: Any) -> str:
    """A short, key-order-independent hash of a tool's input schema (what an import pins)."""
    canonical = json.dumps(input_schema, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def function_name(tool_name: str) -> str:
    """A server's tool name as a function name a template accepts (letters, digits, _ and -)."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", tool_name)[:64] or "tool"
