"""The policy under training on an OpenAI-compatible endpoint, one session (bearer key) per episode.

`POST /v1/chat/completions` samples from the same generation scheduler as built-in rollouts (so
concurrent sessions share batches and the backend's prefix cache) and records the sampled ids in the
session (trainers.agent.session). `POST /v1/episodes/{id}/reward` posts the episode's reward (AReaL's
`set_reward`); `POST /v1/episodes/{id}/result` is where the agent runner leaves what `run` returned.
A key opens only its own episode, and only until the episode ends.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
import zlib
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from trainers.agent.messages import MessageError, normalise, to_openai
from trainers.agent.session import AgentSession, LimitExceeded, Segment
from trainers.agent.streaming import completion_events
from trainers.backends.base import GenerationOutput, GenerationRequest
from trainers.config.limits import RolloutLimits
from trainers.config.sampling import SamplingParams
from trainers.templates.chatml import ChatMLToolTemplate

Generate = Callable[[GenerationRequest], Awaitable[GenerationOutput]]
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


class AgentEndpoint:
    """The sessions of one rollout and the app that serves them."""

    def __init__(
        self,
        template: ChatMLToolTemplate,
        limits: RolloutLimits,
        sampling: SamplingParams,
        generate: Generate,
        *,
        model_name: str = "policy",
    ) -> None:
        self.template, self.limits, self.sampling = template, limits, sampling
        self.generate, self.model_name = generate, model_name
        self.sessions: dict[str, AgentSession] = {}  # by key
        self.seeds: dict[str, str | None] = {}  # by episode: what the session's sampling seeds derive from

    def open(self, episode_id: str, seed: str | None) -> AgentSession:
        """A new episode's session with a fresh unguessable key."""
        session = AgentSession(episode_id, secrets.token_urlsafe(24), self.template, self.limits)
        self.sessions[session.key] = session
        self.seeds[episode_id] = seed
        return session

    def app(self) -> Starlette:
        routes = [
            Route("/v1/chat/completions", self._guarded(self.chat), methods=["POST"]),
            Route("/v1/episodes/{episode}/reward", self._guarded(self.reward), methods=["POST"]),
            Route("/v1/episodes/{episode}/result", self._guarded(self.result), methods=["POST"]),
            Route("/v1/models", self._guarded(self.models), methods=["GET"]),
        ]
        return Starlette(routes=routes)

    def _guarded(self, handler: Callable[[Request, AgentSession], Awaitable[dict | Response]]):
        async def endpoint(request: Request) -> Response:
            try:
                session = self._session(request)
                answer = await handler(request, session)
            except EndpointError as exc:
                return exc.response()
            return answer if isinstance(answer, Response) else JSONResponse(answer)

        return endpoint

    def _session(self, request: Request) -> AgentSession:
        scheme, _, key = request.headers.get("authorization", "").partition(" ")
        session = self.sessions.get(key.strip()) if scheme.lower() == "bearer" else None
        if session is None:
            raise EndpointError(401, "unknown session key", "authentication_error", "invalid_api_key")
        if session.ended:
            raise EndpointError(403, "this episode has ended", "permission_error", "episode_ended")
        episode = request.path_params.get("episode")
        if episode is not None and episode != session.episode_id:
            raise EndpointError(404, "no such episode for this key", "not_found_error")
        return session

    # --- routes ------------------------------------------------------------------------------------
    async def models(self, request: Request, session: AgentSession) -> dict:
        return {
            "object": "list",
            "data": [{"id": self.model_name, "object": "model", "owned_by": "workbench"}],
        }

    async def reward(self, request: Request, session: AgentSession) -> dict:
        value = (await read_json(request)).get("reward")
        if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
            raise EndpointError(400, "reward must be a number")
        session.posted_reward = float(value)
        return {"episode": session.episode_id, "reward": session.posted_reward}

    async def result(self, request: Request, session: AgentSession) -> dict:
        session.result = (await read_json(request)).get("result")
        return {"episode": session.episode_id}

    async def chat(self, request: Request, session: AgentSession) -> dict | Response:
        body = await read_json(request)
        completion = await self.complete(body, session)
        if not body.get("stream"):
            return completion
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        events = completion_events(completion, include_usage=include_usage)
        return StreamingResponse(events, media_type="text/event-stream")

    async def complete(self, body: dict, session: AgentSession) -> dict:
        """The chat completion a request's body asks for, recorded in its session."""
        n = body.get("n") or 1
        if not isinstance(n, int) or not 1 <= n <= MAX_CHOICES:
            raise EndpointError(400, f"n must be an integer from 1 to {MAX_CHOICES}")
        try:
            messages = normalise(body.get("messages"))
        except MessageError as exc:
            raise EndpointError(400, str(exc)) from None
        tools = read_tools(body.get("tools"))
        stops = self.template.stops(tools) + read_stops(body.get("stop"))
        with_calls = body.get("tool_choice", "auto") != "none"
        try:
            budget = session.budget(body.get("max_completion_tokens") or body.get("max_tokens"))
        except LimitExceeded as exc:
            raise EndpointError(400, f"the episode's {exc} is spent", "limit_exceeded", str(exc)) from None
        session.requests += 1
        try:
            segment = session.prepare(messages, tools)
        except MessageError as exc:
            raise EndpointError(400, str(exc)) from None
        segments = [segment] + [session.fork(segment) for _ in range(n - 1)]
        outputs = await asyncio.gather(
            *(self._sample(session, s, budget, stops, i) for i, s in enumerate(segments))
        )
        choices = [
            self._choice(session, s, out, i, with_calls)
            for i, (s, out) in enumerate(zip(segments, outputs, strict=True))
        ]
        completion = sum(len(out.token_ids) for out in outputs)
        return {
            "id": f"chatcmpl-{secrets.token_hex(8)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model_name,
            "choices": choices,
            "usage": {
                "prompt_tokens": len(segment.context) - len(outputs[0].token_ids),
                "completion_tokens": completion,
                "total_tokens": len(segment.context) - len(outputs[0].token_ids) + completion,
            },
        }

    async def _sample(
        self, session: AgentSession, segment: Segment, budget: int, stops: list[str], choice: int
    ) -> GenerationOutput:
        sampling = self.sampling
        base = self.seeds.get(session.episode_id)
        if base is not None:
            seed = zlib.crc32(f"{base}:{session.requests}:{choice}".encode())
            sampling = sampling.model_copy(update={"seed": seed})
        request = GenerationRequest(list(segment.context), budget, stops, sampling)
        return await self.generate(request)

    def _choice(
        self, session: AgentSession, segment: Segment, out: GenerationOutput, index: int, with_calls: bool
    ) -> dict:
        text = self.template.tokenizer.decode(out.token_ids, skip_special_tokens=False)
        message = session.record(segment, out, text, with_calls=with_calls)
        call_ids = [f"call_{secrets.token_hex(6)}" for _ in message["tool_calls"]]
        finish = "tool_calls" if call_ids else ("length" if out.finish_reason == "length" else "stop")
        return {
            "index": index,
            "message": to_openai(message, call_ids),
            "finish_reason": finish,
            "logprobs": None,
        }


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
