"""Tools of the operator's MCP servers in the catalog: list a server's tools, import them as tool schemas
(input schema pinned by hash), and check a run's pinned MCP tools against their servers before launch."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from trainers.workbench_api import MCP_POOL, McpCallError, McpServer, mcp_function_name, mcp_schema_hash
from workbench.accounts.models import Team
from workbench.catalog.services import catalog_version_create
from workbench.toolschemas.models import Implementation, ToolSchema, ToolSchemaVersion
from workbench.toolschemas.selectors import mcp_servers
from workbench.toolschemas.services import ToolSchemaContent, operator_context, tool_schema_create

LIST_TIMEOUT_S = 20.0  # a page or a launch check waits this long for a server's tools/list
IMPORTED_TIMEOUT_S = 30.0  # an imported tool's call timeout (editable later)
MCP_TOOL = "mcp"  # the trainers tool that calls a server's tool


class McpUnavailable(Exception):
    """A server did not list its tools: down, slow, or broke the protocol. The message says which."""


@dataclass(frozen=True)
class ServerTool:
    """One tool as the server lists it now."""

    name: str
    description: str
    input_schema: dict[str, Any]

    @property
    def schema_hash(self) -> str:
        return mcp_schema_hash(self.input_schema)


def mcp_tools_list(server: McpServer) -> list[ServerTool]:
    """The server's tools (`tools/list`, within the egress policy); McpUnavailable when it cannot answer."""
    listing = mcp_listings([server])[server.name]
    if isinstance(listing, str):
        raise McpUnavailable(listing)
    return list(listing.values())


def mcp_listings(servers: Sequence[McpServer]) -> dict[str, dict[str, ServerTool] | str]:
    """Each server's tools by name, or why it could not list them; the servers are asked concurrently."""

    async def every() -> list[dict[str, ServerTool] | str]:
        return await asyncio.gather(*(_listing(server) for server in servers))

    with operator_context(mcp=False):
        return dict(zip([server.name for server in servers], asyncio.run(every()), strict=True))


async def _listing(server: McpServer) -> dict[str, ServerTool] | str:
    try:
        tools = await asyncio.wait_for(MCP_POOL.list_tools(server), LIST_TIMEOUT_S)
    except TimeoutError:
        return f"MCP server {server.name!r} did not list its tools within {LIST_TIMEOUT_S:g} s"
    except McpCallError as exc:
        return str(exc)
    return {t.name: ServerTool(t.name, t.description or "", dict(t.input_schema or {})) for t in tools}


def _content(server: McpServer, tool: ServerTool, prefix: str) -> ToolSchemaContent:
    return ToolSchemaContent(
        function_name=mcp_function_name(prefix + tool.name),
        description=tool.description.strip() or f"{tool.name} (a tool of the MCP server {server.name})",
        parameters=tool.input_schema,
        implementation=Implementation.MCP,
        timeout_s=IMPORTED_TIMEOUT_S,
        mcp_server=server.name,
        mcp_tool=tool.name,
        schema_hash=tool.schema_hash,
    )


def _same_tool(item: ToolSchema, server: McpServer, tool: ServerTool) -> ToolSchemaVersion | None:
    """The item's latest version when it is this server's tool (importing it again updates it)."""
    latest = item.latest_version()
    if latest.implementation == Implementation.MCP and (latest.mcp_server, latest.mcp_tool) == (
        server.name,
        tool.name,
    ):
        return latest
    return None


def _messages(exc: ValidationError) -> list[str]:
    if hasattr(exc, "error_dict"):
        return [f"{field}: {m}" for field, texts in exc.message_dict.items() for m in texts]
    return exc.messages


def mcp_tools_import(
    *, team: Team, user, server: McpServer, names: Sequence[str], prefix: str = ""
) -> list[ToolSchemaVersion]:
    """One tool schema per chosen tool, as the server lists it now, named by its function name (`prefix`
    first). A name the team's catalog already uses is refused, unless that item is this server's same tool:
    then the import is its new version (when the server changed the tool). All or nothing: a ValidationError
    names each refused tool. The server is asked before the transaction opens."""
    offered = {tool.name: tool for tool in mcp_tools_list(server)}
    with transaction.atomic():
        return _import_all(team=team, user=user, server=server, offered=offered, names=names, prefix=prefix)


