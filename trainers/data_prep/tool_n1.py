"""Tool-N1 data preparation (arXiv 2505.00024, sec. 3): drop invalid calls, split conversations into steps.

Input: one conversation per row, OpenAI-style messages and the sample's candidate tools::

    {"id": "c1", "tools": [{"name": "weather", "parameters": {...}}, ...],
     "messages": [{"role": "user", "content": "..."},
                  {"role": "assistant", "content": "<think>...</think>",
                   "tool_calls": [{"name": "weather", "arguments": {"city": "Oslo"}}]},
                  {"role": "tool", "name": "weather", "content": "rain"},
                  {"role": "assistant", "content": "<think>...</think><answer>Take an umbrella</answer>"}]}

`conversations` is accepted for `messages`; calls may use OpenAI's `{"function": {...}}` wrapper,
JSON-string arguments, or sit in the assistant text as `<tool_call>` tags. A row without messages
is one step: its `question` and its `tool_calls`.

A conversation is dropped whole (every step of it) when any call fails JSON parsing (`bad_json`)
or names a tool missing from its candidate list (`unknown_tool`): a step whose context holds a bad
call would teach from a wrong history.

Output: one single-step row per assistant turn. The turns before it are its context; that
turn is the target and its calls the ground truth (`tool_calls`; an answer turn has `answer`
instead). `question` holds the context rendered as the ChatML turns a rollout would have produced
(first user message, then each assistant turn, `<tool_response>` user turn and later user message),
so the `tool_n1` template's prompt shows the whole history and the policy writes the target turn
next; the rollout engine shows a row's `tools` in the prompt. `context` keeps the messages as data.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from trainers.data_prep.base import PREPARERS, Prepared
from trainers.parsing.answers import extract_tag
from trainers.parsing.tool_calls import parse_tagged_calls
from trainers.templates.base import tool_name

BAD_JSON = "bad_json"
UNKNOWN_TOOL = "unknown_tool"
NO_USER_TURN = "no_user_turn"
NO_ASSISTANT_TURN = "no_assistant_turn"

# ChatML turn boundaries, as the ChatML tool templates (qwen_tool, tool_n1) glue turns together
_TURN = "<|im_end|>\n<|im_start|>{role}\n"


class Invalid(ValueError):
    """A conversation that cannot be used; `reason` is one of the drop reasons above."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


def _json(value: Any, what: str) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise Invalid(BAD_JSON, f"{what} is not valid JSON: {exc.msg}") from None


def normalise_call(raw: Any) -> dict[str, Any]:
    """`{"name", "arguments"}` from one call as datasets write it; raises Invalid(bad_json)."""
    raw = _json(raw, "a tool call")
    if isinstance(raw, dict) and isinstance(raw.get("function"), dict):
        raw = raw["function"]  # OpenAI's {"type": "function", "function": {...}} wrapper
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str) or not raw["name"]:
        raise Invalid(BAD_JSON, f"a tool call must be an object with a name, got {raw!r}")
    arguments = _json(raw.get("arguments", raw.get("parameters", {})), f"the arguments of {raw['name']!r}")
    if not isinstance(arguments, dict):
        raise Invalid(BAD_JSON, f"the arguments of {raw['name']!r} must be a JSON object")
    return {"name": raw["name"], "arguments": arguments}


