"""The policy under training on an OpenAI-compatible endpoint, one session (bearer key) per episode.

`POST /v1/chat/completions` samples from the same generation scheduler as built-in rollouts (so
concurrent sessions share batches and the backend's prefix cache) and records the sampled ids in the
session (trainers.agent.session). `POST /v1/episodes/{id}/reward` posts the episode's reward (AReaL's
`set_reward`); `POST /v1/episodes/{id}/result` is where the agent runner leaves what `run` returned.
A key opens only its own episode, and only until the episode ends.
"""

from __future__ import annotations

import asyncio
import secrets
import time
import zlib
from collections.abc import Awaitable, Callable

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from trainers.agent.messages import MessageError, to_openai
from trainers.agent.requests import EndpointError, read_chat_request, read_json
from trainers.agent.session import AgentSession, LimitExceeded, Segment
from trainers.agent.streaming import completion_events
from trainers.backends.base import GenerationOutput, GenerationRequest
from trainers.config.limits import RolloutLimits
from trainers.config.sampling import SamplingParams
from trainers.templates.chatml import ChatMLToolTemplate

Generate = Callable[[GenerationRequest], Awaitable[GenerationOutput]]


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
        max_context_tokens: int = 8192,
    ) -> None:
        self.template, self.limits, self.sampling = template, limits, sampling
        self.generate, self.model_name = generate, model_name
        self.max_context_tokens = max_context_tokens  # prompt + new tokens of one request, at most
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
        ask = read_chat_request(body, self.template)
        try:
            budget = session.budget(ask.max_tokens)
        except LimitExceeded as exc:
            raise EndpointError(400, f"the episode's {exc} is spent", "limit_exceeded", str(exc)) from None
        session.requests += 1
        try:
            segment = session.prepare(ask.messages, ask.tools)
            session.check_context(segment, budget, self.max_context_tokens)
        except MessageError as exc:
            raise EndpointError(400, str(exc)) from None
        except LimitExceeded as exc:
            message = (
                f"the conversation and max_tokens pass the {self.max_context_tokens}-token context bound"
            )
            raise EndpointError(400, message, "limit_exceeded", str(exc)) from None
        segments = [segment] + [session.fork(segment) for _ in range(ask.n - 1)]
        outputs = await asyncio.gather(
            *(self._sample(session, s, budget, ask.stops, i) for i, s in enumerate(segments))
        )
        choices = [
            self._choice(session, s, out, i, ask.with_calls)
            for i, (s, out) in enumerate(zip(segments, outputs, strict=True))
        ]
        prompt_tokens = len(segment.context) - len(outputs[0].token_ids)
        return completion_body(
            self.model_name, choices, prompt_tokens, sum(len(o.token_ids) for o in outputs)
        )

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


def completion_body(model: str, choices: list[dict], prompt_tokens: int, completion_tokens: int) -> dict:
    """A `chat.completion` object with its usage counts."""
    return {
        "id": f"chatcmpl-{secrets.token_hex(8)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": choices,
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }
