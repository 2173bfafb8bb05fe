"""Validate reward definitions with the trainers library's own models: component Params and schedules."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter
from pydantic import ValidationError as PydanticError

from trainers.workbench_api import REWARDS, RewardDefinition, Schedule, describe_components

_SCHEDULE = TypeAdapter(Schedule)


@dataclass(frozen=True)
class ParamInfo:
    """One parameter of a component, for the reference table next to the form."""

    name: str
    kind: str
    default: Any
    description: str


def component_names() -> list[str]:
    return REWARDS.names()


@dataclass(frozen=True)
class ComponentInfo:
    name: str
    description: str
    params: list[ParamInfo]


def component_reference() -> list[ComponentInfo]:
    """Every registered component with its one-line description and parameters, from the library's catalog."""
    return [
        ComponentInfo(c["name"], c["description"], _params(c["params_schema"])) for c in describe_components()
    ]


def _params(schema: dict[str, Any]) -> list[ParamInfo]:
    infos = []
    for field, prop in schema.get("properties", {}).items():
        kind = prop.get("type") or " | ".join(p.get("type", "?") for p in prop.get("anyOf", []))
        if "enum" in prop:
            kind = " | ".join(map(str, prop["enum"]))
        infos.append(ParamInfo(field, kind, prop.get("default"), prop.get("description", "")))
    return infos


def _messages(exc: PydanticError) -> list[str]:
    """Pydantic's errors as "field: message", the field path joined with dots."""
    out = []
    for error in exc.errors():
        where = ".".join(str(part) for part in error["loc"])
        out.append(f"{where}: {error['msg']}" if where else error["msg"])
    return out


def component_errors(*, name: str, params: Any, schedule: Any) -> dict[str, list[str]]:
    """Field errors of one component: its name, its Params (the component's pydantic model), its schedule."""
    if name not in REWARDS:
        return {"name": [f"unknown reward component {name!r}; known: {', '.join(component_names())}"]}
    errors: dict[str, list[str]] = {}
    try:
        REWARDS.get(name).Params.model_validate(params if params is not None else {})
    except PydanticError as exc:
        errors["params"] = _messages(exc)
    if schedule not in (None, ""):
        try:
            _SCHEDULE.validate_python(schedule)
        except PydanticError as exc:
            errors["schedule"] = _messages(exc)
    return errors


def definition_build(components: list[dict[str, Any]]) -> RewardDefinition:
    """The trainers RewardDefinition; ValueError with every problem (e.g. duplicate keys) when invalid."""
    try:
        return RewardDefinition.model_validate({"components": components})
    except PydanticError as exc:
        raise ValueError("; ".join(_messages(exc))) from None
