"""A finished chat completion as the server-sent events of `stream: true`: the endpoint samples a turn
in one piece, so each choice arrives as one delta (content and calls), then its finish reason, then
usage when `stream_options.include_usage` asks for it, then `[DONE]`. Clients that stream (the openai
client's `stream=True`, agent frameworks) read the same message they would get without streaming."""

from __future__ import annotations

import json
from collections.abc import Iterator

CHUNK = "chat.completion.chunk"


def completion_events(completion: dict, *, include_usage: bool) -> Iterator[str]:
    """`data: {...}` events of `completion` (the endpoint's non-streamed answer)."""
    head = {key: completion[key] for key in ("id", "created", "model")} | {"object": CHUNK}
    for choice in completion["choices"]:
        message = choice["message"]
        delta = {"role": "assistant", "content": message["content"] or ""}
        if message["tool_calls"]:
            delta["tool_calls"] = [{"index": i, **call} for i, call in enumerate(message["tool_calls"])]
        yield _event(head | {"choices": [{"index": choice["index"], "delta": delta, "finish_reason": None}]})
        done = {"index": choice["index"], "delta": {}, "finish_reason": choice["finish_reason"]}
        yield _event(head | {"choices": [done]})
    if include_usage:
        yield _event(head | {"choices": [], "usage": completion["usage"]})
    yield "data: [DONE]\n\n"


def _event(data: dict) -> str:
    return f"data: {json.dumps(data)}\n\n"