def message_calls(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The calls of an assistant message: its `tool_calls` field, else `<tool_call>` tags in its text."""
    raw = message.get("tool_calls")
    if raw is not None:
        raw = _json(raw, "tool_calls")
        return [normalise_call(c) for c in (raw if isinstance(raw, list) else [raw])]
    calls = parse_tagged_calls(_text(message.get("content")))
    for call in calls:
        if call.parse_error is not None:
            raise Invalid(BAD_JSON, f"a <tool_call> tag: {call.parse_error}")
    return [{"name": c.name, "arguments": c.arguments} for c in calls]


def _text(content: Any) -> str:
    if content is None:
        return ""
    return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)


def normalise_messages(row: dict[str, Any]) -> list[dict[str, Any]]:
    """`{"role", "content"[, "tool_calls"][, "name"]}` messages, system messages left out."""
    raw = row.get("messages", row.get("conversations"))
    if raw is None:  # already one step: the question, then the expected calls
        question = row.get("question", row.get("prompt"))
        calls = row.get("tool_calls")
        raw = [{"role": "user", "content": question}]
        if calls is not None:
            raw.append({"role": "assistant", "content": "", "tool_calls": calls})
    messages = []
    for message in _json(raw, "messages"):
        if not isinstance(message, dict):
            raise Invalid(BAD_JSON, f"a message must be an object, got {message!r}")
        role = "tool" if message.get("role") == "function" else message.get("role")
        if role == "system":
            continue  # the template writes its own system prompt with the candidate tools
        out = {"role": role, "content": _text(message.get("content"))}
        if role == "assistant":
            out["tool_calls"] = message_calls(message)
        elif role == "tool" and message.get("name") is not None:
            out["name"] = message["name"]
        messages.append(out)
    return messages


def candidate_tools(row: dict[str, Any]) -> list[dict[str, Any]]:
    tools = _json(row.get("tools") or [], "tools")
    if not isinstance(tools, list):
        raise Invalid(BAD_JSON, "tools must be a list of tool specs")
    return tools


def check_tools(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> None:
    known = {tool_name(t) for t in tools}
    for message in messages:
        for call in message.get("tool_calls", []):
            if call["name"] not in known:
                raise Invalid(UNKNOWN_TOOL, f"{call['name']!r} is not among the candidates {sorted(known)}")


def assistant_text(message: dict[str, Any]) -> str:
    """An assistant turn as the policy would have written it: its text, then its calls as Tool-N1's
    JSON list in one `<tool_call>` tag (unless the text already holds its calls in tags)."""
    text, calls = message["content"].strip(), message.get("tool_calls", [])
    if not calls or "<tool_call>" in text:
        return text
    block = f"<tool_call>{json.dumps(calls, ensure_ascii=False)}</tool_call>"
    return f"{text}\n{block}" if text else block


def render_context(context: list[dict[str, Any]]) -> str:
    """The context as the `question` of a ChatML template: the first user message, then the later turns
    with their ChatML boundaries (the template closes the last turn and opens the assistant's)."""
    parts = [context[0]["content"]]
    responses: list[str] = []
    for message in context[1:]:
        if message["role"] == "tool":
            responses.append(f"<tool_response>\n{message['content']}\n</tool_response>")
            continue
        if responses:
            parts.append(_TURN.format(role="user") + "\n".join(responses))
            responses = []
        role = "assistant" if message["role"] == "assistant" else "user"
        body = assistant_text(message) if role == "assistant" else message["content"]
        parts.append(_TURN.format(role=role) + body)
    if responses:
        parts.append(_TURN.format(role="user") + "\n".join(responses))
    return "".join(parts)


def final_answer(text: str) -> str | None:
    """An answer turn's answer: its `<answer>` tag, else the text outside `<think>`."""
    tagged = extract_tag(text, "answer")
    if tagged is not None:
        return tagged
    rest = text.split("</think>")[-1].strip()
    return rest or None


def split_conversation(row: dict[str, Any], row_id: str) -> list[dict[str, Any]]:
    """The single-step rows of one conversation; raises Invalid when the conversation must be dropped."""
    tools = candidate_tools(row)
    messages = normalise_messages(row)
    check_tools(messages, tools)
    if not messages or messages[0]["role"] != "user":
        raise Invalid(NO_USER_TURN, "the conversation must start with a user message")
    targets = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    if not targets:
        raise Invalid(NO_ASSISTANT_TURN, "no assistant turn to learn from")
    steps = []
    for step, index in enumerate(targets, start=1):
        context, target = messages[:index], messages[index]
        sample: dict[str, Any] = {
            "id": f"{row_id}#{step}",
            "question": render_context(context),
            "tools": tools,
            "context": context,
        }
        if target["tool_calls"]:
            sample["tool_calls"] = target["tool_calls"]
        else:
            sample["answer"] = final_answer(target["content"])
        sample["metadata"] = {
            **(row.get("metadata") or {}),
            "source_id": row_id,
            "step": step,
            "steps": len(targets),
        }
        steps.append(sample)
    return steps


@PREPARERS.register("tool_n1")
def prepare_tool_n1(rows: list[dict[str, Any]]) -> Prepared:
    """Every valid conversation split into single-step rows; invalid ones dropped, counted by reason."""
    out: list[dict[str, Any]] = []
    dropped: Counter[str] = Counter()
    kept = 0
    for number, row in enumerate(rows, start=1):
        row_id = str(row.get("id", f"row{number}"))  # the id `read_rows` would give the row
        try:
            out.extend(split_conversation(row, row_id))
        except Invalid as exc:
            dropped[exc.reason] += 1
            continue
        kept += 1
    return Prepared(out, kept, dropped)
