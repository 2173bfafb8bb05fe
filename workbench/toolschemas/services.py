"""Writes for tool schemas (every save is a new version) and the "try it" call."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError

from trainers.workbench_api import (
    TOOLS,
    EgressPolicy,
    SandboxError,
    ServerFault,
    Toolset,
    egress_policy,
    listed_servers,
    mcp_schema_hash,
    server_metadata,
)
from workbench.accounts.models import Team
from workbench.catalog.services import catalog_item_create, catalog_version_create
from workbench.toolschemas.models import Implementation, ToolSchema, ToolSchemaVersion
from workbench.toolschemas.selectors import mcp_servers
from workbench.toolschemas.specs import arguments_error, name_error, parameters_error

# the registry's HTTP, MCP and environment-server tools are implementations of their own, not built-ins
NOT_BUILTIN = frozenset({"http", "mcp", "env_server"})
PINNED = ("implementation", "mcp_server", "mcp_tool", "schema_hash", "parameters")  # what an MCP edit keeps


def builtin_names() -> list[str]:
    """Built-in tools a schema can bind to, from the trainers registry."""
    return [name for name in TOOLS.names() if name not in NOT_BUILTIN]


def builtin_spec(name: str) -> dict[str, Any]:
    """A built-in tool's own spec, used as a preset for the form."""
    return TOOLS.get(name).spec()["function"]


@dataclass
class ToolSchemaContent:
    """What a version holds; `clean()` raises ValidationError by field."""

    function_name: str
    description: str
    parameters: Any
    implementation: str
    builtin: str = ""
    url: str = ""
    timeout_s: float = 10.0
    mcp_server: str = ""
    mcp_tool: str = ""
    schema_hash: str = ""
    env_actions: list[str] = dataclasses.field(default_factory=list)

    def clean(self) -> None:
        errors: dict[str, str] = {}
        for field, message in (
            ("function_name", name_error(self.function_name)),
            ("parameters", parameters_error(self.parameters)),
            (
                "description",
                None if self.description.strip() else "Say what the tool does; the model reads it.",
            ),
            ("timeout_s", None if 0 < self.timeout_s <= 300 else "Use a timeout between 0 and 300 seconds."),
        ):
            if message:
                errors[field] = message
        if self.implementation == Implementation.BUILTIN:
            if self.builtin not in builtin_names():
                errors["builtin"] = f"Choose one of: {', '.join(builtin_names())}."
            elif self.function_name != self.builtin:
                # Rollouts dispatch calls by the tool's own name, so the model must use it.
                errors["function_name"] = f"A built-in tool is called by its own name: {self.builtin}."
        elif self.implementation == Implementation.HTTP:
            if not self.url:
                errors["url"] = "Give the endpoint's URL."
        elif self.implementation == Implementation.MCP:
            errors.update(self._mcp_errors())
        elif self.implementation == Implementation.ENV_SERVER:
            if not self.url:
                errors["url"] = "Give the environment server's URL."
        else:
            errors["implementation"] = "Choose a built-in tool, an HTTP endpoint or an environment server."
        if errors:
            raise ValidationError(errors)

    def _mcp_errors(self) -> dict[str, str]:
        """An MCP tool is imported: its server, tool and the hash of the schema it was imported with."""
        if not (self.mcp_server and self.mcp_tool):
            return {"implementation": "An MCP tool names its server and tool: import it from the server."}
        if self.schema_hash != mcp_schema_hash(self.parameters):
            return {"parameters": "An MCP tool keeps the input schema it was imported with: import it again."}
        return {}

    def version(self, note: str) -> ToolSchemaVersion:
        builtin = self.builtin if self.implementation == Implementation.BUILTIN else ""
        at_url = self.implementation in (Implementation.HTTP, Implementation.ENV_SERVER)
        url = self.url if at_url else ""
        mcp = self.implementation == Implementation.MCP
        env = self.implementation == Implementation.ENV_SERVER
        return ToolSchemaVersion(
            function_name=self.function_name,
            description=self.description,
            parameters=self.parameters,
            implementation=self.implementation,
            builtin=builtin,
            url=url,
            timeout_s=self.timeout_s,
            mcp_server=self.mcp_server if mcp else "",
            mcp_tool=self.mcp_tool if mcp else "",
            schema_hash=self.schema_hash if mcp else "",
            env_actions=list(self.env_actions) if env else [],
            note=note,
        )

    @classmethod
    def of(cls, version: ToolSchemaVersion, **changes: Any) -> ToolSchemaContent:
        """A version's content, with `changes`."""
        fields = {name: getattr(version, name) for name in cls.__dataclass_fields__}
        return cls(**{**fields, **changes})