def _import_all(
    *, team: Team, user, server: McpServer, offered: dict[str, ServerTool], names: Sequence[str], prefix: str
) -> list[ToolSchemaVersion]:
    errors: list[str] = []
    saved: list[ToolSchemaVersion] = []
    for name in dict.fromkeys(names):
        tool = offered.get(name)
        if tool is None:
            errors.append(f"{name}: the server {server.name!r} does not offer this tool")
            continue
        try:
            saved.append(_import_one(team=team, user=user, server=server, tool=tool, prefix=prefix))
        except ValidationError as exc:
            errors.extend(f"{name}: {message}" for message in _messages(exc))
    if errors:
        raise ValidationError(errors)  # rolls back what this import saved
    return saved


def _import_one(*, team: Team, user, server: McpServer, tool: ServerTool, prefix: str) -> ToolSchemaVersion:
    content = _content(server, tool, prefix)
    content.clean()
    name = content.function_name
    item = ToolSchema.objects.filter(team=team, name=name, is_deleted=False).first()
    if item is None:
        return tool_schema_create(team=team, user=user, name=name, content=content, note="imported")
    latest = _same_tool(item, server, tool)
    if latest is None:
        raise ValidationError(
            f"the catalog already has a tool schema named {name!r}; import with a name prefix, or rename it"
        )
    if (latest.schema_hash, latest.description) == (content.schema_hash, content.description):
        return latest
    # a new version with the server's schema and description (the one change of the pins there is); the
    # member's own timeout and function name stay
    changed = {name: getattr(content, name) for name in ("description", "parameters", "schema_hash")}
    again = ToolSchemaContent.of(latest, **changed)
    again.clean()
    return catalog_version_create(item=item, version=again.version("imported again"), user=user)


def mcp_launch_errors(*, team: Team, tools: Sequence[Any], labels: Sequence[str]) -> list[str]:
    """Why the run's MCP tools (bindings of the composed config, `labels` naming each) cannot launch: a
    server that does not answer, a tool it no longer offers, an input schema changed since import. Servers
    not listed or not open to the team are the operator bounds' errors, not repeated here."""
    if not any(_is_mcp(tool) for tool in tools):
        return []
    try:
        servers = mcp_servers()
    except ValueError:
        return []  # a malformed server list: the bounds say so
    wanted = [
        (label, tool["config"], servers[tool["config"].get("server")])
        for label, tool in zip(labels, tools, strict=True)
        if _is_mcp(tool) and _open(servers.get(tool["config"].get("server")), team)
    ]
    listings = mcp_listings(list({server.name: server for _, _, server in wanted}.values()))
    errors = []
    for label, config, server in wanted:
        error = _pin_error(listings[server.name], config)
        if error:
            errors.append(f"{label} (MCP server {server.name!r}, tool {config.get('tool')!r}): {error}")
    return errors


def _open(server: McpServer | None, team: Team) -> bool:
    return server is not None and server.open_to(team.name)


def _is_mcp(binding: Any) -> bool:
    """An mcp binding whose server is a name (anything else is the config validation's or bounds' error)."""
    if not isinstance(binding, dict) or binding.get("name") != MCP_TOOL:
        return False
    config = binding.get("config")
    return isinstance(config, dict) and isinstance(config.get("server"), str)


def _pin_error(listing: dict[str, ServerTool] | str, config: dict[str, Any]) -> str | None:
    if isinstance(listing, str):
        return f"the server cannot be reached: {listing}"
    tool = listing.get(str(config.get("tool")))
    if tool is None:
        return "the server no longer offers this tool; import another or remove it from the run"
    pinned = config.get("schema_hash")
    if pinned and pinned != tool.schema_hash:
        return (
            f"the server's input schema changed since import (pinned {pinned}, now {tool.schema_hash}); "
            "import it again"
        )
    return None
