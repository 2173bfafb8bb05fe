"""Reading an endpoint request: a bounded JSON body, and a chat request's fields checked and normalised.

Every error is an `EndpointError`, answered in the OpenAI API's shape; nothing is recorded before a
request has been read whole.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from trainers.agent.messages import MessageError, normalise
from trainers.templates.chatml import ChatMLToolTemplate

MAX_BODY_BYTES = 4 * 1024 * 1024
MAX_CHOICES = 8
MAX_STOPS = 4


class EndpointError(Exception):
    """An error answered in the OpenAI API's shape."""

    def __init__(
        self, status: int, message: str, kind: str = "invalid_request_error", code: str | None = None
    ):
        super().__init__(message)
        self.status, self.kind, self.code = status, kind, code

    def response(self) -> JSONResponse:
        body = {"error": {"message": str(self), "type": self.kind, "code": self.code}}
        return JSONResponse(body, status_code=self.status)


@dataclass(frozen=True)
class ChatRequest:
    """What a chat completion request asks for."""

    messages: list[dict]
    tools: list[dict]
    stops: list[str]
    n: int
    with_calls: bool  # tool_choice "none" leaves calls unparsed
    max_tokens: int | None


def read_chat_request(body: dict, template: ChatMLToolTemplate) -> ChatRequest:
    n = body.get("n") or 1
    if not isinstance(n, int) or not 1 <= n <= MAX_CHOICES:
        raise EndpointError(400, f"n must be an integer from 1 to {MAX_CHOICES}")
    try:
        messages = normalise(body.get("messages"))
    except MessageError as exc:
        raise EndpointError(400, str(exc)) from None
    tools = read_tools(body.get("tools"))
    max_tokens = body.get("max_completion_tokens") or body.get("max_tokens")
    if max_tokens is not None and (
        isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1
    ):
        raise EndpointError(400, "max_tokens must be a positive integer")
    return ChatRequest(
        messages=messages,
        tools=tools,
        stops=template.stops(tools) + read_stops(body.get("stop")),
        n=n,
        with_calls=body.get("tool_choice", "auto") != "none",
        max_tokens=max_tokens,
    )


async def read_json(request: Request) -> dict:
    """The request's JSON object, read up to MAX_BODY_BYTES."""
    body = bytearray()
    async for chunk in request.stream():
        body.extend(chunk)
        if len(body) > MAX_BODY_BYTES:
            raise EndpointError(413, f"the request body exceeds {MAX_BODY_BYTES} bytes")
    try:
        data = json.loads(body or b"{}")
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise EndpointError(400, "the request body is not JSON") from None
    if not isinstance(data, dict):
        raise EndpointError(400, "the request body must be a JSON object")
    return data


def read_tools(tools: Any) -> list[dict]:
    """The request's function tools, checked for the fields the prompt shows."""
    if not tools:
        return []
    if not isinstance(tools, list):
        raise EndpointError(400, "tools must be a list")
    for index, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise EndpointError(400, f"tools[{index}] needs function.name")
    return tools


def read_stops(stop: Any) -> list[str]:
    if stop is None:
        return []
    stops = [stop] if isinstance(stop, str) else stop
    if (
        not isinstance(stops, list)
        or len(stops) > MAX_STOPS
        or not all(isinstance(s, str) and s for s in stops)
    ):
        raise EndpointError(400, f"stop must be a string or a list of at most {MAX_STOPS} strings")
    return stops
