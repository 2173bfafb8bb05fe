"""Tool-call parsing: JSON calls inside tags, one object or a list per tag, several tags per turn.

A malformed call never raises: it becomes a ToolCall whose `parse_error` says what was wrong, so the
rollout can answer it with an error observation and count it as a failed call.
"""

from __future__ import annotations

import json
import re
from typing import Any

from trainers.parsing.json_limits import MAX_JSON_DEPTH, too_deep
from trainers.trajectory import ToolCall

UNKNOWN_TOOL = "unknown tool"
# The first "name": "<string>" member of a block, read even where the JSON around it is broken.
_NAME_MEMBER = re.compile(r'"name"\s*:\s*("(?:[^"\\\n]|\\.){1,128}")')


def called_name(call: ToolCall) -> str:
    """The tool a call names: its parsed name, else the first `"name": "..."` in its malformed block,
    else UNKNOWN_TOOL; for showing the call's result, never for running it."""
    if call.name:
        return call.name
    match = _NAME_MEMBER.search(call.raw)
    if match is not None:
        try:
            name = json.loads(match.group(1))
        except ValueError:  # a bad escape inside the string
            return UNKNOWN_TOOL
        if name.strip():
            return name
    return UNKNOWN_TOOL


def tag_spans(text: str, open_tag: str, close_tag: str) -> list[tuple[str, bool]]:
    """Contents of every `open_tag`...`close_tag` span, in order, with whether it was closed."""
    spans: list[tuple[str, bool]] = []
    pos = text.find(open_tag)
    while pos != -1:
        start = pos + len(open_tag)
        end = text.find(close_tag, start)
        if end == -1:
            spans.append((text[start:], False))
            break
        spans.append((text[start:end], True))
        pos = text.find(open_tag, end + len(close_tag))
    return spans


def call_from_object(obj: Any, raw: str) -> ToolCall:
    """One `{"name": ..., "arguments": {...}}` object (arguments may also be a JSON string)."""
    if not isinstance(obj, dict):
        return ToolCall("", {}, raw, f"a tool call must be a JSON object, got {type(obj).__name__}")
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        return ToolCall("", {}, raw, "the tool call has no 'name' string")
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):  # OpenAI-style calls encode the arguments as a JSON string
        try:
            args = json.loads(args)
        except json.JSONDecodeError as exc:
            return ToolCall(name, {}, raw, f"'arguments' is not valid JSON: {exc.msg}")
        except (ValueError, RecursionError) as exc:  # e.g. nesting too deep for the decoder
            return ToolCall(name, {}, raw, f"'arguments' is not valid JSON: {type(exc).__name__}")
    if not isinstance(args, dict):
        return ToolCall(name, {}, raw, f"'arguments' must be a JSON object, got {type(args).__name__}")
    if too_deep(args):  # parsed, but schema checks and serialisers recurse: refused here, not there
        return ToolCall(name, {}, raw, f"'arguments' nested deeper than {MAX_JSON_DEPTH} levels")
    return ToolCall(name, args, raw)


def parse_json_calls(body: str) -> list[ToolCall]:
    """The calls in one tag body: a JSON object or a JSON list of objects."""
    raw = body.strip()
    if not raw:
        return [ToolCall("", {}, body, "empty tool call")]
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        return [ToolCall("", {}, raw, f"invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})")]
    except (ValueError, RecursionError) as exc:  # parsers never raise: nesting too deep for the decoder
        return [ToolCall("", {}, raw, f"invalid JSON: {type(exc).__name__}")]
    if too_deep(value, MAX_JSON_DEPTH + 2):  # a list of calls, each call object, then its arguments
        return [ToolCall("", {}, raw, f"invalid JSON: nested deeper than {MAX_JSON_DEPTH} levels")]
    if isinstance(value, list):
        if not value:
            return [ToolCall("", {}, raw, "empty list of tool calls")]
        return [call_from_object(item, _dumps(item)) for item in value]
    return [call_from_object(value, raw)]


def _dumps(item: Any) -> str:
    try:
        return json.dumps(item)
    except (ValueError, RecursionError):  # deeply nested (the decoder took it, the encoder may not)
        return repr(item)[:200]


def parse_tagged_calls(
    text: str, open_tag: str = "<tool_call>", close_tag: str = "</tool_call>"
) -> list[ToolCall]:
    """Every call in every tag of `text`; an unclosed last tag is a malformed call."""
    calls: list[ToolCall] = []
    for body, closed in tag_spans(text, open_tag, close_tag):
        if closed:
            calls.extend(parse_json_calls(body))
        else:
            calls.append(ToolCall("", {}, body.strip(), f"missing closing {close_tag} tag"))
    return calls
