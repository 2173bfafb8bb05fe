"""Chat-completion requests to a registered judge, a batch at once, through the egress guard.

Each request has its endpoint's `timeout_s` from connect to last byte; at most `max_concurrency` are in
flight. A request never raises: its `JudgeReply` holds the answer text or why there is none.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import time
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from trainers.rewards.judge_endpoints import JudgeEndpoint

MAX_REPLY_BYTES = 1 << 20
T = TypeVar("T")


@dataclass(frozen=True)
class JudgeReply:
    """The judge's answer text, or `error` (timeout, unreachable, HTTP status, refusal, malformed reply)."""

    text: str | None = None
    error: str | None = None
    tokens: int = 0  # prompt + completion tokens, as the judge's `usage` reports them
    seconds: float = 0.0


def ask_all(endpoint: JudgeEndpoint, bodies: list[dict[str, Any]]) -> list[JudgeReply]:
    """One reply per request body (`model` is added), in order; the requests run concurrently."""
    if not bodies:
        return []
    try:
        key = endpoint.api_key()
    except KeyError:
        missing = JudgeReply(error=f"the key variable {endpoint.api_key_env} is not set")
        return [missing] * len(bodies)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return run_coroutine(lambda: _ask_all(endpoint, bodies, headers))


async def _ask_all(endpoint: JudgeEndpoint, bodies: list[dict[str, Any]], headers: dict) -> list[JudgeReply]:
    from trainers.net.guard import guarded_client  # imports httpx: only when a judge is asked
    from trainers.tools.http import ssl_context

    gate = asyncio.Semaphore(endpoint.max_concurrency)
    # the transport's own timeouts sit past the request's deadline, which is the one that classifies
    async with guarded_client(
        timeout=endpoint.timeout_s + 5, headers=headers, verify=ssl_context()
    ) as client:

        async def one(body: dict[str, Any]) -> JudgeReply:
            async with gate:
                return await _ask(client, endpoint, {"model": endpoint.model, **body})

        return list(await asyncio.gather(*(one(body) for body in bodies)))


async def _ask(client: Any, endpoint: JudgeEndpoint, body: dict[str, Any]) -> JudgeReply:
    import httpx

    start = time.perf_counter()
    try:
        async with asyncio.timeout(endpoint.timeout_s):
            status, data = await _post(client, endpoint.chat_url, body)
    except TimeoutError:
        return JudgeReply(error=f"timed out after {endpoint.timeout_s:g} s", seconds=endpoint.timeout_s)
    except httpx.HTTPError as exc:  # the guard's one message: refused, unresolvable, unreachable
        return JudgeReply(error=f"unreachable: {exc}", seconds=time.perf_counter() - start)
    reply = _read_reply(status, data)
    return JudgeReply(reply.text, reply.error, reply.tokens, time.perf_counter() - start)


async def _post(client: Any, url: str, body: dict[str, Any]) -> tuple[int, bytes | None]:
    """The status and the body (None when over MAX_REPLY_BYTES)."""
    async with client.stream("POST", url, json=body) as response:
        data = bytearray()
        async for chunk in response.aiter_bytes():
            data += chunk
            if len(data) > MAX_REPLY_BYTES:
                return response.status_code, None
        return response.status_code, bytes(data)


def _read_reply(status: int, data: bytes | None) -> JudgeReply:
    if not 200 <= status < 300:
        return JudgeReply(error=f"HTTP {status}")
    if data is None:
        return JudgeReply(error=f"malformed reply: over {MAX_REPLY_BYTES} bytes")
    try:
        payload = json.loads(data)
        choice = payload["choices"][0]
        message = choice["message"]
    except (ValueError, KeyError, IndexError, TypeError):
        return JudgeReply(error="malformed reply: not a chat completion")
    tokens = _usage_tokens(payload.get("usage"))
    if message.get("refusal") or choice.get("finish_reason") == "content_filter":
        return JudgeReply(error="refusal", tokens=tokens)
    content = message.get("content")
    if not isinstance(content, str):
        return JudgeReply(error="malformed reply: no text content", tokens=tokens)
    return JudgeReply(text=content, tokens=tokens)


def _usage_tokens(usage: Any) -> int:
    if not isinstance(usage, dict):
        return 0
    counts = (usage.get("prompt_tokens"), usage.get("completion_tokens"))
    return sum(c for c in counts if isinstance(c, int) and not isinstance(c, bool) and c >= 0)


def run_coroutine(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run the coroutine `make()` to completion from synchronous code; from inside a running event loop
    (an async caller) it runs in a thread of its own, with this context (egress policy) copied."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())
    context = contextvars.copy_context()
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(context.run, lambda: asyncio.run(make())).result()
