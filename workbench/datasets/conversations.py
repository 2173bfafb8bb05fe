"""Validate one uploaded conversation, a row of a conversations dataset: the expert messages an SFT warm
start trains on, checked so that the worker renders every stored row.

A row holds `messages` (a list, or its JSON text in a CSV cell), optionally `answer` and `metadata`;
other fields are kept as metadata. Messages are OpenAI-style: system messages first (the run's template
writes its own system prompt, so they are kept but not trained on), then a user message; an assistant
message may call tools (`tool_calls`: {name, arguments} or OpenAI's {"function": {...}} with arguments
as JSON text) and is then answered by one `tool` message per call, in order; a user message is followed
by an assistant message; the conversation ends with an assistant message (the turn SFT teaches last).
"""

from __future__ import annotations

import json
from typing import Any

from workbench.datasets.fields import NOTED, Fail, checked_calls, checked_fields
from workbench.datasets.limits import UploadLimits
from workbench.datasets.records import RowError
from workbench.datasets.rows import RowData
from workbench.datasets.values import ValueProblem, loads

ROLES = ("system", "user", "assistant", "tool")
KNOWN_FIELDS = {"messages", "answer", "metadata"}


def validate_conversation(
    where: str, fields: dict[str, Any], limits: UploadLimits
) -> RowData | list[RowError]:
    """A RowData whose prompt is the first user message and `messages` the normalised conversation, or
    every problem found, each with its field (`messages[3].tool_calls[0].name`)."""
    errors: list[RowError] = []

    def fail(name: str, message: str) -> None:
        errors.append(RowError(where, message, name))

    fields = checked_fields(fields, limits, fail)
    messages = _messages(fields.get("messages"), limits, fail)
    if messages is not None:
        _order(messages, fail)
    answer = fields.get("answer")
    if answer is not None and (isinstance(answer, bool) or not isinstance(answer, str | int | float)):
        fail("answer", f"must be text or a number, got {type(answer).__name__}")
    metadata = _json(fields.get("metadata", {}), "metadata", limits, fail)
    if not isinstance(metadata, dict) and metadata is not NOTED:
        fail("metadata", "must be a JSON object")
    if errors or messages is None:
        return errors
    prompt = next(m["content"] for m in messages if m["role"] == "user")
    extra = {k: v for k, v in fields.items() if k not in KNOWN_FIELDS}
    answer_text = None if answer is None else str(answer)
    return RowData(prompt, answer_text, metadata={**extra, **metadata}, messages=messages)


def _json(value: Any, name: str, limits: UploadLimits, fail: Fail) -> Any:
    """A nested value, decoded when it came as JSON text (CSV cells); NOTED when it cannot be."""
    if not isinstance(value, str) or value.strip()[:1] not in ("{", "["):
        return value
    try:
        return loads(value, limits)
    except json.JSONDecodeError as exc:
        fail(name, f"invalid JSON: {exc.msg} at column {exc.colno}")
    except ValueProblem as exc:
        fail(name, str(exc))
    return NOTED


def _messages(value: Any, limits: UploadLimits, fail: Fail) -> list[dict[str, Any]] | None:
    value = _json(value, "messages", limits, fail)
    if value is NOTED:
        return None
    if not isinstance(value, list) or not value:
        fail("messages", "required: a non-empty list of {role, content} messages")
        return None
    messages = [_message(m, f"messages[{i}]", limits, fail) for i, m in enumerate(value)]
    return None if any(m is None for m in messages) else messages


def _message(value: Any, name: str, limits: UploadLimits, fail: Fail) -> dict[str, Any] | None:
    if not isinstance(value, dict):
        fail(name, "must be an object with role and content")
        return None
    role, content = value.get("role"), value.get("content")
    if role not in ROLES:
        fail(f"{name}.role", f"must be one of {', '.join(ROLES)}, got {role!r}")
        return None
    calls = value.get("tool_calls")
    if calls is not None and role != "assistant":
        fail(f"{name}.tool_calls", "only assistant messages call tools")
        return None
    if content is None and calls:
        content = ""  # an assistant message that only calls
    if isinstance(content, int | float) and not isinstance(content, bool) and role == "tool":
        content = str(content)
    if not isinstance(content, str):
        fail(f"{name}.content", f"must be text, got {type(content).__name__}")
        return None
    message: dict[str, Any] = {"role": role, "content": content}
    if calls:
        message["tool_calls"] = _calls(calls, f"{name}.tool_calls", limits, fail)
    if role == "tool" and isinstance(value.get("name"), str):
        message["name"] = value["name"]
    return message


def _calls(value: Any, name: str, limits: UploadLimits, fail: Fail) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        fail(name, "must be a list of {name, arguments} objects")
        return []
    return checked_calls(value, name, fail, lambda v, where: _json(v, where, limits, fail))


def _order(messages: list[dict[str, Any]], fail: Fail) -> None:
    """The turn order the SFT renderer (and a rollout) follows; each problem names its message."""
    start = next((i for i, m in enumerate(messages) if m["role"] != "system"), len(messages))
    if start == len(messages) or messages[start]["role"] != "user":
        where = f"messages[{min(start, len(messages) - 1)}].role"
        fail(where, "the conversation starts with a user message (after any system messages)")
        return
    pending, caller = 0, start  # tool responses the last calling assistant message still waits for
    for i, message in enumerate(messages[start:], start=start):
        role, previous = message["role"], messages[i - 1]["role"] if i > start else None
        if role == "system":
            fail(f"messages[{i}].role", "system messages come before the first user message")
        elif role == "tool" and not pending:
            fail(f"messages[{i}].role", "a tool response answers a call of the assistant message before it")
        elif role != "tool" and pending:
            fail(f"messages[{caller}].tool_calls", f"{pending} call(s) have no tool response")
        elif role == "user" and previous == "user":
            fail(f"messages[{i}].role", "a user message is answered by an assistant message")
        if role == "assistant":
            pending, caller = len(message.get("tool_calls", [])), i
        else:
            pending = max(0, pending - 1) if role == "tool" else 0
    if pending:
        fail(f"messages[{caller}].tool_calls", f"{pending} call(s) have no tool response")
    elif messages[-1]["role"] != "assistant":
        fail(f"messages[{len(messages) - 1}].role", "the conversation ends with an assistant message")
