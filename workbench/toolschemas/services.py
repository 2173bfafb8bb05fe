"""Writes for tool schemas (every save is a new version) and the "try it" call."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError

from trainers.workbench_api import TOOLS, EgressPolicy, SandboxError, Toolset, egress_policy
from workbench.accounts.models import Team
from workbench.catalog.services import catalog_item_create, catalog_version_create
from workbench.toolschemas.models import Implementation, ToolSchema, ToolSchemaVersion
from workbench.toolschemas.specs import arguments_error, name_error, parameters_error

HTTP_TOOL = "http"  # the registry's HTTP tool is the "HTTP endpoint" implementation, not a built-in choice


def builtin_names() -> list[str]:
    """Built-in tools a schema can bind to, from the trainers registry."""
    return [name for name in TOOLS.names() if name != HTTP_TOOL]


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
        else:
            errors["implementation"] = "Choose a built-in tool or an HTTP endpoint."
        if errors:
            raise ValidationError(errors)

    def version(self, note: str) -> ToolSchemaVersion:
        builtin = self.builtin if self.implementation == Implementation.BUILTIN else ""
        url = self.url if self.implementation == Implementation.HTTP else ""
        return ToolSchemaVersion(
            function_name=self.function_name,
            description=self.description,
            parameters=self.parameters,
            implementation=self.implementation,
            builtin=builtin,
            url=url,
            timeout_s=self.timeout_s,
            note=note,
        )


def tool_schema_create(
    *, team: Team, user, name: str, content: ToolSchemaContent, note: str = ""
) -> ToolSchemaVersion:
    content.clean()
    return catalog_item_create(
        item=ToolSchema(team=team, name=name.strip()), version=content.version(note), user=user
    )


def tool_schema_update(
    *, item: ToolSchema, user, content: ToolSchemaContent, note: str = ""
) -> ToolSchemaVersion:
    content.clean()
    return catalog_version_create(item=item, version=content.version(note), user=user)


@dataclass(frozen=True)
class TryResult:
    ok: bool
    output: str
    error: str | None = None
    latency_s: float = 0.0


def tool_schema_try(*, version: ToolSchemaVersion, arguments_text: str) -> TryResult:
    """Validate the arguments against the schema, then run the bound tool (python runs in the sandbox;
    an HTTP endpoint is reached only within the operator's WORKBENCH_EGRESS_ALLOW setting)."""
    try:
        arguments = json.loads(arguments_text)
    except json.JSONDecodeError as exc:
        return TryResult(
            False, "", f"arguments are not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        )
    error = arguments_error(version.parameters, arguments)
    if error is not None:
        return TryResult(False, "", f"arguments do not match the schema: {error}")
    try:
        with egress_policy(EgressPolicy.parse(settings.WORKBENCH_EGRESS_ALLOW)):
            result = asyncio.run(_invoke(version.binding(), arguments))
    except ValueError as exc:  # a binding the library refuses (bad config)
        return TryResult(False, "", str(exc))
    except SandboxError as exc:  # the sandbox refuses to start here (no isolation): say why, run nothing
        return TryResult(False, "", str(exc))
    return TryResult(result.ok, result.output, result.error, result.latency_s)


async def _invoke(binding: dict, arguments: dict):
    toolset = Toolset.build([binding])
    try:
        (tool,) = toolset.tools.values()
        return await tool.invoke(arguments)
    finally:
        await toolset.close()