def tool_schema_create(
    *, team: Team, user, name: str, content: ToolSchemaContent, note: str = ""
) -> ToolSchemaVersion:
    content.clean()
    content = env_server_described(content)
    return catalog_item_create(
        item=ToolSchema(team=team, name=name.strip()), version=content.version(note), user=user
    )


def tool_schema_update(
    *, item: ToolSchema, user, content: ToolSchemaContent, note: str = ""
) -> ToolSchemaVersion:
    _check_kept_pins(item.latest_version(), content)
    content.clean()
    content = env_server_described(content)
    return catalog_version_create(item=item, version=content.version(note), user=user)


def _check_kept_pins(latest: ToolSchemaVersion, content: ToolSchemaContent) -> None:
    """An edit keeps an MCP tool an MCP tool with its server, tool and schema (a new import changes those),
    and makes no other tool an MCP tool."""
    was_mcp = latest.implementation == Implementation.MCP
    is_mcp = content.implementation == Implementation.MCP
    if was_mcp and any(getattr(latest, name) != getattr(content, name) for name in PINNED):
        raise ValidationError(
            "An imported MCP tool keeps its server, tool and input schema: import it again to change them."
        )
    if is_mcp and not was_mcp:
        raise ValidationError({"implementation": "MCP tools are imported from their server, not edited in."})


@dataclass(frozen=True)
class TryResult:
    ok: bool
    output: str
    error: str | None = None
    latency_s: float = 0.0


def tool_schema_try(*, version: ToolSchemaVersion, arguments_text: str) -> TryResult:
    """Validate the arguments against the schema, then run the bound tool (python runs in the sandbox;
    an HTTP endpoint is reached only within the operator's WORKBENCH_EGRESS_ALLOW setting; an MCP tool
    only on a server of WORKBENCH_MCP_SERVERS open to the schema's team)."""
    try:
        arguments = json.loads(arguments_text)
    except json.JSONDecodeError as exc:
        return TryResult(
            False, "", f"arguments are not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        )
    error = arguments_error(version.parameters, arguments)
    if error is not None:
        return TryResult(False, "", f"arguments do not match the schema: {error}")
    binding = version.binding()
    if binding["name"] == "mcp":
        binding["config"]["team"] = version.item.team.name  # the team rule, as the run bounds apply it
    try:
        with operator_context(mcp=binding["name"] == "mcp"):
            result = asyncio.run(_invoke(binding, arguments))
    except ValueError as exc:  # a binding the library refuses (bad config; a malformed server list)
        return TryResult(False, "", str(exc))
    except SandboxError as exc:  # the sandbox refuses to start here (no isolation): say why, run nothing
        return TryResult(False, "", str(exc))
    return TryResult(result.ok, result.output, result.error, result.latency_s)


def env_server_described(content: ToolSchemaContent) -> ToolSchemaContent:
    """An environment server's schema as the server describes itself (`GET /metadata`): the server must
    answer, within the operator's egress allowlist; when it lists its actions they are pinned, and the
    argument schema is the one the tool builds from them (several actions a turn, as the built-in games)."""
    if content.implementation != Implementation.ENV_SERVER:
        return content
    try:
        with operator_context(mcp=False):
            metadata = server_metadata(content.url)
    except ServerFault as exc:
        raise ValidationError({"url": f"The environment server did not answer: {exc}"}) from None
    actions = metadata.get("actions")
    if not (isinstance(actions, list) and actions and all(isinstance(a, str) and a for a in actions)):
        return replace(content, env_actions=[])
    parameters = TOOLS.get("env_server").action_parameters(tuple(actions))
    return replace(content, env_actions=actions, parameters=parameters)


@contextlib.contextmanager
def operator_context(*, mcp: bool = True) -> Iterator[None]:
    """The operator's egress allowlist and (with `mcp`) MCP servers, from settings, for the tools built and
    called in it; McpServerError (a ValueError) when the server list is malformed."""
    servers = listed_servers(mcp_servers()) if mcp else contextlib.nullcontext()
    with egress_policy(EgressPolicy.parse(settings.WORKBENCH_EGRESS_ALLOW)), servers:
        yield


async def _invoke(binding: dict, arguments: dict):
    toolset = Toolset.build([binding])
    try:
        await toolset.start()  # an environment server's episode starts here
        (tool,) = toolset.tools.values()
        return await tool.invoke(arguments)
    finally:
        await toolset.close()
