"""OpenAI chat messages in one canonical form, so a client's echo of a conversation compares equal.

A client sends back the assistant messages it received (often re-serialised: `arguments` JSON with
other spacing, extra null fields, content as a list of parts). `normalise` keeps what the prompt is
made of (role, content, the calls' names and arguments, a tool message's function name) and nothing
else, so "does this request extend the recorded conversation?" is a plain equality of lists.
"""

from __future__ import annotations

import json
from typing import Any

from trainers.parsing.response import ParsedResponse

ROLES = ("system", "user", "assistant", "tool")


class MessageError(ValueError):
    """A request's messages cannot be read; the endpoint answers 400 with this text."""


def normalise(messages: Any) -> list[dict]:
    """Canonical messages: {"role", "content", "tool_calls": [{"name", "arguments"}], "name"}."""
    if not isinstance(messages, list) or not messages:
        raise MessageError("messages must be a non-empty list")
    calls_by_id: dict[str, str] = {}
    out = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            raise MessageError(f"messages[{index}]: a message needs a role among {', '.join(ROLES)}")
        canonical = {"role": message["role"], "content": _content(message.get("content"), index)}
        if message["role"] == "assistant":
            canonical["tool_calls"] = [_call(c, index, calls_by_id) for c in message.get("tool_calls") or []]
        if message["role"] == "tool":
            canonical["name"] = calls_by_id.get(str(message.get("tool_call_id")), message.get("name") or "")
        out.append(canonical)
    return out


def _content(content: Any, index: int) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list):  # content parts: only text is read
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    raise MessageError(f"messages[{index}].content must be a string or a list of text parts")


def _call(call: Any, index: int, calls_by_id: dict[str, str]) -> dict:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise MessageError(f"messages[{index}].tool_calls: each call needs function.name")
    arguments = function.get("arguments") or "{}"
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            raise MessageError(f"messages[{index}].tool_calls: arguments are not JSON") from None
    if call.get("id"):
        calls_by_id[str(call["id"])] = function["name"]
    return {"name": function["name"], "arguments": arguments}


def assistant_message(parsed: ParsedResponse, text: str, turn_end: str, *, with_calls: bool) -> dict:
    """The canonical assistant message of a sampled text: its prose (call blocks and the end-of-turn
    marker cut out) and its well-formed calls."""
    calls = [c for c in parsed.tool_calls if c.parse_error is None] if with_calls else []
    content = text
    if turn_end and content.endswith(turn_end):
        content = content[: -len(turn_end)]
    if with_calls:
        content = _without_call_blocks(content)
    return {
        "role": "assistant",
        "content": content.strip(),
        "tool_calls": [{"name": c.name, "arguments": c.arguments} for c in calls],
    }


def _without_call_blocks(text: str, open_tag: str = "<tool_call>", close_tag: str = "</tool_call>") -> str:
    while (start := text.find(open_tag)) != -1:
        end = text.find(close_tag, start)
        text = text[:start] + ("" if end == -1 else text[end + len(close_tag) :])
    return text


def to_openai(message: dict, call_ids: list[str]) -> dict:
    """A canonical assistant message as the API returns it (calls with ids and JSON arguments)."""
    calls = [
        {
            "id": call_id,
            "type": "function",
            "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])},
        }
        for call_id, c in zip(call_ids, message["tool_calls"], strict=True)
    ]
    return {"role": "assistant", "content": message["content"] or None, "tool_calls": calls or None}
