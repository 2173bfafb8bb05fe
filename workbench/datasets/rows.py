"""Validate one uploaded record into a dataset row: prompt, ground truth (answer and/or tool calls), state."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from workbench.datasets.fields import NOTED, checked_calls, checked_fields
from workbench.datasets.limits import UploadLimits
from workbench.datasets.records import RowError
from workbench.datasets.values import ValueProblem, loads

PROMPT_FIELDS = ("prompt", "question")
KNOWN_FIELDS = {*PROMPT_FIELDS, "answer", "tool_calls", "initial_state", "metadata"}


@dataclass
class RowData:
    """A validated row. `tool_calls` follow ToolRL / Tool-N1: a list of {"name", "arguments"} objects."""

    prompt: str
    answer: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    initial_state: Any = None
    metadata: dict[str, Any] = field(default_factory=dict)
    messages: list[dict[str, Any]] | None = None  # a conversations dataset's row (see conversations.py)


def validate_record(where: str, fields: dict[str, Any], limits: UploadLimits) -> RowData | list[RowError]:
    """Turn raw fields into a RowData, or return every problem found, each with its field."""
    errors: list[RowError] = []

    def fail(name: str, message: str) -> None:
        errors.append(RowError(where, message, name))

    def decode(name: str, text: str) -> Any:
        """JSON text of a cell, checked; NOTED (the problem noted) when it breaks a limit."""
        try:
            return loads(text, limits)
        except ValueProblem as exc:
            fail(name, str(exc))
            return NOTED

    fields = checked_fields(fields, limits, fail)
    prompt_key = next((k for k in PROMPT_FIELDS if k in fields), None)
    prompt = fields.get(prompt_key) if prompt_key else None
    prompt_noted = any(e.field in PROMPT_FIELDS for e in errors)
    if (not isinstance(prompt, str) or not prompt.strip()) and not prompt_noted:
        fail(prompt_key or "prompt", "required: a non-empty text in 'prompt' or 'question'")
    answer = _answer(fields.get("answer"), fail)
    tool_calls = _tool_calls(fields.get("tool_calls"), fail, decode)
    if answer is None and tool_calls is None and not any(e.field in ("answer", "tool_calls") for e in errors):
        fail("answer", "required when tool_calls is absent")
    initial_state = _maybe_json(fields.get("initial_state"), "initial_state", decode)
    initial_state = None if initial_state is NOTED else initial_state
    metadata = _metadata(fields, prompt_key, fail, decode)
    if errors:
        return errors
    return RowData(prompt, answer, tool_calls, initial_state, metadata)


def _maybe_json(value: Any, name: str, decode) -> Any:
    """CSV cells (and some Parquet columns) hold nested values as JSON text; decode when it parses."""
    if isinstance(value, str) and value.strip()[:1] in ("{", "["):
        try:
            return decode(name, value)
        except json.JSONDecodeError:
            return value
    return value


def _answer(value: Any, fail) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        fail("answer", f"must be text or a number, got {type(value).__name__}")
        return None
    return str(value)


def _tool_calls(value: Any, fail, decode) -> list[dict[str, Any]] | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = decode("tool_calls", value)
        except json.JSONDecodeError as exc:
            fail("tool_calls", f"invalid JSON: {exc.msg} at column {exc.colno}")
            return None
        if value is NOTED:
            return None
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list) or not value:
        fail("tool_calls", "must be a non-empty list of {name, arguments} objects")
        return None
    return checked_calls(value, "tool_calls", fail, lambda v, name: _maybe_json(v, name, decode))


def _metadata(fields: dict[str, Any], prompt_key: str | None, fail, decode) -> dict[str, Any]:
    metadata = _maybe_json(fields.get("metadata", {}), "metadata", decode)
    if metadata is NOTED:
        return {}
    if not isinstance(metadata, dict):
        fail("metadata", "must be a JSON object")
        return {}
    # Unknown columns are kept, not dropped: they may be a split column or useful for analysis later.
    consumed = KNOWN_FIELDS - (set(PROMPT_FIELDS) - {prompt_key})
    extra = {k: v for k, v in fields.items() if k not in consumed}
    return {**extra, **metadata}
