"""Checks shared by the row validators of every dataset kind (rows.py, conversations.py): stored values
within the upload limits, and tool calls normalised to {name, arguments}."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from workbench.datasets.limits import UploadLimits
from workbench.datasets.values import ValueProblem, check

NOTED = object()  # what a nested value decodes to when its problem is already noted

Fail = Callable[[str, str], None]  # (field, message): notes one problem of the row
DecodeArguments = Callable[[Any, str], Any]  # (value, field) -> the decoded value, or NOTED


def checked_fields(fields: dict[str, Any], limits: UploadLimits, fail: Fail) -> dict[str, Any]:
    """The fields whose values can be stored (see `values.check`); each other one is noted by `fail`."""
    kept = {}
    for name, value in fields.items():
        try:
            kept[name] = check(value, limits)
        except ValueProblem as exc:
            fail(name, str(exc))
    return kept


def checked_calls(calls: list[Any], where: str, fail: Fail, decode_arguments: DecodeArguments) -> list[dict]:
    """Each call as {name, arguments}, OpenAI's {"function": {...}} wrapper unwrapped; a call without a
    name, or whose arguments are not an object (after `decode_arguments` of JSON text), is noted."""
    out = []
    for i, call in enumerate(calls):
        name = f"{where}[{i}]"
        if isinstance(call, dict) and isinstance(call.get("function"), dict):
            call = call["function"]
        if not isinstance(call, dict):
            fail(name, "must be an object with name and arguments")
            continue
        if not isinstance(call.get("name"), str) or not call["name"].strip():
            fail(f"{name}.name", "required: the tool's name")
        arguments = decode_arguments(call.get("arguments", {}), f"{name}.arguments")
        if not isinstance(arguments, dict) and arguments is not NOTED:
            fail(f"{name}.arguments", "must be a JSON object")
        out.append({"name": call.get("name"), "arguments": arguments})
    return out
